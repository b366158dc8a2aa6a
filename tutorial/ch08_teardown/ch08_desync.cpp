// ch08_desync: a watched process group (dist/parallel/watchdog.hpp) that goes out of
// step on purpose: chapter 08's failure zoo, live. Run a scenario under ddprun or mpirun
// and read the diagnosis (tutorial/ch08_teardown/README.md); tests/ch08/ledger/desync.sh
// runs every scenario and checks it. It also shows the labels as the trainer and the
// Reducer set them: "step N" around a step, "bucket b" around each bucket's all-reduce,
// "end of epoch E" around the epoch's barrier.
//
//   ddprun --nproc-per-node 4 ch08_desync --scenario skip --rank 2 --step 3
//   ch08_desync --scenario S [--rank R] [--step K] [--steps N] [--backend tcp|mpi]
//               [--timeout-s T] [--tag WORD]
// Scenarios (rank R does it at step K; every other rank runs the plain loop):
//   ok             everyone in step: the loop, the end-of-epoch barrier, destroy(); exit 0
//   skip           rank R skips step K's collectives: it runs one step short
//   layout         rank R's bucket 0 has 2,000 floats instead of 1,000 (another layout)
//   early-barrier  rank R calls the end-of-epoch barrier in step K, before bucket 1
//   stall          rank R sleeps T + 10 s in step K before bucket 1: it is behind
//   kill           rank R SIGKILLs itself at step K: a lost rank
//   error          rank R throws at step K, between collectives: its own error, printed at
//                  once; the watched group it leaves tells the others (~WatchedGroup)
// Success prints "ch08_desync: rank R: ok" and exits 0; a desync exits through the
// watchdog (kExitWatchdog, 4) with its diagnosis on stderr.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "dist/init.hpp"
#include "base/exit_codes.hpp"
#include "dist/parallel/ledger.hpp"
#include "dist/parallel/watchdog.hpp"
#include "base/error.hpp"
#include "tensor/tensor.hpp"

namespace {

struct Options {
  std::string scenario = "ok";
  std::string backend = "tcp";
  int rank = 1;    // the rank that goes wrong
  int step = 3;    // ... at this step
  int steps = 6;   // steps in the epoch
  int timeout_s = 3;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    DDP_CHECK(i + 1 < argc, "ch08_desync: ", flag, " needs a value");
    const std::string v = argv[i + 1];
    if (flag == "--scenario") {
      o.scenario = v;
    } else if (flag == "--backend") {
      o.backend = v;
    } else if (flag == "--rank") {
      o.rank = std::stoi(v);
    } else if (flag == "--step") {
      o.step = std::stoi(v);
    } else if (flag == "--steps") {
      o.steps = std::stoi(v);
    } else if (flag == "--timeout-s") {
      o.timeout_s = std::stoi(v);
    } else if (flag == "--tag") {
      // ignored: the test scripts mark their ranks with it, to find any left behind
    } else {
      DDP_FAIL("ch08_desync: unknown flag ", flag,
               " (--scenario, --rank, --step, --steps, --backend, --timeout-s, --tag)");
    }
  }
  const std::string known = " ok skip layout early-barrier stall kill error ";
  DDP_CHECK(known.find(" " + o.scenario + " ") != std::string::npos,
            "ch08_desync: unknown scenario \"", o.scenario, "\" (one of", known, ")");
  return o;
}

// Sums `count` floats holding the rank and checks the closed form w(w-1)/2.
void all_reduce_bucket(ddp::ProcessGroup& group, int count) {
  ddp::Tensor t = ddp::full({count}, static_cast<double>(group.rank()));
  group.all_reduce(t)->wait();
  const int w = group.size();
  DDP_CHECK(t.data<float>()[0] == static_cast<float>(w * (w - 1) / 2), "rank ", group.rank(),
            ": all_reduce gave ", t.data<float>()[0]);
}

void run(const Options& o) {
  ddp::InitOptions init;
  init.backend = o.backend;
  init.timeout = std::chrono::seconds(o.timeout_s);
  // The watchdog's deadline is the group's, init.timeout (Note [Failing once]).
  std::unique_ptr<ddp::WatchedGroup> group = ddp::watch(ddp::init_process_group(init));
  const int rank = group->rank();
  const bool me = rank == o.rank;

  for (int step = 0; step < o.steps; ++step) {
    if (me && step == o.step && o.scenario == "skip") continue;
    if (me && step == o.step && o.scenario == "error") {  // leaves run(), as ddp-train would
      DDP_FAIL("rank ", rank, ": a planted error at step ", step);
    }
    if (me && step == o.step && o.scenario == "kill") {
      std::printf("ch08_desync: rank %d: raising SIGKILL at step %d\n", rank, step);
      std::fflush(stdout);
      std::raise(SIGKILL);
    }
    ddp::ledger::Label step_label("step " + std::to_string(step));  // the trainer's
    {
      ddp::ledger::Label bucket("bucket 0");  // the Reducer's
      all_reduce_bucket(*group, me && o.scenario == "layout" ? 2000 : 1000);
    }
    if (me && step == o.step && o.scenario == "early-barrier") {
      group->barrier()->wait();
    }
    if (me && step == o.step && o.scenario == "stall") {
      std::this_thread::sleep_for(std::chrono::seconds(o.timeout_s + 10));
    }
    {
      ddp::ledger::Label bucket("bucket 1");
      all_reduce_bucket(*group, 300);
    }
  }
  {
    ddp::ledger::Label end("end of epoch 0");
    group->barrier()->wait();
  }
  group->destroy();
  std::printf("ch08_desync: rank %d: ok\n", rank);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    run(parse(argc, argv));
    std::fflush(stdout);
    return ddp::kExitOk;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ch08_desync: error: %s\n", e.what());
    std::fflush(stderr);
    std::_Exit(ddp::kExitError);  // no destructors: they may wait on peers that failed
  }
}

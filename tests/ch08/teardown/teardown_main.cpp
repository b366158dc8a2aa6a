// ch08_teardown: a job that ends as a job should, for chapter 08's teardown tests
// (teardown.sh runs it under ddprun and mpirun and reads what it prints).
//
//   ch08_teardown [--backend tcp|mpi] [--end destroy|destructor|watched] [--tag WORD]
// A few all-reduces, a final barrier, then the end: destroy() by hand, the group's
// destructor alone, or destroy() of a watched group (dist/parallel/watchdog.hpp). The last
// rank is slow on purpose: it sleeps 1 s after the barrier and then reads a key from the
// store, which only works if rank 0's store is still there; rank 0 must wait for it.
// Each rank prints "entered the end at <ns>" before it ends the group and, on rank 0,
// "store may stop at <ns>" once destroy() has returned (CLOCK_REALTIME, one host), so
// the script can check that rank 0 outlived the others' use of the store. Nothing else
// may reach stderr. Exit 0; an error exits 1.
#include <time.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "dist/init.hpp"
#include "base/exit_codes.hpp"
#include "dist/parallel/watchdog.hpp"
#include "base/error.hpp"
#include "tensor/tensor.hpp"

namespace {

long long wall_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

void run(const std::string& backend, const std::string& end) {
  ddp::InitOptions init;
  init.backend = backend;
  init.timeout = std::chrono::seconds(20);
  std::unique_ptr<ddp::ProcessGroup> group = ddp::init_process_group(init);
  if (end == "watched") {
    group = ddp::watch(std::move(group));
  }
  const int rank = group->rank();
  const int w = group->size();
  ddp::Tensor t = ddp::full({4097}, static_cast<double>(rank));
  for (int i = 0; i < 5; ++i) {
    t.fill_(static_cast<double>(rank));
    group->all_reduce(t)->wait();
    DDP_CHECK(t.data<float>()[4096] == static_cast<float>(w * (w - 1) / 2), "rank ", rank,
              ": all_reduce gave ", t.data<float>()[4096]);
  }
  group->barrier()->wait();  // the final barrier: nothing is in flight after it
  if (rank == w - 1) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    if (auto store = group->store()) {
      store->set("teardown/late", "still here");
      DDP_CHECK(store->get("teardown/late") == "still here", "the store lost a key");
    }
  }
  std::printf("ch08_teardown: rank %d: entered the end at %lld\n", rank, wall_ns());
  std::fflush(stdout);
  if (end == "destructor") {
    group.reset();
  } else {
    group->destroy();
    group->destroy();  // a second call does nothing
  }
  if (rank == 0) std::printf("ch08_teardown: rank 0: store may stop at %lld\n", wall_ns());
  group.reset();
  std::printf("ch08_teardown: rank %d: ok\n", rank);
}

}  // namespace

int main(int argc, char** argv) {
  std::string backend = "tcp";
  std::string end = "destroy";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--backend") backend = argv[i + 1];
    if (flag == "--end") end = argv[i + 1];
  }
  try {
    run(backend, end);
    std::fflush(stdout);
    return ddp::kExitOk;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ch08_teardown: error: %s\n", e.what());
    std::fflush(stderr);
    std::_Exit(ddp::kExitError);
  }
}

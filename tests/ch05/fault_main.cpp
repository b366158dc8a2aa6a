// ch05_fault: a process group that goes wrong on purpose, for the fault tests of
// chapter 05 (tests/ch05/faults.sh drives it and reads what it prints).
//
//   ch05_fault loop --backend tcp --kill-rank 1 --kill-at 50 --timeout-s 10
//       all-reduces in a loop; rank 1 SIGKILLs itself before iteration 50 and the
//       others must fail, naming it, well within the timeout
//   ch05_fault init --backend tcp --timeout-s 3     rendezvous + one barrier, nothing else
//   ch05_fault init-port-taken --timeout-s 3        binds MASTER_PORT itself, then inits
//   ch05_fault free-port                            prints a loopback port nobody uses now,
//                                                   outside the ephemeral range (test_port.hpp)
// Every failure is printed as "ch05_fault: rank R: error after S s: <message>" on stderr,
// exit code 3; success prints "ch05_fault: rank R: ok" and exits 0.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "dist/init.hpp"
#include "dist/process_group.hpp"
#include "base/error.hpp"
#include "tensor/tensor.hpp"
#include "tests/ch05/test_port.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string mode;
  std::string backend = "tcp";
  int kill_rank = -1;  // -1: nobody dies, the loop runs `iterations` times and succeeds
  int kill_at = 20;
  int iterations = 1000000;
  int count = 65536;  // floats per all_reduce
  int timeout_s = 10;
};

[[noreturn]] void usage_error(const std::string& message) {
  std::fprintf(stderr,
               "ch05_fault: %s\nusage: ch05_fault loop|init|init-port-taken|free-port "
               "[--backend tcp|mpi] [--kill-rank R] [--kill-at I] [--iterations N] "
               "[--count N] [--timeout-s S]\n",
               message.c_str());
  std::exit(2);
}

int parse_int(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0' || v < -1 || v > 100000000) {
    usage_error(flag + " '" + text + "': expected an integer");
  }
  return static_cast<int>(v);
}

Options parse(int argc, char** argv) {
  if (argc < 2) usage_error("no mode given");
  Options o;
  o.mode = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) usage_error(flag + " needs a value");
    const std::string v = argv[++i];
    if (flag == "--backend") {
      o.backend = v;
    } else if (flag == "--kill-rank") {
      o.kill_rank = parse_int(flag, v);
    } else if (flag == "--kill-at") {
      o.kill_at = parse_int(flag, v);
    } else if (flag == "--iterations") {
      o.iterations = parse_int(flag, v);
    } else if (flag == "--count") {
      o.count = parse_int(flag, v);
    } else if (flag == "--timeout-s") {
      o.timeout_s = parse_int(flag, v);
    } else {
      usage_error("unknown flag " + flag);
    }
  }
  return o;
}

// A listening socket on 127.0.0.1:port, closed on destruction.
class Listener {
 public:
  explicit Listener(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    DDP_CHECK(fd_ >= 0, "socket() failed");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    DDP_CHECK(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0,
              "test listener: cannot bind 127.0.0.1:", port);
    DDP_CHECK(::listen(fd_, 4) == 0, "test listener: listen() failed");
  }
  ~Listener() { ::close(fd_); }
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

 private:
  int fd_;
};

std::unique_ptr<ddp::ProcessGroup> init(const Options& o) {
  ddp::InitOptions init;
  init.backend = o.backend;
  init.timeout = std::chrono::seconds(o.timeout_s);
  return ddp::init_process_group(init);
}

// Sums `count` floats holding the rank, over and over; rank kill_rank dies at kill_at.
void loop(const Options& o) {
  std::unique_ptr<ddp::ProcessGroup> group = init(o);
  const int rank = group->rank();
  const int world = group->size();
  ddp::Tensor t = ddp::empty({o.count});
  for (int it = 0; it < o.iterations; ++it) {
    if (rank == o.kill_rank && it == o.kill_at) {
      std::printf("ch05_fault: rank %d: raising SIGKILL before iteration %d\n", rank, it);
      std::fflush(stdout);
      std::raise(SIGKILL);
    }
    t.fill_(static_cast<double>(rank));
    group->all_reduce(t)->wait(std::chrono::seconds(o.timeout_s));
    const float want = static_cast<float>(world * (world - 1) / 2);
    DDP_CHECK(t.data<float>()[0] == want && t.data<float>()[o.count - 1] == want, "rank ", rank,
              ": iteration ", it, ": all_reduce gave ", t.data<float>()[0], ", expected ", want);
  }
  std::printf("ch05_fault: rank %d: ok, %d iterations\n", rank, o.iterations);
}

void init_and_barrier(const Options& o) {
  std::unique_ptr<ddp::ProcessGroup> group = init(o);
  group->barrier()->wait(std::chrono::seconds(o.timeout_s));
  std::printf("ch05_fault: rank %d: ok\n", group->rank());
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  const Clock::time_point start = Clock::now();
  try {
    if (o.mode == "free-port") {
      std::printf("%d\n", ddp::test::free_test_port());
    } else if (o.mode == "loop") {
      loop(o);
    } else if (o.mode == "init") {
      init_and_barrier(o);
    } else if (o.mode == "init-port-taken") {
      const char* port = std::getenv("MASTER_PORT");
      DDP_CHECK(port != nullptr, "init-port-taken needs MASTER_PORT");
      Listener taken(std::atoi(port));  // held until init has failed (or not)
      init_and_barrier(o);
    } else {
      usage_error("unknown mode " + o.mode);
    }
    std::fflush(stdout);
    return 0;
  } catch (const std::exception& e) {
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    const char* rank = std::getenv("RANK");  // ddprun; mpirun sets OMPI_COMM_WORLD_RANK
    if (rank == nullptr) rank = std::getenv("OMPI_COMM_WORLD_RANK");
    std::fprintf(stderr, "ch05_fault: rank %s: error after %.1f s: %s\n", rank ? rank : "?", s,
                 e.what());
    std::fflush(stderr);
    // No destructors: they may wait on the peers that failed (see collectives_main.cpp).
    std::_Exit(3);
  }
}

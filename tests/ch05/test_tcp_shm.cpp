// Chapter 05, ProcessGroupTcp through shared memory (dist/shm_group.hpp, Note [Shared-memory
// all-reduce]), in 2, 3 and 4 forked processes on this host: every collective and ReduceOp
// against a naive reduction computed here (int64 and Max/Min exact, float32 sums within
// w roundings of the sum of magnitudes, and the same bits on every rank), at sizes around
// the small path's threshold and the segment's chunks; a rank killed mid all-reduce named
// by the others within the timeout; ranks in different collectives refused; DDP_TCP_SHM=0;
// and nothing left in /dev/shm afterwards, even from a crash during an earlier set-up.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "base/error.hpp"
#include "dist/process_group_tcp.hpp"
#include "dist/shm_group.hpp"
#include "tensor/tensor.hpp"
#include "tests/ch05/fork_ranks.hpp"
#include "tests/ch05/local_store.hpp"
#include "tests/ch05/rank_values.hpp"

using namespace std::chrono_literals;
using ddp::ProcessGroupTcp;
using ddp::ReduceOp;
using ddp::ShmGroup;
using ddp::Tensor;
using ddp::test::value;

namespace {

constexpr ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min};

// This test's segments: named after its own job token, so that another job's are not
// counted (the group names its segment "ddp-<token>-...", dist/shm_name.hpp).
std::string token() { return "shmtest" + std::to_string(::getpid()); }

int segments_named(const std::string& job) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm")) {
    if (e.path().filename().string().starts_with("ddp-" + job + "-")) ++n;
  }
  return n;
}

// Element counts: empty, one, odd, around the small path's threshold and the chunk (one
// segment buffer), and several chunks plus a ragged end.
template <typename T>
std::vector<std::int64_t> sizes() {
  const auto small = static_cast<std::int64_t>(ShmGroup::kSmallBytes / sizeof(T));
  const auto chunk = static_cast<std::int64_t>(ShmGroup::kBufferBytes / sizeof(T));
  return {0, 1, 7, small - 1, small, small + 1, chunk - 1, chunk, chunk + 1, 2 * chunk + 3};
}

// Whether rank r's reduction of element i over w ranks is right: exact for int64 and for
// Max/Min, within rounding for float sums (rank_values.hpp).
template <typename T>
bool reduced_ok(T got, ReduceOp op, int w, std::int64_t i) {
  if constexpr (std::is_same_v<T, float>) {
    return ddp::test::float_ok(got, op, w, i);
  } else {
    return got == ddp::test::reference_int(op, w, i);
  }
}

// The bytes of a result, hashed (FNV-1a): all-gathered, to see every rank got the same.
std::int64_t hash_of(const void* data, std::size_t bytes) {
  std::uint64_t h = 1469598103934665603ULL;
  for (std::size_t i = 0; i < bytes; ++i) {
    h = (h ^ static_cast<const unsigned char*>(data)[i]) * 1099511628211ULL;
  }
  return static_cast<std::int64_t>(h);
}

// Every element of `t` is `want(i)`; counts and prints the first few that are not.
template <typename T, typename Ok>
int count_bad(const Tensor& t, const char* what, std::int64_t n, Ok ok, int rank) {
  int bad = 0;
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    if (!ok(t.data<T>()[i], i) && ++bad <= 3) {
      std::fprintf(stderr, "rank %d: %s of %lld %s: [%lld] = %.9g is wrong\n", rank, what,
                   (long long)n, sizeof(T) == 4 ? "float32" : "int64", (long long)i,
                   static_cast<double>(t.data<T>()[i]));
    }
  }
  return bad;
}

// One rank: every collective, op and size for dtype T; returns the number of wrong
// elements, plus one for every result whose bytes differ between ranks.
template <typename T>
int check_rank(ProcessGroupTcp& g) {
  const int w = g.size();
  const int me = g.rank();
  const ddp::DType dt = ddp::dtype_of<T>();
  int bad = 0;
  auto same_everywhere = [&](const Tensor& t) {
    Tensor mine = ddp::full({1}, 0.0, {ddp::DType::Int64});
    mine.data<std::int64_t>()[0] =
        hash_of(t.raw_data(), static_cast<std::size_t>(t.numel()) * sizeof(T));
    Tensor all = ddp::empty({w}, {ddp::DType::Int64});
    g.all_gather(all, mine)->wait(30s);
    for (int r = 1; r < w; ++r) bad += all.data<std::int64_t>()[r] != all.data<std::int64_t>()[0];
  };
  for (const std::int64_t n : sizes<T>()) {
    for (const ReduceOp op : kOps) {
      Tensor t = ddp::empty({n}, {dt});
      for (std::int64_t i = 0; i < n; ++i) t.data<T>()[i] = value<T>(me, i);
      g.all_reduce(t, op)->wait(30s);
      bad += count_bad<T>(
          t, "all_reduce", n, [&](T v, std::int64_t i) { return reduced_ok<T>(v, op, w, i); }, me);
      same_everywhere(t);
      // reduce_scatter: rank r's input is w blocks of n; block b of the result is the
      // reduction of elements b*n .. of every rank's input.
      // Beyond one buffer of elements adds time, not cases: reduce_scatter already goes
      // through in chunks of a buffer / size() of each block.
      if (n > static_cast<std::int64_t>(ShmGroup::kBufferBytes / sizeof(T))) continue;
      Tensor in = ddp::empty({w * n}, {dt});
      for (std::int64_t i = 0; i < w * n; ++i) in.data<T>()[i] = value<T>(me, i);
      Tensor out = ddp::empty({n}, {dt});
      g.reduce_scatter(out, in, op)->wait(30s);
      bad += count_bad<T>(
          out, "reduce_scatter", n,
          [&](T v, std::int64_t i) { return reduced_ok<T>(v, op, w, me * n + i); }, me);
    }
    Tensor piece = ddp::empty({n}, {dt});
    for (std::int64_t i = 0; i < n; ++i) piece.data<T>()[i] = value<T>(me, i);
    Tensor gathered = ddp::empty({w * n}, {dt});
    g.all_gather(gathered, piece)->wait(30s);
    bad += count_bad<T>(
        gathered, "all_gather", n,
        [&](T v, std::int64_t i) {
          return n == 0 || v == value<T>(static_cast<int>(i / n), i % n);
        },
        me);
    const int root = w - 1;
    g.broadcast(piece, root)->wait(30s);
    bad += count_bad<T>(
        piece, "broadcast", n, [&](T v, std::int64_t i) { return v == value<T>(root, i); }, me);
    g.barrier()->wait(30s);
  }
  return bad;
}

}  // namespace

TEST_CASE(
    "tcp over shared memory: every collective and op against a naive reduction, at "
    "2, 3 and 4 ranks",
    "[ch05][tcp][shm]") {
  ::unsetenv("DDP_TCP_SHM");
  const std::string job = token();
  ::setenv("DDP_JOB_TOKEN", job.c_str(), 1);
  for (int w : {2, 3, 4}) {
    ddp::test::ForkedStoreServer server;
    const int port = server.port();
    const auto codes = ddp::test::run_forked(w, [&](int rank) {
      ProcessGroupTcp g(ddp::test::local_store_client(port), rank, w, 20s, "shm", std::nullopt);
      if (!g.uses_shared_memory() || g.description() != "tcp (shared memory)") return 3;
      // One large all-reduce, 64 MiB of int64 at 2 ranks (exact), in many chunks.
      if (w == 2) {
        const std::int64_t n = 8 << 20;
        Tensor t = ddp::empty({n}, {ddp::DType::Int64});
        for (std::int64_t i = 0; i < n; ++i)
          t.data<std::int64_t>()[i] = value<std::int64_t>(rank, i);
        g.all_reduce(t, ReduceOp::Sum)->wait(30s);
        if (count_bad<std::int64_t>(
                t, "all_reduce", n,
                [&](std::int64_t v, std::int64_t i) {
                  return v == ddp::test::reference_int(ReduceOp::Sum, w, i);
                },
                rank) != 0) {
          return 4;
        }
      }
      const int bad = check_rank<float>(g) + check_rank<std::int64_t>(g);
      g.barrier()->wait(30s);
      return bad == 0 ? 0 : 2;
    });
    INFO("world size " << w << " (exit 3: no shared memory; 2: wrong results)");
    CHECK(codes == std::vector<int>(static_cast<std::size_t>(w), 0));
    CHECK(segments_named(job) == 0);  // unlinked once every rank had mapped it
  }
}

TEST_CASE(
    "tcp over shared memory: a rank killed mid all_reduce is named within the timeout, "
    "and no segment is left",
    "[ch05][tcp][shm]") {
  ::unsetenv("DDP_TCP_SHM");
  const std::string job = token();
  ::setenv("DDP_JOB_TOKEN", job.c_str(), 1);
  for (int w : {3, 4}) {
    const int victim = 1;
    ddp::test::ForkedStoreServer server;
    const int port = server.port();
    const auto codes = ddp::test::run_forked(w, [&](int rank) {
      ProcessGroupTcp g(ddp::test::local_store_client(port), rank, w, 10s, "kill", std::nullopt);
      if (!g.uses_shared_memory()) return 3;
      if (rank == victim) {  // SIGKILL from another thread, at some point of the loop below
        std::thread([] {
          std::this_thread::sleep_for(150ms);
          ::raise(SIGKILL);
        }).detach();
      }
      Tensor t = ddp::full({3 << 20}, 1.0);  // 12 MiB: chunks, two barriers each
      const auto start = std::chrono::steady_clock::now();
      std::string message;
      try {
        for (int i = 0; i < 100000; ++i) g.all_reduce(t)->wait(60s);
      } catch (const ddp::Error& e) {
        message = e.what();
      }
      const auto took = std::chrono::steady_clock::now() - start;
      // The dead rank named, by pid: either this rank saw it die, or it relays the report
      // of the rank that did.
      const bool named = message.find("rank 1 (") != std::string::npos &&
                         message.find("died") != std::string::npos;
      if (!named || took > 8s) {
        std::fprintf(stderr, "rank %d: after %lld ms: \"%s\"\n", rank,
                     (long long)std::chrono::duration_cast<std::chrono::milliseconds>(took).count(),
                     message.c_str());
        return 2;
      }
      return 0;
    });
    INFO("world size " << w);
    for (int r = 0; r < w; ++r) {
      CHECK(codes[static_cast<std::size_t>(r)] == (r == victim ? 128 + SIGKILL : 0));
    }
    CHECK(segments_named(job) == 0);
  }
}

TEST_CASE("tcp over shared memory refuses ranks that call different collectives, naming both",
          "[ch05][tcp][shm]") {
  ::unsetenv("DDP_TCP_SHM");
  ddp::test::ForkedStoreServer server;
  const int port = server.port();
  const auto codes = ddp::test::run_forked(3, [&](int rank) {
    ProcessGroupTcp g(ddp::test::local_store_client(port), rank, 3, 5s, "order", std::nullopt);
    Tensor t = ddp::full({rank == 1 ? 4 : 6}, 1.0);
    std::string message;
    try {
      (rank == 2 ? g.broadcast(t, 0) : g.all_reduce(t))->wait(30s);
    } catch (const ddp::Error& e) {
      message = e.what();
    }
    // Every rank sees both others' calls; rank 0 names rank 1's and rank 2's.
    if (rank != 0) return message.empty() ? 3 : 0;
    const bool ok = message.find("rank 1 (") != std::string::npos &&
                    message.find(
                        "called all_reduce of 4 float32 (sum) where this rank called all_reduce "
                        "of 6 float32 (sum)") != std::string::npos;
    if (!ok) std::fprintf(stderr, "rank 0: \"%s\"\n", message.c_str());
    return ok ? 0 : 4;
  });
  CHECK(codes == std::vector<int>{0, 0, 0});
}

TEST_CASE(
    "DDP_TCP_SHM=0 keeps the ring on one host, and a segment whose creator died is "
    "removed by the next set-up",
    "[ch05][tcp][shm]") {
  // A crash during set-up, imitated: a segment named as a group names it, by a pid that is
  // gone (a child that exited and was reaped), and one by a live process (ours).
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  const std::string dead = "/ddp-shmtest_stale-x-" + std::to_string(child) + "-1";
  const std::string alive = "/ddp-shmtest_stale-x-" + std::to_string(::getpid()) + "-2";
  for (const std::string& name : {dead, alive}) {
    const int fd = ::shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
    REQUIRE(fd >= 0);
    ::close(fd);
  }
  for (const char* setting : {"0", "1"}) {
    ::setenv("DDP_TCP_SHM", setting, 1);
    ddp::test::ForkedStoreServer server;
    const int port = server.port();
    const bool want = std::string(setting) == "1";
    const auto codes = ddp::test::run_forked(2, [&](int rank) {
      ProcessGroupTcp g(ddp::test::local_store_client(port), rank, 2, 10s, "env", std::nullopt);
      if (g.uses_shared_memory() != want) return 3;
      if (!want && g.description() != "tcp") return 4;
      Tensor t = ddp::full({5}, static_cast<double>(rank + 1));
      g.all_reduce(t)->wait(30s);
      return t.data<float>()[4] == 3.0f ? 0 : 2;
    });
    INFO("DDP_TCP_SHM=" << setting);
    CHECK(codes == std::vector<int>{0, 0});
  }
  ::unsetenv("DDP_TCP_SHM");
  CHECK_FALSE(std::filesystem::exists("/dev/shm" + dead));
  CHECK(std::filesystem::exists("/dev/shm" + alive));
  ::shm_unlink(alive.c_str());
}

// Chapter 05, ProcessGroupTcp's small all-reduce (Note [Small all-reduce] in
// dist/process_group_tcp.cpp): at, just below and just above its threshold, in 2, 3 and 4
// forked processes, every ReduceOp. int64 against a naive reduction computed here, exact;
// float32 with values whose sum depends on the order of the additions, near the naive
// sum in double and bit for bit the same on every rank (compared by the parent, from the
// bytes each rank wrote to a file): ranks whose float sums differ in the last bit would
// train replicas that drift apart.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "dist/process_group_tcp.hpp"
#include "tensor/tensor.hpp"
#include "tests/ch05/fork_ranks.hpp"
#include "tests/ch05/local_store.hpp"
#include "tests/ch05/rank_values.hpp"

using namespace std::chrono_literals;
using ddp::ProcessGroupTcp;
using ddp::ReduceOp;
using ddp::test::reference;
using ddp::test::reference_int;
using ddp::test::value;

namespace {

constexpr ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min};

// Element counts around the threshold at w ranks (the largest n with (w-1)·n elements
// within kSmallAllReduceBytes): the last two of each list take the ring.
template <typename T>
std::vector<std::int64_t> sizes(int w) {
  const auto at = static_cast<std::int64_t>(ProcessGroupTcp::kSmallAllReduceBytes /
                                            (sizeof(T) * static_cast<std::size_t>(w - 1)));
  return {0, 1, 7, at - 1, at, at + 1, 3 * at};
}

// One rank: every op and size; writes each float result to `dir`; returns the number of
// mismatches against the reference (printed, the first few).
template <typename T>
int check_rank(ProcessGroupTcp& g, const std::filesystem::path& dir) {
  int bad = 0;
  for (const ReduceOp op : kOps) {
    for (const std::int64_t n : sizes<T>(g.size())) {
      ddp::Tensor t = ddp::empty({n}, {ddp::dtype_of<T>()});
      for (std::int64_t i = 0; i < n; ++i) t.data<T>()[i] = value<T>(g.rank(), i);
      g.all_reduce(t, op)->wait(30s);
      const T* got = t.data<T>();
      for (std::int64_t i = 0; i < n; ++i) {
        bool ok = true;
        double want = 0;
        if constexpr (std::is_same_v<T, float>) {
          want = reference<T>(op, g.size(), i);
          ok = ddp::test::float_ok(got[i], op, g.size(), i);
        } else {
          want = static_cast<double>(reference_int(op, g.size(), i));
          ok = got[i] == reference_int(op, g.size(), i);
        }
        if (!ok && ++bad <= 5) {
          std::fprintf(stderr, "rank %d/%d all_reduce %s of %lld: [%lld] = %.9g, expected %.9g\n",
                       g.rank(), g.size(), to_string(op), (long long)n, (long long)i,
                       static_cast<double>(got[i]), want);
        }
      }
      if constexpr (std::is_same_v<T, float>) {
        std::ofstream out(dir / (std::string(to_string(op)) + "_" + std::to_string(n) + "_rank" +
                                 std::to_string(g.rank())),
                          std::ios::binary);
        out.write(reinterpret_cast<const char*>(got), static_cast<std::streamsize>(n * 4));
      }
    }
  }
  return bad;
}

std::string slurp(const std::filesystem::path& file) {
  std::string bytes(std::filesystem::file_size(file), '\0');
  std::ifstream(file, std::ios::binary)
      .read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return bytes;
}

}  // namespace

TEST_CASE("tcp small all_reduce: exact for int64, the same float bits on every rank, around "
          "its threshold", "[ch05][tcp]") {
  // The ring's path, not shared memory's (test_tcp_shm.cpp), though the ranks share a host.
  ::setenv("DDP_TCP_SHM", "0", 1);
  for (int w : {2, 3, 4}) {
    for (const std::size_t element : {sizeof(float), sizeof(std::int64_t)}) {  // the threshold
      const std::vector<std::int64_t> n = element == 4 ? sizes<float>(w) : sizes<std::int64_t>(w);
      REQUIRE(ProcessGroupTcp::takes_small_all_reduce(static_cast<std::size_t>(n[4]) * element, w));
      REQUIRE_FALSE(
          ProcessGroupTcp::takes_small_all_reduce(static_cast<std::size_t>(n[5]) * element, w));
    }
    ddp::test::ForkedStoreServer server;  // ranks forked from a parent without threads
    const int port = server.port();
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() /
        ("ddp_tcp_small_" + std::to_string(::getpid()) + "_w" + std::to_string(w));
    std::filesystem::create_directories(dir);
    const auto codes = ddp::test::run_forked(w, [&](int rank) {
      ProcessGroupTcp g(ddp::test::local_store_client(port), rank, w, 20s, "small",
                        std::nullopt);  // plain links
      int bad = check_rank<std::int64_t>(g, dir) + check_rank<float>(g, dir);
      g.barrier()->wait(30s);  // nobody tears down while others still talk
      return bad == 0 ? 0 : 2;
    });
    INFO("world size " << w);
    REQUIRE(codes == std::vector<int>(static_cast<std::size_t>(w), 0));
    for (const ReduceOp op : kOps) {
      for (const std::int64_t n : sizes<float>(w)) {
        const std::string stem = std::string(to_string(op)) + "_" + std::to_string(n) + "_rank";
        const std::string first = slurp(dir / (stem + "0"));
        REQUIRE(first.size() == static_cast<std::size_t>(n) * 4);
        for (int r = 1; r < w; ++r) {
          INFO("float32 all_reduce " << to_string(op) << " of " << n << ": rank " << r
                                     << " against rank 0");
          CHECK(slurp(dir / (stem + std::to_string(r))) == first);
        }
      }
    }
    std::filesystem::remove_all(dir);
  }
}

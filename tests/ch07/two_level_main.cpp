// ch07_two_level: the two-level all-reduce (dist/two_level_group.hpp) across real
// processes, against a reference computed from each rank's own values. Chapter 07.
//
//   ddprun --nproc-per-node 4 build/<dir>/tests/ch07_two_level --backend tcp --layout 0,0,1,1
//   mpirun -np 4 --oversubscribe build/<dir>/tests/ch07_two_level --backend mpi --layout 0,1,0,1
//
// --layout pretends the ranks sit on nodes (the node of each rank, as DDP_NODE_OF_RANK);
// without it the nodes are the hosts. Checks:
//   - sums, averages, maxima and minima, float32 and int64, of lengths 0 to past 1 MiB,
//     odd ones and ones the node's size does not divide: every element equal to the
//     reference. The values are integers below 2^24, which float32 adds exactly in any
//     order, so that "equal" holds for float32 sums too whatever order the levels add in;
//   - float32 values that are not integers: within 1e-6 (relative) of the flat ring's
//     result on the same inputs, which adds in another order;
//   - several all-reduces queued before the first wait;
//   - --expect-refusal TEXT: making the group must fail on every rank with TEXT.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "base/error.hpp"
#include "dist/init.hpp"
#include "dist/two_level_group.hpp"
#include "tensor/tensor.hpp"

namespace {

using ddp::DType;
using ddp::ProcessGroup;
using ddp::ReduceOp;
using ddp::Tensor;

[[noreturn]] void usage_error(const std::string& what) {
  std::fprintf(stderr, "ch07_two_level: %s\n", what.c_str());
  std::exit(2);
}

// What rank g puts at index i: which rank holds the maximum (and the minimum) changes with
// i; a value from another index or rank differs. Integers below 2^24, and so are their sums.
std::int64_t value(int g, std::int64_t i) {
  return ((g + i) % 5) * 1000 - 2000 + 17 * g + (i % 11);
}

double reference(ReduceOp op, int world, std::int64_t i, DType dtype) {
  std::int64_t sum = 0, hi = INT64_MIN, lo = INT64_MAX;
  for (int g = 0; g < world; ++g) {
    sum += value(g, i);
    hi = std::max(hi, value(g, i));
    lo = std::min(lo, value(g, i));
  }
  switch (op) {
    case ReduceOp::Sum: return static_cast<double>(sum);
    case ReduceOp::Max: return static_cast<double>(hi);
    case ReduceOp::Min: return static_cast<double>(lo);
    case ReduceOp::Avg:
      // int64 truncates toward zero (process_group.hpp); float32 divides the exact sum.
      return dtype == DType::Int64 ? static_cast<double>(sum / world)
                                   : static_cast<double>(static_cast<float>(sum) /
                                                         static_cast<float>(world));
  }
  return 0;
}

template <typename T>
Tensor filled(std::int64_t n, int g) {
  Tensor t = ddp::empty({n}, ddp::TensorOptions{ddp::dtype_of<T>()});
  for (std::int64_t i = 0; i < n; ++i) t.data<T>()[i] = static_cast<T>(value(g, i));
  return t;
}

int checks = 0;

template <typename T>
void expect_reference(const Tensor& t, ReduceOp op, int world, const std::string& what) {
  const T* p = t.data<T>();
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    const double want = reference(op, world, i, t.dtype());
    DDP_CHECK(static_cast<double>(p[i]) == want, what, ": index ", i, " of ", t.numel(),
              ": got ", p[i], ", expected ", want);
  }
  ++checks;
}

const char* dtype_label(DType d) { return d == DType::Int64 ? "int64" : "float32"; }

void exact_results(ddp::ProcessGroupTwoLevel& two) {
  const int local = two.node().size();
  // Around the node's size (padding), odd, and past the tcp group's small all-reduce.
  std::vector<std::int64_t> sizes = {0, 1, 2, 3, 5, 7, 1000, 1001, 4096 * local - 1,
                                     (1 << 18) + 3, (1 << 20) + 1};
  for (const ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min}) {
    for (const std::int64_t n : sizes) {
      Tensor f = filled<float>(n, two.rank());
      Tensor l = filled<std::int64_t>(n, two.rank());
      // Both queued before either is waited for: the thread runs them in order.
      auto wf = two.all_reduce(f, op);
      auto wl = two.all_reduce(l, op);
      wf->wait();
      wl->wait();
      const std::string what = std::string("all_reduce ") + ddp::to_string(op) + " of " +
                               std::to_string(n);
      expect_reference<float>(f, op, two.size(), what + " float32");
      expect_reference<std::int64_t>(l, op, two.size(), what + " int64");
    }
  }
}

// Random floats: the two levels add in another order than the flat ring, so the results
// differ in the last bits only.
void against_flat_ring(ddp::ProcessGroupTwoLevel& two) {
  for (const std::int64_t n : {std::int64_t{999}, std::int64_t{300001}}) {
    std::mt19937 rng(1234 + two.rank());
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    Tensor a = ddp::empty({n});
    for (std::int64_t i = 0; i < n; ++i) a.data<float>()[i] = dist(rng);
    Tensor b = a.clone();
    two.all_reduce(a, ReduceOp::Sum)->wait();
    two.flat().all_reduce(b, ReduceOp::Sum)->wait();
    double worst = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const double x = a.data<float>()[i], y = b.data<float>()[i];
      worst = std::max(worst, std::abs(x - y) / std::max(1.0, std::abs(y)));
    }
    DDP_CHECK(worst <= 1e-6, "random float32 sums of ", n, ": two levels and the flat ring differ by ",
              worst, " (relative), more than 1e-6");
    ++checks;
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string backend = "tcp", layout_text, refusal;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) usage_error(flag + " needs a value");
    const std::string v = argv[++i];
    if (flag == "--backend") {
      backend = v;
    } else if (flag == "--layout") {
      layout_text = v;
    } else if (flag == "--expect-refusal") {
      refusal = v;
    } else {
      usage_error("unknown flag " + flag);
    }
  }
  try {
    ddp::InitOptions init;
    init.backend = backend;
    init.timeout = std::chrono::seconds(30);
    std::unique_ptr<ProcessGroup> world = ddp::init_process_group(init);
    const ddp::NodeLayout layout =
        layout_text.empty() ? ddp::layout_by_host(*world)
                            : ddp::parse_node_layout(layout_text, world->size(), "--layout");
    const int rank = world->rank();
    if (!refusal.empty()) {
      try {
        ddp::ProcessGroupTwoLevel two(std::move(world), layout);
      } catch (const ddp::Error& e) {
        DDP_CHECK(std::string(e.what()).find(refusal) != std::string::npos,
                  "expected a refusal with '", refusal, "', got: ", e.what());
        std::printf("ch07_two_level: rank %d: refused as expected: %s\n", rank, e.what());
        return 0;
      }
      DDP_CHECK(false, "the layout ", layout.describe(), " was not refused");
    }
    ddp::ProcessGroupTwoLevel two(std::move(world), layout);
    exact_results(two);
    against_flat_ring(two);
    two.barrier()->wait();
    std::printf("ch07_two_level: rank %d: ok: %d checks (%s, %s)\n", rank, checks,
                backend.c_str(), layout.describe().c_str());
    std::fflush(stdout);
    two.destroy();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ch07_two_level: FAIL: %s\n", e.what());
    std::fflush(stderr);
    std::_Exit(1);
  }
}

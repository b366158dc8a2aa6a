// ch05_collectives: every collective of a ProcessGroup, checked across real processes
// against closed forms. Chapter 05's proof that a backend is right.
//
//   ddprun --nproc-per-node 4 build/<dir>/bin/ch05_collectives --backend tcp
//   mpirun -np 3 --oversubscribe build/<dir>/bin/ch05_collectives --backend mpi --sizes 0,7
//
// Each rank fills its tensors with values that depend on its rank *and* the index, so a
// chunk sent to the wrong place, or reduced twice, shows up; the expected result is a
// formula, never another collective. Speed is bench/allreduce.cpp's business.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "dist/init.hpp"
#include "dist/process_group.hpp"
#include "dist/process_group_tcp.hpp"
#include "base/error.hpp"
#include "tensor/tensor.hpp"

namespace {

using ddp::DType;
using ddp::ProcessGroup;
using ddp::ReduceOp;
using ddp::Tensor;

// ---- The values each rank contributes ------------------------------------------------

// Note [Values that catch misplaced chunks]
// Rank r puts pattern(r, i) = (r + i) % w + 1 + 8 * (i % 1021) at index i. For a fixed i,
// (r + i) % w runs over 0..w-1 once as r does, so over all ranks
//   sum = w(w+1)/2 + 8w(i % 1021),  max = w + 8(i % 1021),  min = 1 + 8(i % 1021),
// whichever rank holds the maximum changes with i (a backend that returns one rank's
// buffer fails), and an element from another index has another value (a chunk that lands
// at the wrong offset fails). Every value and sum is an integer below 2^24: exact in
// float32 in any summation order. int64 adds offset(i) = 2^53 + 1 + 3(i % 5), the same
// on every rank: a sum or an average taken through double rounds it, and the 3(i % 5)
// makes the rounding direction vary with i (a constant offset happens to hide an average
// through double at w = 2). It also flips the sign at odd i: avg must truncate toward 0.
constexpr std::int64_t kBig = (std::int64_t{1} << 53) + 1;

std::int64_t offset(std::int64_t i) { return kBig + 3 * (i % 5); }

std::int64_t pattern(int rank, int world, std::int64_t i) {
  return (rank + i) % world + 1 + 8 * (i % 1021);
}

template <typename T>
T value(int rank, int world, std::int64_t i) {
  if constexpr (std::is_same_v<T, float>) {
    return static_cast<float>(pattern(rank, world, i));
  } else {
    const std::int64_t sign = i % 2 == 1 ? -1 : 1;
    return sign * (offset(i) + pattern(rank, world, i));
  }
}

// The reduction of value<T>(r, i) over r = 0..w-1, in closed form (Note above).
template <typename T>
double expected_reduction(ReduceOp op, int world, std::int64_t i) {
  const std::int64_t w = world;
  const std::int64_t m = 8 * (i % 1021);
  const std::int64_t sum = w * (w + 1) / 2 + w * m;
  const std::int64_t lo = 1 + m;
  const std::int64_t hi = w + m;
  if constexpr (std::is_same_v<T, float>) {
    switch (op) {
      case ReduceOp::Sum:
        return static_cast<double>(sum);
      case ReduceOp::Avg:
        return static_cast<double>(sum) / static_cast<double>(w);
      case ReduceOp::Max:
        return static_cast<double>(hi);
      case ReduceOp::Min:
        return static_cast<double>(lo);
    }
  }
  return 0.0;  // int64 goes through expected_int64 (a double cannot hold offset(i))
}

std::int64_t expected_int64(ReduceOp op, int world, std::int64_t i) {
  const std::int64_t w = world;
  const std::int64_t m = 8 * (i % 1021);
  const std::int64_t sign = i % 2 == 1 ? -1 : 1;
  const std::int64_t k = offset(i);
  const std::int64_t sum = sign * (w * k + w * (w + 1) / 2 + w * m);
  switch (op) {
    case ReduceOp::Sum:
      return sum;
    case ReduceOp::Avg:
      return sum / w;  // C++ division truncates toward zero
    case ReduceOp::Max:
      return sign > 0 ? k + w + m : -(k + 1 + m);
    case ReduceOp::Min:
      return sign > 0 ? k + 1 + m : -(k + w + m);
  }
  return 0;
}

// ---- Checking ------------------------------------------------------------------------

struct Options {
  std::string backend = "tcp";
  std::vector<std::int64_t> sizes = {0, 1, 7, 1001, 4194304};  // 4194304 floats = 16 MiB
  int timeout_s = 60;
};

class Suite {
 public:
  Suite(ProcessGroup& group, std::chrono::milliseconds timeout)
      : group_(group), timeout_(timeout), rank_(group.rank()), world_(group.size()) {}

  void run_all(const std::vector<std::int64_t>& sizes) {
    for (const std::int64_t n : sizes) {
      for (const DType dtype : {DType::Float32, DType::Int64}) {
        for (const ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min}) {
          dispatch(dtype, [&]<typename T>() { all_reduce<T>(n, op); });
        }
        for (int root = 0; root < world_; ++root) {
          dispatch(dtype, [&]<typename T>() { broadcast<T>(n, root); });
        }
        dispatch(dtype, [&]<typename T>() { all_gather<T>(n); });
        for (const ReduceOp op : {ReduceOp::Sum, ReduceOp::Max}) {
          dispatch(dtype, [&]<typename T>() { reduce_scatter<T>(n, op); });
        }
      }
    }
    barrier();
    async_all_reduces();
    async_mixed();
  }

  int checks() const { return checks_; }

 private:
  template <typename F>
  static void dispatch(DType dtype, F&& f) {
    if (dtype == DType::Float32) {
      f.template operator()<float>();
    } else {
      f.template operator()<std::int64_t>();
    }
  }

  template <typename T>
  static Tensor make(std::int64_t n) {
    return ddp::empty({n}, ddp::TensorOptions{ddp::dtype_of<T>()});
  }

  // t[i] = value<T>(rank, i + first) for every i.
  template <typename T>
  Tensor filled(std::int64_t n, int rank, std::int64_t first = 0) const {
    Tensor t = make<T>(n);
    T* p = t.data<T>();
    for (std::int64_t i = 0; i < n; ++i) p[i] = value<T>(rank, world_, i + first);
    return t;
  }

  void wait(const std::shared_ptr<ddp::Work>& work, const std::string& name) {
    work->wait(timeout_);
    DDP_CHECK(work->is_completed() && !work->exception(), "rank ", rank_, ": ", name,
              ": wait() returned but the Work is not completed without error");
  }

  // Compares t[i] with want(i) for every i; the first difference throws, naming it.
  template <typename T, typename Want>
  void expect(const Tensor& t, const std::string& name, Want&& want, bool approximate = false) {
    const T* p = t.data<T>();
    for (std::int64_t i = 0; i < t.numel(); ++i) {
      const auto expected = want(i);
      const bool same = approximate
                            ? std::abs(static_cast<double>(p[i]) - static_cast<double>(expected)) <=
                                  1e-6 * std::abs(static_cast<double>(expected))
                            : static_cast<T>(expected) == p[i];
      if (!same) {
        DDP_FAIL("rank ", rank_, " of ", world_, ": ", name, ": index ", i, " of ", t.numel(),
                 ": got ", p[i], ", expected ", static_cast<T>(expected));
      }
    }
    ++checks_;
    if (rank_ == 0) std::printf("ok  %s\n", name.c_str());
  }

  template <typename T>
  std::string case_name(const std::string& what, std::int64_t n) const {
    return what + " " + std::string(ddp::dtype_name(ddp::dtype_of<T>())) +
           " n=" + std::to_string(n);
  }

  // ---- The collectives, one check each ---------------------------------------------

  template <typename T>
  void all_reduce(std::int64_t n, ReduceOp op) {
    const std::string name = case_name<T>(std::string("all_reduce ") + ddp::to_string(op), n);
    Tensor t = filled<T>(n, rank_);
    wait(group_.all_reduce(t, op), name);
    if constexpr (std::is_same_v<T, float>) {
      expect<T>(
          t, name, [&](std::int64_t i) { return expected_reduction<T>(op, world_, i); },
          op == ReduceOp::Avg);  // sum / w or sum * (1/w): both within 1e-6
    } else {
      expect<T>(t, name, [&](std::int64_t i) { return expected_int64(op, world_, i); });
    }
  }

  template <typename T>
  void broadcast(std::int64_t n, int root) {
    const std::string name = case_name<T>("broadcast root=" + std::to_string(root), n);
    Tensor t = filled<T>(n, rank_);  // every rank's values differ at every index
    wait(group_.broadcast(t, root), name);
    expect<T>(t, name, [&](std::int64_t i) { return value<T>(root, world_, i); });
  }

  // input: (n) = value(rank, i) -> output: (w * n), output[q*n + i] = value(q, i).
  template <typename T>
  void all_gather(std::int64_t n) {
    const std::string name = case_name<T>("all_gather", n);
    const Tensor input = filled<T>(n, rank_);
    Tensor output = make<T>(world_ * n);
    output.fill_(-7.0);  // a slot nobody writes keeps -7, which no pattern value is
    wait(group_.all_gather(output, input), name);
    expect<T>(output, name,
              [&](std::int64_t j) { return value<T>(static_cast<int>(j / n), world_, j % n); });
  }

  // input: (w * n) = value(rank, j) -> output on rank r: (n), the reduction over ranks
  // of input[r*n + i], which is expected_reduction at index j = r*n + i.
  template <typename T>
  void reduce_scatter(std::int64_t n, ReduceOp op) {
    const std::string name = case_name<T>(std::string("reduce_scatter ") + ddp::to_string(op), n);
    const Tensor input = filled<T>(world_ * n, rank_);
    Tensor output = make<T>(n);
    output.fill_(-7.0);
    wait(group_.reduce_scatter(output, input, op), name);
    const std::int64_t first = rank_ * n;
    if constexpr (std::is_same_v<T, float>) {
      expect<T>(output, name,
                [&](std::int64_t i) { return expected_reduction<T>(op, world_, first + i); });
    } else {
      expect<T>(output, name,
                [&](std::int64_t i) { return expected_int64(op, world_, first + i); });
    }
  }

  // A barrier must not let anyone through before everyone has arrived. Each rank leaves
  // a file before entering; rank 0 arrives late on purpose; after the barrier every rank
  // must see all w files. The file names carry a token rank 0 broadcasts, so runs never
  // see each other's files.
  void barrier() {
    Tensor token = ddp::full({1}, 0.0, ddp::TensorOptions{DType::Int64});
    if (rank_ == 0) token.data<std::int64_t>()[0] = static_cast<std::int64_t>(::getpid());
    wait(group_.broadcast(token, 0), "broadcast of the barrier token");
    const std::filesystem::path dir = std::filesystem::temp_directory_path();
    const auto file = [&](int r) {
      return dir / ("ddp_ch05_barrier_" + std::to_string(token.item<std::int64_t>()) + "_" +
                    std::to_string(r));
    };
    if (rank_ == 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::ofstream(file(rank_)) << rank_ << "\n";
    wait(group_.barrier(), "barrier");
    for (int r = 0; r < world_; ++r) {
      DDP_CHECK(std::filesystem::exists(file(r)), "rank ", rank_, " of ", world_,
                ": barrier: returned before rank ", r, " arrived (", file(r).string(),
                " is missing)");
    }
    wait(group_.barrier(), "second barrier");  // nobody removes a file another still reads
    std::filesystem::remove(file(rank_));
    ++checks_;
    if (rank_ == 0) std::printf("ok  barrier (nobody leaves before the last arrives)\n");
  }

  // Three all_reduces queued before any wait, waited for in reverse order.
  void async_all_reduces() {
    const std::int64_t sizes[3] = {1001, 65536, 7};
    const ReduceOp ops[3] = {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min};
    std::vector<Tensor> tensors;
    std::vector<std::shared_ptr<ddp::Work>> works;
    for (int k = 0; k < 3; ++k) {
      tensors.push_back(filled<float>(sizes[k], rank_));
      works.push_back(group_.all_reduce(tensors.back(), ops[k]));
    }
    for (int k = 2; k >= 0; --k) {
      const std::string name = "async all_reduce " + std::string(ddp::to_string(ops[k])) +
                               " n=" + std::to_string(sizes[k]) + " (3 queued, waited " +
                               std::to_string(3 - k) +
                               (k == 2   ? "st)"
                                : k == 1 ? "nd)"
                                         : "rd)");
      wait(works[k], name);
      expect<float>(tensors[k], name,
                    [&](std::int64_t i) { return expected_reduction<float>(ops[k], world_, i); });
    }
  }

  // An all_reduce, a broadcast and an all_gather queued together, waited in reverse.
  void async_mixed() {
    const std::int64_t n = 1001;
    Tensor reduced = filled<std::int64_t>(n, rank_);
    Tensor broadcasted = filled<float>(n, rank_);
    const Tensor input = filled<float>(n, rank_);
    Tensor gathered = make<float>(world_ * n);
    const int root = world_ - 1;
    auto w1 = group_.all_reduce(reduced, ReduceOp::Sum);
    auto w2 = group_.broadcast(broadcasted, root);
    auto w3 = group_.all_gather(gathered, input);
    wait(w3, "async all_gather");
    wait(w2, "async broadcast");
    wait(w1, "async all_reduce");
    expect<float>(
        gathered, "async all_gather n=1001 (queued after all_reduce, broadcast)",
        [&](std::int64_t j) { return value<float>(static_cast<int>(j / n), world_, j % n); });
    expect<float>(broadcasted, "async broadcast n=1001 (queued between)",
                  [&](std::int64_t i) { return value<float>(root, world_, i); });
    expect<std::int64_t>(reduced, "async all_reduce sum int64 n=1001 (queued first)",
                         [&](std::int64_t i) { return expected_int64(ReduceOp::Sum, world_, i); });
  }

  ProcessGroup& group_;
  std::chrono::milliseconds timeout_;
  int rank_;
  int world_;
  int checks_ = 0;
};

// ---- Command line --------------------------------------------------------------------

[[noreturn]] void usage_error(const std::string& message) {
  std::fprintf(stderr,
               "ch05_collectives: %s\nusage: ch05_collectives --backend tcp|mpi "
               "[--sizes 0,1,7,1001,4194304] [--timeout-s 60]\n",
               message.c_str());
  std::exit(2);
}

std::int64_t parse_count(const std::string& flag, const std::string& text, std::int64_t max) {
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0' || v < 0 || v > max) {
    usage_error(flag + " '" + text + "': expected an integer from 0 to " + std::to_string(max));
  }
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) usage_error(flag + " needs a value");
    const std::string v = argv[++i];
    if (flag == "--backend") {
      o.backend = v;
    } else if (flag == "--timeout-s") {
      o.timeout_s = static_cast<int>(parse_count(flag, v, 3600));
    } else if (flag == "--sizes") {
      o.sizes.clear();
      for (std::size_t start = 0; start <= v.size();) {
        const std::size_t comma = std::min(v.find(',', start), v.size());
        o.sizes.push_back(parse_count(flag, v.substr(start, comma - start), 1 << 26));
        start = comma + 1;
      }
    } else {
      usage_error("unknown flag " + flag);
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  try {
    ddp::InitOptions init;
    init.backend = options.backend;
    init.timeout = std::chrono::seconds(options.timeout_s);
    std::unique_ptr<ProcessGroup> group = ddp::init_process_group(init);
    if (group->rank() == 0) {
      // tcp says whether it runs through shared memory or its ring.
      const auto* tcp = dynamic_cast<const ddp::ProcessGroupTcp*>(group.get());
      std::printf("ch05_collectives: backend %s, %d ranks\n",
                  tcp != nullptr ? tcp->description().c_str() : group->backend_name().c_str(),
                  group->size());
    }
    Suite suite(*group, std::chrono::seconds(options.timeout_s));
    suite.run_all(options.sizes);
    if (group->rank() == 0) {
      std::printf("ok: %d checks on %d ranks (%s)\n", suite.checks(), group->size(),
                  options.backend.c_str());
    }
    std::fflush(stdout);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ch05_collectives: FAIL: %s\n", e.what());
    std::fflush(stderr);
    // _Exit skips the destructors: a backend's teardown (MPI_Finalize, joining a thread
    // blocked on a peer) may wait for ranks that are themselves stuck. Exiting closes our
    // sockets, which wakes the tcp peers, and mpirun tears the job down when a rank exits
    // without MPI_Finalize.
    std::_Exit(1);
  }
}

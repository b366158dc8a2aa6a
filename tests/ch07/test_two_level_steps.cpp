// Chapter 07, exercise 07.3: the two-level all-reduce's three steps (two_level_all_reduce,
// dist/two_level_group.hpp), run by threads that stand for the ranks, over groups that meet
// in memory. Against a reference computed from every rank's own values, and by what each
// level moved: the ring across the nodes must carry one slice, not the whole tensor.
// (ch07.two_level runs the same function in real processes over tcp and mpi.)
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/error.hpp"
#include "dist/host_reduce.hpp"
#include "dist/two_level_group.hpp"
#include "tensor/tensor.hpp"

namespace {

using ddp::DType;
using ddp::ReduceOp;
using ddp::Tensor;
using namespace std::chrono_literals;

// Where the ranks of one in-memory group meet: each collective is two barriers, one after
// every rank has shown its input, one after every rank has read what it needs.
struct Meeting {
  explicit Meeting(int size) : size(size), inputs(static_cast<std::size_t>(size)) {}
  const int size;
  std::mutex mutex;
  std::condition_variable cv;
  int arrived = 0;
  std::uint64_t round = 0;
  std::vector<const std::byte*> inputs;

  void barrier(int rank) {
    std::unique_lock lock(mutex);
    const std::uint64_t mine = round;
    if (++arrived == size) {
      arrived = 0;
      ++round;
      cv.notify_all();
      return;
    }
    if (!cv.wait_for(lock, 10s, [&] { return round != mine; })) {
      throw ddp::Error("rank " + std::to_string(rank) +
                       ": the other ranks of its group never came (10 s): a collective "
                       "called on some ranks only?");
    }
  }
};

// What one collective moved on one rank, for the test to look at.
struct Call {
  std::string collective;
  std::int64_t elements;  // the input's
};

// A ProcessGroup whose ranks are threads of this process (float32 and int64).
class ThreadGroup final : public ddp::ProcessGroup {
 public:
  ThreadGroup(std::shared_ptr<Meeting> meeting, int rank)
      : ProcessGroup(rank, meeting->size, 10s), meeting_(std::move(meeting)) {}
  std::string backend_name() const override { return "threads"; }
  std::vector<Call> calls;

  std::shared_ptr<ddp::Work> all_reduce(Tensor& t, ReduceOp op) override {
    calls.push_back({"all_reduce", t.numel()});
    Tensor out = t.clone();
    meet(t, [&] { reduce(out, t.numel(), 0, op); });
    t.copy_(out);
    return done();
  }
  std::shared_ptr<ddp::Work> reduce_scatter(Tensor& output, const Tensor& input,
                                            ReduceOp op) override {
    check_reduce_scatter(output, input);
    calls.push_back({"reduce_scatter", input.numel()});
    meet(input, [&] { reduce(output, output.numel(), rank() * output.numel(), op); });
    return done();
  }
  std::shared_ptr<ddp::Work> all_gather(Tensor& output, const Tensor& input) override {
    check_all_gather(output, input);
    calls.push_back({"all_gather", input.numel()});
    const std::size_t bytes = static_cast<std::size_t>(input.numel()) * ddp::element_size(input.dtype());
    meet(input, [&] {
      for (int r = 0; r < size(); ++r) {
        std::memcpy(static_cast<std::byte*>(output.raw_data()) + r * bytes, input_of(r), bytes);
      }
    });
    return done();
  }
  std::shared_ptr<ddp::Work> broadcast(Tensor& t, int root) override {
    calls.push_back({"broadcast", t.numel()});
    Tensor out = t.clone();
    const std::size_t bytes = static_cast<std::size_t>(t.numel()) * ddp::element_size(t.dtype());
    meet(t, [&] { std::memcpy(out.raw_data(), input_of(root), bytes); });
    t.copy_(out);
    return done();
  }
  std::shared_ptr<ddp::Work> barrier() override {
    meeting_->barrier(rank());
    return done();
  }

 private:
  // Shows `input`, waits for the others, runs `read` (which reads their inputs), and
  // waits until every rank has read.
  template <typename Read>
  void meet(const Tensor& input, Read&& read) {
    meeting_->inputs[static_cast<std::size_t>(rank())] =
        static_cast<const std::byte*>(input.raw_data());
    meeting_->barrier(rank());
    read();
    meeting_->barrier(rank());
  }
  const std::byte* input_of(int r) const { return meeting_->inputs[static_cast<std::size_t>(r)]; }

  // out[i] = op over the ranks, in rank order, of their input[offset + i].
  void reduce(Tensor& out, std::int64_t n, std::int64_t offset, ReduceOp op) {
    if (out.dtype() == DType::Float32) {
      reduce_as<float>(out, n, offset, op);
    } else {
      reduce_as<std::int64_t>(out, n, offset, op);
    }
  }
  template <typename T>
  void reduce_as(Tensor& out, std::int64_t n, std::int64_t offset, ReduceOp op) {
    T* o = out.data<T>();
    std::memcpy(o, reinterpret_cast<const T*>(input_of(0)) + offset, n * sizeof(T));
    for (int r = 1; r < size(); ++r) {
      ddp::detail::combine(o, reinterpret_cast<const T*>(input_of(r)) + offset,
                           static_cast<std::size_t>(n), op);
    }
    if (op == ReduceOp::Avg) ddp::detail::divide(o, n, size());
  }
  std::shared_ptr<ddp::Work> done() {
    auto work = std::make_shared<ddp::FutureWork>("threads", timeout());
    work->finish();
    return work;
  }

  std::shared_ptr<Meeting> meeting_;
};

// What rank g holds at index i: integers, exact in float32 in any order of addition; the
// rank with the maximum changes with i.
std::int64_t value(int g, std::int64_t i) { return ((g + i) % 5) * 100 - 150 + 7 * g + i % 13; }

double reference(ReduceOp op, int world, std::int64_t i, DType dtype) {
  std::int64_t sum = 0, hi = INT64_MIN, lo = INT64_MAX;
  for (int g = 0; g < world; ++g) {
    sum += value(g, i);
    hi = std::max(hi, value(g, i));
    lo = std::min(lo, value(g, i));
  }
  if (op == ReduceOp::Max) return static_cast<double>(hi);
  if (op == ReduceOp::Min) return static_cast<double>(lo);
  if (op == ReduceOp::Sum) return static_cast<double>(sum);
  return dtype == DType::Int64 ? static_cast<double>(sum / world)
                               : static_cast<double>(static_cast<float>(sum) / static_cast<float>(world));
}

struct Rank {
  int global = 0;
  std::unique_ptr<ThreadGroup> node, across;
};

// `nodes` nodes of `local` ranks, rank g = node k · local + i; each runs body(rank) on a
// thread of its own. What a rank throws (an unwritten exercise's pointer, a mismatch)
// fails the test.
void run_ranks(int nodes, int local, const std::function<void(Rank&)>& body) {
  const int world = nodes * local;
  std::vector<std::shared_ptr<Meeting>> node_meetings, across_meetings;
  for (int k = 0; k < nodes; ++k) node_meetings.push_back(std::make_shared<Meeting>(local));
  for (int i = 0; i < local; ++i) across_meetings.push_back(std::make_shared<Meeting>(nodes));
  std::vector<Rank> ranks(static_cast<std::size_t>(world));
  std::vector<std::string> errors(static_cast<std::size_t>(world));
  std::vector<std::thread> threads;
  for (int g = 0; g < world; ++g) {
    Rank& r = ranks[static_cast<std::size_t>(g)];
    r.global = g;
    r.node = std::make_unique<ThreadGroup>(node_meetings[static_cast<std::size_t>(g / local)], g % local);
    r.across = std::make_unique<ThreadGroup>(across_meetings[static_cast<std::size_t>(g % local)], g / local);
    threads.emplace_back([&, g] {
      try {
        body(ranks[static_cast<std::size_t>(g)]);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(g)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int g = 0; g < world; ++g) {
    INFO("rank " << g);
    CHECK(errors[static_cast<std::size_t>(g)] == "");
  }
}

template <typename T>
void check_one(Rank& r, std::int64_t n, ReduceOp op, int world) {
  Tensor t = ddp::empty({n}, ddp::TensorOptions{ddp::dtype_of<T>()});
  for (std::int64_t i = 0; i < n; ++i) t.data<T>()[i] = static_cast<T>(value(r.global, i));
  ddp::two_level_all_reduce(t, op, *r.node, *r.across);
  for (std::int64_t i = 0; i < n; ++i) {
    const double want = reference(op, world, i, t.dtype());
    if (static_cast<double>(t.data<T>()[i]) != want) {
      throw ddp::Error("rank " + std::to_string(r.global) + ": " + ddp::to_string(op) + " of " +
                       std::to_string(n) + ": index " + std::to_string(i) + " is " +
                       std::to_string(t.data<T>()[i]) + ", expected " + std::to_string(want));
    }
  }
}

void check_every_op(int nodes, int local) {
  run_ranks(nodes, local, [&](Rank& r) {
    for (const std::int64_t n : {0, 1, 2, 3, 5, 6, 7, 100, 1001}) {
      for (const ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min}) {
        check_one<float>(r, n, op, nodes * local);
        check_one<std::int64_t>(r, n, op, nodes * local);
      }
    }
  });
}

}  // namespace

TEST_CASE("two levels, 2 nodes of 2: every op, float32 and int64, lengths the node's size "
          "does not divide",
          "[two_level][ex07.3]") {
  check_every_op(2, 2);
}

TEST_CASE("two levels, 2 nodes of 3, 3 nodes of 2, one node of 4, 4 nodes of 1",
          "[two_level][ex07.3]") {
  check_every_op(2, 3);
  check_every_op(3, 2);
  check_every_op(1, 4);
  check_every_op(4, 1);
}

TEST_CASE("two levels: the ring across the nodes carries one slice, the node all of it",
          "[two_level][ex07.3]") {
  // 2 nodes of 3, 1000 elements: slices of ceil(1000 / 3) = 334; the node's reduce-scatter
  // and all-gather move 3 slices (1002, padded), the ring across only one.
  run_ranks(2, 3, [](Rank& r) {
    Tensor t = ddp::zeros({1000});
    ddp::two_level_all_reduce(t, ReduceOp::Sum, *r.node, *r.across);
    const auto& node = r.node->calls;
    const auto& across = r.across->calls;
    const bool ok = node.size() == 2 && node[0].collective == "reduce_scatter" &&
                    node[0].elements == 1002 && node[1].collective == "all_gather" &&
                    node[1].elements == 334 && across.size() == 1 &&
                    across[0].collective == "all_reduce" && across[0].elements == 334;
    if (!ok) {
      std::string seen;
      for (const auto& c : node) seen += " node." + c.collective + "(" + std::to_string(c.elements) + ")";
      for (const auto& c : across) seen += " across." + c.collective + "(" + std::to_string(c.elements) + ")";
      throw ddp::Error("rank " + std::to_string(r.global) +
                       ": expected node.reduce_scatter(1002) across.all_reduce(334) "
                       "node.all_gather(334), saw" + seen);
    }
  });
}

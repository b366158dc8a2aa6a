// ddp::ProcessGroupTwoLevel: the node layout, the three groups and the three steps.
#include "dist/two_level_group.hpp"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <map>
#include <utility>

#include "base/error.hpp"
#include "base/trace.hpp"
#include "dist/all_gather_text.hpp"
#include "dist/launch_env.hpp"   // host_name
#include "dist/new_group.hpp"

namespace ddp {

// Note [Two levels]
// Take S bytes on each of W = N·L ranks, N nodes of L. The flat ring sends 2(W-1)/W · S
// from every rank to its right neighbour; placed node by node, N of its W links cross the
// network, and since every step of the ring moves S/W over all links at once, each step
// takes as long as a network link needs for S/W: the fast links inside the nodes wait.
//
// The two-level all-reduce cuts the tensor into L slices:
//   1. node.reduce_scatter: local rank i ends with its node's sum of slice i. Each rank
//      sends (L-1)/L · S inside the node;
//   2. across.all_reduce of slice i among the N ranks with local rank i, one per node:
//      each rank sends 2(N-1)/N · S/L over the network, and the L rings run side by side;
//   3. node.all_gather: every rank collects the L slices, (L-1)/L · S sent inside the node.
// The network carries 2(N-1)/N · S/L from each rank instead of 2(W-1)/W · S over one link
// in L: at 2 nodes of 2, 0.5·S a rank against 1.5·S on each crossing link of the flat ring.
// Whether that is faster depends on how the L rings share a node's network card: the
// cost model (dist/parallel/cost_model.hpp) says both ways, and the tcp backend's link
// emulation gives every connection a link of its own.
//
// A length that L does not divide is padded to L·ceil(n/L): the pad's values are summed
// like the rest and then dropped. Avg sums at both levels and divides once by W, as the
// flat ring does, so that int64 truncates once.

int NodeLayout::nodes() const {
  int n = 0;
  for (int k : node_of_rank) n = std::max(n, k + 1);
  return n;
}

std::vector<int> NodeLayout::ranks_of_node(int k) const {
  std::vector<int> ranks;
  for (int r = 0; r < static_cast<int>(node_of_rank.size()); ++r) {
    if (node_of_rank[r] == k) ranks.push_back(r);
  }
  return ranks;
}

std::string NodeLayout::describe() const {
  std::vector<std::size_t> sizes;
  for (int k = 0; k < nodes(); ++k) sizes.push_back(ranks_of_node(k).size());
  const bool even = std::all_of(sizes.begin(), sizes.end(), [&](auto s) { return s == sizes[0]; });
  std::string text = std::to_string(sizes.size()) + (sizes.size() == 1 ? " node of " : " nodes of ");
  if (even && !sizes.empty()) return text + std::to_string(sizes[0]) + (sizes[0] == 1 ? " rank" : " ranks");
  for (std::size_t k = 0; k < sizes.size(); ++k) text += (k ? ", " : "") + std::to_string(sizes[k]);
  return text + " ranks";
}

namespace {

// Numbers the distinct keys in order of first appearance: {"b", "a", "b"} -> {0, 1, 0}.
NodeLayout number_in_order(const std::vector<std::string>& keys) {
  std::map<std::string, int> seen;
  NodeLayout layout;
  for (const std::string& key : keys) {
    auto [it, fresh] = seen.emplace(key, static_cast<int>(seen.size()));
    layout.node_of_rank.push_back(it->second);
  }
  return layout;
}

}  // namespace

NodeLayout layout_by_host(ProcessGroup& group) {
  return number_in_order(all_gather_text(group, host_name()));
}

NodeLayout parse_node_layout(const std::string& text, int world_size, const char* variable) {
  std::vector<std::string> keys;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = text.find(',', start);
    keys.push_back(text.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  const bool numbers = std::all_of(keys.begin(), keys.end(), [](const std::string& k) {
    return !k.empty() && std::all_of(k.begin(), k.end(), [](char c) { return c >= '0' && c <= '9'; });
  });
  DDP_CHECK(numbers && static_cast<int>(keys.size()) == world_size, variable, "=\"", text,
            "\": expected the node of each of the ", world_size,
            " ranks, numbers separated by commas (\"0,0,1,1\": ranks 0 and 1 on one node, "
            "2 and 3 on another)");
  return number_in_order(keys);
}

ProcessGroupTwoLevel::ProcessGroupTwoLevel(std::unique_ptr<ProcessGroup> flat,
                                           const NodeLayout& layout)
    : ProcessGroup(flat->rank(), flat->size(), flat->timeout()),
      flat_(std::move(flat)),
      layout_(layout) {
  DDP_CHECK(flat_->backend_name() != "nccl", who(),
            ": the two-level all-reduce is for the tcp and mpi backends; nccl's all-reduce "
            "already follows NVLink and the network itself");
  DDP_CHECK(static_cast<int>(layout_.node_of_rank.size()) == size(), who(),
            ": the node layout names ", layout_.node_of_rank.size(), " ranks, the group has ",
            size());
  const int nodes = layout_.nodes();
  const std::size_t per_node = layout_.ranks_of_node(0).size();
  for (int k = 0; k < nodes; ++k) {
    DDP_CHECK(layout_.ranks_of_node(k).size() == per_node, who(),
              ": the two-level all-reduce needs the same number of ranks on every node, "
              "and the layout is ", layout_.describe(),
              "\nhint: start as many ranks on every node (--nproc-per-node), or use the "
              "flat ring");
  }
  // Every rank makes every group, in the same order (new_group is a collective of the
  // parent): first the nodes, then the rings across them.
  for (int k = 0; k < nodes; ++k) {
    auto group = new_group(*flat_, layout_.ranks_of_node(k));
    if (group->rank() >= 0) node_ = std::move(group);
  }
  for (std::size_t i = 0; i < per_node; ++i) {
    std::vector<int> ring;
    for (int k = 0; k < nodes; ++k) ring.push_back(layout_.ranks_of_node(k)[i]);
    std::sort(ring.begin(), ring.end());
    auto group = new_group(*flat_, ring);
    if (group->rank() >= 0) across_ = std::move(group);
  }
  thread_ = std::thread([this] { loop(); });
}

ProcessGroupTwoLevel::~ProcessGroupTwoLevel() { destroy(); }

std::string ProcessGroupTwoLevel::description() const {
  return layout_.describe() + ": reduce-scatter in the node, all-reduce across the nodes, "
                              "all-gather in the node";
}

void ProcessGroupTwoLevel::check_tensor(const Tensor& t, const char* collective,
                                        const char* name) const {
  ProcessGroup::check_tensor(t, collective, name);
  DDP_CHECK(t.device().is_cpu(), where(collective), ": ", name, " is ", t.describe(),
            "; the two-level all-reduce moves host tensors (on GPUs, nccl does this itself)");
  DDP_CHECK(t.dtype() == DType::Float32 || t.dtype() == DType::Int64, where(collective), ": ",
            name, " is ", t.describe(), "; expected float32 or int64");
}

std::shared_ptr<Work> ProcessGroupTwoLevel::enqueue(std::string what, std::chrono::milliseconds timeout,
                                                  std::function<void()> run) {
  auto work = std::make_shared<FutureWork>(where(what.c_str()), timeout);
  {
    std::lock_guard lock(mutex_);
    if (stop_) {
      work->fail(std::make_exception_ptr(
          Error(work->description() + ": the process group was destroyed first")));
      return work;
    }
    queue_.push_back(Task{work, std::move(run)});
  }
  cv_.notify_one();
  return work;
}

std::shared_ptr<Work> ProcessGroupTwoLevel::all_reduce(Tensor& tensor, ReduceOp op) {
  check_tensor(tensor, "all_reduce", "tensor");
  // Three steps, each within the group's deadline: the Work waits for all three, so that a
  // step that fails is the one to say who and why.
  return enqueue(detail::concat("all_reduce of ", tensor.numel(), " ", dtype_name(tensor.dtype()),
                                " (", to_string(op), ", two levels)"),
                 3 * timeout(),
                 [this, tensor, op]() mutable { two_level_all_reduce(tensor, op, *node_, *across_); });
}

// The others are the flat group's, queued behind the all-reduces all the same: a
// broadcast of a tensor that an all-reduce still works on, or a barrier, must come after it.
std::shared_ptr<Work> ProcessGroupTwoLevel::broadcast(Tensor& tensor, int root) {
  return enqueue("broadcast", timeout(),
                 [this, tensor, root]() mutable { flat_->broadcast(tensor, root)->wait(); });
}
std::shared_ptr<Work> ProcessGroupTwoLevel::all_gather(Tensor& output, const Tensor& input) {
  return enqueue("all_gather", timeout(), [this, output, input]() mutable {
    flat_->all_gather(output, input)->wait();
  });
}
std::shared_ptr<Work> ProcessGroupTwoLevel::reduce_scatter(Tensor& output, const Tensor& input,
                                                           ReduceOp op) {
  return enqueue("reduce_scatter", timeout(), [this, output, input, op]() mutable {
    flat_->reduce_scatter(output, input, op)->wait();
  });
}
std::shared_ptr<Work> ProcessGroupTwoLevel::barrier() {
  return enqueue("barrier", timeout(), [this] { flat_->barrier()->wait(); });
}

void ProcessGroupTwoLevel::loop() {
  trace::set_thread_name("two-level all-reduce");
  std::string broken;  // the first failure: what is queued behind it fails at once
  for (;;) {
    Task task;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) break;  // stopped, and nothing left to run
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    try {
      DDP_CHECK(broken.empty(), task.work->description(),
                " refused: this process group failed earlier:\n", broken);
      task.run();
      task.work->finish();
    } catch (const std::exception& e) {
      if (broken.empty()) broken = e.what();
      task.work->fail(std::current_exception());
    }
  }
}

void ProcessGroupTwoLevel::destroy() {
  {
    std::lock_guard lock(mutex_);
    if (destroyed_) return;  // once, whoever calls it
    destroyed_ = stop_ = true;
  }
  cv_.notify_one();
  // What is queued still runs (the peers are in the same collectives), each within its
  // deadline; after a failure the rest fail at once.
  if (thread_.joinable()) thread_.join();
  // Sub-groups before the group they were made from (dist/new_group.hpp).
  if (across_) across_->destroy();
  if (node_) node_->destroy();
  flat_->destroy();
}

void ProcessGroupTwoLevel::abort() noexcept {
  if (across_) across_->abort();
  if (node_) node_->abort();
  flat_->abort();
}

}  // namespace ddp

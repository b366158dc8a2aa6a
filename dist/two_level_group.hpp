// ddp::ProcessGroupTwoLevel: an all-reduce that knows the cluster's shape. Chapter 07,
// "Topology".
//
// A cluster is N nodes of L ranks each: fast links inside a node (shared memory, NVLink),
// a slower network between nodes. The flat ring of all W = N·L ranks crosses the network
// at every node boundary, and each of its 2(W-1) steps waits for its slowest link. The
// two-level all-reduce of S bytes sends what must cross the network once, in L rings side
// by side (Note [Two levels] in the .cpp):
//   1. reduce-scatter inside the node: local rank i holds its node's sum of slice i
//      (S/L bytes), over the fast links;
//   2. all-reduce across the nodes, among the ranks with the same local rank: the
//      network carries slice i only, 2(N-1)/N · S/L bytes from each rank;
//   3. all-gather inside the node: every rank gets every slice, over the fast links.
// It is made of three groups from new_group (dist/new_group.hpp): the whole group (the
// "flat" one, for everything that is not an all-reduce), this rank's node, and this
// rank's ring across the nodes. On the tcp backend the node's group talks through shared
// memory when its ranks share a host (dist/process_group_tcp.hpp). NCCL does the same
// inside ncclAllReduce on NVLink + InfiniBand machines, with more levels and trees; this
// is the textbook version of it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dist/process_group.hpp"

namespace ddp {

// Where each rank of a group runs: node_of_rank[r] is rank r's node, numbered 0, 1, ... in
// the order of each node's lowest rank. The same on every rank.
struct NodeLayout {
  std::vector<int> node_of_rank;

  int nodes() const;
  // The ranks of node k, in increasing order.
  std::vector<int> ranks_of_node(int k) const;
  // "2 nodes of 2 ranks", or "3 nodes of 1, 2, 1 ranks" when they differ.
  std::string describe() const;
};

// The layout by host name: the ranks that share a host name share a node. A collective
// on `group` (every rank calls it).
NodeLayout layout_by_host(ProcessGroup& group);
// The layout from a list such as "0,0,1,1" (node of each rank in order): for tests and
// demonstrations that pretend one machine is several nodes (DDP_NODE_OF_RANK). Throws
// ddp::Error naming `variable`, the text and the expected form.
NodeLayout parse_node_layout(const std::string& text, int world_size, const char* variable);

// The three steps on a host tensor (float32 or int64, contiguous), Note [Two levels]:
// node.reduce_scatter, across.all_reduce of this rank's slice, node.all_gather. `node`
// holds this rank's node (its rank() is the local rank), `across` the ranks with this
// local rank, one a node. A length the node's size does not divide is padded; Avg sums
// at both levels and divides once by node.size() · across.size(). Every rank calls it
// with as many elements. Exercise 07.3 (dist/two_level_steps.cpp).
void two_level_all_reduce(Tensor& tensor, ReduceOp op, ProcessGroup& node, ProcessGroup& across);

class ProcessGroupTwoLevel final : public ProcessGroup {
 public:
  // Builds the node's group and the ring across the nodes from `flat` with new_group
  // (a collective on `flat`: every rank calls it, with the same layout). Throws ddp::Error
  // when the nodes do not all hold the same number of ranks (naming them), or when `flat`
  // is nccl (NCCL's all-reduce already does this, better).
  ProcessGroupTwoLevel(std::unique_ptr<ProcessGroup> flat, const NodeLayout& layout);
  ~ProcessGroupTwoLevel() override;

  std::string backend_name() const override { return flat_->backend_name(); }
  // "2 nodes of 2 ranks: reduce-scatter in the node, all-reduce across the nodes,
  // all-gather in the node": for a program's banner.
  std::string description() const;

  // Every collective runs on this group's own thread, in the order they were called, as a
  // backend's communication thread runs them. all_reduce is two_level_all_reduce, for host
  // tensors only (float32, int64: the GPU's path is nccl's); its Work waits up to three
  // times timeout(), one for each step, and each step names whoever failed it. After a
  // failure, what is queued behind it fails at once.
  std::shared_ptr<Work> all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::Sum) override;
  // The others are the flat group's.
  std::shared_ptr<Work> broadcast(Tensor& tensor, int root) override;
  std::shared_ptr<Work> all_gather(Tensor& output, const Tensor& input) override;
  std::shared_ptr<Work> reduce_scatter(Tensor& output, const Tensor& input,
                                       ReduceOp op = ReduceOp::Sum) override;
  std::shared_ptr<Work> barrier() override;

  void destroy() override;
  void abort() noexcept override;
  std::shared_ptr<Store> store() const override { return flat_->store(); }

  ProcessGroup& flat() { return *flat_; }
  ProcessGroup& node() { return *node_; }
  ProcessGroup& across() { return *across_; }

 private:
  void check_tensor(const Tensor& t, const char* collective, const char* name) const override;
  std::shared_ptr<Work> enqueue(std::string what, std::chrono::milliseconds timeout,
                                std::function<void()> run);
  void loop();

  std::unique_ptr<ProcessGroup> flat_;
  std::unique_ptr<ProcessGroup> node_;    // this rank's node; rank() = the local rank
  std::unique_ptr<ProcessGroup> across_;  // the ranks with this local rank, one a node
  NodeLayout layout_;

  // The queue of collectives and the thread that runs them in order, as a backend's
  // communication thread does: a caller never waits for the three steps.
  struct Task {
    std::shared_ptr<FutureWork> work;
    std::function<void()> run;
  };
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  bool stop_ = false;
  bool destroyed_ = false;
  std::thread thread_;
};

}  // namespace ddp

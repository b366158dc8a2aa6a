// The Reducer: chapter 07's gradient averaging, bucket by bucket, inside backward.
//
// Chapter 06's DDP waits for backward to finish, then all-reduces every gradient. But
// backward produces the gradients one layer at a time, last layer first, and the
// network does not need the average until the optimizer step. So the Reducer
//   1. groups the parameters into buckets, in the order backward produces their
//      gradients (reverse registration order; after the first step, the order measured),
//      each bucket one flat buffer, closed once it holds at least its cap
//      (`first_bucket_bytes`, then `bucket_cap_bytes`: see assign_buckets);
//   2. makes every parameter's .grad a view into its bucket's buffer, so that backward
//      writes the gradient straight where the all-reduce reads it (no copy in or out);
//   3. hooks every parameter (a grad-ready hook, chapter 03): when the last gradient of
//      a bucket is ready, that bucket's all-reduce is launched (asynchronously: a Work)
//      while backward goes on computing earlier layers;
//   4. at the end of backward (an end-of-backward callback), waits for every bucket and
//      divides by the world size (by the iteration's divisor inside chapter 08's Join).
//      The optimizer then sees averaged gradients.
// The communication of every bucket but the last hides behind the rest of backward
// (Note [Why buckets] in reducer.cpp). PyTorch's reducer.cpp is the model: same default
// caps (25 MiB, first bucket 1 MiB), same rebuild after the first step, same find_unused_
// parameters, same no_sync.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.hpp"
#include "base/trace.hpp"
#include "dist/parallel/joinable.hpp"
#include "dist/process_group.hpp"
#include "base/units.hpp"  // kMiB

namespace ddp {

// ---- The bucket assignment (the algorithm, in one function) ----------------------------

// Groups parameters into buckets: `order` lists parameter indices in the order their
// gradients are expected; `bytes[i]` is parameter i's gradient size. Walks `order`,
// adding each parameter to the open bucket, and closes the bucket once it holds at least
// its cap: `first_cap` for the first bucket, `cap` for every later one. So a bucket passes
// its cap by at most its last parameter, and a parameter larger than the cap closes the
// bucket it joins (alone only if that bucket was empty). Returns the buckets in order,
// each the parameter indices in the order they were added. Caps <= 0 are an error.
std::vector<std::vector<std::size_t>> assign_buckets(const std::vector<std::int64_t>& bytes,
                                                     const std::vector<std::size_t>& order,
                                                     std::int64_t first_cap, std::int64_t cap);

// ---- Communication hooks ---------------------------------------------------------------

// What a bucket goes through between "ready" and "averaged" (PyTorch's register_comm_hook).
// `launch` starts the reduction of the bucket's flat float32 gradients and returns its
// Work; `finish` runs once that Work has completed and must leave the AVERAGE over the
// ranks in `bucket`. Both run on the training thread; every rank must use the same hook.
struct CommHook {
  std::string name;  // "all-reduce", for messages and the bucket table
  std::function<std::shared_ptr<Work>(ProcessGroup& group, Tensor& bucket)> launch;
  std::function<void(ProcessGroup& group, Tensor& bucket)> finish;
};
// The default: all-reduce (sum), then multiply by 1/W (chapter 06's arithmetic).
CommHook allreduce_hook();

// ---- The Reducer -----------------------------------------------------------------------

struct ReducerOptions {
  std::int64_t bucket_cap_bytes = 25 * kMiB;   // PyTorch's bucket_cap_mb = 25
  std::int64_t first_bucket_bytes = 1 * kMiB;  // PyTorch's first bucket: start talking early
  // A parameter may get no gradient in a step (a branch the model skipped). Off: that is
  // an error naming it. On: it counts as ready, with a zero contribution; one used on no
  // rank keeps the gradient it had (none, if it had none: the optimizer then skips it).
  // Costs a graph walk per forward and one small all-reduce per step.
  bool find_unused_parameters = false;
  // After the first step, regroup the buckets in the order the gradients really came.
  bool rebuild_buckets = true;
  // Every wait is the group's deadline (ProcessGroup::timeout()): no timeout of its own.
};

class Reducer {
 public:
  // `parameters`: (dotted name, parameter) in registration order, the same on every rank
  // (DDP checks that first). All float32, all on one device. Registers one grad-ready
  // hook per parameter; `group` must outlive the Reducer.
  Reducer(std::vector<std::pair<std::string, Variable>> parameters, ProcessGroup& group,
          ReducerOptions options = {});
  ~Reducer();  // removes its hooks (and only its hooks)
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // Called by DDP's forward (grad mode on, training), before the backward it prepares.
  // `output` is the forward's result: with find_unused_parameters, the Reducer walks its
  // graph to find the parameters this backward will not reach. `sync` false (no_sync)
  // makes the coming backward accumulate gradients locally without communicating.
  // `divisor`: what this backward's summed gradients are divided by: the group's size,
  // except inside a Join (chapter 08; Note [A divisor per iteration] in reducer.cpp).
  void prepare_for_backward(const Variable& output, bool sync, int divisor);

  // True once the last prepared backward has been averaged (or did not need to be).
  bool finished() const { return !expecting_backward_; }

  // The buckets as a table, one line each (what --print-buckets shows):
  //   bucket 0: 4 parameters, 2570 floats (10 KiB): fc.bias fc.weight block3.bn2.bias ...
  std::string describe_buckets() const;
  // The assignment: the parameter indices of each bucket, in launch order.
  std::vector<std::vector<std::size_t>> bucket_assignment() const;
  int rebuilds() const { return rebuilds_; }  // 0 or 1
  const ReducerOptions& options() const { return options_; }
  // On the timeline (chapter 07): each launch is recorded as an instant "bucket b: launch"
  // of category "reducer" on the thread that ran backward. This row draws them under that
  // thread's row in trace::render_text, each as the last digit of b:
  //   main                FFFFFBBBBBBBBBBBBBBBBBBBw...
  //     bucket launches            0      1     2
  static trace::InstantRow launches_row();

  void set_comm_hook(CommHook hook);

  // Chapter 08 (reducer_join.cpp): the Reducer's part of DDP's JoinHook (joinable.hpp), the
  // shadow of one backward on a rank that has joined. Valid while the Reducer lives.
  std::unique_ptr<JoinHook> join_hook();

 private:
  class ReducerJoinHook;  // chapter 08: reducer_join.cpp

  struct Bucket {
    std::vector<std::size_t> parameters;  // indices into parameters_, in the bucket's order
    std::vector<std::int64_t> offsets;    // where each one's gradient starts in `flat`
    Tensor flat;                          // the gradients, one after another
    std::size_t pending = 0;              // parameters not ready yet in this backward
    std::shared_ptr<Work> work;           // the launched reduction; null before launch
  };
  struct Slot {  // where parameter i lives
    std::size_t bucket = 0;
    std::size_t index = 0;  // in bucket.parameters
  };

  void build_buckets(const std::vector<std::vector<std::size_t>>& assignment);
  Tensor bucket_view(std::size_t parameter) const;
  // Makes parameter i's gradient its bucket view, copying in what it held.
  void attach_gradient(std::size_t parameter);
  void on_gradient_ready(std::size_t parameter);  // the hook
  // Exercise 07.2 (reducer_ready.cpp): count a ready gradient; launch in bucket order.
  void mark_ready(std::size_t parameter);
  void launch_ready_buckets();        // in bucket order: Note [Launch order]
  void launch_bucket(std::size_t b);  // through the comm hook: sets buckets_[b].work
  void finish_backward();             // the end-of-backward callback
  void reduce_buckets();              // ... its work
  void drop_zero_filled_gradients();
  void wait_for_launched();                  // before throwing: no collective left behind
  void apply_divisor(Tensor& bucket) const;  // after the hook: Note [A divisor per iteration]
  void check_divisor(int divisor) const;
  std::vector<std::size_t> unused_in_graph(const Variable& output) const;
  void rebuild_from_arrival_order();
  // Throws on every rank unless every rank holds the same bucket assignment.
  void check_same_assignment() const;
  std::string who() const;  // "Reducer on rank 1/4 (tcp, node07)"

  std::vector<std::pair<std::string, Variable>> parameters_;
  std::vector<GradReadyHookId> hook_ids_;
  ProcessGroup& group_;
  ReducerOptions options_;
  CommHook hook_;

  std::vector<Bucket> buckets_;
  std::vector<Slot> slots_;

  // The state of one backward pass, reset by prepare_for_backward.
  bool expecting_backward_ = false;
  bool sync_ = true;
  int divisor_ = 0;  // this backward's, set by prepare_for_backward
  bool callback_queued_ = false;
  std::vector<bool> ready_;          // per parameter
  std::vector<bool> zero_filled_;    // its gradient is only the zeros attach_gradient put there
  std::vector<std::size_t> unused_;  // found in the graph, marked ready at the first hook
  std::size_t next_bucket_ = 0;      // the next bucket to launch
  std::vector<std::size_t> arrival_order_;  // this backward's, for the rebuild
  int rebuilds_ = 0;
  bool rebuild_due_ = false;
  bool broken_ = false;  // a reduction failed: the ranks are out of step for good
};

}  // namespace ddp

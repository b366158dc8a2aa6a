// FullyShardedDataParallel: ZeRO stage 3, parameters sharded too. Chapter 09.
//
// ZeRO-2 (sharded_data_parallel.hpp) still keeps every parameter on every rank. Here each
// unit of the model -- each direct child of the wrapped module that has parameters: for
// the ResNet, the stem conv, its BatchNorm, the three residual blocks and the classifier --
// becomes a FlatParameter of which each rank keeps only its 1/W slice. A unit's full
// parameters exist only while it computes:
//
//   forward of unit u:   all-gather u (prefetched) -> start gathering u+1 -> u's ops -> free u
//                        (the last unit stays whole when a backward follows: it is the
//                        first one backward needs)
//   backward of unit u:  all-gather u (prefetched) -> start gathering u-1 -> u's backward
//                        -> reduce-scatter u's gradients -> free u and its full gradients
//   step:                the local optimizer on the slices; nothing to gather (the next
//                        forward does)
//
// So a rank holds its shards plus at most two units' full parameters (the one computing,
// the one prefetched). "Free" gives the memory back while autograd's saved views of the
// weights live on (Storage::release); the gather before backward refills that same memory.
// Buffers (BatchNorm's running statistics) stay replicated and are broadcast from rank 0
// before each training forward, as DDP does. Every rank runs the same steps, and every
// parameter gets a gradient in every step. Outside forward and backward the parameters are
// released: read them inside a SummonFullParameters.
//
//   FullyShardedDataParallel model(net, group, [](std::vector<Variable> shards) {
//     return std::make_unique<nn::AdamW>(std::move(shards), nn::AdamWOptions{...});
//   });
//   cross_entropy(model(x), y).backward();
//   model.clip_grad_norm(1.0);   // optional
//   model.step();
//   model.zero_grad();
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "autograd/variable.hpp"
#include "base/deadline.hpp"
#include "dist/parallel/broadcast_coalesced.hpp"
#include "dist/parallel/flat_parameter.hpp"
#include "dist/parallel/zero_redundancy_optimizer.hpp"
#include "dist/process_group.hpp"
#include "nn/module.hpp"

namespace ddp {

struct FsdpOptions {
  bool broadcast_buffers = true;  // as DDPOptions
  bool prefetch = true;           // gather the next unit while this one computes
  // Each collective waits the group's deadline (ProcessGroup::timeout()).
};

class FullyShardedDataParallel {
 public:
  // Checks that every rank has the same model (ddp::Error on every rank otherwise), makes
  // rank 0's values everyone's, shards every unit and frees the full parameters. The
  // wrapped module must hold no parameters of its own, only in its children.
  FullyShardedDataParallel(std::shared_ptr<nn::Module> module, ProcessGroup& group,
                           const ZeroRedundancyOptimizer::MakeOptimizer& make,
                           FsdpOptions options = {});
  ~FullyShardedDataParallel();  // removes its hooks; the parameters stay released
  FullyShardedDataParallel(const FullyShardedDataParallel&) = delete;
  FullyShardedDataParallel& operator=(const FullyShardedDataParallel&) = delete;

  Variable forward(const Variable& x);
  Variable operator()(const Variable& x) { return forward(x); }
  [[nodiscard]] NoSyncGuard no_sync() { return NoSyncGuard(require_sync_); }
  double clip_grad_norm(double max_norm);  // as ShardedDataParallel's
  void step();
  void zero_grad();

  // While it lives, every unit's full parameters are gathered (PyTorch's
  // summon_full_params): to compare, evaluate or save the whole model. With `writeback`,
  // what was written into them (a checkpoint loaded) goes back into this rank's shards at
  // the end; every rank must then write the same values.
  class SummonFullParameters {
   public:
    explicit SummonFullParameters(FullyShardedDataParallel& fsdp, bool writeback = false);
    ~SummonFullParameters();
    SummonFullParameters(const SummonFullParameters&) = delete;
    SummonFullParameters& operator=(const SummonFullParameters&) = delete;

   private:
    FullyShardedDataParallel& fsdp_;
    bool writeback_;
  };

  nn::Optimizer& local_optimizer() { return *local_; }
  nn::Module& module() const { return *module_; }
  std::size_t num_units() const { return units_.size(); }
  const FlatParameter& unit(std::size_t u) const { return units_[u].flat; }
  // What happened to the units, in order, for the tests and the page: "gather 2",
  // "free 2", "reduce-scatter 2". Recorded while record_events(true).
  void record_events(bool on) { recording_ = on; }
  const std::vector<std::string>& events() const { return events_; }

 private:
  struct Unit {
    Unit(std::string n, nn::Module* m, FlatParameter f) : name(std::move(n)), module(m), flat(std::move(f)) {}
    std::string name;
    nn::Module* module;
    FlatParameter flat;                // flat.flat(): the full parameters, released between uses
    Variable shard;                    // this rank's slice, kept; with its averaged gradient
    std::shared_ptr<Work> gather;      // an all-gather into flat in flight
    bool gathered = false;             // flat holds the full parameters
    std::size_t pending = 0;           // parameters whose gradient has not come this backward
    Tensor padded_gradients;           // the reduce-scatter's input, while in flight
    Tensor summed;                     // its output (S), added to the shard's gradient
    std::shared_ptr<Work> reduce;
    bool reduced = false;              // this backward's averaged gradient is in `shard`
  };

  std::string who() const;
  void note(const char* what, std::size_t u);
  void start_gather(std::size_t u);  // restore the memory, launch the all-gather
  void wait_gathered(std::size_t u);
  void free_full(std::size_t u);     // release the memory of unit u's full parameters
  // A unit's hooks around its forward and backward: fsdp_unit_order.cpp (exercise 09.3).
  void before_forward(std::size_t u);
  Variable after_forward(std::size_t u, const Variable& output);
  void gather_for_backward(std::size_t u);  // runs when the gradient reaches u's output
  void on_gradient_ready(std::size_t u);
  void complete_reduce(std::size_t u);  // wait, free the padded buffer, divide by W
  void finish_backward();

  std::shared_ptr<nn::Module> module_;
  ProcessGroup& group_;
  FsdpOptions options_;
  std::vector<Unit> units_;
  std::vector<Variable> shards_;
  std::unique_ptr<nn::Optimizer> local_;
  std::vector<std::pair<Variable, GradReadyHookId>> hooks_;
  bool require_sync_ = true;
  bool expecting_backward_ = false;
  bool callback_queued_ = false;
  int summoned_ = 0;
  bool recording_ = false;
  std::vector<std::string> events_;
};

}  // namespace ddp

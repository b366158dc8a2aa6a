// FullyShardedDataParallel (see fully_sharded_data_parallel.hpp): the units, their
// gathers and frees, the reduce-scatter, the step. When a unit is gathered and freed
// around its forward and backward is fsdp_unit_order.cpp's (exercise 09.3).
#include "dist/parallel/fully_sharded_data_parallel.hpp"

#include <utility>

#include "autograd/engine.hpp"
#include "autograd/grad_mode.hpp"
#include "base/error.hpp"
#include "dist/parallel/replica_check.hpp"
#include "dist/parallel/shard_trace.hpp"
#include "tensor/memory.hpp"

namespace ddp {

// ---- Construction: units, shards, hooks ---------------------------------------------------

FullyShardedDataParallel::FullyShardedDataParallel(
    std::shared_ptr<nn::Module> module, ProcessGroup& group,
    const ZeroRedundancyOptimizer::MakeOptimizer& make, FsdpOptions options)
    : module_(std::move(module)), group_(group), options_(options) {
  DDP_CHECK(module_ != nullptr, "FullyShardedDataParallel: null module");
  check_same_model(*module_, group_, "FullyShardedDataParallel");  // or an error on every rank
  const std::size_t own = module_->parameters().size() -
                          [&] {
                            std::size_t in_children = 0;
                            for (const auto& [name, child] : module_->children())
                              in_children += child->parameters().size();
                            return in_children;
                          }();
  DDP_CHECK(own == 0, who(), ": the wrapped module holds ", own,
            " parameter(s) of its own; FSDP shards its children (the units), so every "
            "parameter must belong to one of them");

  NoGradGuard no_grad;
  for (const auto& [name, child] : module_->children()) {
    std::vector<Variable> parameters = child->parameters();
    if (parameters.empty()) continue;  // a ReLU: nothing to shard
    units_.emplace_back(name, child.get(),
                        FlatParameter(std::move(parameters), group_.rank(), group_.size()));
  }
  DDP_CHECK(!units_.empty(), who(), ": the model has no parameters");
  for (Unit& unit : units_) {
    group_.broadcast(unit.flat.flat(), /*root=*/0)->wait();  // rank 0's
    Tensor kept;  // this rank's slice outlives the full buffer
    {
      const memory::Scope parameters(memory::Category::Parameters);
      kept = unit.flat.shard().clone();
    }
    unit.shard = Variable(kept, /*requires_grad=*/true);
    unit.shard.set_grad(zeros_like(kept));
    shards_.push_back(unit.shard);
    unit.flat.flat().storage()->release();
  }
  broadcast_buffers(*module_, group_, /*root=*/0);
  local_ = make(shards_);
  DDP_CHECK(local_ != nullptr, who(), ": the MakeOptimizer function returned no optimizer");

  for (std::size_t u = 0; u < units_.size(); ++u) {
    DDP_CHECK(!units_[u].module->has_forward_hooks(), who(), ": unit ", u, " (", units_[u].name,
              ") has forward hooks already (another FSDP around it?): a module has one pair");
    units_[u].module->set_forward_hooks(
        [this, u](nn::Module&) { before_forward(u); },
        [this, u](nn::Module&, const Variable& output) { return after_forward(u, output); });
    for (const Variable& p : units_[u].flat.parameters()) {
      hooks_.emplace_back(p, p.register_grad_ready_hook([this, u](const Variable&) {
                            on_gradient_ready(u);
                          }));
    }
  }
}

FullyShardedDataParallel::~FullyShardedDataParallel() {
  for (const auto& [p, id] : hooks_) p.remove_grad_ready_hook(id);
  for (Unit& unit : units_) unit.module->set_forward_hooks(nullptr, nullptr);
}

std::string FullyShardedDataParallel::who() const { return group_.who("FullyShardedDataParallel"); }

void FullyShardedDataParallel::note(const char* what, std::size_t u) {
  if (recording_) events_.push_back(detail::concat(what, " ", u));
  trace_shard_event(what, u);  // the timeline draws the gathers and reduce-scatters
}

// ---- Gathering and freeing a unit ---------------------------------------------------------

void FullyShardedDataParallel::start_gather(std::size_t u) {
  Unit& unit = units_[u];
  if (unit.gathered || unit.gather) return;  // there, or on its way
  unit.flat.flat().storage()->restore();     // counted as parameters again (and budgeted)
  unit.gather = group_.all_gather(unit.flat.flat(), unit.shard.data());
  note("gather", u);
}

void FullyShardedDataParallel::wait_gathered(std::size_t u) {
  Unit& unit = units_[u];
  start_gather(u);
  if (unit.gather) {
    const TracedWait traced("gather", u);
    unit.gather->wait();
    unit.gather.reset();
  }
  unit.gathered = true;
}

void FullyShardedDataParallel::free_full(std::size_t u) {
  Unit& unit = units_[u];
  if (summoned_ > 0 || !unit.gathered) return;
  unit.flat.flat().storage()->release();
  unit.gathered = false;
  note("free", u);
}

// ---- Forward ------------------------------------------------------------------------------

Variable FullyShardedDataParallel::forward(const Variable& x) {
  const bool trains = grad_enabled() && module_->is_training();
  if (options_.broadcast_buffers && trains) {
    broadcast_buffers(*module_, group_, /*root=*/0);
  }
  if (grad_enabled()) {
    DDP_CHECK(!(expecting_backward_ && callback_queued_), who(),
              ": a forward while the last backward has not finished");
    expecting_backward_ = require_sync_;
    callback_queued_ = false;
    for (Unit& unit : units_) unit.pending = unit.flat.parameters().size();
  }
  return (*module_)(x);
}

// ---- Backward -----------------------------------------------------------------------------

void FullyShardedDataParallel::on_gradient_ready(std::size_t u) {
  Unit& unit = units_[u];
  DDP_CHECK(unit.pending > 0, who(), ": unit ", u, " (", unit.name,
            ") got more gradients than it has parameters in one backward");
  if (--unit.pending > 0) return;
  // Every op that used the unit's weights has run (each produced a weight gradient).
  if (!expecting_backward_) {  // under no_sync: the full gradients accumulate; u can go
    free_full(u);
    return;
  }
  if (!callback_queued_) {
    callback_queued_ = true;
    queue_backward_callback([this] { finish_backward(); });
  }
  {
    const memory::Scope communication(memory::Category::Communication);
    unit.padded_gradients =
        empty({unit.flat.layout().padded_numel()}, {.device = unit.flat.flat().device()});
    unit.summed = empty({unit.flat.layout().shard_numel}, {.device = unit.flat.flat().device()});
  }
  unit.flat.copy_gradients(unit.padded_gradients, who());
  for (const Variable& p : unit.flat.parameters()) p.zero_grad();  // the full gradients go
  // Into a buffer of its own, added to the shard's gradient when done: a second backward
  // without zero_grad adds to the first, as DDP's gradients do.
  unit.reduce = group_.reduce_scatter(unit.summed, unit.padded_gradients, ReduceOp::Sum);
  note("reduce-scatter", u);
  free_full(u);
  // Wait for the unit before this one here, inside backward: its padded buffer can go
  // then, so that the buffers in flight never add up to a whole model's gradients. The
  // ring runs the collectives in order, so it is done or nearly; the wait costs a little
  // overlap.
  for (std::size_t v = 0; v < units_.size(); ++v) {
    if (v != u && units_[v].reduce) complete_reduce(v);
  }
}

void FullyShardedDataParallel::complete_reduce(std::size_t u) {
  Unit& unit = units_[u];
  {
    const TracedWait traced("reduce-scatter", u);
    unit.reduce->wait();
  }
  unit.reduce.reset();
  unit.padded_gradients = Tensor();
  // The sum over ranks -> the average, added to what the shard's gradient held.
  Tensor(unit.shard.grad()).add_(unit.summed, 1.0f / static_cast<float>(group_.size()));
  unit.summed = Tensor();
  unit.reduced = true;
}

void FullyShardedDataParallel::finish_backward() {
  expecting_backward_ = false;
  for (std::size_t u = 0; u < units_.size(); ++u) {
    Unit& unit = units_[u];
    if (unit.reduce) complete_reduce(u);
    DDP_CHECK(unit.reduced, who(), ": backward ended before unit ", u, " (", unit.name,
              ") had all its gradients: sharded training needs every parameter's");
    unit.reduced = false;
  }
}

// ---- The step -----------------------------------------------------------------------------

double FullyShardedDataParallel::clip_grad_norm(double max_norm) {
  return clip_shard_gradients(shards_, max_norm, group_);
}

void FullyShardedDataParallel::step() {
  // The full copies a SummonFullParameters holds would go stale: step outside one.
  DDP_CHECK(summoned_ == 0, who(), ": step() inside a SummonFullParameters");
  // A unit still whole would go stale: the last one, after a forward that no backward
  // followed (after_forward keeps it for the backward).
  for (std::size_t u = 0; u < units_.size(); ++u) free_full(u);
  NoGradGuard no_grad;
  local_->step();  // the kept slices; the next forward gathers them
}

void FullyShardedDataParallel::zero_grad() {
  for (const Variable& shard : shards_) Tensor(shard.grad()).zero_();
  for (const Unit& unit : units_) {
    for (const Variable& p : unit.flat.parameters()) p.zero_grad();
  }
}

// ---- Summoning the full parameters ------------------------------------------------------

FullyShardedDataParallel::SummonFullParameters::SummonFullParameters(
    FullyShardedDataParallel& fsdp, bool writeback)
    : fsdp_(fsdp), writeback_(writeback) {
  if (fsdp_.summoned_ == 0) {
    for (std::size_t u = 0; u < fsdp_.units_.size(); ++u) fsdp_.wait_gathered(u);
  }
  ++fsdp_.summoned_;  // after the gathers: a failed one leaves nothing half summoned
}

FullyShardedDataParallel::SummonFullParameters::~SummonFullParameters() {
  if (writeback_) {
    NoGradGuard no_grad;
    for (Unit& unit : fsdp_.units_) unit.shard.data().copy_(unit.flat.shard());
  }
  if (--fsdp_.summoned_ > 0) return;
  for (std::size_t u = 0; u < fsdp_.units_.size(); ++u) fsdp_.free_full(u);
}

}  // namespace ddp

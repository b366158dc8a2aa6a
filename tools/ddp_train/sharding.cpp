// The optimizer and how the model is synchronised: --optimizer, --shard, --clip-grad-norm,
// --grad-accum's no_sync, --print-memory. Chapter 09. Under --shard none the model is in
// DDP (chapter 07) and the optimizer steps every parameter; zero1 keeps DDP and shards
// the optimizer (ZeroRedundancyOptimizer); zero2 and fsdp replace DDP by a wrapper that
// shards gradients (ShardedDataParallel) or parameters too (FullyShardedDataParallel),
// with the optimizer inside, over this rank's shards.
#include <cstdio>
#include <string>
#include <vector>

#include "autograd/grad_mode.hpp"
#include "dist/parallel/memory_prediction.hpp"
#include "dist/parallel/zero_redundancy_optimizer.hpp"
#include "nn/adamw.hpp"
#include "nn/clip_grad.hpp"
#include "nn/sgd.hpp"
#include "tensor/memory.hpp"
#include "tools/ddp_train/trainer.hpp"

namespace ddp::train {

std::unique_ptr<nn::Optimizer> Trainer::new_optimizer(std::vector<Variable> parameters) const {
  if (options_.optimizer == "adamw") {
    return std::make_unique<nn::AdamW>(
        std::move(parameters),
        nn::AdamWOptions{.lr = options_.lr, .weight_decay = options_.weight_decay});
  }
  return std::make_unique<nn::SGD>(
      std::move(parameters),
      nn::SGDOptions{
          .lr = options_.lr, .momentum = options_.momentum, .weight_decay = options_.weight_decay});
}

void Trainer::make_optimizer() {
  const auto make = [this](std::vector<Variable> shards) { return new_optimizer(std::move(shards)); };
  if (options_.shard != "none" && !group_) {
    std::printf("--shard %s: one process, nothing to shard over: training unsharded%s\n",
                options_.shard.c_str(),
                options_.save_format == "sharded"
                    ? "; --save-format sharded: no shards to write, --save writes the full format"
                    : "");
  }
  if (!group_ || options_.shard == "none") {
    optimizer_ = new_optimizer(model_->parameters());
  } else if (options_.shard == "zero1") {
    optimizer_ = std::make_unique<ZeroRedundancyOptimizer>(model_->parameters(), *group_, make);
  } else if (options_.shard == "zero2") {
    zero2_ = std::make_unique<ShardedDataParallel>(
        model_, *group_, make,
        ShardedOptions{.broadcast_buffers = options_.broadcast_buffers});
  } else {
    fsdp_ = std::make_unique<FullyShardedDataParallel>(
        model_, *group_, make,
        FsdpOptions{.broadcast_buffers = options_.broadcast_buffers});
  }
}

std::vector<const FlatParameter*> Trainer::sharded_flats() const {
  std::vector<const FlatParameter*> out;
  if (const auto* zero1 = dynamic_cast<const ZeroRedundancyOptimizer*>(optimizer_.get())) {
    out.push_back(&zero1->flat_parameter());
  }
  if (zero2_) {
    for (const FlatParameter& bucket : zero2_->buckets()) out.push_back(&bucket);
  }
  if (fsdp_) {
    for (std::size_t u = 0; u < fsdp_->num_units(); ++u) out.push_back(&fsdp_->unit(u));
  }
  return out;
}

nn::Optimizer& Trainer::optimizer() {
  if (zero2_) return zero2_->local_optimizer();
  if (fsdp_) return fsdp_->local_optimizer();
  return *optimizer_;
}

nn::Optimizer& Trainer::local_optimizer() {
  if (auto* zero1 = dynamic_cast<ZeroRedundancyOptimizer*>(optimizer_.get())) {
    return zero1->local_optimizer();
  }
  return optimizer();  // zero2 and fsdp: their local optimizer already
}

Variable Trainer::forward(const Variable& images) {
  if (ddp_) return (*ddp_)(images);
  if (zero2_) return (*zero2_)(images);
  if (fsdp_) return (*fsdp_)(images);
  return (*model_)(images);
}

std::unique_ptr<NoSyncGuard> Trainer::hold_back() {
  // The guards cannot move: each is made in place from what no_sync() returns.
  if (zero2_) return std::unique_ptr<NoSyncGuard>(new NoSyncGuard(zero2_->no_sync()));
  if (fsdp_) return std::unique_ptr<NoSyncGuard>(new NoSyncGuard(fsdp_->no_sync()));
  // DDP's flat and per-parameter averaging run after backward: nothing to hold back.
  if (ddp_ && ddp_->options().gradient_sync == GradientSync::Bucketed) {
    return std::unique_ptr<NoSyncGuard>(new NoSyncGuard(ddp_->no_sync()));
  }
  return nullptr;
}

void Trainer::clip_and_step() {
  if (ddp_) ddp_->average_gradients();
  if (options_.clip_grad_norm > 0.0) {
    if (zero2_) {
      zero2_->clip_grad_norm(options_.clip_grad_norm);
    } else if (fsdp_) {
      fsdp_->clip_grad_norm(options_.clip_grad_norm);
    } else {  // none, zero1: every rank holds every averaged gradient
      nn::clip_grad_norm(model_->parameters(), options_.clip_grad_norm);
    }
  }
  trace::Span span("optimizer", options_.optimizer == "adamw" ? "AdamW step" : "SGD step");
  if (zero2_) {
    zero2_->step();
  } else if (fsdp_) {
    fsdp_->step();
  } else {
    optimizer_->step();
  }
}

void Trainer::zero_grad() {
  if (zero2_) {
    zero2_->zero_grad();
  } else if (fsdp_) {
    fsdp_->zero_grad();
  } else {
    optimizer_->zero_grad();
  }
}

// Each rank's table, with Note [The memory prediction] (dist/parallel/memory_prediction.hpp)
// beside the rows it covers.
void Trainer::print_memory() const {
  const double k = options_.optimizer == "adamw" ? 8.0 : (options_.momentum > 0.0 ? 4.0 : 0.0);
  const std::string& s = group_ ? options_.shard : std::string("none");
  const MemoryPrediction prediction = predict_memory(s, *model_, world_size(), k);
  const memory::Snapshot now = memory::snapshot();
  std::string table = memory::format_table(now);
  // The prediction beside the three rows it covers, in bytes like the column before it.
  const std::pair<const char*, double> predicted[] = {
      {"parameters", prediction.parameters},
      {"gradients", prediction.gradients},
      {"optimizer state", prediction.optimizer_state}};
  std::string out;
  std::size_t start = 0;
  while (start < table.size()) {
    const std::size_t end = table.find('\n', start);
    std::string line = table.substr(start, end - start);
    start = end + 1;
    if (out.empty()) line += " predicted bytes";
    for (const auto& [name, bytes] : predicted) {
      if (line.find(std::string("  ") + name + " ") == 0) {
        char text[32];
        std::snprintf(text, sizeof text, " %15.0f", bytes);
        line += text;
      }
    }
    out += line + "\n";
  }
  std::printf("memory of rank %d/%d (--shard %s, %s; peaks since the start):\n%s", rank(),
              world_size(), s.c_str(), options_.optimizer.c_str(), out.c_str());
  std::fflush(stdout);
}

}  // namespace ddp::train

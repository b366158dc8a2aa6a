// BatchNorm2d: per-channel normalisation of (B, C, H, W) activations. Chapter 04.
//
// Training mode normalises with the batch's statistics and updates the running ones;
// evaluation mode uses the running ones (autograd/ops/batch_norm.cpp has the math).
// State, named as in PyTorch: parameters "weight" (C, starts at 1) and "bias" (C, 0);
// buffers "running_mean" (C, 0) and "running_var" (C, 1). PyTorch also keeps an int64
// "num_batches_tracked", which only matters when momentum is None; it is left out here
// (and is absent from the parity fixture, which keeps floating-point tensors only).
// Under DDP (chapter 06) every rank normalises with the statistics of its own shard of the
// batch, and its running statistics follow that shard. DDP's broadcast_buffers (on by
// default, as in PyTorch) copies rank 0's running statistics to every rank before each
// training forward; the last forward still moves each rank's copy, so ddp-train calls
// sync_buffers() before it evaluates. SyncBatchNorm2d (dist/parallel/sync_batch_norm.hpp)
// normalises with the statistics of the global batch instead, and every rank updates its
// running statistics with those same values.
#pragma once

#include <cstdint>
#include <string>

#include "nn/module.hpp"

namespace ddp::nn {

class BatchNorm2d : public Module {
 public:
  explicit BatchNorm2d(std::int64_t num_features, double eps = 1e-5, double momentum = 0.1);

  // x: (B, C, H, W) -> (B, C, H, W)
  Variable forward(const Variable& x) override;
  std::string describe() const override;

  const Variable& weight() const { return weight_; }
  const Variable& bias() const { return bias_; }
  const Tensor& running_mean() const { return running_mean_.data(); }
  const Tensor& running_var() const { return running_var_.data(); }
  std::int64_t num_features() const { return num_features_; }
  double eps() const { return eps_; }
  double momentum() const { return momentum_; }

 protected:  // SyncBatchNorm2d (chapter 06) normalises the same state differently
  std::int64_t num_features_;
  double eps_;
  double momentum_;
  Variable weight_;
  Variable bias_;
  Variable running_mean_;  // buffer holders (see Module::register_buffer)
  Variable running_var_;
};

}  // namespace ddp::nn

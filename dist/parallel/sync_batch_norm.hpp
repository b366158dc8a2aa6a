// SyncBatchNorm2d: batch normalisation with the statistics of the global batch. Chapter 06.
//
// Under DDP each rank normalises with the mean and variance of its own slice of the
// batch: with 4 ranks and a global batch of 128, BatchNorm sees 32 images. SyncBatchNorm2d
// all-reduces per-channel sums instead, so every rank normalises with the statistics of
// all 128, exactly what one process with the whole batch would compute; its backward
// all-reduces the two per-channel gradient sums that the normalisation couples (Note
// [The batch-norm backward] in autograd/ops/batch_norm.cpp). In evaluation mode it is a
// plain BatchNorm2d: running statistics, no communication. It is a BatchNorm2d (the same
// parameters and buffers, by name), so checkpoints load into either.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "dist/process_group.hpp"
#include "nn/batch_norm2d.hpp"
#include "nn/module.hpp"

namespace ddp {

class SyncBatchNorm2d final : public nn::BatchNorm2d {
 public:
  // `group` must outlive the module and every backward through it.
  SyncBatchNorm2d(std::int64_t num_features, ProcessGroup& group, double eps = 1e-5,
                  double momentum = 0.1);

  // x: (B, C, H, W) -> (B, C, H, W). In training, every rank of `group` must call it (the
  // same module, in the same order): it runs two all-reduces, and one in backward. In
  // evaluation it is BatchNorm2d::forward.
  Variable forward(const Variable& x) override;
  std::string describe() const override;

 private:
  ProcessGroup& group_;
};

// The op itself, on Variables: training-mode batch norm over the union of every rank's x.
// x: (B_r, C, H, W) on rank r (B_r may differ between ranks), weight/bias: (C) ->
// (B_r, C, H, W). Updates running_mean/var (C) with the global statistics when defined.
Variable sync_batch_norm(const Variable& x, const Variable& weight, const Variable& bias,
                         Tensor& running_mean, Tensor& running_var, double momentum, double eps,
                         ProcessGroup& group);

// Replaces every nn::BatchNorm2d below `module` (children, grandchildren, ...) by a
// SyncBatchNorm2d over `group` with the same settings, parameter values and running
// statistics (PyTorch's SyncBatchNorm.convert_sync_batchnorm). The new layers have new
// parameter Variables: convert first, then build the optimizer and DDP. Returns how many
// layers were replaced.
int convert_sync_batchnorm(nn::Module& module, ProcessGroup& group);

}  // namespace ddp

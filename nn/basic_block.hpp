// BasicBlock: the residual block of ResNet-18/34 (He et al. 2015). Chapter 04.
//
//   x ─┬─ conv1 3x3 (stride s) ─ bn1 ─ relu ─ conv2 3x3 ─ bn2 ─┐
//      │                                                       (+) ─ relu ─ out
//      └─ shortcut: identity, or conv 1x1 (stride s) ─ bn ─────┘
//
// The shortcut gets a 1x1 convolution + BatchNorm when the block changes the width or
// the resolution (so that both branches have one shape), and is an empty Sequential
// otherwise, exactly as in ref_model.py: the names ("shortcut.0.weight", ...) match.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "nn/batch_norm2d.hpp"
#include "nn/conv2d.hpp"
#include "nn/module.hpp"
#include "nn/sequential.hpp"
#include "tensor/random.hpp"

namespace ddp::nn {

class BasicBlock final : public Module {
 public:
  // Draws the initial weights from `gen` in PyTorch's order: conv1, conv2, shortcut.
  BasicBlock(std::int64_t in_channels, std::int64_t out_channels, std::int64_t stride,
             Generator& gen);

  // x: (B, Cin, H, W) -> (B, Cout, (H - 1) / s + 1, (W - 1) / s + 1)
  Variable forward(const Variable& x) override;
  std::string describe() const override;

  // The layers, for code that walks the block step by step (the chapter's shape table).
  Conv2d& conv1() const { return *conv1_; }
  // The normalisation layers are reached by name: a BatchNorm2d, or whatever replaced
  // it (chapter 06's SyncBatchNorm2d; Note [Swapping a child] in nn/module.cpp).
  Module& bn1() const { return child("bn1"); }
  Conv2d& conv2() const { return *conv2_; }
  Module& bn2() const { return child("bn2"); }
  Sequential& shortcut() const { return *shortcut_; }

 private:
  std::int64_t in_channels_;
  std::int64_t out_channels_;
  std::int64_t stride_;
  std::shared_ptr<Conv2d> conv1_;
  std::shared_ptr<Conv2d> conv2_;
  std::shared_ptr<Sequential> shortcut_;
};

}  // namespace ddp::nn

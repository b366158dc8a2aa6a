// ResNetMnist: the chapter's network, a small ResNet for 28x28 digits. Chapter 04.
// The same network as shared/anchors/ref_model.py (RefNet), layer for layer and name
// for name, 77,754 parameters. Chapter 07 adds a width multiplier K (every layer's
// channels times K, names unchanged): communication grows with the parameters, about
// K^2 times, so a wider network gives the overlap of chapter 07 something to hide.
//
//   layer    what (K = 1: 16, 32, 64 channels)                output (B, C, H, W)
//   input                                                     (B,   1, 28, 28)
//   conv     conv 3x3 1->16K, stride 1, pad 1, no bias         (B, 16K, 28, 28)
//   bn, relu BatchNorm2d(16K), ReLU                            (B, 16K, 28, 28)
//   block1   BasicBlock 16K->16K, stride 1, identity shortcut  (B, 16K, 28, 28)
//   block2   BasicBlock 16K->32K, stride 2, 1x1 conv+BN short. (B, 32K, 14, 14)
//   block3   BasicBlock 32K->64K, stride 2, 1x1 conv+BN short. (B, 64K,  7,  7)
//   pool     global average pool                               (B, 64K)
//   fc       Linear 64K->10                                    (B, 10) logits
//
// Parameters: 298 c^2 + 91 c + 10 with c = 16K: 77,754 (K = 1), 308,074 (K = 2),
// 1,226,442 (K = 4).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "nn/basic_block.hpp"
#include "nn/batch_norm2d.hpp"
#include "nn/conv2d.hpp"
#include "nn/linear.hpp"
#include "nn/module.hpp"
#include "tensor/random.hpp"

namespace ddp::nn {

class ResNetMnist final : public Module {
 public:
  static constexpr std::int64_t kNumClasses = 10;
  static constexpr std::int64_t kNumParameters = 77754;  // at width 1

  // PyTorch's default initialisation, drawn from `gen` layer by layer in the order above.
  // width: K >= 1; K = 1 is the network (and the draws) of chapter 04, bit for bit.
  explicit ResNetMnist(Generator& gen, std::int64_t width = 1);

  // x: (B, 1, 28, 28) normalised images -> (B, 10) logits
  Variable forward(const Variable& x) override;
  std::string describe() const override;  // "ResNetMnist", "ResNetMnist(width 2)"
  std::int64_t width() const { return width_; }

  Conv2d& conv() const { return *conv_; }
  Module& bn() const { return child("bn"); }  // by name: Note [Swapping a child]
  BasicBlock& block1() const { return *block1_; }
  BasicBlock& block2() const { return *block2_; }
  BasicBlock& block3() const { return *block3_; }
  Linear& fc() const { return *fc_; }

 private:
  std::int64_t width_;
  std::shared_ptr<Conv2d> conv_;
  std::shared_ptr<BasicBlock> block1_;
  std::shared_ptr<BasicBlock> block2_;
  std::shared_ptr<BasicBlock> block3_;
  std::shared_ptr<Linear> fc_;
};

}  // namespace ddp::nn

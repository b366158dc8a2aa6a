// ResNetMnist: the chapter's network, a small ResNet for 28x28 digits. Chapter 04.
// The same network as shared/anchors/ref_model.py (RefNet), layer for layer and name
// for name, 77,754 parameters:
//
//   layer    what                                             output (B, C, H, W)
//   input                                                     (B,  1, 28, 28)
//   conv     conv 3x3 1->16, stride 1, pad 1, no bias          (B, 16, 28, 28)
//   bn, relu BatchNorm2d(16), ReLU                             (B, 16, 28, 28)
//   block1   BasicBlock 16->16, stride 1, identity shortcut    (B, 16, 28, 28)
//   block2   BasicBlock 16->32, stride 2, 1x1 conv+BN shortcut (B, 32, 14, 14)
//   block3   BasicBlock 32->64, stride 2, 1x1 conv+BN shortcut (B, 64,  7,  7)
//   pool     global average pool                               (B, 64)
//   fc       Linear 64->10                                     (B, 10) logits
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
  static constexpr std::int64_t kNumParameters = 77754;

  // PyTorch's default initialisation, drawn from `gen` layer by layer in the order above.
  explicit ResNetMnist(Generator& gen);

  // x: (B, 1, 28, 28) normalised images -> (B, 10) logits
  Variable forward(const Variable& x) override;
  std::string describe() const override { return "ResNetMnist"; }

  Conv2d& conv() const { return *conv_; }
  Module& bn() const { return child("bn"); }  // by name: Note [Swapping a child]
  BasicBlock& block1() const { return *block1_; }
  BasicBlock& block2() const { return *block2_; }
  BasicBlock& block3() const { return *block3_; }
  Linear& fc() const { return *fc_; }

 private:
  std::shared_ptr<Conv2d> conv_;
  std::shared_ptr<BasicBlock> block1_;
  std::shared_ptr<BasicBlock> block2_;
  std::shared_ptr<BasicBlock> block3_;
  std::shared_ptr<Linear> fc_;
};

}  // namespace ddp::nn

// Linear: the fully connected layer y = x W^T + b. Chapter 04.
// Parameter names as in PyTorch: "weight" (out, in), "bias" (out).
#pragma once

#include <cstdint>
#include <string>

#include "nn/module.hpp"
#include "tensor/random.hpp"

namespace ddp::nn {

class Linear final : public Module {
 public:
  // Initialised as PyTorch does (nn/init.hpp), drawing from `gen`: weight, then bias.
  Linear(std::int64_t in_features, std::int64_t out_features, bool bias, Generator& gen);

  // x: (B, in) -> (B, out)
  Variable forward(const Variable& x) override;
  std::string describe() const override;

  const Variable& weight() const { return weight_; }
  const Variable& bias() const { return bias_; }  // undefined when built without one

 private:
  std::int64_t in_features_;
  std::int64_t out_features_;
  Variable weight_;
  Variable bias_;
};

}  // namespace ddp::nn

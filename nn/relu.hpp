// ReLU as a module, max(x, 0) elementwise, for Sequential. Chapter 04. No state.
#pragma once

#include <string>

#include "nn/module.hpp"

namespace ddp::nn {

class ReLU final : public Module {
 public:
  // x: any shape -> the same shape
  Variable forward(const Variable& x) override;
  std::string describe() const override { return "ReLU"; }
};

}  // namespace ddp::nn

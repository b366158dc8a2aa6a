// Sequential: modules applied one after the other. Chapter 04.
// The children are named "0", "1", ... as in PyTorch, which is where a name such as
// "block2.shortcut.1.running_var" comes from. An empty Sequential is the identity (the
// shortcut of a residual block that changes neither width nor resolution).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "nn/module.hpp"

namespace ddp::nn {

class Sequential final : public Module {
 public:
  Sequential() = default;

  // Appends `module` as child number size(). Returns it, for chaining set-up code.
  template <typename M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> module) {
    register_module(std::to_string(size()), module);
    return module;
  }
  // The layers are the children, so a layer swapped by replace_child is the one that runs.
  std::size_t size() const { return children().size(); }
  bool empty() const { return size() == 0; }
  Module& operator[](std::size_t i) const;

  // x -> layer[n-1](...layer[0](x)); x itself when empty.
  Variable forward(const Variable& x) override;
  std::string describe() const override;
};

}  // namespace ddp::nn

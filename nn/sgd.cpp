// SGD (see sgd.hpp): options, zero_grad and the state. step() is in sgd_step.cpp.
#include "nn/sgd.hpp"

#include <string>
#include <utility>

namespace ddp::nn {

namespace {

const std::string kBufferPrefix = "momentum_buffer.";

}  // namespace

SGD::SGD(std::vector<Variable> parameters, SGDOptions options)
    : parameters_(std::move(parameters)), options_(options) {
  DDP_CHECK(options.lr >= 0.0, "SGD: invalid learning rate ", options.lr);
  DDP_CHECK(options.momentum >= 0.0, "SGD: invalid momentum ", options.momentum);
  DDP_CHECK(options.weight_decay >= 0.0, "SGD: invalid weight_decay ", options.weight_decay);
  DDP_CHECK(!options.nesterov || (options.momentum > 0.0 && options.dampening == 0.0),
            "SGD: Nesterov momentum needs momentum > 0 and dampening = 0, got momentum ",
            options.momentum, " and dampening ", options.dampening);
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    DDP_CHECK(parameters_[i].defined() && parameters_[i].is_leaf() &&
                  parameters_[i].requires_grad(),
              "SGD: parameter ", i, " is not a leaf Variable that requires grad");
  }
  momentum_buffers_.resize(parameters_.size());
}

void SGD::set_lr(double lr) {
  DDP_CHECK(lr >= 0.0, "SGD::set_lr: invalid learning rate ", lr);
  options_.lr = lr;
}

void SGD::zero_grad() {
  for (const Variable& parameter : parameters_) parameter.zero_grad();
}

StateDict SGD::state_dict() const {
  StateDict out;
  for (std::size_t i = 0; i < momentum_buffers_.size(); ++i) {
    if (momentum_buffers_[i].defined()) {
      out.emplace_back(kBufferPrefix + std::to_string(i), momentum_buffers_[i]);
    }
  }
  return out;
}

void SGD::load_state_dict(const StateDict& state, std::string_view source) {
  // Pass 1: check every entry; pass 2: replace the buffers.
  std::vector<Tensor> loaded(parameters_.size());
  for (const auto& [name, tensor] : state) {
    std::size_t index = parameters_.size();
    if (name.starts_with(kBufferPrefix)) {
      const std::string digits = name.substr(kBufferPrefix.size());
      if (!digits.empty() && digits.find_first_not_of("0123456789") == std::string::npos &&
          digits.size() < 10) {
        index = std::stoul(digits);
      }
    }
    DDP_CHECK(index < parameters_.size(), "SGD::load_state_dict(", source,
              "): unexpected entry '", name, "' (expected momentum_buffer.<i> with i < ",
              parameters_.size(), ")");
    DDP_CHECK(!loaded[index].defined(), "SGD::load_state_dict(", source, "): entry '", name,
              "' appears twice");
    const Variable& p = parameters_[index];
    DDP_CHECK(tensor.defined() && tensor.dtype() == DType::Float32 &&
                  tensor.shape() == p.shape(),
              "SGD::load_state_dict(", source, "): entry '", name, "' is ",
              tensor.defined() ? tensor.describe() : std::string("undefined"),
              " but parameter ", index, " is ", p.data().describe());
    loaded[index] = tensor;
  }
  for (std::size_t i = 0; i < loaded.size(); ++i) {
    // A copy, never the caller's tensor: the buffer is updated in place by step().
    momentum_buffers_[i] =
        loaded[i].defined() ? loaded[i].to(parameters_[i].device()).clone() : Tensor();
  }
}

}  // namespace ddp::nn

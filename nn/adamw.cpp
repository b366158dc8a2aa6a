// AdamW (see adamw.hpp for the formulas): the step, in the order PyTorch's
// _single_tensor_adamw does it (so that fp32 rounding matches it closely), and the state.
#include "nn/adamw.hpp"

#include <cmath>
#include <string>
#include <utility>

#include "autograd/grad_mode.hpp"
#include "tensor/memory.hpp"
#include "tensor/ops.hpp"

namespace ddp::nn {

namespace {

const std::string kExpAvgPrefix = "exp_avg.";
const std::string kExpAvgSqPrefix = "exp_avg_sq.";
const std::string kStepPrefix = "step.";

// "exp_avg_sq.12" -> (kExpAvgSqPrefix, 12); an index of count or more when `name` is none
// of the three kinds.
std::pair<const std::string*, std::size_t> parse_entry(const std::string& name,
                                                       std::size_t count) {
  for (const std::string* prefix : {&kExpAvgSqPrefix, &kExpAvgPrefix, &kStepPrefix}) {
    if (!name.starts_with(*prefix)) continue;
    const std::string digits = name.substr(prefix->size());
    if (!digits.empty() && digits.size() < 10 &&
        digits.find_first_not_of("0123456789") == std::string::npos) {
      return {prefix, std::stoul(digits)};
    }
  }
  return {nullptr, count};
}

}  // namespace

AdamW::AdamW(std::vector<Variable> parameters, AdamWOptions options)
    : parameters_(std::move(parameters)), options_(options) {
  DDP_CHECK(options.lr >= 0.0, "AdamW: invalid learning rate ", options.lr);
  DDP_CHECK(options.eps >= 0.0, "AdamW: invalid eps ", options.eps);
  DDP_CHECK(options.beta1 >= 0.0 && options.beta1 < 1.0, "AdamW: invalid beta1 ", options.beta1,
            " (expected 0 <= beta1 < 1)");
  DDP_CHECK(options.beta2 >= 0.0 && options.beta2 < 1.0, "AdamW: invalid beta2 ", options.beta2,
            " (expected 0 <= beta2 < 1)");
  DDP_CHECK(options.weight_decay >= 0.0, "AdamW: invalid weight_decay ", options.weight_decay);
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    DDP_CHECK(parameters_[i].defined() && parameters_[i].is_leaf() &&
                  parameters_[i].requires_grad(),
              "AdamW: parameter ", i, " is not a leaf Variable that requires grad");
  }
  exp_avg_.resize(parameters_.size());
  exp_avg_sq_.resize(parameters_.size());
  steps_.assign(parameters_.size(), 0);
}

void AdamW::step() {
  NoGradGuard no_grad;
  const AdamWOptions& o = options_;
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    Tensor& p = parameters_[i].data();
    const Tensor& g = parameters_[i].grad();
    if (!g.defined()) continue;
    Tensor& m = exp_avg_[i];
    Tensor& v = exp_avg_sq_[i];
    if (!m.defined()) {
      const memory::Scope state(memory::Category::OptimizerState);
      m = zeros_like(p);
      v = zeros_like(p);
    }
    const double t = static_cast<double>(++steps_[i]);
    // Decoupled weight decay: the parameter shrinks, the moments never see the decay.
    if (o.weight_decay != 0.0) p.mul_(static_cast<float>(1.0 - o.lr * o.weight_decay));
    m.mul_(static_cast<float>(o.beta1)).add_(g, static_cast<float>(1.0 - o.beta1));
    v.mul_(static_cast<float>(o.beta2)).add_(mul(g, g), static_cast<float>(1.0 - o.beta2));
    const double bias_correction1 = 1.0 - std::pow(o.beta1, t);
    const double bias_correction2 = 1.0 - std::pow(o.beta2, t);
    const double step_size = o.lr / bias_correction1;
    Tensor denom = div(sqrt(v), std::sqrt(bias_correction2));
    denom.add_(static_cast<float>(o.eps));
    p.add_(div(m, denom), static_cast<float>(-step_size));
  }
}

void AdamW::zero_grad() {
  for (const Variable& parameter : parameters_) parameter.zero_grad();
}

void AdamW::set_lr(double lr) {
  DDP_CHECK(lr >= 0.0, "AdamW::set_lr: invalid learning rate ", lr);
  options_.lr = lr;
}

StateDict AdamW::state_dict() const {
  StateDict out;
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    if (!exp_avg_[i].defined()) continue;
    const std::int64_t step = steps_[i];
    out.emplace_back(kExpAvgPrefix + std::to_string(i), exp_avg_[i]);
    out.emplace_back(kExpAvgSqPrefix + std::to_string(i), exp_avg_sq_[i]);
    out.emplace_back(kStepPrefix + std::to_string(i),
                     from_data(std::span<const std::int64_t>(&step, 1), {1}));
  }
  return out;
}

void AdamW::load_state_dict(const StateDict& state, std::string_view source) {
  // Pass 1: check every entry; pass 2: replace the state.
  const std::size_t n = parameters_.size();
  std::vector<Tensor> avg(n), avg_sq(n), step(n);
  for (const auto& [name, tensor] : state) {
    const auto [prefix, index] = parse_entry(name, n);
    DDP_CHECK(index < n, "AdamW::load_state_dict(", source, "): unexpected entry '", name,
              "' (expected exp_avg.<i>, exp_avg_sq.<i> or step.<i> with i < ", n, ")");
    Tensor& slot = prefix == &kExpAvgPrefix ? avg[index]
                   : prefix == &kExpAvgSqPrefix ? avg_sq[index] : step[index];
    DDP_CHECK(!slot.defined(), "AdamW::load_state_dict(", source, "): entry '", name,
              "' appears twice");
    const Variable& p = parameters_[index];
    const bool is_step = prefix == &kStepPrefix;
    const bool fits = tensor.defined() &&
                      (is_step ? tensor.dtype() == DType::Int64 && tensor.numel() == 1
                               : tensor.dtype() == DType::Float32 && tensor.shape() == p.shape());
    DDP_CHECK(fits, "AdamW::load_state_dict(", source, "): entry '", name, "' is ",
              tensor.defined() ? tensor.describe() : std::string("undefined"), " but ",
              is_step ? std::string("a step count is int64 [1]")
                      : "parameter " + std::to_string(index) + " is " + p.data().describe());
    slot = tensor;
  }
  for (std::size_t i = 0; i < n; ++i) {
    const int present = avg[i].defined() + avg_sq[i].defined() + step[i].defined();
    DDP_CHECK(present == 0 || present == 3, "AdamW::load_state_dict(", source,
              "): parameter ", i, " has ", present,
              " of its three entries (exp_avg, exp_avg_sq, step): all or none");
  }
  for (std::size_t i = 0; i < n; ++i) {
    // Copies, never the caller's tensors: the moments are updated in place by step().
    const Device device = parameters_[i].device();
    exp_avg_[i] = avg[i].defined() ? avg[i].to(device).clone() : Tensor();
    exp_avg_sq_[i] = avg_sq[i].defined() ? avg_sq[i].to(device).clone() : Tensor();
    memory::tag(exp_avg_[i], memory::Category::OptimizerState);
    memory::tag(exp_avg_sq_[i], memory::Category::OptimizerState);
    steps_[i] = step[i].defined() ? step[i].cpu().item<std::int64_t>() : 0;
  }
}

}  // namespace ddp::nn

// Module (see module.hpp): registration, the recursive walks that name everything, and
// the all-or-nothing load_state_dict.
#include "nn/module.hpp"

#include <unordered_map>
#include <unordered_set>

#include "autograd/grad_mode.hpp"
#include "autograd/ops/trace_point.hpp"
#include "tensor/memory.hpp"

namespace ddp::nn {

// ---- Registration ------------------------------------------------------------------------

void Module::check_new_name(const std::string& name) const {
  DDP_CHECK(!name.empty() && name.find('.') == std::string::npos,
            "Module::register_*: name '", name, "' must be non-empty and contain no '.' "
            "(dots separate the levels of a dotted name)");
  auto taken = [&](const auto& list) {
    for (const auto& [existing, value] : list) {
      if (existing == name) return true;
    }
    return false;
  };
  DDP_CHECK(!taken(parameters_) && !taken(buffers_) && !taken(children_),
            "Module::register_*: name '", name, "' is already registered in this ",
            describe());
}

Variable Module::register_parameter(std::string name, Tensor value) {
  check_new_name(name);
  DDP_CHECK(value.defined() && value.dtype() == DType::Float32,
            "register_parameter('", name, "'): a parameter must be a float32 tensor");
  memory::tag(value, memory::Category::Parameters);
  Variable parameter(std::move(value), /*requires_grad=*/true);
  parameters_.emplace_back(std::move(name), parameter);
  return parameter;
}

Variable Module::register_buffer(std::string name, Tensor value) {
  check_new_name(name);
  DDP_CHECK(value.defined(), "register_buffer('", name, "'): the tensor is undefined");
  memory::tag(value, memory::Category::Parameters);  // buffers are model state too
  Variable buffer(std::move(value), /*requires_grad=*/false);
  buffers_.emplace_back(std::move(name), buffer);
  return buffer;
}

void Module::add_child(std::string name, std::shared_ptr<Module> module) {
  check_new_name(name);
  DDP_CHECK(module != nullptr, "register_module('", name, "'): null module");
  children_.emplace_back(std::move(name), std::move(module));
}

// Note [Swapping a child]
// PyTorch converts a model to SyncBatchNorm by assigning a new object to an attribute
// (`module.bn1 = SyncBatchNorm(...)`): Python's attributes are the registry of children,
// and forward reads them again at every call. Here the registry is children_, so a swap
// is an assignment into it; and a parent whose forward must run whatever is registered
// reaches that child by name (child("bn1")), as a Python forward reads self.bn1, instead
// of keeping a typed pointer of its own that the swap could not see. ResNetMnist and
// BasicBlock do so for their normalisation layers, Sequential for all its layers.

Module& Module::child(std::string_view name) const {
  std::string names;
  for (const auto& [existing, module] : children_) {
    if (existing == name) return *module;
    names += (names.empty() ? "" : ", ") + existing;
  }
  DDP_FAIL(describe(), " has no child '", name, "' (its children: ",
           names.empty() ? "none" : names, ")");
}

void Module::replace_child(std::string_view name, std::shared_ptr<Module> replacement) {
  DDP_CHECK(replacement != nullptr, "replace_child('", name, "'): null module");
  for (auto& [existing, module] : children_) {
    if (existing == name) {
      module = std::move(replacement);
      return;
    }
  }
  child(name);  // throws, naming the children there are
}

// ---- Recursive walks ---------------------------------------------------------------------
// Own entries first, then each child's with "<child name>." in front: the order of
// PyTorch's named_parameters() and state_dict().

void Module::collect_parameters(const std::string& prefix,
                                std::vector<std::pair<std::string, Variable>>& out) const {
  for (const auto& [name, parameter] : parameters_) out.emplace_back(prefix + name, parameter);
  for (const auto& [name, child] : children_) child->collect_parameters(prefix + name + ".", out);
}

void Module::collect_buffers(const std::string& prefix,
                             std::vector<std::pair<std::string, Variable>>& out) const {
  for (const auto& [name, buffer] : buffers_) out.emplace_back(prefix + name, buffer);
  for (const auto& [name, child] : children_) child->collect_buffers(prefix + name + ".", out);
}

// A module's parameters, then its buffers, then its children: so BatchNorm contributes
// weight, bias, running_mean, running_var, as PyTorch's state_dict does.
void Module::collect_state(const std::string& prefix, StateDict& out) const {
  for (const auto& [name, parameter] : parameters_) {
    out.emplace_back(prefix + name, parameter.data());
  }
  for (const auto& [name, buffer] : buffers_) out.emplace_back(prefix + name, buffer.data());
  for (const auto& [name, child] : children_) child->collect_state(prefix + name + ".", out);
}

void Module::collect_modules(const std::string& prefix,
                             std::vector<std::pair<std::string, Module*>>& out) {
  out.emplace_back(prefix, this);
  for (const auto& [name, child] : children_) {
    child->collect_modules(prefix.empty() ? name : prefix + "." + name, out);
  }
}

std::vector<std::pair<std::string, Variable>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Variable>> out;
  collect_parameters("", out);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
  std::vector<std::pair<std::string, Variable>> holders;
  collect_buffers("", holders);
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& [name, holder] : holders) out.emplace_back(std::move(name), holder.data());
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out;
  collect_modules("", out);
  return out;
}

std::vector<Variable> Module::parameters() const {
  std::vector<Variable> out;
  for (auto& [name, parameter] : named_parameters()) out.push_back(parameter);
  return out;
}

std::int64_t Module::num_parameters() const {
  std::int64_t total = 0;
  for (const Variable& parameter : parameters()) total += parameter.numel();
  return total;
}

// ---- Mode, device, gradients -------------------------------------------------------------

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::to(Device device) {
  // Assigning through data() swaps the tensor inside the shared VariableImpl: every
  // handle to this parameter or buffer sees the moved tensor.
  for (auto& [name, parameter] : named_parameters()) {
    parameter.data() = parameter.data().to(device);
    if (parameter.grad().defined()) parameter.set_grad(parameter.grad().to(device));
  }
  std::vector<std::pair<std::string, Variable>> buffers;
  collect_buffers("", buffers);
  for (auto& [name, buffer] : buffers) buffer.data() = buffer.data().to(device);
}

void Module::zero_grad() {
  for (const Variable& parameter : parameters()) parameter.zero_grad();
}

// ---- state_dict ----------------------------------------------------------------------------

StateDict Module::state_dict() const {
  StateDict out;
  collect_state("", out);
  return out;
}

void Module::load_state_dict(const StateDict& state, std::string_view source) {
  // Pass 1: check everything. Nothing is written until every entry is known to fit.
  std::unordered_map<std::string, const Tensor*> by_name;
  for (const auto& [name, tensor] : state) {
    DDP_CHECK(by_name.emplace(name, &tensor).second, "load_state_dict(", source,
              "): entry '", name, "' appears twice");
  }
  const StateDict mine = state_dict();
  std::vector<const Tensor*> values;
  values.reserve(mine.size());
  for (const auto& [name, target] : mine) {
    auto it = by_name.find(name);
    DDP_CHECK(it != by_name.end(), "load_state_dict(", source, "): entry '", name,
              "' is missing (the model has it as ", target.describe(), ")");
    const Tensor& value = *it->second;
    DDP_CHECK(value.defined() && value.dtype() == target.dtype() &&
                  value.shape() == target.shape(),
              "load_state_dict(", source, "): entry '", name, "' is ",
              value.defined() ? value.describe() : std::string("undefined"),
              " but the model expects ", dtype_name(target.dtype()), " ",
              shape_str(target.shape()));
    values.push_back(&value);
  }
  if (state.size() != mine.size()) {
    std::unordered_set<std::string> expected;
    for (const auto& [name, target] : mine) expected.insert(name);
    for (const auto& [name, tensor] : state) {
      DDP_CHECK(expected.count(name) == 1, "load_state_dict(", source,
                "): unexpected entry '", name, "' (", tensor.describe(),
                "): the model has no parameter or buffer of that name");
    }
  }
  // Pass 2: copy. copy_ writes into the existing storage (across devices when the file's
  // tensors are on the CPU and the model on a GPU), so every handle stays valid.
  NoGradGuard no_grad;
  for (std::size_t i = 0; i < mine.size(); ++i) {
    Tensor target = mine[i].second;
    target.copy_(*values[i]);
  }
}

// ---- Tracing ---------------------------------------------------------------------------

// Note [Tracing modules]
// Forward is easy: a span around forward(), on the calling thread, nested as the calls
// are. Backward is the engine's, so the module leaves two trace points in the graph
// (autograd/ops/trace_point.hpp): one on its input, made before its ops, and one on its
// output, made after them. The engine runs the ready node created last first, and
// everything a module creates is created between its two points; so once the gradient
// reaches a module's output, the engine finishes that module (its nodes always outrank
// the ready nodes of modules called before it, and a module called after it has been
// finished already, or it would not have handed the gradient on) before anything else.
// The backward spans of one thread therefore nest, and are written as Chrome's complete
// ("X") events like the forward ones; tests/ch07/trace checks the nesting, so that an
// engine which ran siblings interleaved would be caught (it would need async events).
// A module whose input carries no gradient (the first layer, fed the images) has no point
// where the gradient leaves: it gets an instant "<name>: gradient in" instead of a span.
// Without grad mode (evaluation) there is no backward and no trace point.

void trace_modules(Module& root, std::string root_name) {
  for (auto& [name, module] : root.named_modules()) {
    module->trace_name_ = name.empty() ? root_name : name;
  }
}

Variable Module::traced_call(const Variable& x) {
  std::shared_ptr<BackwardSpan> span;
  Variable input = x;
  if (grad_enabled()) {
    span = std::make_shared<BackwardSpan>(trace_name_);
    span->leaves = x.requires_grad();
    input = trace_backward_leave(x, span);  // first: lower than every node of forward()
  }
  Variable output;
  {
    trace::Span forward_span("forward", trace_name_);
    output = forward(input);
  }
  return span ? trace_backward_enter(output, span) : output;
}

void Module::set_forward_hooks(ForwardPreHook pre, ForwardHook post) {
  pre_hook_ = std::move(pre);
  post_hook_ = std::move(post);
}

Variable Module::hooked_call(const Variable& x) {
  if (pre_hook_) pre_hook_(*this);
  Variable output = trace::enabled() && !trace_name_.empty() ? traced_call(x) : forward(x);
  return post_hook_ ? post_hook_(*this, output) : output;
}

}  // namespace ddp::nn

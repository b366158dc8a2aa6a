// Module: the base class of every layer and network. Chapter 04.
//
// A module owns named parameters (Variables that require grad), named buffers (state
// that is not trained, such as BatchNorm's running statistics) and named child modules.
// From those three lists it answers everything a training loop and DDP ask: all
// parameters in a fixed order, their dotted names ("block2.shortcut.0.weight", exactly
// PyTorch's state_dict names), train/eval mode, moving to a GPU, saving and loading.
// A child can be swapped for another module of the same role (replace_child): chapter 06
// turns every BatchNorm2d into a SyncBatchNorm2d that way. It does not do parameter groups
// or deep copies. Every call of a module, top-level or from a parent's forward, goes
// through operator(): that is where chapter 07's tracing sees it, and where chapter 09's
// forward hooks run (FSDP gathers a unit's parameters there).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "autograd/variable.hpp"
#include "nn/state_dict.hpp"
#include "tensor/device.hpp"
#include "tensor/tensor.hpp"
#include "base/trace.hpp"

namespace ddp::nn {

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  // A module is referred to by (shared) pointer, never copied: a copy would share or
  // duplicate parameters, and either is a surprise.
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // x -> the module's output; shapes are documented by each subclass.
  // Parents call their children through operator(), never forward() directly, so that
  // a traced module records its call (Note [Tracing modules]); untraced, it is forward.
  virtual Variable forward(const Variable& x) = 0;
  Variable operator()(const Variable& x) {
    if (pre_hook_ || post_hook_) [[unlikely]] return hooked_call(x);
    if (trace::enabled() && !trace_name_.empty()) [[unlikely]] {
      return traced_call(x);
    }
    return forward(x);
  }

  // ---- Forward hooks (chapter 09) -------------------------------------------------------
  // PyTorch's register_forward_pre_hook and register_forward_hook, one of each: `pre` runs
  // before every call of this module, `post` after it and returns the output the caller
  // gets (it may thread it through an op of its own). FSDP gathers a unit's parameters in
  // `pre` and frees them in `post`. Empty functions remove them.
  using ForwardPreHook = std::function<void(Module&)>;
  using ForwardHook = std::function<Variable(Module&, const Variable& output)>;
  void set_forward_hooks(ForwardPreHook pre, ForwardHook post);
  bool has_forward_hooks() const { return pre_hook_ || post_hook_; }
  // One line for tables and messages: "Conv2d(1 -> 16, 3x3, stride 1, pad 1, no bias)".
  virtual std::string describe() const = 0;

  // ---- What the module holds, recursively, in registration order ----------------------
  // Names are dotted paths from this module: a child "bn" of a child "block1" gives
  // "block1.bn.weight". The order is fixed (this module's own entries first, then each
  // child's, depth first), so every process that builds the same network lists the same
  // parameters in the same order: DDP relies on it.
  std::vector<std::pair<std::string, Variable>> named_parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;
  // Every module below this one and itself (named ""), parents before children.
  std::vector<std::pair<std::string, Module*>> named_modules();
  std::vector<Variable> parameters() const;
  std::int64_t num_parameters() const;  // total number of trainable values

  // ---- Children ------------------------------------------------------------------------
  // The direct children, in registration order.
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const {
    return children_;
  }
  // The direct child registered as `name`; ddp::Error naming the children when absent.
  Module& child(std::string_view name) const;
  // Puts `replacement` where the child `name` was, keeping its name and its place in
  // every walk (so the dotted names and the parameter order stay as they were). A
  // forward that reaches its children through child() or children() runs the new one:
  // Note [Swapping a child].
  void replace_child(std::string_view name, std::shared_ptr<Module> replacement);

  // ---- Mode, device, gradients ---------------------------------------------------------
  // Training mode (the default) vs evaluation mode; only BatchNorm2d behaves differently.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  // Moves every parameter (and its gradient) and buffer to `device` IN PLACE: the
  // Variables keep their identity, so handles taken before (an optimizer's parameter
  // list, DDP's hooks) see the moved tensors.
  void to(Device device);
  // Sets every parameter's gradient back to undefined (PyTorch's set_to_none=True).
  void zero_grad();

  // ---- state_dict: parameters then buffers of each module, as named_* order them ------
  // The entries share storage with the module (no copy); save them with save_state_dict.
  StateDict state_dict() const;
  // Copies `state` into the parameters and buffers. Strict, and all or nothing: every
  // name must be present with the right dtype and shape and no other name may appear;
  // everything is checked BEFORE anything is copied, so on a ddp::Error the module is
  // unchanged. `source` names where `state` came from (a file) in the messages.
  void load_state_dict(const StateDict& state, std::string_view source = "a state_dict");

  // ---- Tracing (chapter 07) ------------------------------------------------------------
  // Names `root` and every module below it for the timeline: each by its dotted path
  // ("block2.conv1"), the root `root_name`. While ddp::trace records, a named module's
  // call records a "forward" span and its backward a "backward" span of that name. Call
  // it after the last replace_child (a new child is unnamed, and so not traced).
  friend void trace_modules(Module& root, std::string root_name);
  const std::string& trace_name() const { return trace_name_; }  // "" = not traced

 protected:
  // For subclasses' constructors. The returned handle is the registered one itself.
  Variable register_parameter(std::string name, Tensor value);
  // A buffer is held in a Variable that never requires grad: a shared handle whose
  // tensor to() can swap, so the subclass holding it sees the move. Pass
  // buffer.data() to ops that update it in place.
  Variable register_buffer(std::string name, Tensor value);
  template <typename M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> module) {
    add_child(std::move(name), module);
    return module;
  }

 private:
  void check_new_name(const std::string& name) const;
  void add_child(std::string name, std::shared_ptr<Module> module);
  void collect_parameters(const std::string& prefix,
                          std::vector<std::pair<std::string, Variable>>& out) const;
  void collect_buffers(const std::string& prefix,
                       std::vector<std::pair<std::string, Variable>>& out) const;
  void collect_state(const std::string& prefix, StateDict& out) const;
  void collect_modules(const std::string& prefix,
                       std::vector<std::pair<std::string, Module*>>& out);
  Variable traced_call(const Variable& x);  // operator() while tracing
  Variable hooked_call(const Variable& x);  // operator() with forward hooks

  std::vector<std::pair<std::string, Variable>> parameters_;
  std::vector<std::pair<std::string, Variable>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
  std::string trace_name_;
  ForwardPreHook pre_hook_;
  ForwardHook post_hook_;
};

void trace_modules(Module& root, std::string root_name = "model");

}  // namespace ddp::nn

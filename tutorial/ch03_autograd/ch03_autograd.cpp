// ch03_autograd: a tiny network, its backward graph, its gradients checked against
// finite differences, and the order in which the parameters' grad-ready hooks fire.
// Chapter 03 (tutorial/ch03_autograd/README.md).
//
//   build/release/bin/ch03_autograd
//
// The network: conv 3x3 -> batch norm -> relu -> max pool 2x2 -> conv 1x1 (stride 2) ->
// global average pool -> linear -> cross entropy, on the CPU, batch of 4 random 8x8
// images with 2 channels. Everything is seeded: the output is the same on every run.
// It exits with 1 if gradcheck fails. It does not train anything: that is chapter 04.
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "autograd/functions.hpp"
#include "autograd/gradcheck.hpp"
#include "autograd/grad_mode.hpp"
#include "tensor/ops.hpp"
#include "tensor/random.hpp"

namespace {

using ddp::Tensor;
using ddp::Variable;

struct Param {
  const char* name;
  Variable value;
};

struct Net {
  std::vector<Param> params;  // in the order the forward pass uses them
  Tensor running_mean = ddp::zeros({4}), running_var = ddp::ones({4});

  explicit Net(ddp::Generator& gen) {
    auto make = [&](const char* name, const ddp::Shape& shape, float std) {
      params.push_back({name, Variable(ddp::normal(shape, 0.0f, std, gen), true)});
    };
    make("conv1.weight", {4, 2, 3, 3}, 0.3f);
    make("conv1.bias", {4}, 0.1f);
    make("bn.weight", {4}, 0.1f);
    params.back().value.data().add_(1.0f);  // batch-norm scales start near 1
    make("bn.bias", {4}, 0.1f);
    make("conv2.weight", {6, 4, 1, 1}, 0.5f);
    make("fc.weight", {3, 6}, 0.4f);
    make("fc.bias", {3}, 0.1f);
  }

  // x: (B, 2, 8, 8), labels: int64 (B) -> loss (). `p` are the parameters to use (the
  // net's own, or gradcheck's copies of them).
  Variable loss(const std::vector<Variable>& p, const Variable& x, const Tensor& labels) {
    Variable h = ddp::conv2d(x, p[0], p[1], 1, 1);                          // (B, 4, 8, 8)
    h = ddp::batch_norm(h, p[2], p[3], running_mean, running_var, true);
    h = ddp::max_pool2d(ddp::relu(h), 2, 2);                                // (B, 4, 4, 4)
    h = ddp::global_avg_pool2d(ddp::conv2d(h, p[4], Variable(), 2, 0));   // (B, 6)
    return ddp::cross_entropy(ddp::linear(h, p[5], p[6]), labels);        // ()
  }

  std::vector<Variable> values() const {
    std::vector<Variable> v;
    for (const Param& p : params) v.push_back(p.value);
    return v;
  }
};

// Prints the backward graph below `node`, one node per line, children indented; a
// parameter's AccumulateGrad with the parameter's name. A node reached twice (a shared
// parameter) would be printed each time it is reached.
void print_graph(const ddp::Node* node, int depth,
                 const std::map<const ddp::Node*, std::string>& leaf_names) {
  const auto leaf = leaf_names.find(node);
  std::printf("  %*s%s%s\n", 2 * depth, "", node->name(),
              leaf == leaf_names.end() ? "" : (" (" + leaf->second + ")").c_str());
  for (const auto& next : node->next_functions()) {
    if (next) print_graph(next.get(), depth + 1, leaf_names);
  }
}

int run() {
  ddp::Generator gen(3);
  Net net(gen);
  const Variable x(ddp::randn({4, 2, 8, 8}, gen));  // data: needs no gradient
  const std::vector<std::int64_t> label_values{0, 2, 1, 2};
  const Tensor labels = ddp::from_data(label_values, {4});

  // ---- 1. The graph that the forward pass records --------------------------------------
  std::vector<std::string> fired;
  for (const Param& p : net.params) {
    p.value.register_grad_ready_hook(
        [&fired, name = std::string(p.name)](const Variable&) { fired.push_back(name); });
  }
  const Variable loss = net.loss(net.values(), x, labels);
  std::printf("loss = %.6f\n\nbackward graph (root first):\n", loss.data().item<float>());
  std::map<const ddp::Node*, std::string> leaf_names;  // each parameter's AccumulateGrad
  for (const Param& p : net.params) leaf_names[p.value.gradient_edge().get()] = p.name;
  print_graph(loss.grad_fn().get(), 0, leaf_names);

  // ---- 2. Backward, and the order of the grad-ready hooks ------------------------------
  loss.backward();
  std::printf("\ngrad-ready hooks fired in this order (the forward used them in reverse):\n");
  for (std::size_t i = 0; i < fired.size(); ++i) {
    std::printf("  %zu. %s\n", i + 1, fired[i].c_str());
  }
  for (const Param& p : net.params) p.value.clear_grad_ready_hooks();

  // ---- 3. A few gradients against central differences of the loss ----------------------
  std::printf("\n%-14s %6s %14s %14s\n", "parameter", "index", "backward", "finite diff");
  const double h = 1e-3;
  for (const Param& p : net.params) {
    const Tensor flat = p.value.data().view({-1});
    const std::vector<float> grad = p.value.grad().to_vector<float>();
    for (std::int64_t k : {std::int64_t{0}, flat.numel() - 1}) {
      const float original = flat.to_vector<float>()[k];
      auto loss_at = [&](double value) {
        Tensor element = flat.narrow(0, k, 1);
        element.fill_(value);
        ddp::NoGradGuard no_grad;
        return static_cast<double>(net.loss(net.values(), x, labels).data().item<float>());
      };
      const double numeric = (loss_at(original + h) - loss_at(original - h)) / (2 * h);
      Tensor element = flat.narrow(0, k, 1);
      element.fill_(original);
      std::printf("%-14s %6lld %14.6f %14.6f\n", p.name, static_cast<long long>(k), grad[k],
                  numeric);
    }
  }

  // ---- 4. Every element, with gradcheck ----------------------------------------------
  std::vector<Tensor> inputs;
  for (const Param& p : net.params) inputs.push_back(p.value.data());
  const ddp::GradcheckResult result = ddp::gradcheck(
      [&](const std::vector<Variable>& p) { return net.loss(p, x, labels); }, inputs);
  std::printf("\n%s\n", result.summary().c_str());
  return result.ok ? 0 : 1;
}

}  // namespace

int main() {
  try {
    return run();
  } catch (const ddp::Error& e) {
    std::fprintf(stderr, "ch03_autograd failed: %s\n", e.what());
    return 1;
  }
}

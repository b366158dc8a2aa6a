// ch04_resnet_mnist: the chapter's network layer by layer, and its parity with PyTorch.
// Chapter 04 (tutorial/ch04_resnet_mnist/README.md).
//
//   build/release/bin/ch04_resnet_mnist                 # the fixture in tests/data/
//   build/release/bin/ch04_resnet_mnist path/to/resnet_mnist
//
// Part 1 builds ResNetMnist and pushes two images through it one layer at a time,
// printing each layer's output shape and parameter count. Part 2 loads PyTorch's initial
// weights from the parity fixture, runs the training-mode forward and backward on its 16
// images, then 3 SGD steps (ref_model.py's recipe) and an eval-mode forward, and prints
// the relative error against PyTorch at each stage. It exits with 1 when an error is over
// its tolerance. It does not train on MNIST: that comes with the data loader.
#include <cstdio>
#include <string>

#include "autograd/functions.hpp"
#include "autograd/grad_mode.hpp"
#include "nn/resnet_mnist.hpp"
#include "nn/sgd.hpp"
#include "tensor/random.hpp"
#include "nn/resnet_fixture.hpp"

namespace {

using ddp::Variable;
namespace nn = ddp::nn;

// ---- Part 1: the shape table --------------------------------------------------------

void row(const std::string& name, const std::string& what, const Variable& out,
         std::int64_t params) {
  std::printf("  %-20s %-48s %-17s %7lld\n", name.c_str(), what.c_str(),
              ddp::shape_str(out.shape()).c_str(), static_cast<long long>(params));
}

Variable layer(const std::string& name, nn::Module& module, const Variable& x) {
  Variable out = module.forward(x);
  row(name, module.describe(), out, module.num_parameters());
  return out;
}

// BasicBlock::forward, spelled out so that every step gets its row.
Variable block(const std::string& name, nn::BasicBlock& b, const Variable& x) {
  Variable out = layer(name + ".conv1", b.conv1(), x);
  out = layer(name + ".bn1", b.bn1(), out);
  out = ddp::relu(out);
  row(name + " relu", "ReLU", out, 0);
  out = layer(name + ".conv2", b.conv2(), out);
  out = layer(name + ".bn2", b.bn2(), out);
  // The shortcut: identity, or its layers one row each ("block2.shortcut.0", ...).
  Variable shortcut = x;
  if (b.shortcut().empty()) row(name + ".shortcut", "identity", shortcut, 0);
  for (std::size_t i = 0; i < b.shortcut().size(); ++i) {
    shortcut = layer(name + ".shortcut." + std::to_string(i), b.shortcut()[i], shortcut);
  }
  out = ddp::relu(out + shortcut);
  row(name + " add, relu", "ReLU(bn2 + shortcut)", out, 0);
  return out;
}

void print_shape_table(nn::ResNetMnist& net, ddp::Generator& gen) {
  ddp::NoGradGuard no_grad;
  std::printf("ResNetMnist, layer by layer, on a batch of 2 random 28x28 images:\n");
  std::printf("  %-20s %-48s %-17s %7s\n", "layer", "module", "output", "params");
  const Variable x(ddp::randn({2, 1, 28, 28}, gen));
  row("input", "", x, 0);
  Variable h = layer("conv", net.conv(), x);
  h = layer("bn", net.bn(), h);
  h = ddp::relu(h);
  row("relu", "ReLU", h, 0);
  h = block("block1", net.block1(), h);
  h = block("block2", net.block2(), h);
  h = block("block3", net.block3(), h);
  h = ddp::global_avg_pool2d(h);
  row("pool", "global average pool", h, 0);
  h = layer("fc", net.fc(), h);
  std::printf("  total: %lld parameters (ref_model.py: 77,754), %zu tensors, %zu buffers\n\n",
              static_cast<long long>(net.num_parameters()), net.named_parameters().size(),
              net.named_buffers().size());
}

// ---- Part 2: parity with PyTorch ------------------------------------------------------

struct Check {
  bool ok = true;
  void report(const char* what, double error, double tolerance, const std::string& where = "") {
    const bool pass = error < tolerance;
    ok = ok && pass;
    std::printf("  %-34s %9.2e  (tolerance %.0e) %s %s\n", what, error, tolerance,
                pass ? "ok" : "OVER", where.c_str());
  }
};

bool check_parity(const std::string& dir) {
  using ddp::nn::relative_error;
  const auto fx = ddp::nn::load_resnet_fixture(dir);
  std::printf("Parity with PyTorch 1.13 (fixture %s), relative error ||a-b||/||b||:\n",
              dir.c_str());
  ddp::Generator gen(0);
  nn::ResNetMnist net(gen);
  net.load_state_dict(fx.with_prefix("init/"), dir + " init/*");
  Check check;

  // Training-mode forward (batch statistics), loss, backward.
  const Variable x(fx.at("batch/x"));
  const Variable logits = net.forward(x);
  const Variable loss = ddp::cross_entropy(logits, fx.labels);
  check.report("step 0 logits", relative_error(logits.data(), fx.at("step0/logits")), 1e-4);
  check.report("step 0 loss", relative_error(loss.data(), fx.at("step0/loss")), 1e-4);
  loss.backward();
  double worst = 0.0;
  std::string worst_name;
  for (const auto& [name, p] : net.named_parameters()) {
    const double e = relative_error(p.grad(), fx.at("step0/grad/" + name));
    if (e >= worst) {
      worst = e;
      worst_name = name;
    }
  }
  check.report("step 0 gradients, worst", worst, 1e-3, worst_name);

  // The first SGD step uses the gradients above; two more on the same batch.
  nn::SGD sgd(net.parameters(), {.lr = 0.1, .momentum = 0.9, .weight_decay = 5e-4});
  sgd.step();
  for (int step = 1; step < 3; ++step) {
    sgd.zero_grad();
    ddp::cross_entropy(net.forward(x), fx.labels).backward();
    sgd.step();
  }
  worst = 0.0;
  for (const auto& [name, tensor] : net.state_dict()) {
    const double e = relative_error(tensor, fx.at("after3/" + name));
    if (e >= worst) {
      worst = e;
      worst_name = name;
    }
  }
  check.report("after 3 SGD steps, worst tensor", worst, 5e-3, worst_name);

  net.eval();
  ddp::NoGradGuard no_grad;
  check.report("eval-mode logits after 3 steps",
               relative_error(net.forward(x).data(), fx.at("after3/eval_logits")), 1e-4);
  std::printf("  (PyTorch in float64 against the same float32 fixture: 2.0e-7, 1.1e-7, "
              "5.1e-5, 8.0e-4, 1.3e-5)\n");
  return check.ok;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string dir = argc > 1 ? argv[1] : DDP_RESNET_FIXTURE_DIR;
    ddp::Generator gen(0);
    nn::ResNetMnist net(gen);
    print_shape_table(net, gen);
    const bool ok = check_parity(dir);
    std::printf(ok ? "PASS: matches PyTorch\n" : "FAIL: an error is over its tolerance\n");
    return ok ? 0 : 1;
  } catch (const ddp::Error& e) {
    std::fprintf(stderr, "ch04_resnet_mnist: %s\n", e.what());
    return 1;
  }
}

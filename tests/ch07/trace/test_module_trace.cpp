// Chapter 07, the network on the timeline (nn::trace_modules, Module::operator(),
// autograd/ops/trace_point.hpp): one forward span per module named by its dotted path,
// nested as the calls are; one backward span per module whose input carries a gradient,
// nested too (Note [Tracing modules]); the same values and gradients with tracing on or
// off. And the width multiplier of ResNetMnist: parameter counts against a hand formula,
// width 1 drawing exactly the weights of chapter 04's construction.
#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "autograd/functions.hpp"
#include "autograd/grad_mode.hpp"
#include "nn/basic_block.hpp"
#include "nn/batch_norm2d.hpp"
#include "nn/conv2d.hpp"
#include "nn/linear.hpp"
#include "nn/resnet_mnist.hpp"
#include "tensor/ops.hpp"
#include "tensor/random.hpp"
#include "base/trace.hpp"
#include "tests/support/reference.hpp"

namespace nn = ddp::nn;
namespace trace = ddp::trace;
using ddp::Generator;
using ddp::Tensor;
using ddp::Variable;
using trace::Event;
using trace::Phase;

namespace {

struct Interval {
  std::int64_t begin, end;
  bool contains(const Interval& o) const { return begin <= o.begin && o.end <= end; }
};

// name -> interval of the complete events of `category` (each name must appear once).
std::map<std::string, Interval> spans(const std::vector<Event>& events, const char* category) {
  std::map<std::string, Interval> out;
  for (const Event& e : events) {
    if (e.phase != Phase::Complete || e.category != category) continue;
    INFO(category << " span " << e.name);
    CHECK(out.emplace(e.name, Interval{e.ts_ns, e.ts_ns + e.dur_ns}).second);
  }
  return out;
}

// "block2.conv1" -> "block2"; "conv" -> "model" (the root's name); "model" -> "".
std::string parent_of(const std::string& name) {
  if (name == "model") return "";
  const std::size_t dot = name.rfind('.');
  return dot == std::string::npos ? "model" : name.substr(0, dot);
}

Tensor labels() {
  const std::vector<std::int64_t> y{3, 7};
  return ddp::from_data(std::span<const std::int64_t>(y), {2});
}

}  // namespace

TEST_CASE("a traced step: a forward and a backward span per module, nested as called",
          "[ch07][trace][nn]") {
  Generator gen(5);
  nn::ResNetMnist net(gen);
  nn::trace_modules(net);
  const Variable x(ddp::randn({2, 1, 28, 28}, gen));
  trace::start(0);
  Variable logits = net(x);
  ddp::cross_entropy(logits, labels()).backward();
  trace::stop();
  const std::vector<Event> events = trace::events();

  // The reference for the names: named_modules(), the walk that names the parameters.
  std::set<std::string> expected;
  for (const auto& [name, module] : net.named_modules()) {
    expected.insert(name.empty() ? "model" : name);
  }
  REQUIRE(expected.count("block2.shortcut.0") == 1);
  const std::map<std::string, Interval> forward = spans(events, "forward");
  std::set<std::string> forward_names;
  for (const auto& [name, interval] : forward) forward_names.insert(name);
  CHECK(forward_names == expected);
  for (const auto& [name, interval] : forward) {
    if (name == "model") continue;
    INFO("forward of " << name << " within " << parent_of(name));
    CHECK(forward.at(parent_of(name)).contains(interval));
  }
  CHECK(forward.at("block1").end <= forward.at("block2").begin);

  // Backward: every module but the two whose input is the images (no gradient leaves
  // them), which get an instant instead.
  const std::map<std::string, Interval> backward = spans(events, "backward");
  std::set<std::string> backward_names, instants;
  for (const auto& [name, interval] : backward) backward_names.insert(name);
  for (const Event& e : events) {
    if (e.phase == Phase::Instant && e.category == "backward") instants.insert(e.name);
  }
  std::set<std::string> expected_backward = expected;
  expected_backward.erase("model");
  expected_backward.erase("conv");
  CHECK(backward_names == expected_backward);
  CHECK(instants == std::set<std::string>{"model: gradient in", "conv: gradient in"});
  for (const auto& [name, interval] : backward) {
    const std::string parent = parent_of(name);
    if (parent == "model") continue;  // the root has no span (its input is the images)
    INFO("backward of " << name << " within " << parent);
    CHECK(backward.at(parent).contains(interval));
  }
  // Siblings do not interleave (what lets them be complete events), and run in reverse.
  CHECK(backward.at("block3").end <= backward.at("block2").begin);
  CHECK(backward.at("block2").end <= backward.at("block1").begin);
  CHECK(backward.at("fc").end <= backward.at("block3").begin);
  const Interval b2_conv2 = backward.at("block2.conv2"), b2_short = backward.at("block2.shortcut");
  CHECK((b2_conv2.end <= b2_short.begin || b2_short.end <= b2_conv2.begin));
  CHECK(forward.at("model").end <= backward.at("fc").begin);
}

TEST_CASE("tracing changes no value and no gradient, and is absent when off", "[ch07][trace][nn]") {
  Generator gen_a(9), gen_b(9);
  nn::ResNetMnist a(gen_a), b(gen_b);
  nn::trace_modules(b);
  const Variable x(ddp::randn({2, 1, 28, 28}, gen_a));
  trace::stop();
  Variable la = a(x);
  CHECK(std::string(la.grad_fn()->name()) != "TraceEnterBackward");
  ddp::cross_entropy(la, labels()).backward();
  trace::start(0);
  Variable lb = b(x);
  CHECK(std::string(lb.grad_fn()->name()) == "TraceEnterBackward");
  ddp::cross_entropy(lb, labels()).backward();
  trace::stop();
  CHECK(ddp::ref::bitwise_mismatch(la.data(), lb.data()) == "");
  const auto pa = a.named_parameters(), pb = b.named_parameters();
  for (std::size_t i = 0; i < pa.size(); ++i) {
    INFO(pa[i].first);
    CHECK(ddp::ref::bitwise_mismatch(pa[i].second.grad(), pb[i].second.grad()) == "");
  }
  // Untraced modules (a) record nothing even while recording; without grad mode a traced
  // one records its forward spans but leaves no trace point in a graph.
  trace::start(0);
  a(x);
  CHECK(trace::events().empty());
  {
    ddp::NoGradGuard no_grad;
    CHECK_FALSE(b(x).requires_grad());
  }
  trace::stop();
  CHECK(spans(trace::events(), "forward").size() == b.named_modules().size());
}

TEST_CASE("ResNetMnist's width: parameters 298 c^2 + 91 c + 10 for c = 16K", "[ch07][nn]") {
  // By hand, c = 16K channels in the stem: conv 9c; bn 2c; block1 2 x 9c^2 + 2 x 2c;
  // block2 9c*2c + 9(2c)^2 + 2c^2 (1x1 shortcut) + 3 x 4c; block3 the same at 2c -> 4c:
  // 72c^2 + 144c^2 + 8c^2 + 3 x 8c; fc 4c x 10 + 10.
  for (const std::int64_t k : {1, 2, 4}) {
    const std::int64_t c = 16 * k;
    const std::int64_t by_hand = (9 * c) + (2 * c) + (18 * c * c + 4 * c) +
                                 (18 * c * c + 36 * c * c + 2 * c * c + 12 * c) +
                                 (72 * c * c + 144 * c * c + 8 * c * c + 24 * c) + (40 * c + 10);
    Generator gen(0);
    nn::ResNetMnist net(gen, k);
    INFO("width " << k);
    CHECK(net.num_parameters() == by_hand);
    CHECK(net.width() == k);
    if (k == 1) CHECK(by_hand == nn::ResNetMnist::kNumParameters);
    // Names do not change with the width.
    Generator gen1(0);
    nn::ResNetMnist narrow(gen1);
    const auto wide_names = net.named_parameters(), narrow_names = narrow.named_parameters();
    REQUIRE(wide_names.size() == narrow_names.size());
    for (std::size_t i = 0; i < wide_names.size(); ++i) {
      CHECK(wide_names[i].first == narrow_names[i].first);
    }
    // A forward pass works at every width: (B, 1, 28, 28) -> (B, 10).
    ddp::NoGradGuard no_grad;
    CHECK(net(Variable(ddp::randn({2, 1, 28, 28}, gen))).shape() == ddp::Shape{2, 10});
  }
  Generator gen(0);
  CHECK_THROWS_WITH(nn::ResNetMnist(gen, 0), Catch::Contains("width must be an integer >= 1"));
}

TEST_CASE("width 1 draws chapter 04's weights: the layers built one by one", "[ch07][nn]") {
  // The reference: chapter 04's construction written out, layer by layer, from a
  // generator of the same seed (the order of the draws is the order of construction).
  Generator ref_gen(11), gen(11);
  nn::Conv2d conv(1, 16, 3, 1, 1, false, ref_gen);
  nn::BasicBlock block1(16, 16, 1, ref_gen), block2(16, 32, 2, ref_gen), block3(32, 64, 2, ref_gen);
  nn::Linear fc(64, 10, true, ref_gen);
  nn::ResNetMnist net(gen);
  std::vector<Tensor> reference = {conv.weight().data()};
  for (nn::BasicBlock* block : {&block1, &block2, &block3}) {
    for (const auto& [name, p] : block->named_parameters()) reference.push_back(p.data());
  }
  reference.push_back(fc.weight().data());
  reference.push_back(fc.bias().data());
  std::vector<Tensor> mine;
  for (const auto& [name, p] : net.named_parameters()) {
    if (name != "bn.weight" && name != "bn.bias") mine.push_back(p.data());
  }
  REQUIRE(mine.size() == reference.size());
  for (std::size_t i = 0; i < mine.size(); ++i) {
    INFO("parameter " << i);
    CHECK(ddp::ref::bitwise_mismatch(mine[i], reference[i]) == "");
  }
}

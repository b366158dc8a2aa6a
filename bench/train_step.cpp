// bench_train_step: how long one training step of ResNetMnist takes -- zero_grad,
// forward, cross_entropy, backward, SGD step (lr 0.1, momentum 0.9, weight decay 5e-4)
// -- next to the PyTorch anchor of the same step (bench/anchors/RESULTS.md, section 2),
// then where the time of a step goes, layer by layer. Chapter 04 sends readers here.
//
// It prints numbers and asserts nothing: speed is read as ratios, never tested.
//   bench_train_step [--steps 30] [--warmup 10] [--batches 64,128] [--threads 1,2]
//                    [--breakdown-batch 128] [--breakdown-threads 2] [--anchors DIR]
//                    [--device cpu|cuda]
// The breakdown times the model's own modules from the outside; the library carries no
// timing code. On a GPU every clock reading waits for the GPU first (settled_now), so a
// part's time is the time its kernels took, not the time it took to queue them.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "bench/bench_args.hpp"
#include "autograd/functions.hpp"
#include "autograd/variable.hpp"
#include "bench/anchor_json.hpp"
#include "bench/timing.hpp"
#include "data/mnist.hpp"
#include "nn/resnet_mnist.hpp"
#include "nn/sgd.hpp"
#include "tensor/backend.hpp"
#include "tensor/device.hpp"
#include "base/error.hpp"
#include "tensor/random.hpp"
#include "tensor/tensor.hpp"
#include "tensor/threads.hpp"

using ddp::bench::parse_int;
using ddp::bench::parse_int_list;

namespace {

using ddp::Tensor;
using ddp::Variable;
using ddp::bench::Timing;

constexpr double kTargetRatio = 1.0;  // ours / PyTorch, median step time

// ---- Options ---------------------------------------------------------------------------

struct Options {
  int steps = 30;
  int warmup = 10;
  std::vector<int> batches = {64, 128};
  std::vector<int> threads = {1, 2};
  int breakdown_batch = 128;
  int breakdown_threads = 2;
  std::string anchors = ddp::bench::default_anchors_dir();
  ddp::Device device = ddp::Device::cpu();
};

// now_seconds() once the device has finished what was queued (on the CPU: at once).
double settled_now(ddp::Device device) {
  ddp::backend_for(device).synchronize();
  return ddp::bench::now_seconds();
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::printf("usage: bench_train_step [--steps N] [--warmup N] [--batches B,B,...]"
                  " [--threads T,T,...]\n                        [--breakdown-batch B]"
                  " [--breakdown-threads T] [--anchors DIR] [--device cpu|cuda]\n"
                  "--breakdown-batch 0 skips the per-layer breakdown\n");
      std::exit(0);
    }
    DDP_CHECK(i + 1 < argc, flag, " needs a value\nhint: bench_train_step --help");
    const std::string value = argv[++i];
    if (flag == "--steps") {
      o.steps = parse_int(flag, value, 1);
    } else if (flag == "--warmup") {
      o.warmup = parse_int(flag, value, 0);
    } else if (flag == "--batches") {
      o.batches = parse_int_list(flag, value);
    } else if (flag == "--threads") {
      o.threads = parse_int_list(flag, value);
    } else if (flag == "--breakdown-batch") {
      o.breakdown_batch = parse_int(flag, value, 0);
    } else if (flag == "--breakdown-threads") {
      o.breakdown_threads = parse_int(flag, value, 1);
    } else if (flag == "--anchors") {
      o.anchors = value;
    } else if (flag == "--device") {
      o.device = ddp::Device::parse(value);
      ddp::backend_for(o.device);  // "no such GPU" now, with its hint, not after a minute
    } else {
      DDP_FAIL("unknown option ", flag, "\nhint: bench_train_step --help");
    }
  }
  return o;
}

// ---- The step being measured -----------------------------------------------------------

// The model, its optimizer and a source of random training batches, as the anchor
// builds them (bench_single.py): a fresh model per configuration, batches drawn with
// replacement from the training set, and the gather kept out of the timed region.
// On a GPU the model lives there and each batch is copied there before the clock starts.
struct Setup {
  explicit Setup(ddp::Device on) : device(on) { model->to(device); }

  ddp::Device device;
  ddp::Generator init{0};
  std::shared_ptr<ddp::nn::ResNetMnist> model = std::make_shared<ddp::nn::ResNetMnist>(init);
  ddp::nn::SGD optimizer{model->parameters(),
                         ddp::nn::SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 5e-4}};
  std::mt19937_64 pick{1};

  ddp::Batch random_batch(const ddp::MnistDataset& data, int batch) {
    std::uniform_int_distribution<std::int64_t> index(0, data.size() - 1);
    std::vector<std::int64_t> indices(static_cast<std::size_t>(batch));
    for (std::int64_t& i : indices) i = index(pick);
    const ddp::Batch b = data.get_batch(indices);
    return {b.images.to(device), b.labels.to(device)};
  }
};

// Times `warmup + steps` full steps; returns the timed ones' min / median in seconds.
Timing time_steps(const ddp::MnistDataset& data, int batch, const Options& o) {
  Setup s(o.device);
  std::vector<double> times;
  for (int r = 0; r < o.warmup + o.steps; ++r) {
    const ddp::Batch b = s.random_batch(data, batch);
    const double t0 = settled_now(o.device);
    s.optimizer.zero_grad();
    Variable loss = ddp::cross_entropy((*s.model)(Variable(b.images)), b.labels);
    loss.backward();
    s.optimizer.step();
    const double t = settled_now(o.device) - t0;
    if (r >= o.warmup) times.push_back(t);
  }
  return ddp::bench::summarize(times);
}

// ---- Anchors ---------------------------------------------------------------------------

struct AnchorStep {
  std::string run;
  double min_s = 0.0;
  double median_s = 0.0;
};

// The PyTorch step times at (threads, batch) from results/run{1,2}/single_t<threads>.json.
std::vector<AnchorStep> anchor_steps(const std::string& dir, int threads, int batch,
                                     std::vector<std::string>& missing) {
  std::vector<AnchorStep> rows;
  for (const char* run : {"run1", "run2"}) {
    const std::string file =
        dir + "/results/" + run + "/single_t" + std::to_string(threads) + ".json";
    const std::string key = std::to_string(batch);
    const auto min = ddp::bench::read_anchor_number(file, {"step_timing", key, "min"});
    const auto median = ddp::bench::read_anchor_number(file, {"step_timing", key, "median"});
    if (!min || !median) {
      missing.push_back(file + " (step_timing." + key + ")");
      continue;
    }
    rows.push_back({run, *min, *median});
  }
  return rows;
}

// ---- Breakdown 1: the step by top-level module -----------------------------------------

// Forward through the model's top-level children one at a time (exactly
// ResNetMnist::forward, unrolled), then backward, SGD step and zero_grad, each timed.
void breakdown_by_module(const ddp::MnistDataset& data, const Options& o) {
  Setup s(o.device);
  ddp::nn::ResNetMnist& m = *s.model;
  const std::vector<std::string> parts = {
      "conv (stem 3x3, 1->16)", "bn (stem)", "relu (stem)", "block1 (16->16, 28x28)",
      "block2 (16->32, 14x14)", "block3 (32->64, 7x7)", "global_avg_pool2d", "fc (64->10)",
      "cross_entropy", "backward (all layers)", "SGD step", "zero_grad"};
  std::vector<std::vector<double>> times(parts.size());
  std::vector<double> totals;
  for (int r = 0; r < o.warmup + o.steps; ++r) {
    const ddp::Batch b = s.random_batch(data, o.breakdown_batch);
    std::vector<double> t;  // t[i]..t[i + 1]: part i
    t.reserve(parts.size() + 1);
    auto mark = [&t, &o] { t.push_back(settled_now(o.device)); };
    mark();
    Variable h = m.conv()(Variable(b.images));
    mark();
    h = m.bn()(h);
    mark();
    h = ddp::relu(h);
    mark();
    h = m.block1()(h);
    mark();
    h = m.block2()(h);
    mark();
    h = m.block3()(h);
    mark();
    h = ddp::global_avg_pool2d(h);
    mark();
    h = m.fc()(h);
    mark();
    Variable loss = ddp::cross_entropy(h, b.labels);
    mark();
    loss.backward();
    mark();
    s.optimizer.step();
    mark();
    s.optimizer.zero_grad();
    mark();
    if (r < o.warmup) continue;
    for (std::size_t i = 0; i < parts.size(); ++i) times[i].push_back(t[i + 1] - t[i]);
    totals.push_back(t[parts.size()] - t[0]);
  }

  const double total = ddp::bench::summarize(totals).median_s;
  std::printf("\nBreakdown 1: one step by top-level module (batch %d, %d thread(s), median of %d"
              " steps)\n", o.breakdown_batch, ddp::get_num_threads(), o.steps);
  std::printf("%-26s %10s %10s %7s\n", "part", "median ms", "min ms", "share");
  double forward = 0.0;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const Timing tm = ddp::bench::summarize(times[i]);
    if (i < 9) forward += tm.median_s;
    std::printf("%-26s %10.2f %10.2f %6.1f%%\n", parts[i].c_str(), tm.median_s * 1e3,
                tm.min_s * 1e3, 100.0 * tm.median_s / total);
    if (i == 8) {
      std::printf("%-26s %10.2f %10s %6.1f%%\n", "= forward + loss", forward * 1e3, "",
                  100.0 * forward / total);
    }
  }
  std::printf("%-26s %10.2f %10s %6s   (median of the per-step sums; the rows' medians need"
              " not add up to it)\n", "step", total * 1e3, "", "100%");
  std::fflush(stdout);
}

// ---- Breakdown 2: every layer alone, forward and backward ------------------------------

struct LayerTime {
  std::string name;
  std::string family;  // the op family the layer belongs to
  double forward_s = 0.0;
  double backward_s = 0.0;
};

// Each layer of the network run alone on the activation it gets in the real network:
// a fresh leaf input (requiring grad, except the images), forward timed, then backward
// from a random output gradient timed. This splits the backward pass, which the engine
// runs as one call, into layers; it leaves out the engine's bookkeeping between nodes
// and the cache effects of the full graph (compare the sum with Breakdown 1).
class LayerProfiler {
 public:
  LayerProfiler(int reps, int warmup, ddp::Device device)
      : reps_(reps), warmup_(warmup), device_(device) {}

  // Runs `fn` on `input` (warm-up + reps times); returns its output for the next layer.
  Tensor run(const std::string& name, const std::string& family,
             const std::function<Variable(const Variable&)>& fn, const Tensor& input,
             bool input_requires_grad = true) {
    std::vector<double> fwd, bwd;
    Tensor out;
    for (int r = 0; r < warmup_ + reps_; ++r) {
      Variable x(input, input_requires_grad);
      double t0 = settled_now(device_);
      Variable y = fn(x);
      const double tf = settled_now(device_) - t0;
      const Tensor grad = ddp::randn(y.shape(), gen_).to(device_);
      t0 = settled_now(device_);
      y.backward(grad);
      const double tb = settled_now(device_) - t0;
      if (r >= warmup_) {
        fwd.push_back(tf);
        bwd.push_back(tb);
      }
      out = y.data();
    }
    rows_.push_back({name, family, ddp::bench::summarize(fwd).median_s,
                     ddp::bench::summarize(bwd).median_s});
    return out;
  }

  const std::vector<LayerTime>& rows() const { return rows_; }

 private:
  int reps_;
  int warmup_;
  ddp::Device device_;
  ddp::Generator gen_{7};
  std::vector<LayerTime> rows_;
};

// One BasicBlock, layer by layer (BasicBlock::forward, unrolled). x: the block's input.
Tensor profile_block(LayerProfiler& p, const std::string& name, ddp::nn::BasicBlock& block,
                     const Tensor& x) {
  const std::string k3 = "conv3x3";
  Tensor a = p.run(name + ".conv1", k3, [&](const Variable& v) { return block.conv1()(v); }, x);
  a = p.run(name + ".bn1", "batch_norm", [&](const Variable& v) { return block.bn1()(v); }, a);
  a = p.run(name + ".relu1", "relu", [](const Variable& v) { return ddp::relu(v); }, a);
  a = p.run(name + ".conv2", k3, [&](const Variable& v) { return block.conv2()(v); }, a);
  a = p.run(name + ".bn2", "batch_norm", [&](const Variable& v) { return block.bn2()(v); }, a);
  Tensor shortcut = x;
  if (!block.shortcut().empty()) {
    ddp::nn::Module& conv = block.shortcut()[0];
    ddp::nn::Module& bn = block.shortcut()[1];
    shortcut = p.run(name + ".shortcut.0", "conv1x1", [&](const Variable& v) { return conv(v); },
                     x);
    shortcut = p.run(name + ".shortcut.1", "batch_norm", [&](const Variable& v) { return bn(v); },
                     shortcut);
  }
  const Variable other(shortcut, true);
  a = p.run(name + ".add", "add", [&](const Variable& v) { return v + other; }, a);
  return p.run(name + ".relu2", "relu", [](const Variable& v) { return ddp::relu(v); }, a);
}

void breakdown_by_layer(const ddp::MnistDataset& data, const Options& o) {
  Setup s(o.device);
  ddp::nn::ResNetMnist& m = *s.model;
  const ddp::Batch b = s.random_batch(data, o.breakdown_batch);
  LayerProfiler p(o.steps, std::max(2, o.warmup / 2), o.device);

  Tensor h = p.run("conv", "conv3x3 (stem)", [&](const Variable& v) { return m.conv()(v); },
                   b.images, /*input_requires_grad=*/false);
  h = p.run("bn", "batch_norm", [&](const Variable& v) { return m.bn()(v); }, h);
  h = p.run("relu", "relu", [](const Variable& v) { return ddp::relu(v); }, h);
  h = profile_block(p, "block1", m.block1(), h);
  h = profile_block(p, "block2", m.block2(), h);
  h = profile_block(p, "block3", m.block3(), h);
  h = p.run("pool", "global_avg_pool2d",
            [](const Variable& v) { return ddp::global_avg_pool2d(v); }, h);
  h = p.run("fc", "linear", [&](const Variable& v) { return m.fc()(v); }, h);
  p.run("loss", "cross_entropy",
        [&](const Variable& v) { return ddp::cross_entropy(v, b.labels); }, h);
  s.optimizer.zero_grad();

  double total = 0.0, total_fwd = 0.0;
  for (const LayerTime& r : p.rows()) {
    total += r.forward_s + r.backward_s;
    total_fwd += r.forward_s;
  }
  std::printf("\nBreakdown 2: every layer alone, forward and backward (batch %d, %d thread(s),"
              " median of %d reps)\n", o.breakdown_batch, ddp::get_num_threads(), o.steps);
  std::printf("%-20s %-18s %8s %7s %8s %8s %7s\n", "layer", "family", "fwd ms", "fwd %",
              "bwd ms", "bwd/fwd", "share");
  for (const LayerTime& r : p.rows()) {
    std::printf("%-20s %-18s %8.2f %6.1f%% %8.2f %7.1fx %6.1f%%\n", r.name.c_str(),
                r.family.c_str(), r.forward_s * 1e3, 100.0 * r.forward_s / total_fwd,
                r.backward_s * 1e3, r.backward_s / r.forward_s,
                100.0 * (r.forward_s + r.backward_s) / total);
  }
  std::printf("%-20s %-18s %8.2f %7s %8.2f %8s %7s\n", "sum", "", total_fwd * 1e3, "",
              (total - total_fwd) * 1e3, "", "100%");
  std::printf("('fwd %%': share of the summed forward; 'share': of forward + backward)\n");

  // The same, summed per op family, largest first.
  std::map<std::string, LayerTime> by_family;
  for (const LayerTime& r : p.rows()) {
    LayerTime& f = by_family[r.family];
    f.family = r.family;
    f.forward_s += r.forward_s;
    f.backward_s += r.backward_s;
  }
  std::vector<LayerTime> families;
  for (const auto& [name, f] : by_family) families.push_back(f);
  std::sort(families.begin(), families.end(), [](const LayerTime& l, const LayerTime& r) {
    return l.forward_s + l.backward_s > r.forward_s + r.backward_s;
  });
  std::printf("\nBy op family (sum of the layers above), largest first\n");
  std::printf("%-20s %8s %8s %9s %7s\n", "family", "fwd ms", "bwd ms", "total ms", "share");
  for (const LayerTime& f : families) {
    std::printf("%-20s %8.2f %8.2f %9.2f %6.1f%%\n", f.family.c_str(), f.forward_s * 1e3,
                f.backward_s * 1e3, (f.forward_s + f.backward_s) * 1e3,
                100.0 * (f.forward_s + f.backward_s) / total);
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse_options(argc, argv);
    const ddp::MnistDataset data(ddp::MnistSplit::Train);
    const bool gpu = o.device.is_cuda();
    std::printf("bench_train_step: ResNetMnist on %s, one step = zero_grad + forward +"
                " cross_entropy + backward + SGD step\n(lr 0.1, momentum 0.9, weight decay"
                " 5e-4); random batches from the %lld training images (gather%s not timed);\n"
                "%d warm-up + %d timed steps per row, a fresh model per row\n\n",
                o.device.str().c_str(), static_cast<long long>(data.size()),
                gpu ? " and copy to the GPU" : "", o.warmup, o.steps);

    std::vector<std::string> missing;
    std::printf("%7s %5s  %-22s %9s %9s %8s  %s\n", "threads", "batch", "who", "min ms",
                "med ms", "img/s", "ours/PyTorch (median)");
    for (const int threads : o.threads) {
      ddp::set_num_threads(threads);
      for (const int batch : o.batches) {
        const Timing t = time_steps(data, batch, o);
        std::printf("%7d %5d  %-22s %9.1f %9.1f %8.0f\n", threads, batch, "ddp.cpp",
                    t.min_s * 1e3, t.median_s * 1e3, batch / t.median_s);
        // The anchors are CPU runs: a GPU step has no anchor (bench/README.md, "On a GPU").
        const std::vector<AnchorStep> anchors =
            gpu ? std::vector<AnchorStep>{} : anchor_steps(o.anchors, threads, batch, missing);
        for (const AnchorStep& a : anchors) {
          const double ratio = t.median_s / a.median_s;
          std::printf("%7s %5s  %-22s %9.1f %9.1f %8.0f  %.2fx%s\n", "", "",
                      ("PyTorch anchor " + a.run).c_str(), a.min_s * 1e3, a.median_s * 1e3,
                      batch / a.median_s, ratio, ratio <= kTargetRatio ? "" : "  (slower)");
        }
        std::fflush(stdout);  // rows take seconds to minutes: show each as it is done
      }
    }
    for (const std::string& file : missing) std::printf("anchor not found: %s\n", file.c_str());
    if (gpu) {
      std::printf("\nno anchor on a GPU (the PyTorch anchors are CPU runs): bench/torch_gpu.py"
                  " times PyTorch's step on the same GPU\n");
    } else {
      std::printf("\nratio = our median step time / PyTorch's median step time: <= %.1fx is the"
                  " target (as fast as PyTorch or faster).\nnoise: the anchor medians moved up"
                  " to +-25 %% between run1 and run2 (RESULTS.md, 'Noise'); a ratio within\n"
                  "~25 %% of 1.0 is noise. Anchors: %s, measured on: %s; CPU here: %s\n",
                  kTargetRatio,
                  std::filesystem::weakly_canonical(o.anchors).c_str(),
                  ddp::bench::read_anchor_cpu_model(o.anchors + "/results/run1/machine.json")
                      .value_or("unknown")
                      .c_str(),
                  ddp::bench::this_cpu_model().c_str());
    }

    if (o.breakdown_batch > 0) {
      ddp::set_num_threads(o.breakdown_threads);
      breakdown_by_module(data, o);
      breakdown_by_layer(data, o);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_train_step: error: %s\n", e.what());
    return 1;
  }
}

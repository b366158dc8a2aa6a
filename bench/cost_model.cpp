// bench_cost_model: chapter 07's exercise "pick the bucket size", answered on paper with
// the DDP cost model (dist/parallel/cost_model.hpp), and the headline prediction: ResNet50
// on 8 GPUs in 2 nodes (bench/README.md, "Cost model").
//
//   build/release/bin/bench_cost_model                      # our ResNet, 2 ranks, 1gbit,50us
//   build/release/bin/bench_cost_model --world 4 --link 100mbit,200us --backward-ms 80
//   build/release/bin/bench_cost_model --headline
//
// It measures nothing. The compute times are flags (take them from bench_ddp_step's
// no-sync mode, or from a trace); the link has the grammar of DDP_TCP_LINK.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "bench/bench_args.hpp"
#include "dist/parallel/cost_model.hpp"
#include "base/error.hpp"
#include "base/units.hpp"

namespace {

using namespace ddp;
using bench::parse_decimal;
using bench::parse_decimal_list;

// ---- Flags -----------------------------------------------------------------------------

struct Options {
  std::int64_t params = 77754;  // ResNetMnist at width 1 (bench/torch/README.md)
  // A rank's compute without communication. Defaults: bench_train_step's 1 thread x 64
  // images (the local batch at 2 ranks), 96.7 ms at the median (bench/README.md,
  // 2026-11-23), split 1 : 2 between forward and backward, 4 ms of SGD assumed.
  double forward_ms = 30.0, backward_ms = 62.0, optimizer_ms = 4.0;
  int world = 2;
  RingLink link = parse_ring_link("1gbit,50us");
  std::vector<double> caps_mib{0.1, 0.25, 1, 5, 25};
  double first_cap_mib = 1;  // PyTorch's first bucket (dist._DEFAULT_FIRST_BUCKET_BYTES)
  bool headline = false;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--headline") {
      o.headline = true;
      continue;
    }
    DDP_CHECK(i + 1 < argc, "bench_cost_model: ", flag, " needs a value");
    const std::string value = argv[++i];
    if (flag == "--params") {
      o.params = parse_int_flag(flag, value, 1, std::numeric_limits<int>::max());
    } else if (flag == "--forward-ms") {
      o.forward_ms = parse_decimal(flag, value, true);
    } else if (flag == "--backward-ms") {
      o.backward_ms = parse_decimal(flag, value, true);
    } else if (flag == "--optimizer-ms") {
      o.optimizer_ms = parse_decimal(flag, value, true);
    } else if (flag == "--world") {
      o.world = bench::parse_int(flag, value, 1);
    } else if (flag == "--link") {
      o.link = parse_ring_link(value, flag);
    } else if (flag == "--caps") {
      o.caps_mib = parse_decimal_list(flag, value);
    } else if (flag == "--first-cap-mb") {
      o.first_cap_mib = parse_decimal(flag, value);
    } else {
      DDP_FAIL("bench_cost_model: unknown flag ", flag,
               "\nhint: [--params N] [--forward-ms F] [--backward-ms B] [--optimizer-ms O] "
               "[--world W] [--link 1gbit,50us] [--caps 0.1,0.25,1,5,25] [--first-cap-mb 1] "
               "| --headline");
    }
  }
  return o;
}

std::int64_t mib_to_bytes(double mib) { return std::llround(mib * static_cast<double>(kMiB)); }

// ---- The exercise: pick the bucket size ------------------------------------------------

void print_exercise(const Options& o) {
  const std::int64_t total = 4 * o.params;  // fp32 gradients
  const StepTimes t{o.forward_ms / 1e3, o.backward_ms / 1e3, o.optimizer_ms / 1e3};
  std::printf(
      "Predicted DDP step, one rank of %d (Note [The DDP cost model], "
      "dist/parallel/cost_model.cpp)\n",
      o.world);
  std::printf("gradients: %lld B (%lld fp32 parameters); link %s\n", static_cast<long long>(total),
              static_cast<long long>(o.params), to_string(o.link).c_str());
  std::printf("compute: forward %.1f + backward %.1f + optimizer %.1f = %.1f ms (one process)\n",
              o.forward_ms, o.backward_ms, o.optimizer_ms,
              o.forward_ms + o.backward_ms + o.optimizer_ms);
  std::printf(
      "gradients leave backward at a uniform byte rate; the first bucket is capped at "
      "min(cap, %g MiB)\n\n",
      o.first_cap_mib);
  std::printf(
      "| bucket cap | buckets | last bucket (B) | link busy (ms) | exposed (ms) | "
      "step (ms) | vs one bucket | efficiency |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");

  const std::vector<std::int64_t> one{total};
  const StepPrediction naive =
      predict_step(t, ready_at_uniform_rate(one, t.backward_s), o.world, o.link);
  auto row = [&](const std::string& name, const std::vector<std::int64_t>& sizes) {
    const StepPrediction p =
        predict_step(t, ready_at_uniform_rate(sizes, t.backward_s), o.world, o.link);
    std::printf("| %s | %zu | %lld | %.2f | %.2f | %.2f | %.3fx | %.1f %% |\n", name.c_str(),
                sizes.size(), static_cast<long long>(sizes.back()), p.comm_s * 1e3,
                p.exposed_comm_s * 1e3, p.step_s * 1e3, p.step_s / naive.step_s,
                100 * p.efficiency);
  };
  for (const double cap : o.caps_mib) {
    char name[32];
    std::snprintf(name, sizeof name, "%g MiB", cap);
    row(name, split_into_buckets(total, mib_to_bytes(cap),
                                 std::min(mib_to_bytes(cap), mib_to_bytes(o.first_cap_mib))));
  }
  row("one bucket (ch06)", one);
}

// ---- The headline: ResNet50 on 8 GPUs in 2 nodes ---------------------------------------
// Figures and their sources: bench/README.md, "Cost model".

constexpr std::int64_t kResNet50Params = 25'557'032;
constexpr double kImagesPerEpoch = 60'000;  // MNIST's training set
constexpr double kEpochs = 5;
// The seed table (V100): 5 epochs on 1 GPU, 4 GPUs (one node), 8 GPUs (2 nodes).
constexpr double kSeed1 = 309.7, kSeed4 = 85.2, kSeed8 = 47.0;
// SGD with momentum reads weight, gradient and momentum and writes weight and momentum:
// 5 x 4 B per parameter through ~900 GB/s of HBM2 (V100's specification).
constexpr double kOptimizerS = 5.0 * 4 * kResNet50Params / 900e9;

struct Scenario {
  const char* name;
  int world;
  const char* link;  // DDP_TCP_LINK grammar
  double cap_mib;    // 0: one all-reduce after backward (chapter 06)
  int batch;         // images per GPU per step
};

// One step at `batch` images per GPU, from the 1-GPU run's time per image (an assumption:
// compute grows linearly with the batch), split 1 : 2 between forward and backward.
StepTimes step_times(int batch) {
  const double one = kSeed1 / (kEpochs * kImagesPerEpoch) * batch;
  return {(one - kOptimizerS) / 3, 2 * (one - kOptimizerS) / 3, kOptimizerS};
}

StepPrediction predict(const Scenario& s) {
  const std::int64_t total = 4 * kResNet50Params;
  const StepTimes t = step_times(s.batch);
  const std::vector<std::int64_t> sizes =
      s.cap_mib > 0 ? split_into_buckets(total, mib_to_bytes(s.cap_mib), kMiB)
                    : std::vector<std::int64_t>{total};
  return predict_step(t, ready_at_uniform_rate(sizes, t.backward_s), s.world,
                      parse_ring_link(s.link));
}

// Five epochs of weak-scaled steps: 5 x 60,000 / (W x batch) steps of the predicted length.
double five_epochs_s(const Scenario& s, const StepPrediction& p) {
  return kEpochs * kImagesPerEpoch / (s.world * s.batch) * p.step_s;
}

void print_headline() {
  std::printf(
      "ResNet50 (%lld parameters, %.1f MiB of fp32 gradients), MNIST (60,000 images), "
      "5 epochs, V100\n",
      static_cast<long long>(kResNet50Params), 4.0 * kResNet50Params / kMiB);
  const StepTimes t128 = step_times(128);
  std::printf(
      "assumed: 128 images per GPU per step; 1-GPU step = 309.7 s / (5 x 60,000) x 128 "
      "= %.1f ms: forward %.1f, backward %.1f, SGD %.2f ms\n",
      (t128.forward_s + t128.backward_s + t128.optimizer_s) * 1e3, t128.forward_s * 1e3,
      t128.backward_s * 1e3, t128.optimizer_s * 1e3);
  std::printf(
      "links (bus bandwidth, latency per ring step): NVLink 40 GB/s; InfiniBand EDR "
      "100 Gbit/s = 12 GB/s, HDR 200 Gbit/s = 24 GB/s; 10 us per step across nodes\n\n");

  // Links in DDP_TCP_LINK's grammar: 320gbit = 40 GB/s, 96gbit = 12 GB/s, 192gbit = 24 GB/s.
  const Scenario nvlink4{"4 GPUs, 1 node, NVLink, 25 MiB", 4, "320gbit,5us", 25, 128};
  const Scenario nvlink4_naive{"4 GPUs, 1 node, NVLink, naive", 4, "320gbit,5us", 0, 128};
  const Scenario rows[] = {
      nvlink4_naive,
      nvlink4,
      {"8 GPUs, EDR 100, naive (ch06)", 8, "96gbit,10us", 0, 128},
      {"8 GPUs, EDR 100, 25 MiB buckets", 8, "96gbit,10us", 25, 128},
      {"8 GPUs, EDR 100, 5 MiB buckets", 8, "96gbit,10us", 5, 128},
      {"8 GPUs, EDR 100, 1 MiB buckets", 8, "96gbit,10us", 1, 128},
      {"8 GPUs, EDR 100, naive, batch 256", 8, "96gbit,10us", 0, 256},
      {"8 GPUs, HDR 200, naive", 8, "192gbit,10us", 0, 128},
      {"8 GPUs, HDR 200, 25 MiB buckets", 8, "192gbit,10us", 25, 128},
      {"8 GPUs, EDR 100, 25 MiB, 10x latency", 8, "96gbit,100us", 25, 128},
  };
  // The part of a run no step explains (start-up, data loading, evaluation): what the
  // 4-GPU run took beyond its predicted steps.
  const double fixed_s = kSeed4 - five_epochs_s(nvlink4, predict(nvlink4));
  std::printf(
      "| scenario | buckets | exposed comm (ms/step) | step (ms) | efficiency | "
      "5 epochs (s) | + %.1f s fixed (s) |\n",
      fixed_s);
  std::printf("|---|---|---|---|---|---|---|\n");
  for (const Scenario& s : rows) {
    const StepPrediction p = predict(s);
    const double run = five_epochs_s(s, p);
    std::printf("| %s | %zu | %.2f | %.1f | %.1f %% | %.1f | %.1f |\n", s.name, p.start_s.size(),
                p.exposed_comm_s * 1e3, p.step_s * 1e3, 100 * p.efficiency, run, run + fixed_s);
  }
  std::printf("\nseed: 1 GPU %.1f s; 4 GPUs %.1f s (%.1f %%); 8 GPUs on 2 nodes %.1f s (%.1f %%)\n",
              kSeed1, kSeed4, 100 * kSeed1 / (4 * kSeed4), kSeed8, 100 * kSeed1 / (8 * kSeed8));
  std::printf("fixed = 4-GPU seed - its predicted 5 epochs = %.1f s per run, outside the steps\n",
              fixed_s);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    if (o.headline) {
      print_headline();
    } else {
      print_exercise(o);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cost_model: error: %s\n", e.what());
    return 1;
  }
}

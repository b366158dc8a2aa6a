// ch07_comm_hook: chapter 07's bf16 communication hook (dist/parallel/comm_hooks.hpp)
// across ranks, against references each rank computes on its own.
//
//   ddprun --nproc-per-node 2 build/<dir>/tests/ch07_comm_hook --backend tcp
//   mpirun -np 4 --oversubscribe build/<dir>/tests/ch07_comm_hook --backend mpi
//
// Scenarios (--scenario, default both):
//   gradients  one backward through DDP with the hook, for the ResNet (3 buckets in
//              flight at once) and a Linear(5, 3) (a bucket per parameter, 15 and 3
//              floats: odd lengths, padded on the wire). Every rank recomputes EVERY rank's
//              local gradient in its own process (same seed, same data), rounds each with
//              the tests' own bf16 (bf16_reference.hpp) and sums them in rank order, / W:
//              the hook's gradients must equal that exactly; they must be the same bits on
//              every rank; and they must lie within the bf16 bound of the plain
//              all-reduce's (relative 2^-8 per term). Then 3 SGD steps: the replicas must
//              stay bit-identical.
//   specials   the hook alone on a hand-made bucket: a tie, subnormals, Inf on one rank,
//              NaN on another, an overflowing sum, a sum whose result depends on its order,
//              and a slot whose bits read as a signalling NaN: it must cross every backend
//              untouched.
// --plant skip-average: the hook forgets the 1/W, so that ctest can watch it fail.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "autograd/functions.hpp"
#include "dist/all_gather_text.hpp"
#include "dist/init.hpp"
#include "dist/parallel/comm_hooks.hpp"
#include "dist/parallel/distributed_data_parallel.hpp"
#include "dist/parallel/replica_check.hpp"
#include "nn/linear.hpp"
#include "nn/resnet_mnist.hpp"
#include "nn/sgd.hpp"
#include "base/error.hpp"
#include "tensor/random.hpp"
#include "tests/ch07/comm_hook/bf16_reference.hpp"
#include "tests/support/rank_args.hpp"

namespace {

using namespace ddp;

constexpr std::int64_t kGlobalBatch = 12;  // splits evenly over 1, 2, 3 and 4 ranks
constexpr int kSteps = 3;
constexpr std::uint64_t kSeed = 11;

using Args = test::RankArgs;

// The hook under test, or the planted bug: the average left as a sum (x W after finish).
CommHook hook_under_test(const Args& args) {
  CommHook hook = bf16_compress_hook();
  if (args.plant == "skip-average") {
    hook.finish = [finish = hook.finish](ProcessGroup& group, Tensor& bucket) {
      finish(group, bucket);
      bucket.mul_(static_cast<float>(group.size()));
    };
  }
  return hook;
}

std::uint32_t bits_of(float x) { return std::bit_cast<std::uint32_t>(x); }

// Every rank's text equal to rank 0's?
bool same_on_all_ranks(ProcessGroup& group, const std::string& mine) {
  const std::vector<std::string> all = all_gather_text(group, mine);
  for (const std::string& s : all) {
    if (s != all[0]) return false;
  }
  return true;
}

// FNV-1a over the bits of every gradient: equal hashes, equal bits (for this test's use).
std::string gradient_hash(const nn::Module& m) {
  std::uint64_t h = 1469598103934665603ull;
  for (const Variable& p : m.parameters()) {
    for (const float x : p.grad().to_vector<float>()) {
      h = (h ^ bits_of(x)) * 1099511628211ull;
    }
  }
  return std::to_string(h);
}

using Gradients = std::vector<std::vector<float>>;  // per parameter, flattened

Gradients gradients_of(const nn::Module& m) {
  Gradients g;
  for (const Variable& p : m.parameters()) g.push_back(p.grad().to_vector<float>());
  return g;
}

// ---- gradients ------------------------------------------------------------------------

struct Case {
  std::string name;
  std::function<std::shared_ptr<nn::Module>(Generator&)> make;
  std::int64_t bucket_cap;
  Tensor inputs;  // (kSteps * kGlobalBatch, ...)
  Tensor labels;  // (kSteps * kGlobalBatch)
};

Tensor cyclic_labels(std::int64_t n, std::int64_t classes) {
  std::vector<std::int64_t> labels(n);
  for (std::int64_t i = 0; i < n; ++i) labels[i] = (i * 7 + 3) % classes;
  return from_data(std::span<const std::int64_t>(labels), {n});
}

int check_gradients(const Args& args, ProcessGroup& group, const Case& c) {
  const int world = group.size(), rank = group.rank();
  const std::int64_t b = kGlobalBatch / world;
  auto shard = [&](const Tensor& t, int step, int r) {
    return t.narrow(0, step * kGlobalBatch + r * b, b).contiguous();
  };
  auto loss = [&](auto& m, int step, int r) {  // m: a module or its DDP wrapper
    return cross_entropy(m(Variable(shard(c.inputs, step, r))), shard(c.labels, step, r));
  };
  int failures = 0;
  auto fail = [&](const std::string& what) {
    std::fprintf(stderr, "rank %d: %s: %s\n", rank, c.name.c_str(), what.c_str());
    ++failures;
  };

  DDPOptions options;
  options.reducer.bucket_cap_bytes = options.reducer.first_bucket_bytes = c.bucket_cap;
  Generator g1(kSeed), g2(kSeed);
  auto model = c.make(g1);
  auto plain = c.make(g2);
  DistributedDataParallel ddp(model, group, options);
  ddp.reducer().set_comm_hook(hook_under_test(args));
  DistributedDataParallel plain_ddp(plain, group, options);  // the default: all-reduce
  loss(ddp, 0, rank).backward();
  loss(plain_ddp, 0, rank).backward();

  // Every rank's local gradient, recomputed here from the same seed and data.
  std::vector<Gradients> local;
  for (int r = 0; r < world; ++r) {
    Generator g(kSeed);
    auto alone = c.make(g);
    loss(*alone, 0, r).backward();
    local.push_back(gradients_of(*alone));
  }
  const Gradients got = gradients_of(*model), plain_got = gradients_of(*plain);
  const float inverse = 1.0f / static_cast<float>(world);
  std::int64_t wrong = 0, outside = 0, rounded = 0, total = 0;
  double worst_ratio = 0.0;  // |bf16 - plain| / (mean |g_r|)
  for (std::size_t p = 0; p < got.size(); ++p) {
    for (std::size_t i = 0; i < got[p].size(); ++i) {
      float expected = test::reference_bf16_value(local[0][p][i]);
      double magnitude = std::fabs(local[0][p][i]);
      for (int r = 1; r < world; ++r) {
        expected += test::reference_bf16_value(local[r][p][i]);
        magnitude += std::fabs(local[r][p][i]);
      }
      expected *= inverse;
      magnitude /= world;
      ++total;
      if (got[p][i] != expected) {
        if (wrong++ < 3) {
          fail(detail::concat("parameter ", p, " element ", i, ": the hook gave ", got[p][i],
                              ", the average of the bf16-rounded local gradients is ", expected));
        }
      }
      // bf16 rounding: at most 2^-8 of each |g_r| (half an ulp of 8 significant bits);
      // the float32 sums on either side add a few 2^-24 of it; a subnormal bf16 is off by
      // at most 2^-134 absolute.
      const double difference = std::fabs(static_cast<double>(got[p][i]) - plain_got[p][i]);
      const double bound =
          (std::ldexp(1.0, -8) + std::ldexp(1.0, -18)) * magnitude + std::ldexp(1.0, -133);
      if (difference > 0) ++rounded;
      if (magnitude > 0) worst_ratio = std::max(worst_ratio, difference / magnitude);
      if (!(difference <= bound) && outside++ < 3) {
        fail(detail::concat("parameter ", p, " element ", i, ": the hook's ", got[p][i], " is ",
                            difference, " from the plain all-reduce's ", plain_got[p][i],
                            ", more than the bf16 bound ", bound));
      }
    }
  }
  if (wrong > 0) {
    fail(detail::concat(wrong, " of ", total, " gradient values differ from the reference"));
  }
  // The bound must not hold only because nothing was rounded.
  if (rounded == 0) fail("no gradient differs from the plain all-reduce's: bf16 rounded nothing?");
  if (!same_on_all_ranks(group, gradient_hash(*model))) {
    fail("the averaged gradients differ between ranks");
  }

  // The replicas stay identical, step after step.
  nn::SGD sgd(model->parameters(), nn::SGDOptions{.lr = 0.05, .momentum = 0.9});
  sgd.step();
  for (int s = 1; s < kSteps; ++s) {
    sgd.zero_grad();
    loss(ddp, s, rank).backward();
    sgd.step();
  }
  if (!same_on_all_ranks(group, std::to_string(parameter_hash(*model)))) {
    fail(detail::concat("parameters differ between ranks after ", kSteps, " steps"));
  }
  std::printf(
      "rank %d/%d (%s): %s: %lld values, %zu buckets; equal to the reference: %lld; "
      "differ from the plain all-reduce: %lld, by at most %.3g x mean|g_r| "
      "(bound 2^-8 = %.3g)\n",
      rank, world, group.backend_name().c_str(), c.name.c_str(), static_cast<long long>(total),
      ddp.reducer().bucket_assignment().size(), static_cast<long long>(total - wrong),
      static_cast<long long>(rounded), worst_ratio, std::ldexp(1.0, -8));
  std::fflush(stdout);
  return failures;
}

int scenario_gradients(const Args& args, ProcessGroup& group) {
  const std::int64_t n = kSteps * kGlobalBatch;
  Generator data(5);
  Case resnet{"ResNet, cap 100 kB",
              [](Generator& g) -> std::shared_ptr<nn::Module> {
                return std::make_shared<nn::ResNetMnist>(g);
              },
              100'000, randn({n, 1, 28, 28}, data), cyclic_labels(n, 10)};
  Case linear{"Linear(5, 3), a bucket per parameter",
              [](Generator& g) -> std::shared_ptr<nn::Module> {
                return std::make_shared<nn::Linear>(5, 3, true, g);
              },
              1, randn({n, 5}, data), cyclic_labels(n, 3)};
  return check_gradients(args, group, resnet) + check_gradients(args, group, linear);
}

// ---- specials -------------------------------------------------------------------------

int scenario_specials(const Args& args, ProcessGroup& group) {
  const int world = group.size(), rank = group.rank();
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float tiny = std::bit_cast<float>(0x00010000u);  // 2^-133: bf16's 0x0001
  // Rank r's bucket, value by value (9: an odd length, padded on the wire).
  auto bucket_of = [&](int r) {
    return std::vector<float>{
        tiny,                         // with the next: slot 0x7f800001 on rank 0, a sNaN's bits
        r == 0 ? inf : 1.0f,          // Inf on one rank: the average is Inf
        1.00390625f,                  // 1 + 2^-8: a tie, rounds to 1
        1e-40f * (r + 1),             // float32 subnormals
        r == world - 1 ? nan : 2.0f,  // NaN on one rank: NaN
        3e38f,                        // finite in bf16, the float32 sum overflows: Inf
        0.1f * static_cast<float>(r + 1),
        // 1 + 2^30 - 2^30 - ...: 0 in rank order, 1 in another. Sums of bf16 values are
        // exact in float32 unless their exponents lie far apart, so gradients alone would
        // not show a rank that sums in its own order; this value does (W >= 3).
        r == 0   ? 1.0f
        : r == 1 ? 0x1p30f
        : r == 2 ? -0x1p30f
                 : 0.0f,
        -5.5f};
  };
  Tensor bucket = from_data(bucket_of(rank), {9});
  CommHook hook = hook_under_test(args);
  hook.launch(group, bucket)->wait(std::chrono::seconds(60));
  hook.finish(group, bucket);
  const std::vector<float> got = bucket.to_vector<float>();
  int failures = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    float expected = test::reference_bf16_value(bucket_of(0)[i]);
    for (int r = 1; r < world; ++r) expected += test::reference_bf16_value(bucket_of(r)[i]);
    expected *= 1.0f / static_cast<float>(world);
    const bool ok =
        std::isnan(expected) ? std::isnan(got[i]) : bits_of(got[i]) == bits_of(expected);
    if (!ok) {
      std::fprintf(stderr,
                   "rank %d: specials: value %zu: the hook gave %g (0x%08x), "
                   "expected %g (0x%08x): the bucket differs from the reference\n",
                   rank, i, got[i], bits_of(got[i]), expected, bits_of(expected));
      ++failures;
    }
  }
  std::string mine;
  for (const float x : got) mine += std::to_string(bits_of(x)) + " ";
  if (!same_on_all_ranks(group, mine)) {
    std::fprintf(stderr, "rank %d: specials: the buckets differ between ranks\n", rank);
    ++failures;
  }
  std::printf("rank %d/%d (%s): specials: %s\n", rank, world, group.backend_name().c_str(),
              failures == 0 ? "every value as the reference" : "FAILED");
  std::fflush(stdout);
  return failures;
}

}  // namespace

int main(int argc, char** argv) {
  int rank = -1;
  try {
    const Args args = test::parse_rank_args(argc, argv, "ch07_comm_hook");
    // A misspelt scenario or bug would otherwise run nothing and print PASS.
    DDP_CHECK(args.scenario == "all" || args.scenario == "gradients" ||
                  args.scenario == "specials",
              "ch07_comm_hook: unknown --scenario '", args.scenario, "' (all, gradients, specials)");
    DDP_CHECK(args.plant == "none" || args.plant == "skip-average",
              "ch07_comm_hook: unknown --plant '", args.plant, "' (none, skip-average)");
    DDP_CHECK(!args.device.is_cuda(), "ch07_comm_hook runs on the CPU only (--device ",
              args.device.str(), ")");
    InitOptions init;
    init.backend = args.backend;
    init.timeout = std::chrono::seconds(60);
    auto group = init_process_group(init);
    rank = group->rank();
    int failures = 0;
    const bool all = args.scenario == "all";
    if (all || args.scenario == "gradients") failures += scenario_gradients(args, *group);
    if (all || args.scenario == "specials") failures += scenario_specials(args, *group);
    group->barrier()->wait();
    if (failures == 0 && rank == 0)
      std::printf("PASS: %s on %d ranks\n", args.scenario.c_str(), group->size());
    return failures == 0 ? 0 : 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ch07_comm_hook rank %d: error: %s\n", rank, e.what());
    return 1;
  }
}

// ch09_sharded: sharded data parallelism against DDP, step by step. Chapter 09's proof that
// sharding the optimizer state changes where the numbers live, not what they are.
//
//   ddprun --nproc-per-node 3 build/<dir>/tests/ch09_sharded --backend tcp
//   mpirun -np 4 --oversubscribe build/<dir>/tests/ch09_sharded --backend mpi
//   ddprun --nproc-per-node 2 build/<dir>/tests/ch09_sharded --backend tcp --device cuda
//
// --device cuda puts the networks and the data on GPU 0 (tcp and mpi stage the CUDA
// tensors through host memory, so several ranks may share the GPU; nccl wants a GPU per
// rank); without a usable GPU the program reports Skipped (exit 77).
// Every rank trains two copies of one small network (64 -> 37 -> 23 -> 10, three Linear
// layers, 3,519 parameters: uneven shards at 3 and 4 ranks) for 5 steps on its rows of a
// global batch of 12: one under DDP with a plain optimizer, the reference; one sharded
// (--scenario): zero1 is DDP with ZeroRedundancyOptimizer, zero2 is ShardedDataParallel
// (two buckets: its first is capped at 1 KiB), fsdp is FullyShardedDataParallel (three
// units, one per Linear). Each for SGD with momentum and for AdamW, without and with
// gradient clipping. After every step the sharded copy's parameters must be within
// Note [The sharded tolerance] of the reference's, and the same bits on every rank.
// --plant makes a known bug, so that the tests can watch the checks fail:
//   no-all-gather  the updated shards are not gathered (each rank keeps the others' old
//                  values), as if the all-gather after the step were left out
//   shard-offset   the shard's gradient is one element off its parameters
//   sum            the reduce-scatter's sum is not divided by the world size (zero2)
//   free-before-backward  fsdp: the units' full parameters are gathered for the forward and
//                  freed before backward without being gathered again
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "autograd/functions.hpp"
#include "base/error.hpp"
#include "dist/init.hpp"
#include "dist/parallel/distributed_data_parallel.hpp"
#include "dist/parallel/fully_sharded_data_parallel.hpp"
#include "dist/parallel/sharded_data_parallel.hpp"
#include "dist/parallel/zero_redundancy_optimizer.hpp"
#include "nn/adamw.hpp"
#include "nn/clip_grad.hpp"
#include "nn/linear.hpp"
#include "nn/relu.hpp"
#include "nn/sequential.hpp"
#include "nn/sgd.hpp"
#include "tensor/memory.hpp"
#include "tensor/random.hpp"
#include "tensor/cuda/device_info.hpp"
#include "tests/ch09/fsdp_schedule.hpp"
#include "tests/support/no_gpu.hpp"
#include "tests/support/rank_args.hpp"
#include "tests/support/replicas.hpp"

namespace {

using namespace ddp;

constexpr std::int64_t kGlobalBatch = 12;  // splits evenly over 1, 2, 3 and 4 ranks
constexpr std::int64_t kFeatures = 64;
constexpr int kSteps = 5;

// Note [The sharded tolerance]
// ZeRO-1 steps a slice of one flat buffer with the same element-wise formulas that the
// reference applies parameter by parameter, to the same averaged gradients: the same
// operations on the same numbers. ZeRO-2's and FSDP's gradients come from a reduce-scatter
// whose chunks are not the all-reduce's, so from 3 ranks on a sum may add the same terms in
// another order (one unit in the last place of a gradient), and with clipping the norm is a
// sum of per-rank partial sums. Measured (tcp and mpi, 2 to 4 ranks): zero1 0 on every
// step; zero2 and fsdp 0 to 1.5e-8 at 2 ranks with clipping, up to 3e-8 at 3 and 4, not
// growing over the 5 steps; accumulating micro-batches against one step over their rows
// (a sum split in two, then added), up to 4.5e-8 after 5 steps. The tolerance, 1e-6,
// allows those units and nothing more; the planted bugs are 3e-3 off or more after their
// first step. An accumulation that forgets the 1/K is only 1e-5 off after its first step
// with AdamW (m / sqrt(v) divides a gradient's scale out; only eps sees it), still 10x
// the tolerance.
constexpr double kTolerance = 1e-6;

std::shared_ptr<nn::Sequential> make_model(Device device) {
  Generator gen(5);
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(std::make_shared<nn::Linear>(kFeatures, 37, true, gen));
  model->push_back(std::make_shared<nn::ReLU>());
  model->push_back(std::make_shared<nn::Linear>(37, 23, true, gen));
  model->push_back(std::make_shared<nn::ReLU>());
  model->push_back(std::make_shared<nn::Linear>(23, 10, true, gen));
  model->to(device);
  return model;
}

struct Data {
  Tensor inputs;  // (kSteps * B, kFeatures)
  Tensor labels;  // (kSteps * B)
};

Data make_data() {
  Generator gen(11);
  std::vector<std::int64_t> labels(kSteps * kGlobalBatch);
  for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::int64_t>((i * 3 + 1) % 10);
  return {randn({kSteps * kGlobalBatch, kFeatures}, gen),
          from_data(std::span<const std::int64_t>(labels), {kSteps * kGlobalBatch})};
}

std::unique_ptr<nn::Optimizer> make_optimizer(const std::string& kind, std::vector<Variable> ps) {
  if (kind == "sgd") {
    return std::make_unique<nn::SGD>(std::move(ps),
                                     nn::SGDOptions{.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-3});
  }
  return std::make_unique<nn::AdamW>(std::move(ps), nn::AdamWOptions{.lr = 3e-3, .weight_decay = 0.05});
}

// The planted offset: the local optimizer sees its shard's gradient shifted by one element.
class ShiftedGradient final : public nn::Optimizer {
 public:
  explicit ShiftedGradient(std::unique_ptr<nn::Optimizer> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return inner_->name(); }
  void step() override {
    for (const Variable& p : inner_->parameters()) {
      Tensor g = p.grad();
      const std::int64_t n = g.numel();
      if (n > 1) g.narrow(0, 1, n - 1).copy_(g.narrow(0, 0, n - 1).clone());
    }
    inner_->step();
  }
  void zero_grad() override { inner_->zero_grad(); }
  double lr() const override { return inner_->lr(); }
  void set_lr(double lr) override { inner_->set_lr(lr); }
  const std::vector<Variable>& parameters() const override { return inner_->parameters(); }
  nn::StateDict state_dict() const override { return inner_->state_dict(); }
  void load_state_dict(const nn::StateDict& s, std::string_view from) override {
    inner_->load_state_dict(s, from);
  }

 private:
  std::unique_ptr<nn::Optimizer> inner_;
};

// The sharded copy: one of the two ways, behind the four calls a training step makes.
class Sharded {
 public:
  Sharded(const std::string& scenario, const std::string& optimizer, const test::RankArgs& args,
          ProcessGroup& group)
      : model_(make_model(args.device)) {
    const auto make = [&](std::vector<Variable> shard) {
      auto inner = make_optimizer(optimizer, std::move(shard));
      if (args.plant != "shard-offset") return inner;
      return std::unique_ptr<nn::Optimizer>(new ShiftedGradient(std::move(inner)));
    };
    if (scenario == "zero1") {
      ddp_ = std::make_unique<DistributedDataParallel>(model_, group);
      zero1_ = std::make_unique<ZeroRedundancyOptimizer>(model_->parameters(), group, make);
    } else if (scenario == "zero2") {
      zero2_ = std::make_unique<ShardedDataParallel>(
          model_, group, make, ShardedOptions{.first_bucket_bytes = 1024});
    } else {
      fsdp_ = std::make_unique<FullyShardedDataParallel>(model_, group, make);
    }
    plant_ = args.plant;
  }
  void forward_backward(const Tensor& x, const Tensor& y) {
    if (ddp_) {
      cross_entropy((*ddp_)(Variable(x)), y).backward();
      ddp_->average_gradients();
    } else if (zero2_) {
      cross_entropy((*zero2_)(Variable(x)), y).backward();
    } else if (plant_ == "free-before-backward") {
      for (const auto& [name, child] : model_->children()) child->set_forward_hooks(nullptr, nullptr);
      Variable loss;
      {
        const FullyShardedDataParallel::SummonFullParameters all(*fsdp_);
        loss = cross_entropy((*fsdp_)(Variable(x)), y);
      }  // every unit freed here, and nothing gathers them again for backward
      loss.backward();
    } else {
      cross_entropy((*fsdp_)(Variable(x)), y).backward();
    }
  }
  // Gradient accumulation: K micro-batches, the first K-1 under no_sync, each loss / K.
  void forward_backward_accumulated(const std::vector<Tensor>& xs, const std::vector<Tensor>& ys) {
    const std::size_t k = xs.size();
    const auto one = [&](std::size_t m) {
      const Variable x(xs[m]);
      const Variable out = ddp_ ? (*ddp_)(x) : zero2_ ? (*zero2_)(x) : (*fsdp_)(x);
      mul(cross_entropy(out, ys[m]), 1.0 / static_cast<double>(k)).backward();
    };
    for (std::size_t m = 0; m + 1 < k; ++m) {
      if (ddp_) {
        const NoSyncGuard local = ddp_->no_sync();
        one(m);
      } else if (zero2_) {
        const NoSyncGuard local = zero2_->no_sync();
        one(m);
      } else {
        const NoSyncGuard local = fsdp_->no_sync();
        one(m);
      }
    }
    one(k - 1);  // this backward communicates the sum of all K
    if (ddp_) ddp_->average_gradients();
  }
  void clip(double max_norm) {
    if (zero1_) nn::clip_grad_norm(model_->parameters(), max_norm);
    if (zero2_) zero2_->clip_grad_norm(max_norm);
    if (fsdp_) fsdp_->clip_grad_norm(max_norm);
  }
  void step() {
    if (zero1_) {
      zero1_->step();
      zero1_->zero_grad();
    } else if (zero2_) {
      zero2_->step();
      zero2_->zero_grad();
    } else {
      fsdp_->step();
      fsdp_->zero_grad();
    }
  }
  // FSDP's parameters exist only while summoned: hold this while reading the model.
  std::unique_ptr<FullyShardedDataParallel::SummonFullParameters> summon() {
    if (!fsdp_) return nullptr;
    return std::make_unique<FullyShardedDataParallel::SummonFullParameters>(*fsdp_);
  }
  FullyShardedDataParallel* fsdp() { return fsdp_.get(); }
  std::vector<Tensor> shard_gradients() const {  // zero2's averaged shards
    std::vector<Tensor> out;
    if (zero2_)
      for (std::size_t b = 0; b < zero2_->buckets().size(); ++b) out.push_back(zero2_->shard_gradient(b));
    return out;
  }
  std::vector<Tensor> flat_buffers() const {
    std::vector<Tensor> out;
    if (zero1_) out.push_back(zero1_->flat_parameters());
    if (zero2_) for (const FlatParameter& b : zero2_->buckets()) out.push_back(b.flat());
    return out;
  }
  std::vector<ShardLayout> layouts() const {
    std::vector<ShardLayout> out;
    if (zero1_) out.push_back(zero1_->layout());
    if (zero2_) for (const FlatParameter& b : zero2_->buckets()) out.push_back(b.layout());
    if (fsdp_) for (std::size_t u = 0; u < fsdp_->num_units(); ++u) out.push_back(fsdp_->unit(u).layout());
    return out;
  }
  const nn::Module& model() const { return *model_; }

 private:
  std::shared_ptr<nn::Sequential> model_;
  std::unique_ptr<DistributedDataParallel> ddp_;
  std::unique_ptr<ZeroRedundancyOptimizer> zero1_;
  std::unique_ptr<ShardedDataParallel> zero2_;
  std::unique_ptr<FullyShardedDataParallel> fsdp_;
  std::string plant_;
};

// One run; returns the number of failed checks on this rank.
int run(const std::string& scenario, const std::string& optimizer, double clip,
        const test::RankArgs& args, const Data& data, ProcessGroup& group) {
  const int world = group.size(), rank = group.rank();
  const std::int64_t b = kGlobalBatch / world;
  auto reference = make_model(args.device);
  DistributedDataParallel ddp_reference(reference, group);
  std::unique_ptr<nn::Optimizer> plain = make_optimizer(optimizer, reference->parameters());
  Sharded sharded(scenario, optimizer, args, group);
  const std::string what = detail::concat(scenario, " ", optimizer, " clip ", clip);

  int failures = 0;
  std::string line, norms;
  for (int s = 0; s < kSteps; ++s) {
    const Tensor x = data.inputs.narrow(0, s * kGlobalBatch + rank * b, b).contiguous();
    const Tensor y = data.labels.narrow(0, s * kGlobalBatch + rank * b, b).contiguous();
    cross_entropy(ddp_reference(Variable(x)), y).backward();
    ddp_reference.average_gradients();
    sharded.forward_backward(x, y);
    if (args.plant == "sum" && scenario == "zero2") {  // the reduce-scatter's sum, undivided
      for (Tensor g : sharded.shard_gradients()) g.mul_(static_cast<float>(world));
    }
    if (clip > 0.0) {  // the norms are printed: above `clip`, so that clipping acts
      norms += detail::concat(" ", nn::clip_grad_norm(reference->parameters(), clip));
      sharded.clip(clip);
    }
    plain->step();
    plain->zero_grad();
    std::vector<Tensor> before;
    for (const Tensor& flat : sharded.flat_buffers()) before.push_back(flat.clone());
    sharded.step();
    if (args.plant == "no-all-gather") {  // every slice but this rank's back to its old values
      const std::vector<Tensor> flats = sharded.flat_buffers();
      const std::vector<ShardLayout> layouts = sharded.layouts();
      for (std::size_t k = 0; k < flats.size(); ++k) {
        const ShardLayout& l = layouts[k];
        for (int r = 0; r < world; ++r) {
          if (r == rank) continue;
          Tensor(flats[k]).narrow(0, l.begin(r), l.shard_numel)
              .copy_(before[k].narrow(0, l.begin(r), l.shard_numel));
        }
      }
    }

    const auto summoned = sharded.summon();  // fsdp: the full parameters, to compare
    const double difference = test::max_difference(sharded.model(), *reference);
    line += detail::concat(" ", difference);
    if (!(difference <= kTolerance)) {
      std::fprintf(stderr, "rank %d: %s: step %d: parameters differ from DDP's by %g > %g\n",
                   rank, what.c_str(), s + 1, difference, kTolerance);
      ++failures;
    }
    if (!test::identical_on_all_ranks(sharded.model(), group)) {
      std::fprintf(stderr, "rank %d: %s: step %d: parameters differ between ranks\n", rank,
                   what.c_str(), s + 1);
      ++failures;
    }
  }
  std::printf("rank %d/%d (%s): %s: max |sharded - ddp| after steps 1..%d:%s%s%s\n", rank, world,
              group.backend_name().c_str(), what.c_str(), kSteps, line.c_str(),
              norms.empty() ? "" : "; gradient norms:", norms.c_str());
  std::fflush(stdout);
  return failures;
}

// Memory as exact numbers (tensor/memory.hpp), for the sharded copy alone with AdamW:
// parameters = the padded flat buffers (fsdp: the shards only, outside forward and
// backward, and at their peak no more than the shards + the two largest units); after a
// synchronising backward, gradients = the shards (zero2, fsdp: the full gradients are
// freed) or DDP's buckets + the shard (zero1); after the step, optimizer state = 8 bytes
// per element of the shards: 1/W of DDP's, give or take the padding (fewer than W elements
// per flat buffer). Returns the number of failed checks on this rank.
int check_memory(const std::string& scenario, const Data& data, const test::RankArgs& args,
                 ProcessGroup& group) {
  namespace memory = ddp::memory;
  using memory::Category;
  const int world = group.size(), rank = group.rank();
  const std::int64_t b = kGlobalBatch / world;
  const memory::Snapshot before = memory::snapshot();
  const auto grown = [&](Category c) { return memory::snapshot()[c].live - before[c].live; };
  Sharded sharded(scenario, "adamw", args, group);
  std::int64_t padded = 0, shards = 0, numel = 0, largest = 0, second = 0;
  for (const ShardLayout& l : sharded.layouts()) {
    padded += l.padded_numel();
    shards += l.shard_numel;
    numel += l.numel;
    if (l.padded_numel() > largest) {
      second = largest;
      largest = l.padded_numel();
    } else {
      second = std::max(second, l.padded_numel());
    }
  }
  memory::reset_peaks();
  const Tensor x = data.inputs.narrow(0, rank * b, b).contiguous();
  const Tensor y = data.labels.narrow(0, rank * b, b).contiguous();
  sharded.forward_backward(x, y);
  const std::int64_t parameters = grown(Category::Parameters);
  const std::int64_t parameters_peak =
      memory::snapshot()[Category::Parameters].peak - before[Category::Parameters].live;
  const std::int64_t gradients = grown(Category::Gradients);
  const std::int64_t communication = grown(Category::Communication);
  sharded.step();
  const std::int64_t state = grown(Category::OptimizerState);

  const std::int64_t want_gradients = scenario == "zero1" ? 4 * (numel + shards) : 4 * shards;
  int failures = 0;
  const auto expect = [&](const char* what, std::int64_t got, std::int64_t want) {
    if (got == want) return;
    std::fprintf(stderr, "rank %d: %s memory: %s %lld bytes, expected %lld\n", rank,
                 scenario.c_str(), what, static_cast<long long>(got), static_cast<long long>(want));
    ++failures;
  };
  if (scenario == "fsdp") {
    expect("parameters after backward", parameters, 4 * shards);
    if (parameters_peak > 4 * (shards + largest + second)) {
      expect("parameters at their peak (at most)", parameters_peak, 4 * (shards + largest + second));
    }
  } else {
    expect("parameters", parameters, 4 * padded);
  }
  expect("gradients after backward", gradients, want_gradients);
  // Communication is not checked to the byte: a tcp collective's task holds its buffers
  // until the communication thread drops it, a moment after Work::wait returns. zero1's
  // one lasting buffer (the all-gather's input, 4 x S) is there at least.
  if (scenario == "zero1" && communication < 4 * shards) expect("communication", communication, 4 * shards);
  expect("optimizer state after the step", state, 8 * shards);
  std::printf("rank %d/%d (%s): %s memory: %lld parameters (%lld padded), parameters held "
              "%lld B (peak %lld B), gradients %lld B, optimizer state %lld B = 8 x %lld "
              "(DDP's: %lld B)\n",
              rank, world, group.backend_name().c_str(), scenario.c_str(),
              static_cast<long long>(numel), static_cast<long long>(padded),
              static_cast<long long>(parameters), static_cast<long long>(parameters_peak),
              static_cast<long long>(gradients), static_cast<long long>(state),
              static_cast<long long>(shards), static_cast<long long>(8 * numel));
  std::fflush(stdout);
  return failures;
}

// The parts' rows, one part after the other: (sum of rows, ...).
Tensor rows_of(const std::vector<Tensor>& parts) {
  std::int64_t rows = 0;
  for (const Tensor& p : parts) rows += p.size(0);
  Shape shape = parts[0].shape();
  shape[0] = rows;
  Tensor out = empty(shape, TensorOptions{.dtype = parts[0].dtype(), .device = parts[0].device()});
  std::int64_t first = 0;
  for (const Tensor& p : parts) {
    out.narrow(0, first, p.size(0)).copy_(p);
    first += p.size(0);
  }
  return out;
}

// Gradient accumulation: K micro-batches per step (the first K-1 under no_sync, each
// loss / K) against one step of plain DDP over the same rows at once, for 5 steps of
// AdamW, with each of zero1 (DDP's no_sync), zero2 and fsdp. K = 2 at 2 and 3 ranks, 3 at
// 4 (the 12 rows of a step split into K x W micro-batches). The mean of the K
// micro-batches' mean losses is the mean loss over their rows, so the gradients are equal
// up to the order of the sums: Note [The sharded tolerance]. Returns the failed checks.
int check_accumulation(const std::string& scenario, const Data& data,
                       const test::RankArgs& args, ProcessGroup& group) {
  const int world = group.size(), rank = group.rank();
  const std::int64_t k = 6 % world == 0 ? 2 : 3;
  const std::int64_t micro = kGlobalBatch / (k * world);
  auto reference = make_model(args.device);
  DistributedDataParallel ddp_reference(reference, group);
  std::unique_ptr<nn::Optimizer> plain = make_optimizer("adamw", reference->parameters());
  Sharded sharded(scenario, "adamw", args, group);
  int failures = 0;
  std::string line;
  for (int s = 0; s < kSteps; ++s) {
    std::vector<Tensor> xs, ys;  // this rank's micro-batch m: rows s*12 + (m*W + rank)*micro
    for (std::int64_t m = 0; m < k; ++m) {
      const std::int64_t first = s * kGlobalBatch + (m * world + rank) * micro;
      xs.push_back(data.inputs.narrow(0, first, micro).contiguous());
      ys.push_back(data.labels.narrow(0, first, micro).contiguous());
    }
    cross_entropy(ddp_reference(Variable(rows_of(xs))), rows_of(ys)).backward();
    ddp_reference.average_gradients();
    plain->step();
    plain->zero_grad();
    sharded.forward_backward_accumulated(xs, ys);
    sharded.step();
    const auto summoned = sharded.summon();
    const double difference = test::max_difference(sharded.model(), *reference);
    line += detail::concat(" ", difference);
    if (!(difference <= kTolerance)) {
      std::fprintf(stderr, "rank %d: %s accumulating %lld: step %d: parameters differ from "
                   "DDP's by %g > %g\n", rank, scenario.c_str(), static_cast<long long>(k), s + 1,
                   difference, kTolerance);
      ++failures;
    }
  }
  std::printf("rank %d/%d (%s): %s accumulating %lld micro-batches of %lld: max |sharded - ddp "
              "in one step| after steps 1..%d:%s\n", rank, world, group.backend_name().c_str(),
              scenario.c_str(), static_cast<long long>(k), static_cast<long long>(micro), kSteps,
              line.c_str());
  std::fflush(stdout);
  return failures;
}

// FSDP's order of gathers, frees and reduce-scatters over one training step of the three
// units, against the schedule of fully_sharded_data_parallel.hpp (fsdp_schedule.hpp).
// Returns the number of failed checks on this rank.
int check_order(const Data& data, const test::RankArgs& args, ProcessGroup& group) {
  const std::int64_t b = kGlobalBatch / group.size();
  Sharded sharded("fsdp", "sgd", args, group);
  FullyShardedDataParallel& fsdp = *sharded.fsdp();
  fsdp.record_events(true);
  const Tensor x = data.inputs.narrow(0, group.rank() * b, b).contiguous();
  const Tensor y = data.labels.narrow(0, group.rank() * b, b).contiguous();
  sharded.forward_backward(x, y);
  const std::vector<std::string>& expected = test::kThreeUnitStep;
  std::string got;
  for (const std::string& e : fsdp.events()) got += (got.empty() ? "" : ", ") + e;
  std::printf("rank %d/%d (%s): fsdp order: %s\n", group.rank(), group.size(),
              group.backend_name().c_str(), got.c_str());
  std::fflush(stdout);
  if (fsdp.events() == expected) return 0;
  std::fprintf(stderr, "rank %d: fsdp order: not the schedule of fully_sharded_data_parallel.hpp\n",
               group.rank());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  int rank = -1;
  try {
    const test::RankArgs args = test::parse_rank_args(argc, argv, "ch09_sharded");
    if (args.device.is_cuda() && cuda::device_count() == 0) return test::skip_without_gpu();
    DDP_CHECK(args.scenario == "all" || args.scenario == "zero1" || args.scenario == "zero2" ||
                  args.scenario == "fsdp",
              "ch09_sharded: unknown --scenario '", args.scenario, "' (all, zero1, zero2, fsdp)");
    DDP_CHECK(args.plant == "none" || args.plant == "no-all-gather" ||
                  args.plant == "shard-offset" || args.plant == "sum" ||
                  args.plant == "free-before-backward",
              "ch09_sharded: unknown --plant '", args.plant,
              "' (none, no-all-gather, shard-offset, sum, free-before-backward)");
    InitOptions init;
    init.backend = args.backend;
    init.timeout = std::chrono::seconds(60);
    auto group = init_process_group(init);
    rank = group->rank();
    Data data = make_data();
    data.inputs = data.inputs.to(args.device);
    data.labels = data.labels.to(args.device);
    int failures = 0;
    const std::vector<std::string> scenarios =
        args.scenario == "all" ? std::vector<std::string>{"zero1", "zero2", "fsdp"}
                               : std::vector<std::string>{args.scenario};
    for (const std::string& scenario : scenarios) {
      for (const char* optimizer : {"sgd", "adamw"}) {
        for (const double clip : {0.0, 0.25}) {
          failures += run(scenario, optimizer, clip, args, data, *group);
        }
      }
      if (args.plant == "none") failures += check_memory(scenario, data, args, *group);
      if (args.plant == "none" && scenario == "fsdp") failures += check_order(data, args, *group);
      if (args.plant == "none") failures += check_accumulation(scenario, data, args, *group);
    }
    group->barrier()->wait(std::chrono::seconds(60));
    group->destroy();
    if (failures > 0) {
      std::fprintf(stderr, "rank %d: FAIL: %d check(s) failed\n", rank, failures);
      return 1;
    }
    if (rank == 0) std::printf("PASS\n");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    return 1;
  }
}

// Chapter 06: SyncBatchNorm2d across forked ranks (tcp on 127.0.0.1) against the single-
// process batch_norm of chapter 03 on the concatenated batch -- outputs, input gradients,
// parameter gradients summed over ranks, running statistics -- and convert_sync_batchnorm.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "autograd/functions.hpp"
#include "dist/parallel/sync_batch_norm.hpp"
#include "dist/process_group_tcp.hpp"
#include "dist/tcp_store.hpp"
#include "nn/batch_norm2d.hpp"
#include "nn/resnet_mnist.hpp"
#include "tensor/ops.hpp"
#include "tensor/random.hpp"
#include "tests/ch05/fork_ranks.hpp"
#include "tests/ch05/local_store.hpp"

using namespace std::chrono_literals;
using ddp::Tensor;
using ddp::Variable;

namespace {

// The store runs in a process of its own (tests/ch05/local_store.hpp), so that ranks are
// forked from a parent without threads.
std::unique_ptr<ddp::test::ForkedStoreServer> start_server() {
  return std::make_unique<ddp::test::ForkedStoreServer>();
}

std::unique_ptr<ddp::ProcessGroupTcp> join(int port, int rank, int world, const char* prefix) {
  ddp::TCPStoreOptions o;
  o.port = port;
  o.timeout = 20s;
  auto store = std::make_shared<ddp::TCPStore>(o);
  return std::make_unique<ddp::ProcessGroupTcp>(store, rank, world, 20s, prefix);
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const auto x = a.to_vector<float>(), y = b.to_vector<float>();
  if (x.size() != y.size()) return INFINITY;
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i)
    worst = std::max(worst, std::fabs(double(x[i]) - y[i]));
  return worst;
}

// Rank r's shard is rows [first[r], first[r] + count[r]) of a batch of 8: uneven (1, 3, 4)
// on purpose, so that a rank weighting its statistics by anything but its count fails.
constexpr std::int64_t kBatch = 8, kChannels = 3;
const std::int64_t kFirst[] = {0, 1, 4};
const std::int64_t kCount[] = {1, 3, 4};

struct Inputs {
  Tensor x, weight, bias, probe;  // probe: the loss is sum(y * probe)
};

Inputs make_inputs() {
  ddp::Generator gen(4);
  // A large mean next to a small spread (5 +- 0.5), so E[x^2] - mean^2 would show.
  return {ddp::add(ddp::mul(ddp::randn({kBatch, kChannels, 4, 5}, gen), 0.5), 5.0),
          ddp::randn({kChannels}, gen), ddp::randn({kChannels}, gen),
          ddp::randn({kBatch, kChannels, 4, 5}, gen)};
}

// One rank: SyncBatchNorm on its shard; compares with the reference on the whole batch.
int sync_rank(int port, int rank, int world) {
  auto group = join(port, rank, world, "syncbn");
  const Inputs in = make_inputs();
  // The reference: chapter 03's batch_norm on all 8 images, in this process.
  Variable x_all(in.x.clone(), true), w_ref(in.weight.clone(), true), b_ref(in.bias.clone(), true);
  Tensor rm_ref = ddp::zeros({kChannels}), rv_ref = ddp::ones({kChannels});
  Variable y_all = ddp::batch_norm(x_all, w_ref, b_ref, rm_ref, rv_ref, true, 0.1, 1e-5);
  ddp::sum(ddp::mul(y_all, Variable(in.probe))).backward();

  // kFirst and kCount hold the 3-rank split only: index them at world 3 alone.
  const std::int64_t count = world == 3 ? kCount[rank] : kBatch / world;
  const std::int64_t start = world == 3 ? kFirst[rank] : rank * count;
  Variable x(in.x.narrow(0, start, count).contiguous(), true);
  Variable w(in.weight.clone(), true), b(in.bias.clone(), true);
  Tensor rm = ddp::zeros({kChannels}), rv = ddp::ones({kChannels});
  Variable y = ddp::sync_batch_norm(x, w, b, rm, rv, 0.1, 1e-5, *group);
  ddp::sum(ddp::mul(y, Variable(in.probe.narrow(0, start, count).contiguous()))).backward();
  // Parameter gradients are per rank (DDP sums them): their sum is the reference's.
  Tensor gw = w.grad().clone(), gb = b.grad().clone();
  group->all_reduce(gw)->wait();
  group->all_reduce(gb)->wait();

  const double tol = 2e-5;
  int bad = 0;
  auto check = [&](const char* what, const Tensor& got, const Tensor& want) {
    const double d = max_abs_diff(got, want);
    if (!(d <= tol)) {
      std::fprintf(stderr, "rank %d/%d: %s differs from one process by %g\n", rank, world, what, d);
      ++bad;
    }
  };
  check("y", y.data(), y_all.data().narrow(0, start, count));
  check("dx", x.grad(), x_all.grad().narrow(0, start, count));
  check("dweight (sum over ranks)", gw, w_ref.grad());
  check("dbias (sum over ranks)", gb, b_ref.grad());
  check("running_mean", rm, rm_ref);
  check("running_var", rv, rv_ref);
  return bad;
}

}  // namespace

TEST_CASE("SyncBatchNorm2d on 2, 3 and 4 ranks computes the batch norm of the whole batch",
          "[syncbn]") {
  for (const int world : {2, 3, 4}) {
    CAPTURE(world);
    auto server = start_server();
    const int port = server->port();
    const auto codes =
        ddp::test::run_forked(world, [&](int r) { return sync_rank(port, r, world); });
    for (int code : codes) CHECK(code == 0);
  }
}

TEST_CASE("SyncBatchNorm2d's input gradient passes a finite-difference check across ranks",
          "[syncbn]") {
  // The analytic dx of rank 0 against central differences of the GLOBAL loss, sum over all
  // ranks of sum(y_r * probe_r): moving one of rank 0's inputs moves every rank's output
  // through the shared statistics, so every rank must recompute for each probe point.
  auto server = start_server();
  const int port = server->port();
  const auto codes = ddp::test::run_forked(2, [&](int rank) {
    auto group = join(port, rank, 2, "fd");
    const Inputs in = make_inputs();
    const Tensor xs = in.x.narrow(0, 4 * rank, 4).to(ddp::DType::Float32).contiguous();
    const Tensor probe = in.probe.narrow(0, 4 * rank, 4).contiguous();
    auto global_loss = [&](const Tensor& x) {
      Tensor rm, rv;
      Variable y = ddp::sync_batch_norm(Variable(x), Variable(in.weight), Variable(in.bias), rm, rv,
                                        0.1, 1e-5, *group);
      Tensor l = ddp::sum(ddp::mul(y.data(), probe)).reshape({1});
      group->all_reduce(l)->wait();
      return static_cast<double>(l.item<float>());
    };
    Variable x(xs.clone(), true);
    Tensor rm, rv;
    Variable y =
        ddp::sync_batch_norm(x, Variable(in.weight), Variable(in.bias), rm, rv, 0.1, 1e-5, *group);
    ddp::sum(ddp::mul(y, Variable(probe))).backward();
    const auto analytic = x.grad().to_vector<float>();
    int bad = 0;
    for (std::int64_t i = 0; i < 12; ++i) {  // 12 of rank 0's inputs, every 7th
      const std::int64_t k = i * 7;
      const float h = 1e-2f;
      std::vector<float> plus = xs.to_vector<float>(), minus = plus;
      if (rank == 0) {
        plus[k] += h;
        minus[k] -= h;
      }
      const Tensor xp = ddp::from_data(std::span<const float>(plus), xs.shape());
      const Tensor xm = ddp::from_data(std::span<const float>(minus), xs.shape());
      const double numeric = (global_loss(xp) - global_loss(xm)) / (2.0 * h);
      if (rank == 0 && std::fabs(numeric - analytic[k]) > 2e-2 * (1.0 + std::fabs(numeric))) {
        std::fprintf(stderr, "dx[%lld]: analytic %g, numeric %g\n", static_cast<long long>(k),
                     analytic[k], numeric);
        ++bad;
      }
    }
    return bad;
  });
  for (int code : codes) CHECK(code == 0);
}

TEST_CASE("convert_sync_batchnorm swaps every BatchNorm2d and keeps names, values and order",
          "[syncbn]") {
  auto server = start_server();
  auto group = join(server->port(), 0, 1, "convert");
  ddp::Generator g1(3), g2(3);
  ddp::nn::ResNetMnist plain(g1), model(g2);
  // Change a running statistic so that the copy of buffers is visible.
  ddp::Tensor rv = model.block2().shortcut()[1].state_dict()[3].second;
  rv.fill_(2.5);
  const auto before = model.state_dict();
  const auto names_before = model.named_parameters();
  CHECK(ddp::convert_sync_batchnorm(model, *group) == 9);  // bn, 2 x 3 blocks, 2 shortcuts
  CHECK(model.bn().describe() == "SyncBatchNorm2d(16, 1 ranks)");
  CHECK(model.block3().shortcut()[1].describe() == "SyncBatchNorm2d(64, 1 ranks)");
  const auto after = model.state_dict();
  REQUIRE(after.size() == before.size());
  for (std::size_t i = 0; i < after.size(); ++i) {
    CHECK(after[i].first == before[i].first);
    CHECK(max_abs_diff(after[i].second, before[i].second) == 0.0);
  }
  // The new layers are the ones that run: with one rank, a training forward equals the
  // plain model's (same statistics), and the parameters are new Variables.
  ddp::Generator data(5);
  const Tensor x = ddp::randn({4, 1, 28, 28}, data);
  CHECK(max_abs_diff(model(Variable(x)).data(), plain(Variable(x)).data()) < 1e-5);
  CHECK(!model.named_parameters()[1].second.same(names_before[1].second));
  CHECK(ddp::convert_sync_batchnorm(model, *group) == 0);  // nothing left to convert
}

// Chapter 06: the first DDP's gradient average (GradientSync::Flat and PerParameter) across
// forked ranks (tcp on 127.0.0.1), against one process that computes the mean loss of the
// whole batch: after average_gradients every rank must hold that process's gradients.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "autograd/functions.hpp"
#include "dist/parallel/distributed_data_parallel.hpp"
#include "dist/process_group_tcp.hpp"
#include "dist/tcp_store.hpp"
#include "nn/linear.hpp"
#include "nn/sequential.hpp"
#include "tensor/random.hpp"
#include "tests/ch05/fork_ranks.hpp"
#include "tests/ch05/local_store.hpp"

using namespace std::chrono_literals;
using namespace ddp;

namespace {

// Two layers, four parameters of different sizes (20, 4, 12, 3 floats): a gradient copied
// to or from the wrong place in the flat buffer lands in another parameter's values.
std::shared_ptr<nn::Sequential> make_model() {
  Generator gen(7);
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(std::make_shared<nn::Linear>(5, 4, true, gen));
  model->push_back(std::make_shared<nn::Linear>(4, 3, true, gen));
  return model;
}

constexpr std::int64_t kBatch = 12;  // the global batch: 6, 4 and 3 rows per rank

struct Batch {
  Tensor x, labels;
};

Batch global_batch() {
  Generator gen(11);
  std::vector<std::int64_t> labels(kBatch);
  for (std::int64_t i = 0; i < kBatch; ++i) labels[i] = (i * 7) % 3;
  return {randn({kBatch, 5}, gen), from_data(std::span<const std::int64_t>(labels), {kBatch})};
}

// One rank: DDP on its rows of the batch; 0 when every gradient is the reference's.
int average_rank(int port, int rank, int world, GradientSync sync) {
  TCPStoreOptions o;
  o.port = port;
  o.timeout = 20s;
  ProcessGroupTcp group(std::make_shared<TCPStore>(o), rank, world, 20s, "average");
  const Batch batch = global_batch();

  // The reference: one process, the mean loss over all kBatch rows.
  auto plain = make_model();
  cross_entropy((*plain)(Variable(batch.x)), batch.labels).backward();

  auto model = make_model();
  DDPOptions options;
  options.gradient_sync = sync;
  DistributedDataParallel ddp(model, group, options);
  const std::int64_t rows = kBatch / world;
  const Tensor x = batch.x.narrow(0, rank * rows, rows).contiguous();
  const Tensor labels = batch.labels.narrow(0, rank * rows, rows).contiguous();
  cross_entropy(ddp(Variable(x)), labels).backward();  // this rank's mean loss
  ddp.average_gradients();

  int bad = 0;
  const auto mine = model->named_parameters(), want = plain->named_parameters();
  for (std::size_t i = 0; i < mine.size(); ++i) {
    const auto got = mine[i].second.grad().to_vector<float>();
    const auto ref = want[i].second.grad().to_vector<float>();
    double worst = got.size() == ref.size() ? 0.0 : INFINITY;
    for (std::size_t k = 0; k < got.size() && k < ref.size(); ++k) {
      worst = std::max(worst, std::fabs(double(got[k]) - ref[k]));
    }
    if (!(worst <= 1e-6)) {
      std::fprintf(stderr, "rank %d/%d: the gradient of %s differs from one process by %g\n", rank,
                   world, mine[i].first.c_str(), worst);
      ++bad;
    }
  }
  return bad;
}

void check_average(GradientSync sync) {
  for (const int world : {2, 3, 4}) {
    CAPTURE(world);
    ddp::test::ForkedStoreServer server;
    const int port = server.port();
    const auto codes =
        ddp::test::run_forked(world, [&](int r) { return average_rank(port, r, world, sync); });
    for (int code : codes) CHECK(code == 0);
  }
}

}  // namespace

TEST_CASE("flat: 2, 3 and 4 ranks average to the gradient of one process on the whole batch",
          "[ddp][ex06.2]") {
  check_average(GradientSync::Flat);
}

TEST_CASE("per-parameter: 2, 3 and 4 ranks average to the gradient of one process", "[ddp]") {
  check_average(GradientSync::PerParameter);
}

// Chapter 09, the memory accounting (tensor/memory.hpp) as exact byte counts: a Linear
// layer's parameters, its gradients after backward, SGD's and AdamW's state, scopes,
// peaks, page-locked staging, and the budget's refusal. Counts are process-wide and
// other tests may hold tensors, so every check is a difference from a snapshot taken
// at the start of the test.
#include <catch2/catch.hpp>

#include <cstdlib>

#include "autograd/functions.hpp"
#include "nn/adamw.hpp"
#include "nn/linear.hpp"
#include "nn/sgd.hpp"
#include "tensor/memory.hpp"
#include "tensor/ops.hpp"
#include "tensor/random.hpp"

using Catch::Contains;
using ddp::memory::Category;
namespace memory = ddp::memory;

namespace {

std::int64_t live(Category c) { return memory::snapshot()[c].live; }

// Restores "no budget" however a test ends.
struct NoBudgetAfter {
  ~NoBudgetAfter() { memory::set_limit(std::nullopt); }
};

}  // namespace

TEST_CASE("memory: parameters, gradients and optimizer state in exact bytes",
          "[memory][ch09]") {
  const std::int64_t in = 37, out = 11, batch = 5;
  const std::int64_t numel = in * out + out;  // weight and bias
  const memory::Snapshot before = memory::snapshot();
  ddp::Generator gen(1);
  ddp::nn::Linear layer(in, out, /*bias=*/true, gen);
  CHECK(live(Category::Parameters) - before[Category::Parameters].live == 4 * numel);
  CHECK(live(Category::Activations) == before[Category::Activations].live);  // init's temporaries freed

  {
    ddp::Variable x(ddp::randn({batch, in}, gen));
    ddp::sum(layer.forward(x)).backward();
  }  // the graph and the input are gone: only the gradients stay
  CHECK(live(Category::Gradients) - before[Category::Gradients].live == 4 * numel);
  CHECK(live(Category::Activations) == before[Category::Activations].live);

  SECTION("AdamW keeps two moments per parameter: K = 8 bytes") {
    ddp::nn::AdamW adamw(layer.parameters(), {});
    CHECK(live(Category::OptimizerState) == before[Category::OptimizerState].live);  // lazily
    adamw.step();
    CHECK(live(Category::OptimizerState) - before[Category::OptimizerState].live == 8 * numel);
    CHECK(live(Category::Activations) == before[Category::Activations].live);  // temporaries freed
  }
  SECTION("SGD with momentum keeps one buffer per parameter: K = 4 bytes") {
    ddp::nn::SGD sgd(layer.parameters(), {.lr = 0.1, .momentum = 0.9});
    sgd.step();
    CHECK(live(Category::OptimizerState) - before[Category::OptimizerState].live == 4 * numel);
  }
  SECTION("zero_grad frees the gradients") {
    for (const ddp::Variable& p : layer.parameters()) p.zero_grad();
    CHECK(live(Category::Gradients) == before[Category::Gradients].live);
  }
}

TEST_CASE("memory: scopes, tags, peaks and staging buffers", "[memory][ch09]") {
  const memory::Snapshot before = memory::snapshot();
  SECTION("a scope sets the category of new storages, and nests") {
    CHECK(memory::current() == Category::Activations);
    {
      const memory::Scope comm(Category::Communication);
      const ddp::Tensor a = ddp::zeros({100});
      {
        const memory::Scope state(Category::OptimizerState);
        const ddp::Tensor b = ddp::zeros({50});
        CHECK(live(Category::OptimizerState) - before[Category::OptimizerState].live == 200);
      }
      CHECK(memory::current() == Category::Communication);
      CHECK(live(Category::Communication) - before[Category::Communication].live == 400);
    }
    CHECK(memory::current() == Category::Activations);
    CHECK(live(Category::Communication) == before[Category::Communication].live);
  }
  SECTION("tagging a view moves its whole storage") {
    const ddp::Tensor flat = ddp::zeros({64});
    memory::tag(flat.narrow(0, 8, 8), Category::Gradients);
    CHECK(live(Category::Gradients) - before[Category::Gradients].live == 256);
    CHECK(live(Category::Activations) == before[Category::Activations].live);
  }
  SECTION("the peak remembers a freed temporary until reset_peaks") {
    memory::reset_peaks();
    const std::int64_t base = memory::snapshot().total.live;
    { const ddp::Tensor temporary = ddp::zeros({1 << 18}); }  // 1 MiB
    const memory::Snapshot after = memory::snapshot();
    CHECK(after.total.live == base);
    CHECK(after.total.peak >= base + (1 << 20));
    CHECK(after[Category::Activations].peak >= before[Category::Activations].live + (1 << 20));
    memory::reset_peaks();
    CHECK(memory::snapshot().total.peak == base);
  }
  SECTION("a page-locked staging buffer counts as communication") {
    const auto staging = ddp::Storage::pinned_host(4096);
    CHECK(live(Category::Communication) - before[Category::Communication].live == 4096);
  }
}

TEST_CASE("memory: an allocation past the budget is refused, naming it", "[memory][ch09]") {
  const NoBudgetAfter restore;
  const std::int64_t held = memory::snapshot().total.live;
  memory::set_limit(held + 1000, "DDP_MEMORY_LIMIT_MB=1");
  const ddp::Tensor fits = ddp::zeros({250});  // exactly up to the budget
  {
    const memory::Scope state(Category::OptimizerState);
    CHECK_THROWS_WITH(ddp::zeros({10}),
                      Contains("memory budget exceeded: allocating 40 bytes") &&
                          Contains("of optimizer state") && Contains("DDP_MEMORY_LIMIT_MB=1") &&
                          Contains("held now: parameters"));
  }
  CHECK(memory::snapshot().total.live == held + 1000);  // the refused bytes were never counted
  memory::set_limit(std::nullopt);
  CHECK_NOTHROW(ddp::zeros({10}));
}

TEST_CASE("memory: DDP_MEMORY_LIMIT_MB is read as MiB, or refused naming it", "[memory][ch09]") {
  const char* saved = std::getenv("DDP_MEMORY_LIMIT_MB");
  const std::string restore = saved ? saved : "";
  ::unsetenv("DDP_MEMORY_LIMIT_MB");
  CHECK(!memory::limit_from_environment());
  ::setenv("DDP_MEMORY_LIMIT_MB", "512", 1);
  CHECK(memory::limit_from_environment() == std::int64_t{512} * 1024 * 1024);
  for (const char* bad : {"0", "-3", "1.5", "12MB", "lots"}) {
    ::setenv("DDP_MEMORY_LIMIT_MB", bad, 1);
    INFO(bad);
    CHECK_THROWS_WITH(memory::limit_from_environment(),
                      Contains("DDP_MEMORY_LIMIT_MB='") && Contains("positive whole number"));
  }
  if (saved) ::setenv("DDP_MEMORY_LIMIT_MB", restore.c_str(), 1); else ::unsetenv("DDP_MEMORY_LIMIT_MB");
}

TEST_CASE("memory: the table lists every category and the total", "[memory][ch09]") {
  memory::Snapshot s;
  s.by_category[static_cast<int>(Category::Parameters)] = {3 * 1048576, 3 * 1048576};
  s.by_category[static_cast<int>(Category::OptimizerState)] = {1048576 / 2, 1048576};
  s.total = {3 * 1048576 + 1048576 / 2, 4 * 1048576};
  const std::string table = memory::format_table(s);
  CHECK_THAT(table, Contains("parameters              3.00        3.00         3145728"));
  CHECK_THAT(table, Contains("optimizer state         0.50        1.00          524288"));
  CHECK_THAT(table, Contains("communication           0.00        0.00               0"));
  CHECK_THAT(table, Contains("total                   3.50        4.00         3670016"));
}

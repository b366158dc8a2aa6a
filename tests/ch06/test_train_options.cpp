// Chapter 06, ddp-train's data-parallel flags (tools/ddp_train/options.cpp): each reaches
// its field, bad values name the flag, and the batch rules: --batch-size is per rank (as
// in PyTorch), the default global batch of 128 must split evenly over the ranks.
#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include "tests/ch04_train/parse_options.hpp"
#include "tools/ddp_train/options.hpp"

using ddp::test::error_of;
using ddp::test::parse;
using ddp::train::per_rank_batch;
using ddp::train::TrainOptions;

TEST_CASE("ddp-train's data-parallel flags (chapter 06)", "[ch06][train]") {
  const TrainOptions o = parse({"--backend", "mpi", "--sync-bn", "--grad-sync", "per-parameter",
                                "--no-broadcast-buffers", "--check-sync", "10", "--schedule",
                                "constant", "--warmup-epochs", "0", "--global-batch-size", "96"});
  CHECK(o.backend == "mpi");
  CHECK(o.sync_bn);
  CHECK(o.grad_sync == "per-parameter");
  CHECK_FALSE(o.broadcast_buffers);
  CHECK(o.check_sync == 10);
  CHECK(o.schedule == "constant");
  CHECK(o.warmup_epochs == 0);
  CHECK(per_rank_batch(o, 3) == 32);
  for (const auto& [flag, value] :
       std::vector<std::pair<std::string, std::string>>{{"--backend", "gloo"},
                                                        {"--grad-sync", "buckets"},
                                                        {"--schedule", "linear"},
                                                        {"--check-sync", "-1"},
                                                        {"--global-batch-size", "0"}}) {
    INFO(flag << " '" << value << "'");
    CHECK_THAT(error_of({flag, value}),
               Catch::Contains(flag) && Catch::Contains("'" + value + "'"));
  }
  // --batch-size is per rank (PyTorch's meaning); the global batch must split evenly.
  CHECK(per_rank_batch(parse({"--batch-size", "48"}), 4) == 48);
  CHECK_THROWS_WITH(per_rank_batch(parse({}), 3),
                    Catch::Contains("a global batch of 128 images does not split evenly over 3 "
                                    "ranks (the default)"));
  CHECK_THROWS_WITH(per_rank_batch(parse({"--batch-size", "32", "--global-batch-size", "128"}), 2),
                    Catch::Contains("--batch-size 32 (per rank) x 2 ranks = 64, but "
                                    "--global-batch-size is 128"));
  CHECK(per_rank_batch(parse({"--batch-size", "32", "--global-batch-size", "128"}), 4) == 32);
}

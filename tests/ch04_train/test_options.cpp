// Chapter 04, ddp-train's command line (tools/ddp_train/options.cpp): the defaults are
// the recipe of bench/torch/ref_model.py, every flag reaches its field, and a bad value
// or an unknown flag throws ddp::Error naming the flag and the text it could not use.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "base/error.hpp"
#include "tests/ch04_train/parse_options.hpp"
#include "tools/ddp_train/options.hpp"

using ddp::train::per_rank_batch;
using ddp::train::TrainOptions;
using ddp::test::error_of;
using ddp::test::parse;

TEST_CASE("ddp-train defaults are the ref_model recipe", "[ch04][train]") {
  const TrainOptions o = parse({});
  CHECK(o.lr == 0.1);
  CHECK(o.momentum == 0.9);
  CHECK(o.weight_decay == 5e-4);
  // The batch: 128 over all ranks unless a flag says otherwise (chapter 06).
  CHECK(o.batch_size == 0);
  CHECK(o.global_batch_size == 0);
  CHECK(per_rank_batch(o, 1) == 128);
  CHECK(per_rank_batch(o, 2) == 64);
  CHECK(per_rank_batch(o, 4) == 32);
  CHECK(o.schedule == "cosine");
  CHECK(o.warmup_epochs == 1);
  CHECK(o.backend == "auto");
  CHECK_FALSE(o.sync_bn);
  CHECK(o.grad_sync == "bucketed");  // chapter 07's Reducer
  CHECK(o.bucket_cap_mb == 25.0);     // PyTorch's caps
  CHECK(o.first_bucket_mb == 1.0);
  CHECK_FALSE(o.find_unused_parameters);
  CHECK(o.broadcast_buffers);
  CHECK(o.check_sync == 0);
  CHECK(o.epochs == 5);
  CHECK(o.max_steps == 0);
  CHECK(o.seed == 0);
  CHECK(o.device == "auto");
  CHECK(o.threads == 0);
  CHECK(o.data.empty());
  CHECK(o.metrics.empty());
  CHECK(o.save.empty());
  CHECK(o.resume.empty());
  CHECK(o.progress == "auto");
  CHECK_FALSE(o.help);
}

TEST_CASE("ddp-train parses every flag into its field", "[ch04][train]") {
  const TrainOptions o = parse({"--data", "/tmp/mnist", "--epochs", "3", "--max-steps", "17",
                                "--batch-size", "64", "--lr", "0.05", "--momentum", "0.5",
                                "--weight-decay", "1e-3", "--seed", "18446744073709551615",
                                "--device", "cuda:1", "--threads", "4", "--metrics", "m.csv",
                                "--save", "ck.ddp", "--resume", "old.ddp", "--progress",
                                "lines"});
  CHECK(o.data == "/tmp/mnist");
  CHECK(o.epochs == 3);
  CHECK(o.max_steps == 17);
  CHECK(o.batch_size == 64);
  CHECK(o.lr == 0.05);
  CHECK(o.momentum == 0.5);
  CHECK(o.weight_decay == 1e-3);
  CHECK(o.seed == 18446744073709551615ULL);
  CHECK(o.device == "cuda:1");
  CHECK(o.threads == 4);
  CHECK(o.metrics == "m.csv");
  CHECK(o.save == "ck.ddp");
  CHECK(o.resume == "old.ddp");
  CHECK(o.progress == "lines");
  CHECK_FALSE(o.help);

  CHECK(parse({"--help"}).help);
  CHECK(parse({"-h"}).help);
  CHECK(parse({"--epochs", "2", "--help"}).help);
  // Zero is allowed where it means "none": no step limit, no momentum, no decay, lr 0.
  const TrainOptions zeros =
      parse({"--max-steps", "0", "--momentum", "0", "--weight-decay", "0", "--lr", "0"});
  CHECK(zeros.max_steps == 0);
  CHECK(zeros.momentum == 0.0);
  CHECK(zeros.weight_decay == 0.0);
  CHECK(zeros.lr == 0.0);
  // A later flag wins, as in most command lines.
  CHECK(parse({"--epochs", "2", "--epochs", "7"}).epochs == 7);
}

TEST_CASE("ddp-train rejects bad values, naming the flag and the text", "[ch04][train]") {
  struct Case {
    std::string flag, value;
  };
  const std::vector<Case> cases = {
      {"--epochs", "0"},         {"--epochs", "abc"},       {"--epochs", "2x"},
      {"--epochs", "-1"},        {"--epochs", "1.5"},       {"--epochs", ""},
      {"--max-steps", "-3"},     {"--batch-size", "0"},     {"--batch-size", "12 "},
      {"--batch-size", "99999999999999999999999"},          {"--lr", "fast"},
      {"--lr", "-0.1"},          {"--lr", "0.1.2"},         {"--momentum", "-1"},
      {"--weight-decay", "x"},   {"--seed", "-1"},          {"--seed", "0x10"},
      {"--threads", "0"},        {"--threads", "two"},      {"--threads", "4294967296"},
      {"--lr", "inf"},           {"--momentum", "nan"},     {"--weight-decay", "1e999"},
      {"--device", "gpu"},       {"--device", "cuda:"},     {"--device", "cuda:-1"},
      {"--progress", "fancy"},   {"--progress", "Bar"},     {"--progress", ""},
  };
  for (const Case& c : cases) {
    INFO(c.flag << " '" << c.value << "'");
    const std::string message = error_of({c.flag, c.value});
    CHECK_THAT(message, Catch::Contains(c.flag));
    CHECK_THAT(message, Catch::Contains("'" + c.value + "'"));
  }
}

TEST_CASE("ddp-train rejects unknown flags, stray words and a missing value",
          "[ch04][train]") {
  CHECK_THAT(error_of({"--learning-rate", "0.1"}),
             Catch::Contains("unknown flag '--learning-rate'"));
  CHECK_THAT(error_of({"--epoch", "2"}), Catch::Contains("'--epoch'"));
  CHECK_THAT(error_of({"train.csv"}), Catch::Contains("unexpected argument 'train.csv'"));
  CHECK_THAT(error_of({"-e", "2"}), Catch::Contains("'-e'"));
  CHECK_THAT(error_of({"--epochs"}), Catch::Contains("--epochs needs a value"));
  CHECK_THAT(error_of({"--lr", "0.1", "--save"}), Catch::Contains("--save needs a value"));
  CHECK(error_of({"--epochs", "2"}).empty());
  CHECK_THROWS_AS(parse({"--nope", "1"}), ddp::Error);
  // The name is checked before a value is looked for.
  CHECK_THAT(error_of({"--bogus"}), Catch::Contains("unknown flag '--bogus'"));
  CHECK_THAT(error_of({"--nope=1"}), Catch::Contains("unknown flag '--nope'"));
}

TEST_CASE("ddp-train takes --flag=value as argparse does", "[ch04][train]") {
  const auto o = parse({"--epochs=3", "--lr=0.05", "--device=cpu", "--save=a=b.ckpt"});
  CHECK(o.epochs == 3);
  CHECK(o.lr == 0.05);
  CHECK(o.device == "cpu");
  CHECK(o.save == "a=b.ckpt");  // only the first '=' splits
  CHECK_THAT(error_of({"--epochs=x"}), Catch::Contains("--epochs expects a number >= 1, got 'x'"));
  CHECK_THAT(error_of({"--epochs="}), Catch::Contains("--epochs expects a number >= 1, got ''"));
}

// Chapter 07, ddp-train's --trace and --width (tools/ddp_train/options.cpp): each reaches
// its field, bad values name the flag; and the file each rank writes for --trace.
#include <catch2/catch.hpp>

#include <string>

#include "tests/ch04_train/parse_options.hpp"
#include "tools/ddp_train/options.hpp"

TEST_CASE("ddp-train's --trace and --width, and each rank's trace file", "[ch07][train]") {
  using ddp::test::error_of;
  using ddp::test::parse;
  const ddp::train::TrainOptions o = parse({"--trace", "run.json", "--width", "4"});
  CHECK(o.trace == "run.json");
  CHECK(o.width == 4);
  CHECK(parse({}).width == 1);
  CHECK(parse({}).trace.empty());
  CHECK_THAT(error_of({"--width", "0"}), Catch::Contains("--width") && Catch::Contains("'0'"));
  CHECK_THAT(error_of({"--width", "1.5"}), Catch::Contains("'1.5'"));
  CHECK_THAT(error_of({"--trace"}), Catch::Contains("--trace needs a value"));
  using ddp::train::trace_file_for_rank;
  CHECK(trace_file_for_rank("run.json", 0, 1) == "run.json");
  CHECK(trace_file_for_rank("run.json", 1, 2) == "run.rank1.json");
  CHECK(trace_file_for_rank("out/run.v2.json", 3, 4) == "out/run.v2.rank3.json");
  CHECK(trace_file_for_rank("run", 0, 2) == "run.rank0");
  CHECK(trace_file_for_rank("out.d/run", 1, 2) == "out.d/run.rank1");
  CHECK(trace_file_for_rank("out/.trace", 1, 2) == "out/.trace.rank1");
}

TEST_CASE("ddp-train's Reducer flags reach their fields", "[ch07][train]") {
  using ddp::test::error_of;
  using ddp::test::parse;
  const ddp::train::TrainOptions o =
      parse({"--grad-sync", "bucketed", "--bucket-cap-mb", "0.25", "--first-bucket-mb=2",
             "--find-unused-parameters", "--print-buckets"});
  CHECK(o.grad_sync == "bucketed");
  CHECK(o.bucket_cap_mb == 0.25);
  CHECK(o.first_bucket_mb == 2.0);
  CHECK(o.find_unused_parameters);
  CHECK(o.print_buckets);
  CHECK_FALSE(parse({}).print_buckets);
  CHECK(parse({"--grad-sync", "flat"}).grad_sync == "flat");
  CHECK_THAT(error_of({"--bucket-cap-mb", "0"}), Catch::Contains("--bucket-cap-mb"));
  CHECK_THAT(error_of({"--first-bucket-mb", "-1"}), Catch::Contains("--first-bucket-mb"));
  CHECK_THAT(error_of({"--grad-sync", "ring"}),
             Catch::Contains("bucketed, flat or per-parameter"));
}

// ddp-train's --comm-hook flag (chapter 07): parsed, defaulted, refused when misspelt.
#include <catch2/catch.hpp>

#include "tests/ch04_train/parse_options.hpp"

using namespace ddp;
using test::error_of;
using test::parse;

TEST_CASE("ddp-train's --comm-hook picks the Reducer's hook", "[comm_hook][train]") {
  CHECK(parse({}).comm_hook == "all-reduce");
  CHECK(parse({"--comm-hook", "bf16"}).comm_hook == "bf16");
  CHECK(parse({"--comm-hook=all-reduce"}).comm_hook == "all-reduce");
  CHECK_THAT(error_of({"--comm-hook", "fp16"}),
             Catch::Contains("--comm-hook") && Catch::Contains("'fp16'"));
}

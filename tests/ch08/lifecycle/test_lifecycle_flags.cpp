// Chapter 08, the command-line side of a run's life: ddp-train's --timeout and --resume
// auto, ddprun's --max-restarts, and the exit codes both document in --help (the codes
// that job scripts and ddprun act on, base/exit_codes.hpp).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "base/exit_codes.hpp"
#include "tests/ch04_train/parse_options.hpp"
#include "tools/ddprun/options.hpp"

using Catch::Contains;
using ddp::test::error_of;
using ddp::test::parse;

namespace {

ddp::run::Options parse_ddprun(const std::vector<std::string>& args) {
  std::vector<const char*> argv{"ddprun"};
  for (const auto& a : args) argv.push_back(a.c_str());
  return ddp::run::parse_options(static_cast<int>(argv.size()), argv.data());
}

}  // namespace

TEST_CASE("ddp-train --timeout: seconds for the rendezvous and every collective") {
  CHECK(parse({}).timeout_s == 300);
  CHECK(parse({"--timeout", "10"}).timeout_s == 10);
  CHECK(parse({"--timeout=1"}).timeout_s == 1);
  CHECK_THAT(error_of({"--timeout", "0"}), Contains("--timeout expects a number >= 1, got '0'"));
  CHECK_THAT(error_of({"--timeout", "ten"}), Contains("--timeout"));
}

TEST_CASE("ddp-train --resume auto needs --save") {
  CHECK(parse({"--resume", "auto", "--save", "run.ckpt"}).resume == "auto");
  CHECK(error_of({"--resume", "auto"}) ==
        "--resume auto needs --save PATH (the checkpoint it resumes from when it exists)");
  CHECK(parse({"--resume", "old.ckpt"}).resume == "old.ckpt");  // a path needs no --save
}

TEST_CASE("ddp-train --help documents the stop signals and the exit codes") {
  const std::string text = ddp::train::usage();
  CHECK_THAT(text, Contains("SIGUSR1"));
  CHECK_THAT(text, Contains("--resume auto"));
  CHECK_THAT(text, Contains("--timeout SECONDS"));
  CHECK_THAT(text, Contains("  " + std::to_string(ddp::kExitStopped) + "   stopped on request"));
  CHECK_THAT(text, Contains("  " + std::to_string(ddp::kExitUsage) + "    bad flags"));
}

TEST_CASE("ddprun --max-restarts") {
  CHECK(parse_ddprun({"--nproc-per-node", "2", "prog"}).max_restarts == 0);
  CHECK(parse_ddprun({"--nproc-per-node", "2", "--max-restarts", "3", "prog"}).max_restarts == 3);
  CHECK(parse_ddprun({"--nproc-per-node=2", "--max-restarts=0", "prog"}).max_restarts == 0);
  CHECK_THROWS_WITH(parse_ddprun({"--nproc-per-node", "2", "--max-restarts", "-1", "prog"}),
                    Contains("--max-restarts"));
  const std::string text = ddp::run::usage();
  CHECK_THAT(text, Contains("DDPRUN_RESTART_COUNT"));
  CHECK_THAT(text, Contains("SIGUSR1"));
  CHECK_THAT(text, Contains("  " + std::to_string(ddp::kExitStopped) + "       the ranks stopped"));
}

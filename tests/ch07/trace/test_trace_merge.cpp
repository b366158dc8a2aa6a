// Chapter 07, ddp-trace-merge (tools/trace_merge/): two ranks' files written by the
// recorder become one timeline on one time axis, each rank a process "rank R"; missing,
// corrupt and duplicate inputs are clear errors naming the file.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/error.hpp"
#include "base/trace.hpp"
#include "tools/trace_merge/json.hpp"
#include "tools/trace_merge/trace_merge.hpp"

namespace fs = std::filesystem;
namespace json = ddp::json;
namespace trace = ddp::trace;

namespace {

// A folder of this process's own: ctest runs each test case as a process, in parallel.
fs::path scratch() {
  const fs::path dir = fs::temp_directory_path() /
                       ("ddp_ch07_trace_merge." + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_text(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

// The events of a merged file whose name is `name`.
std::vector<const json::Value*> named(const json::Value& root, const std::string& name) {
  std::vector<const json::Value*> out;
  for (const json::Value& e : std::get<json::Array>(root.find("traceEvents")->v)) {
    const json::Value* n = e.find("name");
    if (n != nullptr && std::get<std::string>(n->v) == name) out.push_back(&e);
  }
  return out;
}

double number(const json::Value& e, const char* key) { return std::get<double>(e.find(key)->v); }

}  // namespace

TEST_CASE("two ranks' traces merge onto one time axis", "[ch07][trace]") {
  const fs::path dir = scratch();
  // Rank 1 starts recording 30 ms after rank 0; both record a span at their own t = 0.
  trace::start(0);
  { trace::Span s("forward", "step"); }
  trace::stop();
  trace::write((dir / "run.rank0.json").string());
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  trace::start(1);
  { trace::Span s("forward", "step"); }
  trace::stop();
  trace::write((dir / "run.rank1.json").string());

  const std::vector<int> ranks = ddp::trace_merge::merge_files(
      (dir / "run.json").string(),
      {(dir / "run.rank1.json").string(), (dir / "run.rank0.json").string()});
  CHECK(ranks == std::vector<int>{1, 0});
  const json::Value merged = json::parse(read_text(dir / "run.json"), "run.json");
  const auto steps = named(merged, "step");
  REQUIRE(steps.size() == 2);
  const json::Value* r0 = number(*steps[0], "pid") == 0 ? steps[0] : steps[1];
  const json::Value* r1 = number(*steps[0], "pid") == 1 ? steps[0] : steps[1];
  CHECK(number(*r1, "pid") == 1);
  // The reference: the files' own start times (the shift the merge must apply).
  const auto start_of = [&](const char* file) {
    return number(*json::parse(read_text(dir / file), file).find("otherData"), "start_unix_us");
  };
  const double shift = start_of("run.rank1.json") - start_of("run.rank0.json");
  CHECK(shift >= 30'000.0);
  const auto own_ts = [&](const char* file) {
    return number(*named(json::parse(read_text(dir / file), file), "step")[0], "ts");
  };
  CHECK(number(*r0, "ts") == Approx(own_ts("run.rank0.json")));
  CHECK(number(*r1, "ts") == Approx(own_ts("run.rank1.json") + shift));
  // Each rank a process named "rank R"; the recorder's own process names replaced.
  const auto processes = named(merged, "process_name");
  REQUIRE(processes.size() == 2);
  for (const json::Value* p : processes) {
    const double pid = number(*p, "pid");
    CHECK(std::get<std::string>(p->find("args")->find("name")->v) ==
          (pid == 0 ? "rank 0" : "rank 1"));
  }
  CHECK(named(merged, "thread_name").size() == 2);  // "main" of each rank, kept
  fs::remove_all(dir);
}

TEST_CASE("ddp-trace-merge refuses missing, corrupt and duplicate inputs", "[ch07][trace]") {
  const fs::path dir = scratch();
  const std::string out = (dir / "out.json").string();
  const std::string missing = (dir / "missing.json").string();
  CHECK_THROWS_WITH(ddp::trace_merge::merge_files(out, {missing}),
                    Catch::Contains("cannot open " + missing));
  const fs::path cut = dir / "cut.json";  // a file cut short (a rank killed mid-write)
  write_text(cut, "{\"traceEvents\":[\n{\"ph\":\"X\",\"pid\":0,\"ts\":1.5");
  CHECK_THROWS_WITH(ddp::trace_merge::merge_files(out, {cut.string()}),
                    Catch::Contains(cut.string() + ": not valid JSON at byte 43: expected '}', "
                                                   "found the end of the file"));
  const fs::path other = dir / "other.json";
  write_text(other, "{\"events\":[]}");
  CHECK_THROWS_WITH(ddp::trace_merge::merge_files(out, {other.string()}),
                    Catch::Contains("is not a Chrome trace"));
  const fs::path a = dir / "a.json", b = dir / "b.json";
  write_text(a, "{\"traceEvents\":[],\"otherData\":{\"rank\":2,\"start_unix_us\":5}}");
  write_text(b, "{\"traceEvents\":[],\"otherData\":{\"rank\":2,\"start_unix_us\":7}}");
  CHECK_THROWS_WITH(ddp::trace_merge::merge_files(out, {a.string(), b.string()}),
                    Catch::Contains("are both rank 2"));
  fs::remove_all(dir);
}

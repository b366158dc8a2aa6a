// ddp-trace-merge: the per-rank timelines of one run -> one file, or a picture. Chapter 07.
//
//   ddprun --nproc-per-node 2 ddp-train --trace run.json   # run.rank0.json, run.rank1.json
//   ddp-trace-merge run.json run.rank0.json run.rank1.json # open run.json in ui.perfetto.dev
//   ddp-trace-merge --svg run.svg run.rank0.json run.rank1.json  # or in any browser, offline
//   ddp-trace-merge --metrics-svg run-metrics.svg run.csv  # ddp-train --metrics as curves
//
// How the ranks are put on one time axis: trace_merge.hpp; the pictures: timeline_svg.hpp,
// metrics_svg.hpp.
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"
#include "tools/trace_merge/metrics_svg.hpp"
#include "tools/trace_merge/svg.hpp"
#include "tools/trace_merge/timeline_svg.hpp"
#include "tools/trace_merge/trace_merge.hpp"

namespace {

constexpr const char* kUsage =
    "usage: ddp-trace-merge OUT.json IN.json...\n"
    "       ddp-trace-merge --svg OUT.svg [--steps N] IN.json...\n"
    "       ddp-trace-merge --metrics-svg OUT.svg METRICS.csv\n"
    "Merges the trace files of a run's ranks (ddp-train --trace) into one timeline, each\n"
    "rank a process named \"rank R\", for ui.perfetto.dev.\n"
    "  --svg OUT.svg      instead, draw the merged timeline as a picture that any browser\n"
    "                     opens offline (no scripts, no fonts to fetch): the offline\n"
    "                     alternative to Perfetto on a login node. A row per rank: forward\n"
    "                     and backward per module, each bucket's all-reduce on a lane\n"
    "                     under them, the exposed communication shaded. The inputs may\n"
    "                     also be a file merged before (the launch scripts' trace)\n"
    "  --steps N          the window --svg draws: from the first forward to the end of\n"
    "                     step N (default 3); 0: the whole trace\n"
    "  --metrics-svg OUT.svg METRICS.csv\n"
    "                     draw ddp-train --metrics' file as loss and accuracy curves\n";

int usage_error(const std::string& what) {
  std::fprintf(stderr, "ddp-trace-merge: %s\n%s", what.c_str(), kUsage);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  std::string svg_out, metrics_out;
  ddp::trace_merge::TimelineOptions timeline;
  std::vector<std::string> files;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool takes_value = a == "--svg" || a == "--metrics-svg" || a == "--steps";
    if (takes_value && i + 1 == args.size()) return usage_error(a + " needs a value");
    if (a == "--svg") {
      svg_out = args[++i];
    } else if (a == "--metrics-svg") {
      metrics_out = args[++i];
    } else if (a == "--steps") {
      const std::string& v = args[++i];
      std::size_t used = 0;
      try {
        timeline.steps = std::stoi(v, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != v.size() || timeline.steps < 0) {
        return usage_error("--steps expects a whole number >= 0, got '" + v + "'");
      }
    } else if (a.size() > 1 && a[0] == '-') {
      return usage_error("unknown flag " + a);
    } else {
      files.push_back(a);
    }
  }
  bool steps_given = false;
  for (const std::string& a : args) steps_given = steps_given || a == "--steps";
  if (steps_given && svg_out.empty()) return usage_error("--steps N goes with --svg OUT.svg");
  try {
    if (!metrics_out.empty()) {
      if (!svg_out.empty() || files.size() != 1) {
        return usage_error("--metrics-svg OUT.svg takes one METRICS.csv and no --svg");
      }
      const auto rows = ddp::trace_merge::read_metrics(files[0]);
      ddp::svg::write_file(metrics_out, ddp::trace_merge::draw_metrics(rows, files[0]));
      std::printf("ddp-trace-merge: %zu epoch%s -> %s\n", rows.size(), rows.size() == 1 ? "" : "s",
                  metrics_out.c_str());
      return 0;
    }
    if (!svg_out.empty()) {
      if (files.empty()) return usage_error("--svg OUT.svg needs the trace files to draw");
      const ddp::trace_merge::Merged merged = ddp::trace_merge::merge(files);
      ddp::svg::write_file(svg_out, ddp::trace_merge::draw_timeline(merged, timeline));
      std::printf("ddp-trace-merge: %zu rank%s -> %s\n", merged.ranks.size(),
                  merged.ranks.size() == 1 ? "" : "s", svg_out.c_str());
      return 0;
    }
    if (files.size() < 2) return usage_error("expected OUT.json and at least one IN.json");
    const std::vector<std::string> inputs(files.begin() + 1, files.end());
    const std::vector<int> ranks = ddp::trace_merge::merge_files(files[0], inputs);
    std::printf("ddp-trace-merge: %zu rank%s -> %s\n", ranks.size(), ranks.size() == 1 ? "" : "s",
                files[0].c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}

// ddp-trace-merge: the per-rank timelines of one run -> one file. Chapter 07.
//
//   ddprun --nproc-per-node 2 ddp-train --trace run.json   # run.rank0.json, run.rank1.json
//   ddp-trace-merge run.json run.rank0.json run.rank1.json # open run.json in ui.perfetto.dev
//
// How the ranks are put on one time axis: trace_merge.hpp.
#include <cstdio>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "tools/trace_merge/trace_merge.hpp"

int main(int argc, char** argv) {
  const std::string first = argc > 1 ? argv[1] : "";
  if (argc < 3 || first == "--help" || first == "-h") {
    std::fprintf(argc < 3 && first != "--help" && first != "-h" ? stderr : stdout,
                 "usage: ddp-trace-merge OUT.json IN.json...\n"
                 "Merges the trace files of a run's ranks (ddp-train --trace) into one\n"
                 "timeline, each rank a process named \"rank R\".\n");
    return first == "--help" || first == "-h" ? 0 : 2;
  }
  try {
    const std::vector<std::string> inputs(argv + 2, argv + argc);
    const std::vector<int> ranks = ddp::trace_merge::merge_files(argv[1], inputs);
    std::printf("ddp-trace-merge: %zu rank%s -> %s\n", ranks.size(), ranks.size() == 1 ? "" : "s",
                argv[1]);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}

// ddp-trace-merge's work: several ranks' trace files -> one job timeline. Chapter 07.
//
// Each rank writes its own file (ddp-train --trace, base/trace.hpp) with times counted
// from its own trace::start(). The merge puts every rank on one time axis using the
// wall-clock time of start() that each file records ("otherData.start_unix_us"): exact
// on one node, as good as the clocks' synchronisation (NTP: about a millisecond) across
// nodes. Each rank becomes one process of the timeline, named "rank R", in rank order.
// It does not resample, filter or check that the ranks belong to the same job.
#pragma once

#include <string>
#include <vector>

#include "tools/trace_merge/json.hpp"

namespace ddp::trace_merge {

// The merged timeline: every input's events on one time axis (microseconds since the
// earliest start()), each event's pid its rank, and a process_name "rank R" per rank.
struct Merged {
  std::vector<std::string> inputs;  // the files, as given
  std::vector<int> ranks;           // the ranks merged, in the order of `inputs`
  json::Array events;
};

// Reads and merges `inputs`. ddp::Error naming the file for a missing or unreadable input,
// one that is not JSON or not a Chrome trace, an event whose pid, ts or dur is not a
// number, and two inputs holding the same rank. A file merged before (no otherData.rank,
// events of several pids) keeps its pids: each is a rank.
Merged merge(const std::vector<std::string>& inputs);

// Writes `merged` as a Chrome trace (for ui.perfetto.dev); ddp::Error naming `output` when
// it cannot be written.
void write_json(const std::string& output, const Merged& merged);

// merge + write_json. Returns the ranks merged, in the order of `inputs`.
std::vector<int> merge_files(const std::string& output, const std::vector<std::string>& inputs);

}  // namespace ddp::trace_merge

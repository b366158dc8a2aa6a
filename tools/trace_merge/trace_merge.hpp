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

namespace ddp::trace_merge {

// Reads `inputs`, writes the merged timeline to `output`. ddp::Error naming the file for
// a missing or unreadable input, one that is not JSON or not a Chrome trace, two inputs
// of the same rank, or an output that cannot be written. Returns the ranks merged, in
// the order of `inputs`.
std::vector<int> merge_files(const std::string& output, const std::vector<std::string>& inputs);

}  // namespace ddp::trace_merge

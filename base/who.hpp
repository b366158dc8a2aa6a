// How every message names ranks, so that one search of the logs finds all that was said
// about one: a rank ("rank 2"), with what is known of it ("rank 2 (node07, pid 4711)";
// in a group of 4: "rank 2/4 (tcp, node07)"), several ranks ("ranks 0 and 1"). The
// process group's who() (dist/process_group.hpp), and through it the Reducer's, Join's
// and SyncBatchNorm's, build on rank_label. Chapter 05.
#pragma once

#include <string>
#include <vector>

namespace ddp {

// "rank 2", or "rank 2 (node07, pid 4711)" with `about` (launch_env.hpp's process_label).
std::string rank_label(int rank, const std::string& about);
// "rank 2/4 (tcp, node07)": a rank of `size`, and what is known of it ("" for nothing).
std::string rank_label(int rank, int size, const std::string& about);

// "rank 2", "ranks 0 and 1", "ranks 0, 1, 3": ranks in the order given.
std::string name_ranks(const std::vector<int>& ranks);
// "[0, 2]": a list of ranks as written in code (a sub-group's, dist/new_group.hpp).
std::string list_ranks(const std::vector<int>& ranks);

}  // namespace ddp

// all_gather_text: every rank's string, in rank order, over any process group. Two
// all_gathers (collectives move tensors of one shape on every rank, a text is not one):
// the lengths, then the texts padded to the longest. For the checks that compare what
// the ranks hold: the model layouts (dist/parallel/replica_check.hpp, chapter 06) and the
// Reducer's bucket assignments (chapter 07).
#pragma once

#include <string>
#include <vector>

#include "dist/process_group.hpp"

namespace ddp {

// Every rank's `text`, in rank order. A collective: every rank calls it. `device`: where
// the group moves tensors (nccl: the rank's GPU).
std::vector<std::string> all_gather_text(ProcessGroup& group, const std::string& text,
                                         Device device = Device::cpu());

}  // namespace ddp

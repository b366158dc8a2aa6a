// ddp::new_group: a process group of some of a group's ranks, as PyTorch's
// torch.distributed.new_group(ranks). Chapter 05.
//
//   auto pair = ddp::new_group(*world, {2, 3});  // every rank of `world` calls this
//   if (pair->rank() >= 0) pair->all_reduce(t)->wait();  // ranks 2 and 3 only
//
// Every rank of the parent calls it, with the same list, in the same order relative to
// the parent's collectives and its other new_group calls (as in PyTorch); it checks that
// with one small all_gather on the parent and names a rank whose list differs. The list
// holds ranks of the parent, sorted and unique (PyTorch sorts silently; here rank i of
// the sub-group is ranks[i], so the order is checked instead). The sub-group shares the
// parent's store and timeout(): tcp builds a ring of its members under the store prefix
// "<parent's>/group<N>" (N counts the parent's new_group calls), mpi splits the
// communicator (MPI_Comm_split) and runs on the parent's communication thread, nccl
// splits the communicator (ncclCommSplit). Its collectives involve only its members: the
// others may meanwhile run collectives elsewhere, on another sub-group too. A rank
// outside the list gets a stand-in whose rank() is -1 and whose collectives throw, naming
// the group. destroy() ends the sub-group alone, never its parent; end sub-groups before
// the parent.
#pragma once

#include <memory>
#include <vector>

#include "dist/process_group.hpp"

namespace ddp {

// Throws ddp::Error, on every rank, for an empty list, a rank out of range, a list not
// sorted or with a rank twice (naming the list and what was expected), or when the
// ranks passed different lists (naming who passed what).
std::unique_ptr<ProcessGroup> new_group(ProcessGroup& parent, const std::vector<int>& ranks);

}  // namespace ddp

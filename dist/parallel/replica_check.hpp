// Are all ranks holding the same model? Two checks DDP runs across its process group.
// Chapter 06.
//
// check_same_model (at DDP's construction): the same parameters and buffers, by name,
// dtype and shape, in the same order. A rank built with another width or depth would
// otherwise all-reduce gradients of a different layout, which fails far from the cause
// or, worse, does not fail. check_parameters_in_sync (every N steps, --check-sync N):
// the same parameter VALUES, compared by a 64-bit hash per rank. DDP keeps replicas
// identical by construction (same start, same averaged gradient, same update); a rank
// that drifts means a bug or a fault, and the sooner it is named, the cheaper.
// Both throw ddp::Error on EVERY rank (they exchange what they found, so no rank waits
// for one that has given up), naming the ranks that disagree.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dist/process_group.hpp"
#include "nn/module.hpp"

namespace ddp {

// One line per parameter, then one per buffer: "parameter fc.weight float32 (10, 64)".
std::vector<std::string> describe_replica(const nn::Module& module);

// Throws when some rank's describe_replica() differs from rank 0's, e.g.
//   DistributedDataParallel: rank 1 holds a different model than rank 0 (4 parameters and
//   buffers on rank 0): first difference at entry 3: rank 0 has 'parameter 1.weight
//   float32 (2, 8)', rank 1 has 'parameter 1.weight float32 (3, 8)'
// `who` names the caller in the error ("DistributedDataParallel", "ShardedDataParallel").
void check_same_model(const nn::Module& module, ProcessGroup& group,
                      std::string_view who = "DistributedDataParallel");

// FNV-1a over the bytes of every parameter, in order (buffers are left out: without
// broadcast_buffers they may differ by design).
std::uint64_t parameter_hash(const nn::Module& module);

// Throws when the ranks' parameter_hash() values differ, naming the ranks that disagree
// with the majority (rank 0's value breaks a tie) and `step`.
void check_parameters_in_sync(const nn::Module& module, ProcessGroup& group, std::int64_t step);

}  // namespace ddp

// The schedule of fully_sharded_data_parallel.hpp for a model of three units, as FSDP's
// recorded events name it (record_events): what test_fsdp_order.cpp (one rank) and
// sharded_main.cpp (2 to 4 ranks) expect of one training step. Chapter 09.
#pragma once

#include <string>
#include <vector>

namespace ddp::test {

inline const std::vector<std::string> kThreeUnitStep = {
    // Forward: u gathered (u+1 prefetched), u's ops, u freed; the last unit stays whole
    // for the backward, which needs it first.
    "gather 0", "gather 1", "free 0", "gather 2", "free 1",
    // Backward, last unit first: u gathered again (u-1 prefetched), u's ops, its gradients
    // reduce-scattered, u freed. At most two units are ever whole.
    "gather 1", "reduce-scatter 2", "free 2", "gather 0", "reduce-scatter 1", "free 1",
    "reduce-scatter 0", "free 0"};

}  // namespace ddp::test

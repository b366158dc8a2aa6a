// ddp::diagnose_desync: from the ranks' ledger tails (dist/parallel/ledger.hpp) to one
// plain-language diagnosis of a hang. Chapter 08.
//
// A pure function, so that every case is tested with hand-made tails
// (tests/ch08/ledger/test_desync_diagnosis.cpp): the watchdog (watchdog.hpp) gathers
// the tails through the store and prints what this returns. It reads only what the tails
// say: it cannot tell a slow rank from a hung one, nor see into a rank without a tail.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dist/parallel/ledger.hpp"

namespace ddp {

// Note [Reading the tails]
// In this order, the first that applies:
//   1. Two ranks recorded the same sequence number with different collectives (op,
//      dtype or count): they disagree, whatever else happened. "ranks 0 and 1 disagree
//      on all_reduce #5: rank 0 has 1,000 float32 (...), rank 1 has 2,000 float32 (...):
//      different bucket layouts?" Where the ops differ, the rank(s) out of step are named,
//      and the first earlier entry whose labels part ways ("step 5" against "step 4")
//      says where it went wrong.
//   2. Otherwise the ranks are in step but at different places: each is in a collective
//      (the oldest it has not seen finish) or between two. The ones furthest back are
//      behind: "rank 2 is in all_reduce #41 (step 17, bucket 0, 311,016 float32);
//      ranks 0, 1, 3 are in barrier #42 (end of epoch 1): rank 2 is behind".
//   3. All at the same place: nobody is behind ("... none is behind: the network, a hung
//      GPU, or a timeout too short?").
// Ranks without a tail are named first, with host and pid where `processes` knows them.
//
// tails: indexed by rank, one per rank of the group; nullopt where none arrived.
// processes: "node07, pid 4711" per rank, or empty (then only rank numbers are named).
std::string diagnose_desync(const std::vector<std::optional<ledger::Tail>>& tails,
                            const std::vector<std::string>& processes = {});

// ---- Step 2 of Note [Reading the tails]: where each rank is (exercise 08.1) ------------

// A place in the run: in entry #seq (key 2·seq, waiting) or past it, before the next
// (key 2·seq + 1, not waiting); before #1 (key 1, no entry) for a rank that called none.
// Keys sort in the order the run passes the places.
struct LedgerPlace {
  std::uint64_t key = 1;
  std::optional<ledger::Entry> entry;  // the entry waited in, or the last one finished
  bool waiting = false;
};

// A rank's place: the collective its tail waits in (Tail::waiting_in: the oldest entry
// not done), or else just past its last entry.
LedgerPlace place_of(const ledger::Tail& tail);

// The ranks that sent a tail, one group per place, the furthest back first (the first
// group is behind, if there are two or more); each group's ranks in increasing order, and
// its place that of any one of them (at one key they are in the same collective: step 1
// has ruled out different calls at one number).
struct RanksAtPlace {
  std::vector<int> ranks;
  LedgerPlace place;
};
std::vector<RanksAtPlace> ranks_by_place(const std::vector<std::optional<ledger::Tail>>& tails);

}  // namespace ddp

// Exercise 08.1: which rank is behind (tutorial/ch08_teardown/README.md#exercise-1).
// Your copy: tutorial/ch08_teardown/mine/ledger_places.cpp (tools/exercise start 08.1).
// Write place_of and ranks_by_place as dist/parallel/desync_diagnosis.hpp describes them;
// check them with tools/exercise check 08.1.
#include "dist/parallel/desync_diagnosis.hpp"

#include <map>

#include "base/error.hpp"

namespace ddp {

LedgerPlace place_of(const ledger::Tail& tail) {
  (void)tail;
  DDP_FAIL("exercise 08.1 is not done yet: see tutorial/ch08_teardown/README.md#exercise-1");
}

std::vector<RanksAtPlace> ranks_by_place(const std::vector<std::optional<ledger::Tail>>& tails) {
  (void)tails;
  DDP_FAIL("exercise 08.1 is not done yet: see tutorial/ch08_teardown/README.md#exercise-1");
}

}  // namespace ddp

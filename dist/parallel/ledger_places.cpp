// place_of and ranks_by_place (see desync_diagnosis.hpp). This file holds exactly the two
// functions of exercise 08.1: the exercise build links the participant's copy in its place
// (tutorial/EXERCISES.md, Note [How an exercise replaces the reference]).
#include "dist/parallel/desync_diagnosis.hpp"

#include <map>

namespace ddp {

LedgerPlace place_of(const ledger::Tail& tail) {
  if (const ledger::Entry* w = tail.waiting_in()) return {2 * w->seq, *w, true};
  if (!tail.entries.empty()) {
    const ledger::Entry& last = tail.entries.back();
    return {2 * last.seq + 1, last, false};
  }
  return {};  // key 1: before #1
}

std::vector<RanksAtPlace> ranks_by_place(const std::vector<std::optional<ledger::Tail>>& tails) {
  std::map<std::uint64_t, RanksAtPlace> by_key;  // a map iterates its keys in order
  for (const auto& t : tails) {
    if (!t) continue;
    const LedgerPlace place = place_of(*t);
    RanksAtPlace& group = by_key[place.key];
    group.ranks.push_back(t->rank);  // tails are indexed by rank: increasing
    group.place = place;
  }
  std::vector<RanksAtPlace> places;
  for (auto& [key, group] : by_key) places.push_back(std::move(group));
  return places;
}

}  // namespace ddp

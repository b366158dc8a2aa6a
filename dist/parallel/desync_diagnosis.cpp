// diagnose_desync (see desync_diagnosis.hpp): Note [Reading the tails], step by step.
#include "dist/parallel/desync_diagnosis.hpp"

#include <algorithm>
#include <map>

#include "base/error.hpp"
#include "base/who.hpp"  // name_ranks, rank_label

namespace ddp {

using ledger::Entry;
using ledger::Op;
using ledger::Tail;

namespace {

const char* is_are(const std::vector<int>& ranks) { return ranks.size() == 1 ? "is" : "are"; }

// Ranks that recorded the same thing, with one of their entries to show.
struct Group {
  std::vector<int> ranks;
  Entry entry;
};

// "1,000 float32 (step 1, bucket 0)": the part of an entry two disagreeing ranks differ in.
std::string what_called(const Entry& e) {
  std::string s = e.op == Op::Barrier ? std::string("barrier")
                                      : ledger::with_commas(e.count) + " " + e.dtype;
  return e.label.empty() ? s : s + " (" + e.label + ")";
}

// ---- 1. Ranks that recorded different collectives under one sequence number ----

std::optional<std::string> disagreement(const std::vector<std::optional<Tail>>& tails) {
  std::map<std::uint64_t, std::vector<std::pair<int, const Entry*>>> by_seq;
  for (const auto& t : tails) {
    if (!t) continue;
    for (const Entry& e : t->entries) by_seq[e.seq].push_back({t->rank, &e});
  }
  for (const auto& [seq, calls] : by_seq) {
    std::vector<Group> groups;
    for (const auto& [rank, e] : calls) {
      auto same = std::find_if(groups.begin(), groups.end(),
                               [&](const Group& g) { return g.entry.same_call(*e); });
      if (same == groups.end()) {
        groups.push_back({{rank}, *e});
      } else {
        same->ranks.push_back(rank);
      }
    }
    if (groups.size() < 2) continue;
    // The most ranks first: the odd ones out come last.
    std::stable_sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) {
      return a.ranks.size() > b.ranks.size();
    });
    std::vector<int> all;
    for (const Group& g : groups) all.insert(all.end(), g.ranks.begin(), g.ranks.end());
    std::sort(all.begin(), all.end());

    const bool same_op = std::all_of(groups.begin(), groups.end(), [&](const Group& g) {
      return g.entry.op == groups[0].entry.op;
    });
    std::string s;
    if (same_op) {
      s = detail::concat(name_ranks(all), " disagree on ", to_string(groups[0].entry.op), " #",
                         seq, ": ");
      for (std::size_t i = 0; i < groups.size(); ++i) {
        s += detail::concat(i ? ", " : "", name_ranks(groups[i].ranks),
                            groups[i].ranks.size() == 1 ? " has " : " have ",
                            what_called(groups[i].entry));
      }
      const bool same_dtype = std::all_of(groups.begin(), groups.end(), [&](const Group& g) {
        return g.entry.dtype == groups[0].entry.dtype;
      });
      s += same_dtype ? ": different bucket layouts? (every rank must build the same model, "
                        "with the same parameters requiring gradients and the same bucket size)"
                      : ": different dtypes? (every rank must hold the same parameters in "
                        "the same dtype)";
      return s;
    }
    s = detail::concat("the ranks called different collectives as #", seq, ": ");
    for (std::size_t i = 0; i < groups.size(); ++i) {
      s += detail::concat(i ? "; " : "", name_ranks(groups[i].ranks), " called ",
                          describe(groups[i].entry));
    }
    // Where it went wrong: the first earlier entry whose labels differ between the odd
    // ranks and the others says which step one of them skipped or repeated.
    const Group& odd = groups.back();
    const Group& most = groups.front();
    s += detail::concat(": ", name_ranks(odd.ranks), " ", is_are(odd.ranks), " out of step");
    for (const auto& [earlier, earlier_calls] : by_seq) {
      if (earlier >= seq) break;
      const Entry* theirs = nullptr;
      const Entry* ours = nullptr;
      for (const auto& [rank, e] : earlier_calls) {
        if (rank == odd.ranks[0]) ours = e;
        if (rank == most.ranks[0]) theirs = e;
      }
      if (ours && theirs && ours->label != theirs->label) {
        return s + detail::concat(". Their labels part ways at #", earlier, ": ",
                                  name_ranks(odd.ranks), " recorded \"", ours->label, "\", ",
                                  name_ranks(most.ranks), " \"", theirs->label, "\": ",
                                  name_ranks(odd.ranks), " skipped or repeated collectives there");
      }
    }
    return s + detail::concat(" (", name_ranks(odd.ranks), " called ", to_string(odd.entry.op),
                              " where the others called ", to_string(most.entry.op), ")");
  }
  return std::nullopt;
}

// ---- 2. and 3. Where each rank is ----

std::string where(const std::vector<int>& ranks, const LedgerPlace& p) {
  if (p.waiting) return detail::concat(name_ranks(ranks), " ", is_are(ranks), " in ",
                                       describe(*p.entry));
  if (p.entry) {
    return detail::concat(name_ranks(ranks), " ", is_are(ranks),
                          " in no collective (the last, ", describe(*p.entry), ", finished)");
  }
  return detail::concat(name_ranks(ranks), " ", is_are(ranks), " in no collective (none called)");
}

}  // namespace

std::string diagnose_desync(const std::vector<std::optional<Tail>>& tails,
                            const std::vector<std::string>& processes) {
  std::string lost;
  std::vector<int> missing;
  for (std::size_t r = 0; r < tails.size(); ++r) {
    if (tails[r]) continue;
    missing.push_back(static_cast<int>(r));
    lost +=
        detail::concat(lost.empty() ? "" : "; ",
                       rank_label(static_cast<int>(r), r < processes.size() ? processes[r] : ""));
  }
  if (!lost.empty()) {
    lost += detail::concat(" sent no ledger: ",
                           missing.size() == 1 ? "it" : "they",
                           " died, hung outside a collective, or cannot reach the store. ");
  }
  if (missing.size() == tails.size()) return lost + "No rank sent a ledger: nothing to compare.";

  if (auto s = disagreement(tails)) return lost + *s;

  // Step 2: where each rank is (ranks_by_place, in ledger_places.cpp).
  const std::vector<RanksAtPlace> places = ranks_by_place(tails);
  if (places.size() == 1) {
    const auto& [ranks, place] = places.front();
    const std::string all = missing.empty() ? "all ranks" : name_ranks(ranks);
    if (!place.waiting) return lost + where(ranks, place);
    return lost + detail::concat(all, " ", is_are(ranks), " in ", describe(*place.entry),
                                 missing.empty()
                                     ? ": none is behind; it did not finish in time on any "
                                       "rank (a slow or broken network, a hung GPU, or a "
                                       "timeout too short for this collective?)"
                                     : ", waiting for the rank(s) that sent no ledger");
  }
  std::string s;
  for (const auto& [ranks, place] : places) {
    s += detail::concat(s.empty() ? "" : "; ", where(ranks, place));
  }
  const std::vector<int>& behind = places.front().ranks;
  return lost + s + detail::concat(": ", name_ranks(behind), " ", is_are(behind), " behind");
}

}  // namespace ddp

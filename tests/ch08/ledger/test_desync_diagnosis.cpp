// Chapter 08, the ledger and the desync diagnosis on hand-made tails: every case of Note
// [Reading the tails] (dist/parallel/desync_diagnosis.hpp), labels, and the text a tail
// travels as. No process group, no store: ctest -L ledger.
#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dist/parallel/desync_diagnosis.hpp"
#include "dist/parallel/ledger.hpp"
#include "base/error.hpp"
#include "base/who.hpp"

namespace {

using ddp::diagnose_desync;
using ddp::ledger::Entry;
using ddp::ledger::Op;
using ddp::ledger::Tail;
using Tails = std::vector<std::optional<Tail>>;

Entry all_reduce(std::uint64_t seq, std::int64_t count, std::string label, bool done) {
  return Entry{seq, Op::AllReduce, "float32", count, std::move(label), done};
}
Entry barrier(std::uint64_t seq, std::string label, bool done) {
  return Entry{seq, Op::Barrier, "", 0, std::move(label), done};
}
Tail tail(int rank, std::vector<Entry> entries) {
  return Tail{rank, "node0" + std::to_string(rank / 2), 1000 + rank, "timed out",
              std::move(entries)};
}

// Four ranks done with step 17's bucket 1 (#40) and bucket 0 (#41) ... in the usual run.
std::vector<Entry> finished_step_17() {
  return {all_reduce(40, 1000, "step 17, bucket 1", true),
          all_reduce(41, 311016, "step 17, bucket 0", true)};
}

}  // namespace

TEST_CASE("labels nest, join outermost first, and end with their scope") {
  using ddp::ledger::current_label;
  using ddp::ledger::Label;
  CHECK(current_label().empty());
  {
    Label step("step 17");
    CHECK(current_label() == "step 17");
    {
      Label bucket("bucket 0");
      CHECK(current_label() == "step 17, bucket 0");
      // Another thread has labels of its own.
      std::string there = "unset";
      std::thread([&] { there = current_label(); }).join();
      CHECK(there.empty());
    }
    CHECK(current_label() == "step 17");
  }
  CHECK(current_label().empty());
}

TEST_CASE("the ledger numbers collectives from 1, labels them, keeps the last kKept") {
  ddp::ledger::Ledger ledger;
  {
    ddp::ledger::Label label("end of epoch 1");
    CHECK(ledger.record(Op::Barrier, "", 0) == 1);
  }
  CHECK(ledger.record(Op::AllReduce, "float32", 7) == 2);
  ledger.mark_done(1);
  const auto t = ledger.tail(8);
  REQUIRE(t.size() == 2);
  CHECK(t[0].label == "end of epoch 1");
  CHECK(t[0].done);
  CHECK_FALSE(t[1].done);
  for (std::size_t i = 0; i < 2 * ddp::ledger::Ledger::kKept; ++i) {
    ledger.record(Op::AllReduce, "float32", 1);
  }
  CHECK(ledger.tail(1000).size() == ddp::ledger::Ledger::kKept);
  CHECK(ledger.tail(1).back().seq == 2 + 2 * ddp::ledger::Ledger::kKept);
}

TEST_CASE("a tail travels through the store as text and comes back whole") {
  Tail t = tail(3, {all_reduce(5, 1001, "step 1,\tbucket\n0", true), barrier(6, "", false)});
  t.reason = "line one\nline two";
  const Tail back = ddp::ledger::decode(ddp::ledger::encode(t));
  CHECK(back.rank == 3);
  CHECK(back.host == "node01");
  CHECK(back.pid == 1003);
  CHECK(back.reason == "line one line two");
  REQUIRE(back.entries.size() == 2);
  CHECK(back.entries[0].label == "step 1, bucket 0");
  CHECK(back.entries[0].count == 1001);
  CHECK(back.entries[0].done);
  CHECK(back.entries[1].op == Op::Barrier);
  CHECK_FALSE(back.entries[1].done);
  CHECK_THROWS_AS(ddp::ledger::decode("not a tail"), ddp::Error);
}

TEST_CASE("a tail with a bad number is a ddp::Error naming the field and its line") {
  const std::string rank_line = "rank 3\tnode01\t1003";
  const std::string entry_line = "5\tall_reduce\tfloat32\t1001\t1\tstep 1";
  const std::string good = ddp::ledger::encode(tail(3, {all_reduce(5, 1001, "step 1", true)}));
  REQUIRE(good == "ddp-ledger 1\n" + rank_line + "\nreason timed out\n" + entry_line + "\n");
  // One line spoilt at a time. std::stoi and its kin threw std::invalid_argument or
  // std::out_of_range here, or read "-5" as 2^64 - 5 and "1e3" as 1 without a word.
  struct Spoilt {
    const std::string& line;
    std::string bad_line;
    std::string says;
  };
  const Spoilt cases[] = {
      {rank_line, "rank x3\tnode01\t1003", "the rank \"x3\" is not a number"},
      {rank_line, "rank 9999999999\tnode01\t1003", "the rank \"9999999999\" is not a number"},
      {rank_line, "rank 3\tnode01\t", "the pid \"\" is not a number"},
      {entry_line, "-5\tall_reduce\tfloat32\t1001\t1\tstep 1",
       "the sequence number \"-5\" is not a number"},
      {entry_line, "5\tall_reduce\tfloat32\t1e3\t1\tstep 1", "the count \"1e3\" is not a number"},
      {entry_line, "5\tall_reduce\tfloat32\t1001\tyes\tstep 1",
       "the done flag \"yes\" is neither 0 nor 1"},
  };
  for (const Spoilt& c : cases) {
    std::string text = good;
    text.replace(text.find(c.line), c.line.size(), c.bad_line);
    CAPTURE(text);
    CHECK_THROWS_AS(ddp::ledger::decode(text), ddp::Error);
    CHECK_THROWS_WITH(ddp::ledger::decode(text),
                      Catch::Contains(c.says) && Catch::Contains("\"" + c.bad_line + "\""));
  }
}

TEST_CASE("numbers and entries read as a person writes them") {
  using ddp::ledger::with_commas;
  CHECK(with_commas(0) == "0");
  CHECK(with_commas(999) == "999");
  CHECK(with_commas(1000) == "1,000");
  CHECK(with_commas(311016) == "311,016");
  CHECK(with_commas(-1234567) == "-1,234,567");
  CHECK(describe(all_reduce(41, 311016, "step 17, bucket 0", false)) ==
        "all_reduce #41 (step 17, bucket 0, 311,016 float32)");
  CHECK(describe(barrier(42, "end of epoch 1", false)) == "barrier #42 (end of epoch 1)");
  CHECK(describe(barrier(3, "", false)) == "barrier #3");
  CHECK(ddp::name_ranks({2}) == "rank 2");
  CHECK(ddp::name_ranks({0, 1}) == "ranks 0 and 1");
  CHECK(ddp::name_ranks({0, 1, 3}) == "ranks 0, 1, 3");
}

TEST_CASE("a rank still in an earlier collective is behind", "[ex08.1]") {
  // Ranks 0, 1, 3 finished #41 and wait in the end-of-epoch barrier; rank 2 is in #41.
  Tails tails(4);
  for (int r : {0, 1, 3}) {
    auto e = finished_step_17();
    e.push_back(barrier(42, "end of epoch 1", false));
    tails[r] = tail(r, e);
  }
  auto slow = finished_step_17();
  slow.back().done = false;
  tails[2] = tail(2, slow);
  CHECK(diagnose_desync(tails) ==
        "rank 2 is in all_reduce #41 (step 17, bucket 0, 311,016 float32); ranks 0, 1, 3 are "
        "in barrier #42 (end of epoch 1): rank 2 is behind");
}

TEST_CASE("a rank between collectives is behind the ranks waiting in the next", "[ex08.1]") {
  Tails tails(3);
  tails[0] = tail(0, {all_reduce(7, 10, "step 3, bucket 0", true),
                      all_reduce(8, 20, "step 3, bucket 1", false)});
  tails[1] = tail(1, {all_reduce(7, 10, "step 3, bucket 0", true)});
  tails[2] = tails[0];
  tails[2]->rank = 2;
  CHECK(diagnose_desync(tails) ==
        "rank 1 is in no collective (the last, all_reduce #7 (step 3, bucket 0, 10 float32), "
        "finished); ranks 0 and 2 are in all_reduce #8 (step 3, bucket 1, 20 float32): rank 1 "
        "is behind");
}

TEST_CASE("place_of and ranks_by_place: keys in the order the run passes them", "[ex08.1]") {
  // Keys by hand: in #seq is 2·seq, past #seq (before the next) is 2·seq + 1, before #1 is 1.
  const Tail in_6 = tail(0, {all_reduce(5, 10, "a", true), all_reduce(6, 10, "b", false),
                             all_reduce(7, 10, "c", true)});  // #7 done, #6 not: waits in #6
  CHECK(ddp::place_of(in_6).key == 12);
  CHECK(ddp::place_of(in_6).waiting);
  CHECK(ddp::place_of(in_6).entry->label == "b");
  const Tail past_7 = tail(1, {all_reduce(6, 10, "b", true), all_reduce(7, 10, "c", true)});
  CHECK(ddp::place_of(past_7).key == 15);
  CHECK_FALSE(ddp::place_of(past_7).waiting);
  CHECK(ddp::place_of(past_7).entry->label == "c");
  const Tail none = tail(2, {});
  CHECK(ddp::place_of(none).key == 1);
  CHECK_FALSE(ddp::place_of(none).waiting);
  CHECK_FALSE(ddp::place_of(none).entry.has_value());
  const Tail in_7 = tail(3, {all_reduce(6, 10, "b", true), all_reduce(7, 10, "c", false)});
  CHECK(ddp::place_of(in_7).key == 14);

  // Six ranks, one without a tail: grouped by place, the furthest back first.
  Tails tails(6);
  tails[0] = in_6;
  tails[1] = past_7;
  tails[2] = none;
  tails[3] = in_7;
  tails[4] = past_7;
  tails[4]->rank = 4;
  tails[5] = std::nullopt;
  const auto places = ddp::ranks_by_place(tails);
  REQUIRE(places.size() == 4);
  CHECK(places[0].ranks == std::vector<int>{2});
  CHECK(places[0].place.key == 1);
  CHECK(places[1].ranks == std::vector<int>{0});
  CHECK(places[1].place.key == 12);
  CHECK(places[2].ranks == std::vector<int>{3});
  CHECK(places[2].place.key == 14);
  CHECK(places[3].ranks == std::vector<int>{1, 4});
  CHECK(places[3].place.key == 15);
  CHECK(places[3].place.entry->label == "c");
  CHECK(ddp::ranks_by_place(Tails(3)).empty());
}

TEST_CASE("a rank that called no collective is behind all others", "[ex08.1]") {
  Tails tails(2);
  tails[0] = tail(0, {});
  tails[1] = tail(1, {barrier(1, "start", false)});
  CHECK(diagnose_desync(tails) ==
        "rank 0 is in no collective (none called); rank 1 is in barrier #1 (start): rank 0 is "
        "behind");
}

TEST_CASE("ranks that disagree on a collective's size are named, with both sizes") {
  Tails tails(2);
  tails[0] = tail(0, {all_reduce(5, 1000, "step 1, bucket 0", false)});
  tails[1] = tail(1, {all_reduce(5, 2000, "step 1, bucket 0", false)});
  const std::string d = diagnose_desync(tails);
  CHECK(d.starts_with("ranks 0 and 1 disagree on all_reduce #5: rank 0 has 1,000 float32 (step "
                      "1, bucket 0), rank 1 has 2,000 float32 (step 1, bucket 0): different "
                      "bucket layouts?"));
}

TEST_CASE("a disagreement wins over who is behind, and the odd rank is named last") {
  // Rank 2 skipped step 4's two all-reduces: its #9 is step 5's bucket 0, whose sizes
  // match; at the end it is in the barrier while the others are still in step 5.
  Tails tails(3);
  for (int r : {0, 1}) {
    tails[r] = tail(r, {all_reduce(8, 100, "step 3, bucket 1", true),
                        all_reduce(9, 200, "step 4, bucket 0", true),
                        all_reduce(10, 100, "step 4, bucket 1", true),
                        all_reduce(11, 200, "step 5, bucket 0", false)});
  }
  tails[2] = tail(2, {all_reduce(8, 100, "step 3, bucket 1", true),
                      all_reduce(9, 200, "step 5, bucket 0", true),
                      all_reduce(10, 100, "step 5, bucket 1", true),
                      barrier(11, "end of epoch 0", false)});
  CHECK(diagnose_desync(tails) ==
        "the ranks called different collectives as #11: ranks 0 and 1 called all_reduce #11 "
        "(step 5, bucket 0, 200 float32); rank 2 called barrier #11 (end of epoch 0): rank 2 "
        "is out of step. Their labels part ways at #9: rank 2 recorded \"step 5, bucket 0\", "
        "ranks 0 and 1 \"step 4, bucket 0\": rank 2 skipped or repeated collectives there");
}

TEST_CASE("an early barrier, with labels in step, says which call met which") {
  Tails tails(3);
  for (int r : {0, 2}) {
    tails[r] = tail(r, {all_reduce(4, 100, "step 2, bucket 0", true),
                        all_reduce(5, 200, "step 2, bucket 1", false)});
  }
  tails[1] = tail(1, {all_reduce(4, 100, "step 2, bucket 0", true),
                      barrier(5, "step 2", false)});
  CHECK(diagnose_desync(tails) ==
        "the ranks called different collectives as #5: ranks 0 and 2 called all_reduce #5 "
        "(step 2, bucket 1, 200 float32); rank 1 called barrier #5 (step 2): rank 1 is out of "
        "step (rank 1 called barrier where the others called all_reduce)");
}

TEST_CASE("ranks without a tail are named first, with host and pid when known", "[ex08.1]") {
  Tails tails(3);
  tails[0] = tail(0, {all_reduce(3, 10, "", false)});
  tails[2] = tail(2, {all_reduce(3, 10, "", false)});
  const std::string d = diagnose_desync(tails, {"", "node07, pid 4711", ""});
  CHECK(d ==
        "rank 1 (node07, pid 4711) sent no ledger: it died, hung outside a collective, or "
        "cannot reach the store. ranks 0 and 2 are in all_reduce #3 (10 float32), waiting "
        "for the rank(s) that sent no ledger");
}

TEST_CASE("all ranks in the same collective: none is behind", "[ex08.1]") {
  Tails tails(2);
  tails[0] = tail(0, {barrier(1, "", false)});
  tails[1] = tail(1, {barrier(1, "", false)});
  CHECK(diagnose_desync(tails).starts_with("all ranks are in barrier #1: none is behind"));
  CHECK(diagnose_desync(Tails(2)).ends_with("No rank sent a ledger: nothing to compare."));
}

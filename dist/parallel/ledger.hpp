// ddp::ledger, the record of a rank's collectives: what it called, in which order, with
// what, and why (a label). Chapter 08.
//
// A watched group (dist/parallel/watchdog.hpp) writes one Entry per collective; when a
// collective hangs, the last few entries of every rank (their tails) go through the
// store to one place, and desync_diagnosis.hpp turns them into one sentence. Labels are
// set by the caller with a scope object, cheap enough for every bucket of every step:
//
//   ddp::ledger::Label step("step 17");       // the trainer
//   ...
//   ddp::ledger::Label bucket("bucket 0");    // the Reducer, inside the step's scope
//   group->all_reduce(grads);                 // recorded as "step 17, bucket 0"
//
// Labels live on the calling thread: a collective queued from another thread sees that
// thread's labels. This file keeps no tensors and talks to no store.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace ddp::ledger {

// ---- Labels ----------------------------------------------------------------------------

// While it lives, `text` is part of the label of every collective this thread calls.
// Nested labels join outermost first: "step 17, bucket 0". Not movable: a scope.
class Label {
 public:
  explicit Label(std::string text);
  ~Label();
  Label(const Label&) = delete;
  Label& operator=(const Label&) = delete;

 private:
  std::string text_;
};

// The labels of this thread's open scopes, joined ("" when none).
std::string current_label();

// ---- Entries ---------------------------------------------------------------------------

enum class Op { AllReduce, Broadcast, AllGather, ReduceScatter, Barrier };
const char* to_string(Op op);  // "all_reduce", ..., as the ProcessGroup calls them

// One collective as this rank called it. `dtype` and `count` describe the input (for
// barrier: "" and 0); `seq` counts a group's collectives from 1, in call order, the same
// on every rank that calls the same collectives.
struct Entry {
  std::uint64_t seq = 0;
  Op op = Op::Barrier;
  std::string dtype;      // "float32", "int64"
  std::int64_t count = 0; // elements
  std::string label;      // "step 17, bucket 0", or ""
  bool done = false;      // finished (successfully) as far as this rank knows

  // Whether two ranks called the same collective here: op, dtype and count agree (labels
  // may differ: they say why, not what).
  bool same_call(const Entry& other) const {
    return op == other.op && dtype == other.dtype && count == other.count;
  }
};

// "all_reduce #41 (step 17, bucket 0, 311,016 float32)"; "barrier #42 (end of epoch 1)".
std::string describe(const Entry& e);
// 311016 -> "311,016".
std::string with_commas(std::int64_t n);

// A rank's last entries, and who it is: what one rank publishes when a collective hangs.
struct Tail {
  int rank = -1;
  std::string host;
  std::int64_t pid = 0;
  std::string reason;          // why this rank gave up (its own words, one line)
  std::vector<Entry> entries;  // oldest first; the in-flight ones are not `done`

  // The oldest entry not done: the collective this rank is waiting in. Null when it is
  // between collectives.
  const Entry* waiting_in() const;
  // "rank 2 (node07, pid 4711)", or "rank 2" when host is unknown.
  std::string who() const;
};

// Text for the store, and back: one line per field, tabs between an entry's fields.
// Labels and reasons lose their tabs and newlines on the way. decode() throws ddp::Error
// on text that encode() did not make, naming the line and the field it could not read.
std::string encode(const Tail& tail);
Tail decode(const std::string& text);

// ---- The ledger ------------------------------------------------------------------------

// The entries of one group, thread-safe: the caller's thread records, the watchdog's
// marks done and reads tails. Keeps the last kKept entries.
class Ledger {
 public:
  static constexpr std::size_t kKept = 64;

  // Records a collective about to be issued, labelled with current_label(); returns its
  // sequence number.
  std::uint64_t record(Op op, std::string dtype, std::int64_t count);
  void mark_done(std::uint64_t seq);
  // The last `n` entries, oldest first.
  std::vector<Entry> tail(std::size_t n) const;
  // A copy of entry `seq`, while it is kept.
  std::optional<Entry> entry(std::uint64_t seq) const;

 private:
  mutable std::mutex mutex_;
  std::deque<Entry> entries_;
  std::uint64_t next_seq_ = 1;
};

}  // namespace ddp::ledger

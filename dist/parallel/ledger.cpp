// The ledger (see ledger.hpp): labels on a thread-local stack, entries in a bounded
// deque, and the text a tail travels as through the store.
#include "dist/parallel/ledger.hpp"

#include <sstream>

#include "dist/launch_env.hpp"  // process_label
#include "base/error.hpp"
#include "base/text.hpp"  // one_line, split, to_integer
#include "base/who.hpp"   // rank_label

namespace ddp::ledger {

// ==== Labels ==============================================================================

namespace {
// The open scopes of this thread, outermost first. Pointers into the Label objects, which
// outlive their entries here (a scope pops itself before it dies).
thread_local std::vector<const std::string*> open_labels;
}  // namespace

Label::Label(std::string text) : text_(std::move(text)) { open_labels.push_back(&text_); }

// Scopes end in reverse order of opening, so ours is the last one.
Label::~Label() { open_labels.pop_back(); }

std::string current_label() {
  std::string joined;
  for (const std::string* text : open_labels) {
    if (text->empty()) continue;
    if (!joined.empty()) joined += ", ";
    joined += *text;
  }
  return joined;
}

// ==== Entries =============================================================================

const char* to_string(Op op) {
  switch (op) {
    case Op::AllReduce: return "all_reduce";
    case Op::Broadcast: return "broadcast";
    case Op::AllGather: return "all_gather";
    case Op::ReduceScatter: return "reduce_scatter";
    case Op::Barrier: return "barrier";
  }
  return "?";
}

std::string with_commas(std::int64_t n) {
  const std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out = n < 0 ? "-" : "";
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string describe(const Entry& e) {
  std::string inside = e.label;
  if (e.op != Op::Barrier) {
    if (!inside.empty()) inside += ", ";
    inside += with_commas(e.count) + " " + e.dtype;
  }
  std::string s = detail::concat(to_string(e.op), " #", e.seq);
  return inside.empty() ? s : s + " (" + inside + ")";
}

const Entry* Tail::waiting_in() const {
  for (const Entry& e : entries) {
    if (!e.done) return &e;
  }
  return nullptr;
}

std::string Tail::who() const {
  return rank_label(rank, host.empty() ? "" : process_label(host, pid));
}

// ==== The text of a tail ==================================================================
//
//   ddp-ledger 1
//   rank <r>\t<host>\t<pid>
//   reason <text>
//   <seq>\t<op>\t<dtype>\t<count>\t<done 0|1>\t<label>      one line per entry

namespace {

constexpr const char* kMagic = "ddp-ledger 1";

Op op_named(const std::string& name) {
  for (Op op : {Op::AllReduce, Op::Broadcast, Op::AllGather, Op::ReduceScatter, Op::Barrier}) {
    if (name == to_string(op)) return op;
  }
  DDP_FAIL("ledger: unknown collective \"", name, "\" in a published tail");
}

// Field `what` of `line`, a whole number of type T, or a ddp::Error naming both.
template <typename T>
T number(const std::string& field, const char* what, const std::string& line) {
  const std::optional<T> value = to_integer<T>(field);
  DDP_CHECK(value.has_value(), "ledger: the ", what, " \"", field, "\" is not a number, in \"",
            line, "\" of a published tail");
  return *value;
}

}  // namespace

// one_line: a tab or newline in a host, reason or label would cut its line short.
std::string encode(const Tail& tail) {
  std::string s = detail::concat(kMagic, "\nrank ", tail.rank, "\t", one_line(tail.host), "\t",
                                 tail.pid, "\nreason ", one_line(tail.reason), "\n");
  for (const Entry& e : tail.entries) {
    s += detail::concat(e.seq, "\t", to_string(e.op), "\t", e.dtype, "\t", e.count, "\t",
                        e.done ? 1 : 0, "\t", one_line(e.label), "\n");
  }
  return s;
}

Tail decode(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  DDP_CHECK(std::getline(in, line) && line == kMagic, "ledger: a published tail does not start "
            "with \"", kMagic, "\"\nhint: ranks built from different versions of ddp.cpp?");
  Tail tail;
  DDP_CHECK(std::getline(in, line) && line.starts_with("rank "), "ledger: tail without a rank");
  const std::vector<std::string> who = split(line.substr(5), '\t');
  DDP_CHECK(who.size() == 3, "ledger: malformed rank line \"", line, "\"");
  tail.rank = number<int>(who[0], "rank", line);
  tail.host = who[1];
  tail.pid = number<std::int64_t>(who[2], "pid", line);
  DDP_CHECK(std::getline(in, line) && line.starts_with("reason "), "ledger: tail of rank ",
            tail.rank, " without a reason");
  tail.reason = line.substr(7);
  while (std::getline(in, line)) {
    const std::vector<std::string> f = split(line, '\t');
    DDP_CHECK(f.size() == 6, "ledger: malformed entry \"", line, "\" in the tail of rank ",
              tail.rank);
    Entry e;
    e.seq = number<std::uint64_t>(f[0], "sequence number", line);
    e.op = op_named(f[1]);
    e.dtype = f[2];
    e.count = number<std::int64_t>(f[3], "count", line);
    DDP_CHECK(f[4] == "0" || f[4] == "1", "ledger: the done flag \"", f[4],
              "\" is neither 0 nor 1, in \"", line, "\" of a published tail");
    e.done = f[4] == "1";
    e.label = f[5];
    tail.entries.push_back(std::move(e));
  }
  return tail;
}

// ==== The ledger ==========================================================================

std::uint64_t Ledger::record(Op op, std::string dtype, std::int64_t count) {
  Entry e{0, op, std::move(dtype), count, current_label(), false};
  std::lock_guard lock(mutex_);
  e.seq = next_seq_++;
  entries_.push_back(std::move(e));
  if (entries_.size() > kKept) entries_.pop_front();
  return entries_.back().seq;
}

void Ledger::mark_done(std::uint64_t seq) {
  std::lock_guard lock(mutex_);
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    if (it->seq == seq) {
      it->done = true;
      return;
    }
  }
}

std::vector<Entry> Ledger::tail(std::size_t n) const {
  std::lock_guard lock(mutex_);
  const std::size_t from = entries_.size() > n ? entries_.size() - n : 0;
  return {entries_.begin() + static_cast<std::ptrdiff_t>(from), entries_.end()};
}

std::optional<Entry> Ledger::entry(std::uint64_t seq) const {
  std::lock_guard lock(mutex_);
  for (const Entry& e : entries_) {
    if (e.seq == seq) return e;
  }
  return std::nullopt;
}

}  // namespace ddp::ledger

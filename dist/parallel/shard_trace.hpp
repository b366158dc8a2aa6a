// What the sharded wrappers record on chapter 07's timeline (base/trace.hpp): an instant
// per collective of a flat buffer as it is launched, "gather 2" or "reduce-scatter 0"
// (FSDP: the unit; ZeRO-2: the bucket; ZeRO-1: its one buffer), and FSDP's "free 2";
// shard_row draws one kind as the buffers' numbers. Chapter 09; tutorial/ch09_sharded's
// ch09_timeline draws them.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.hpp"  // detail::concat
#include "base/trace.hpp"

namespace ddp {

// Records "<what> <index>" while the trace records; costs a load and a branch otherwise.
void trace_shard_event(std::string_view what, std::size_t index);

// The instants of one kind ("gather", "reduce-scatter") as a row titled `title`, each drawn
// as its buffer's number (its last digit, past 9).
trace::InstantRow shard_row(std::string what, std::string title);

// While it lives, the main thread waits for buffer `index`'s collective: a "wait" span
// ('w' on the timeline, "exposed" in the summary), as the Reducer's waits are.
class TracedWait {
 public:
  TracedWait(std::string_view what, std::size_t index) {
    if (trace::enabled()) span_.emplace("wait", detail::concat("wait for ", what, " ", index));
  }

 private:
  std::optional<trace::Span> span_;
};

}  // namespace ddp

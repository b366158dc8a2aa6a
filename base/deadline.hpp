// deadline_after(timeout): the time point `timeout` from now, for the waits of dist/, and
// kDefaultTimeout, the timeout of a wait whose caller names none. Chapter 05.
// Every blocking call takes a timeout; a caller who means "no limit" passes
// something huge (std::chrono::milliseconds::max()), and now + timeout would then
// overflow into the past and expire at once. So a timeout of kNoDeadline or more is
// the clock's end: a wait that never expires by itself.
#pragma once

#include <chrono>

namespace ddp {

// How long a wait lasts when its caller names no timeout: a store call, Work::wait, the
// rendezvous (InitOptions), ddp-train --timeout. PyTorch waits 30 minutes (10 for NCCL);
// a job on one node needs far less, and a dead peer is noticed sooner.
inline constexpr std::chrono::milliseconds kDefaultTimeout = std::chrono::seconds(300);

inline constexpr std::chrono::milliseconds kNoDeadline = std::chrono::hours(24 * 365 * 100);

inline std::chrono::steady_clock::time_point deadline_after(std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  return timeout >= kNoDeadline ? Clock::time_point::max() : Clock::now() + timeout;
}

}  // namespace ddp

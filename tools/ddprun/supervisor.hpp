// The supervisor of ddprun: from the start of the ranks until the last has exited, it
// copies their output (prefixed), reaps them, and stops them all when one fails, when
// ddprun gets a signal, at --timeout, or when a second ddprun for this node knocks.
// Chapter 05 (failures, output), chapter 08 (stops on request, the node claim). Starting
// the ranks and starting them again (--max-restarts) are not its business (ddprun.cpp).
#pragma once

#include <chrono>
#include <vector>

#include "tools/ddprun/node_claim.hpp"
#include "tools/ddprun/options.hpp"
#include "tools/ddprun/rank_process.hpp"

namespace ddp::run {

using Clock = std::chrono::steady_clock;

// How one start of the ranks ended: ddprun's exit code (see usage()), and whether a
// rank failed on its own, the one ending that --max-restarts restarts. Not restarted: a
// signal sent to ddprun (the user or the batch system wants the job gone), --timeout
// (the job's time is up), ranks that exited with kExitStopped (they stopped on request).
struct Outcome {
  int exit_code = 0;
  bool rank_failed = false;
};

// The loop of a launcher: until every rank has exited, copy their output (prefixed),
// reap them, and react. The first rank to fail (non-zero exit other than kExitStopped,
// or a signal; kBlameWindow says which when several fail at once) makes every other rank
// get SIGTERM, then SIGKILL after kGracePeriod; the kForwarded signals sent to ddprun
// (read from `signal_fd`, signal_pipe.hpp) are passed on the same way, with
// kStopGracePeriod. A second ddprun knocking at `claim` stops the ranks too (Note [A
// launcher started twice]). `started`: when the job (its first start) began, for
// --timeout. The steps are Supervisor's member functions, in supervisor.cpp.
Outcome supervise(std::vector<Rank>& ranks, int signal_fd, const NodeClaim& claim,
                  const Options& o, int port, Clock::time_point started);

}  // namespace ddp::run

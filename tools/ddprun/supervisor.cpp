// The supervisor of ddprun (see supervisor.hpp). Chapter 05; the stops on request and the
// node claim, chapter 08. Read Supervisor::run first: one turn of its loop calls the
// steps below in order (wait, copy output, forward signals, a knock, reap, blame,
// deadlines), and its end says how the job ended (outcome).
#include "tools/ddprun/supervisor.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "base/exit_codes.hpp"  // constants only: ddprun links ddp::base alone
#include "tools/ddprun/signal_pipe.hpp"

namespace ddp::run {
namespace {

// After the first failure the other ranks get SIGTERM, and this long to exit cleanly
// (flush logs, close sockets) before SIGKILL.
constexpr auto kGracePeriod = std::chrono::seconds(10);
// After a signal forwarded to the ranks, or a rank that exited with kExitStopped, the
// ranks get this long: a program that stops on request (ddp-train) finishes its step and
// writes a checkpoint first. A second signal to ddprun is forwarded too (a second SIGINT
// ends ddp-train at once; a repeated SIGTERM or SIGUSR1 changes nothing).
constexpr auto kStopGracePeriod = std::chrono::seconds(60);
// Once every rank has exited, output still in the pipes is read for at most this long
// (a rank's own child may hold a pipe open after the rank is gone).
constexpr auto kDrainTime = std::chrono::seconds(1);
// When a rank fails, others that it took down with it (their sockets closed) may exit
// within microseconds, even before the kernel has finished reaping the rank that
// really died. Failures seen within this window count as simultaneous, and among them
// a rank killed by a signal is blamed first, then one that exited with an error of its
// own, and last one whose watchdog gave up (exit code 4: a consequence).
constexpr auto kBlameWindow = std::chrono::milliseconds(250);

// ---- Output: prefixed and passed on -----------------------------------------------------

void write_all(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // our own stdout is gone; nothing better to do
    done += static_cast<std::size_t>(n);
  }
}

// Reads what is available on `fd` and writes every complete line to `to`, prefixed
// with "[rank R] ". At EOF the last partial line is written too (with a newline), and
// fd is closed and set to -1.
void forward_output(int& fd, std::string& partial, int rank, int to) {
  char buffer[65536];
  const ssize_t n = read(fd, buffer, sizeof(buffer));
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  const std::string prefix = "[rank " + std::to_string(rank) + "] ";
  if (n <= 0) {
    if (!partial.empty()) write_all(to, prefix + partial + "\n");
    partial.clear();
    close(fd);
    fd = -1;
    return;
  }
  partial.append(buffer, static_cast<std::size_t>(n));
  std::string lines;  // one write for all complete lines: ranks' lines do not interleave
  std::size_t start = 0;
  for (std::size_t nl; (nl = partial.find('\n', start)) != std::string::npos; start = nl + 1) {
    lines += prefix;
    lines.append(partial, start, nl + 1 - start);
  }
  partial.erase(0, start);
  if (!lines.empty()) write_all(to, lines);
}

// The end of a rank's output, once the job is over: what is left in its pipes (some
// grandchild may still hold them open) is passed on, and the pipes are closed.
void drain_output(Rank& r) {
  for (auto [fd, partial, to] : {std::tuple{&r.out_fd, &r.out_partial, STDOUT_FILENO},
                                 std::tuple{&r.err_fd, &r.err_partial, STDERR_FILENO}}) {
    if (*fd < 0) continue;
    forward_output(*fd, *partial, r.rank, to);
    if (*fd < 0) continue;  // reached the end and closed
    // A last line without its newline (often the error message) is not lost.
    if (!partial->empty()) {
      write_all(to, "[rank " + std::to_string(r.rank) + "] " + *partial + "\n");
    }
    close(*fd);
    *fd = -1;
  }
}

// ---- Exit statuses ------------------------------------------------------------------------

// "exit code 3" or "killed by signal 9 (Killed)", and the code ddprun exits with for it.
std::string describe_status(int status) {
  if (WIFSIGNALED(status)) {
    return "killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  }
  return "exit code " + std::to_string(WEXITSTATUS(status));
}
int exit_code_of(int status) {
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

// The rank exited with kExitStopped: it stopped on request (ddp-train after a stop signal).
bool stopped_on_request(const Rank& r) {
  return WIFEXITED(r.status) && WEXITSTATUS(r.status) == kExitStopped;
}

// ---- The supervisor -----------------------------------------------------------------------

// What one poll() watches: the signal pipe, the node claim, then every open output pipe
// of the ranks.
struct Watched {
  std::vector<pollfd> fds;                     // [0] signals, [1] the claim, then the pipes
  std::vector<std::pair<Rank*, bool>> owners;  // (rank, is stderr) per fds[i + 2]
};

class Supervisor {
 public:
  Supervisor(std::vector<Rank>& ranks, int signal_fd, const NodeClaim& claim, const Options& o,
             int port, Clock::time_point started)
      : ranks_(ranks), signal_fd_(signal_fd), claim_(claim), o_(o), port_(port),
        started_(started) {}

  Outcome run();

 private:
  // The steps of one turn of run()'s loop, in their order.
  Watched watch_list();
  bool drained(const Watched& w) const;
  void copy_output(const Watched& w);
  void forward_signals();
  void stop_for_duplicate();
  void reap();
  void on_exit(const Rank& r);
  void blame();
  void check_timeout(Clock::time_point now);
  void kill_stragglers(Clock::time_point now);
  // After the loop: ddprun's exit code, and whether to restart.
  Outcome outcome() const;

  // Sends `sig` to every rank, and SIGKILL after `grace` to whoever is left.
  void stop_everyone(int sig, Clock::duration grace);
  // A reason to stop the whole job has been found: a rank failed first (blamed), a signal
  // came, --timeout ran out, or a second ddprun knocked. Failures after it are its
  // consequences, not blamed; at the end, whatever the ranks started is killed too.
  bool stop_decided() const {
    return first_failure_ || got_signal_ != 0 || timed_out_ || duplicate_;
  }
  bool all_exited() const {
    return std::none_of(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.running; });
  }

  std::vector<Rank>& ranks_;
  const int signal_fd_;
  const NodeClaim& claim_;
  const Options& o_;
  const int port_;
  const Clock::time_point started_;  // for --timeout

  std::optional<Clock::time_point> kill_at_;      // SIGKILL stragglers then
  std::optional<Clock::time_point> drain_until_;  // all exited: stop reading then
  std::optional<int> first_failure_;              // index into ranks_
  std::vector<int> failures_;                     // in the order they were reaped
  std::optional<Clock::time_point> blame_at_;     // decide who failed first then
  int got_signal_ = 0;
  bool timed_out_ = false;
  bool duplicate_ = false;       // a second ddprun for this node knocked
  bool stop_passed_on_ = false;  // a rank exited kExitStopped: the others got SIGTERM
};

Outcome Supervisor::run() {
  for (;;) {
    // 1. Wait for output, a signal, a knock, or the next deadline.
    Watched w = watch_list();
    if (drained(w)) break;
    poll(w.fds.data(), w.fds.size(), blame_at_ && !first_failure_ ? 10 : 100);  // paces the checks
    copy_output(w);                                // 2. output, prefixed
    if (w.fds[0].revents != 0) forward_signals();  // 3. signals sent to ddprun
    // 3b. A second ddprun for this node of the job (Note [A launcher started twice]).
    if (w.fds[1].revents != 0 && claim_.knocked() && !duplicate_) stop_for_duplicate();
    reap();  // 4. the ranks that exited; the first failure stops the others
    if (blame_at_ && !first_failure_ && Clock::now() >= *blame_at_) blame();
    // 5. Deadlines: the job's --timeout, the grace period, the end of draining.
    const Clock::time_point now = Clock::now();
    check_timeout(now);
    kill_stragglers(now);
    if (all_exited() && !drain_until_) drain_until_ = now + kDrainTime;
  }
  if (!failures_.empty() && !first_failure_) blame();  // all exited inside the window
  // A stopped job leaves nothing behind: whatever the ranks started goes too.
  if (stop_decided()) signal_all(ranks_, SIGKILL);
  for (Rank& r : ranks_) drain_output(r);
  return outcome();
}

Watched Supervisor::watch_list() {
  Watched w;
  w.fds = {{signal_fd_, POLLIN, 0}, {claim_.fd(), POLLIN, 0}};
  for (Rank& r : ranks_) {
    if (r.out_fd >= 0) w.fds.push_back({r.out_fd, POLLIN, 0}), w.owners.emplace_back(&r, false);
    if (r.err_fd >= 0) w.fds.push_back({r.err_fd, POLLIN, 0}), w.owners.emplace_back(&r, true);
  }
  return w;
}

// Every rank has exited and their pipes are closed, or kDrainTime has passed since.
bool Supervisor::drained(const Watched& w) const {
  return drain_until_ && (w.owners.empty() || Clock::now() >= *drain_until_);
}

// 2. Output: prefixed and passed on; stdout to stdout, stderr to stderr.
void Supervisor::copy_output(const Watched& w) {
  for (std::size_t i = 2; i < w.fds.size(); ++i) {
    if (w.fds[i].revents == 0) continue;
    auto [r, is_err] = w.owners[i - 2];
    if (is_err) {
      forward_output(r->err_fd, r->err_partial, r->rank, STDERR_FILENO);
    } else {
      forward_output(r->out_fd, r->out_partial, r->rank, STDOUT_FILENO);
    }
  }
}

// 3. Signals sent to ddprun (kForwarded) go to every rank; SIGQUIT as SIGTERM.
void Supervisor::forward_signals() {
  unsigned char sig = 0;
  while (read(signal_fd_, &sig, 1) == 1) {
    if (sig == SIGCHLD) continue;  // reaped in reap()
    if (got_signal_ == 0) {
      got_signal_ = sig;
      std::fprintf(stderr, "ddprun: got %s, forwarding it to every rank\n", strsignal(sig));
    }
    stop_everyone(sig == SIGQUIT ? SIGTERM : sig, kStopGracePeriod);
  }
}

// 3b. A second ddprun for this node of the job knocked: every rank stops.
void Supervisor::stop_for_duplicate() {
  duplicate_ = true;
  std::fprintf(stderr, "ddprun: stopping the ranks: %s\n",
               NodeClaim::duplicate_message(o_, port_).c_str());
  stop_everyone(SIGTERM, kGracePeriod);
}

// 4. Reaps the ranks that exited (on_exit says what each exit means).
void Supervisor::reap() {
  for (Rank& r : ranks_) {
    if (!r.running || waitpid(r.pid, &r.status, WNOHANG) != r.pid) continue;
    r.running = false;
    on_exit(r);
  }
}

// A rank has exited: a stop on request is passed on to the others; a failure is noted,
// to be blamed (blame()) once kBlameWindow has passed.
void Supervisor::on_exit(const Rank& r) {
  // A rank that stopped on request: in training the others agreed to stop after the
  // same step (ddp-train) and follow within moments; a rank signalled alone before
  // the ranks had met stops at once, and the others would wait for it. So the others
  // get SIGTERM too (a stop already agreed ignores it); kStopGracePeriod bounds the wait.
  const bool stopped = stopped_on_request(r);
  if (stopped && !kill_at_) {  // (a signal sent to ddprun, forwarded, set kill_at_)
    std::fprintf(stderr, "ddprun: rank %d stopped on request (exit code %d); passing "
                 "SIGTERM on to the other ranks\n", r.rank, kExitStopped);
    stop_everyone(SIGTERM, kStopGracePeriod);
    stop_passed_on_ = true;
  }
  // A rank that dies of that SIGTERM (it has no handler) stopped as asked.
  const bool ended_by_us =
      stop_passed_on_ && WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGTERM;
  const bool failed =
      !ended_by_us && (!WIFEXITED(r.status) || (WEXITSTATUS(r.status) != 0 && !stopped));
  if (failed && !stop_decided()) {
    failures_.push_back(static_cast<int>(&r - ranks_.data()));
    if (!blame_at_) blame_at_ = Clock::now() + kBlameWindow;
  }
}

// Picks the rank to blame among the failures of the first kBlameWindow (see there),
// says so, and stops the others.
void Supervisor::blame() {
  const auto first_of = [&](auto&& which) {
    return std::find_if(failures_.begin(), failures_.end(),
                        [&](int i) { return which(ranks_[i]); });
  };
  const auto killed = first_of([](const Rank& r) { return WIFSIGNALED(r.status); });
  // Exit code 4 says "a collective failed under me" (the watchdog, exit_codes.hpp): the
  // consequence of another rank's failure, blamed last.
  const auto own = first_of([](const Rank& r) {
    return WIFEXITED(r.status) && WEXITSTATUS(r.status) != kExitWatchdog;
  });
  first_failure_ = killed != failures_.end() ? *killed
                   : own != failures_.end()  ? *own
                                             : failures_.front();
  const Rank& r = ranks_[*first_failure_];
  std::fprintf(stderr, "ddprun: rank %d (pid %d) failed first: %s; stopping the others\n",
               r.rank, static_cast<int>(r.pid), describe_status(r.status).c_str());
  for (int i : failures_) {
    if (i == *first_failure_) continue;
    std::fprintf(stderr, "ddprun: rank %d also failed: %s\n", ranks_[i].rank,
                 describe_status(ranks_[i].status).c_str());
  }
  stop_everyone(SIGTERM, kGracePeriod);
}

// 5. The job's --timeout, counted from its first start (restarts included).
void Supervisor::check_timeout(Clock::time_point now) {
  const bool over = o_.timeout_s > 0 && now - started_ >= std::chrono::seconds(o_.timeout_s);
  if (!over || stop_decided()) return;
  timed_out_ = true;
  std::fprintf(stderr, "ddprun: the job ran past --timeout %d s; stopping every rank\n",
               o_.timeout_s);
  stop_everyone(SIGTERM, kGracePeriod);
}

// 5. The grace period is over: SIGKILL for whoever is left.
void Supervisor::kill_stragglers(Clock::time_point now) {
  if (!kill_at_ || now < *kill_at_) return;
  signal_all(ranks_, SIGKILL);
  kill_at_ = now + kGracePeriod;  // (again, should one survive the first)
}

void Supervisor::stop_everyone(int sig, Clock::duration grace) {
  signal_all(ranks_, sig);
  if (!kill_at_) kill_at_ = Clock::now() + grace;
}

Outcome Supervisor::outcome() const {
  const bool all_stopped = std::all_of(ranks_.begin(), ranks_.end(), stopped_on_request);
  if (got_signal_ != 0) {
    // The ranks did what the signal asked of a program that stops on request.
    if (all_stopped) {
      std::fprintf(stderr, "ddprun: every rank stopped on request (exit code %d)\n",
                   kExitStopped);
      return {kExitStopped, false};
    }
    return {128 + got_signal_, false};
  }
  if (timed_out_) return {124, false};
  if (duplicate_) return {kExitError, false};  // not restarted: the copy would knock again
  if (first_failure_) {
    const Rank& r = ranks_[*first_failure_];
    std::fprintf(stderr, "ddprun: rank %d failed first (%s)\n", r.rank,
                 describe_status(r.status).c_str());
    return {exit_code_of(r.status), true};
  }
  // Signalled directly (SLURM signals every task itself), or one rank was and ddprun
  // passed it on: the ranks stopped, no failure.
  if (std::any_of(ranks_.begin(), ranks_.end(), stopped_on_request)) {
    std::fprintf(stderr, "ddprun: the ranks stopped on request (exit code %d)\n", kExitStopped);
    return {kExitStopped, false};
  }
  return {0, false};
}

}  // namespace

Outcome supervise(std::vector<Rank>& ranks, int signal_fd, const NodeClaim& claim,
                  const Options& o, int port, Clock::time_point started) {
  return Supervisor(ranks, signal_fd, claim, o, port, started).run();
}

}  // namespace ddp::run

// ddprun: starts the ranks of a job on one node and watches over them. Chapter 05.
//
//   ddprun --nproc-per-node 4 build/release/bin/ch05_rendezvous --backend tcp
//
// The three things a launcher does, each in its own function: tell rank r who it is
// (rank_environment), start it (start_rank), and supervise the ranks (supervise):
// prefix their output, forward Ctrl-C, stop them all when one fails. With --max-restarts
// N (chapter 08, torchrun's option of the same name) it then starts them all again, at
// most N times (run); the program resumes from its own checkpoint (ddp-train --resume
// auto). It does not change the number of ranks (torchrun's elastic --nnodes MIN:MAX)
// and does not reach other nodes: run one ddprun per node (srun, ssh, pdsh), each with
// its --node-rank (Note [Restarting on several nodes]).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "dist/job_token.hpp"  // header-only too
#include "dist/parallel/exit_codes.hpp"  // constants only: ddprun links ddp::base alone
#include "base/error.hpp"
#include "base/errno_text.hpp"
#include "tools/ddprun/options.hpp"

extern char** environ;

namespace ddp::run {
namespace {

using Clock = std::chrono::steady_clock;

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
// The signals ddprun passes on to every rank: Ctrl-C, kill, a closed terminal (the ranks
// sit in process groups of their own, so the terminal's SIGHUP would not reach them),
// SIGUSR1 (SLURM's warning before the time limit, `sbatch --signal=B:USR1@T`, sent to the
// batch script, which passes it on to ddprun), and Ctrl-\, which the ranks get as SIGTERM
// (as torchrun does: a core dump per rank on a shared filesystem helps nobody).
constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1};

// ---- Who is rank r: its environment ---------------------------------------------------

// The variables that tell a rank who it is, torchrun's names (dist/launch_env.hpp reads
// them before any other launcher's, so a ddprun inside a SLURM or Open MPI job still
// wins without unsetting theirs). Global rank = node_rank * nproc_per_node + local rank.
// Besides: DDPRUN_RESTART_COUNT, 0 for the first start and k for the k-th restart, and
// DDPRUN_MAX_RESTARTS (torchrun: TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_MAX_RESTARTS).
std::map<std::string, std::string> rank_environment(const Options& o, int local_rank,
                                                    int master_port, int restart) {
  const int rank = o.node_rank * o.nproc_per_node + local_rank;
  return {
      {"DDPRUN_RESTART_COUNT", std::to_string(restart)},
      {"DDPRUN_MAX_RESTARTS", std::to_string(o.max_restarts)},
      {"RANK", std::to_string(rank)},
      {"WORLD_SIZE", std::to_string(o.nnodes * o.nproc_per_node)},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(o.nproc_per_node)},
      {"GROUP_RANK", std::to_string(o.node_rank)},
      {"MASTER_ADDR", o.master_addr},
      {"MASTER_PORT", std::to_string(master_port)},
  };
}

// A port for the store, held for the whole job. Picking a free port and letting rank 0
// bind it later leaves a gap in which another program can take it (rank 0 then fails
// with "address in use"; under a busy `ctest -j` that happened). So ddprun binds port 0
// with SO_REUSEADDR and keeps that socket open, never listening, until the job ends.
// While it is bound, Linux hands the port to no other bind(0) or outgoing connection,
// yet rank 0, which also sets SO_REUSEADDR (Socket::listen), may bind it and listen:
// two SO_REUSEADDR sockets may share a port as long as neither was listening when the
// second one bound. A restarted job (--max-restarts) uses the same port: the old rank 0
// and every rank that talked to its store are gone (reaped, their process groups killed)
// before the new ranks start, the connections they leave in TIME_WAIT do not stop an
// SO_REUSEADDR bind, and the new rank 0's store starts empty: a fresh rendezvous.
class PortReservation {
 public:
  explicit PortReservation(const std::string& address) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const int rc = getaddrinfo(address.c_str(), "0", &hints, &found);
    DDP_CHECK(rc == 0, "cannot resolve --master-addr '", address, "': ", gai_strerror(rc));
    fd_ = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    const bool bound = fd_ >= 0 &&
                       setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
                       bind(fd_, found->ai_addr, found->ai_addrlen) == 0;
    const int bind_errno = errno;
    freeaddrinfo(found);
    sockaddr_storage name{};
    socklen_t length = sizeof(name);
    if (!bound || getsockname(fd_, reinterpret_cast<sockaddr*>(&name), &length) != 0) {
      if (fd_ >= 0) close(fd_);  // the destructor does not run when the constructor throws
      DDP_FAIL("cannot bind a port on --master-addr '", address, "': ",
               errno_text(bind_errno),
               "\nhint: on a single node the master address must be this machine's");
    }
    port_ = name.ss_family == AF_INET6
                ? ntohs(reinterpret_cast<const sockaddr_in6*>(&name)->sin6_port)
                : ntohs(reinterpret_cast<const sockaddr_in*>(&name)->sin_port);
  }
  ~PortReservation() {
    if (fd_ >= 0) close(fd_);
  }
  PortReservation(const PortReservation&) = delete;
  PortReservation& operator=(const PortReservation&) = delete;

  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// Note [A launcher started twice]
// `srun --ntasks-per-node=1 ddprun ...` inside an allocation of 2 tasks per node starts
// two ddprun on every node, with the same --master-addr, --master-port and --node-rank.
// The ranks find out at the store (Note [Claiming a rank], dist/tcp_store.cpp), but only
// the ranks that reach it: once a failed rank 0 has taken the store away, a late copy's
// ranks retry the connection until their --timeout. So each ddprun first claims its node
// of its job on this host: an abstract Unix socket (Linux: no file, gone with the
// process) named after the user, the job token (default_job_token: two jobs that share a
// port differ there) and the node. The second one finds the name taken, knocks, and exits
// 1 without starting ranks; the first accepts the knock, checks that it comes from the
// same user (SO_PEERCRED: anyone may connect to an abstract socket), stops its ranks and
// exits 1 too. Both copies say why within moments, whatever the store's state.
class NodeClaim {
 public:
  NodeClaim(const Options& o, int port) {
    // The address last: a name longer than sun_path loses the end of the address only.
    const std::string name = detail::concat("ddprun uid ", getuid(), " job '",
                                            default_job_token(), "' node ", o.node_rank,
                                            " port ", port, " ", o.master_addr);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    // sun_path[0] = '\0': the abstract namespace; the name follows, not NUL-terminated.
    const std::size_t length = std::min(name.size(), sizeof(address.sun_path) - 1);
    std::memcpy(address.sun_path + 1, name.data(), length);
    const auto size = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + length);
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    DDP_CHECK(fd_ >= 0, "socket(AF_UNIX): ", errno_text());
    if (bind(fd_, reinterpret_cast<sockaddr*>(&address), size) == 0 && listen(fd_, 64) == 0) {
      return;
    }
    const int bind_errno = errno;
    close(fd_);
    fd_ = -1;
    DDP_CHECK(bind_errno == EADDRINUSE, "cannot claim node ", o.node_rank, " of the job at ",
              o.master_addr, ":", port, ": ", errno_text(bind_errno));
    // Knock without waiting: a full backlog means the first one knows already.
    const int knock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (knock >= 0) {
      connect(knock, reinterpret_cast<sockaddr*>(&address), size);
      close(knock);
    }
    DDP_FAIL(duplicate_message(o, port));
  }
  ~NodeClaim() {
    if (fd_ >= 0) close(fd_);
  }
  NodeClaim(const NodeClaim&) = delete;
  NodeClaim& operator=(const NodeClaim&) = delete;

  int fd() const { return fd_; }  // readable when someone knocks: see knocked()

  // Accepts what knocked; true when one of them was this user's (a second ddprun).
  bool knocked() const {
    bool ours = false;
    for (int peer; (peer = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC)) >= 0; close(peer)) {
      ucred who{};
      socklen_t length = sizeof who;
      ours = ours || (getsockopt(peer, SOL_SOCKET, SO_PEERCRED, &who, &length) == 0 &&
                      who.uid == getuid());
    }
    return ours;
  }

  static std::string duplicate_message(const Options& o, int port) {
    return detail::concat(
        "a second ddprun was started for node ", o.node_rank, " of the job at ", o.master_addr,
        ":", port, " on this host\nhint: the launcher was started twice on this node? (e.g. "
        "srun --ntasks-per-node=1 inside an allocation with 2 tasks per node starts 2 ddprun "
        "per node: give srun --ntasks=<nodes> too); or two of your jobs share --master-port");
  }

 private:
  int fd_ = -1;
};

// ---- Starting a rank --------------------------------------------------------------------

// One rank, as the supervisor sees it.
struct Rank {
  int rank = 0;
  pid_t pid = -1;
  int out_fd = -1;  // read ends of the rank's stdout and stderr pipes; -1 once at EOF
  int err_fd = -1;
  std::string out_partial;  // bytes after the last newline, waiting for the rest of it
  std::string err_partial;
  bool running = true;
  int status = 0;  // from waitpid, once !running
};

// fork + exec of PROGRAM with rank r's environment, its stdout and stderr into pipes,
// stdin from /dev/null (only the foreground process group may read the terminal). The
// child gets a process group of its own, so that a signal to the rank (kill(-pid))
// also reaches whatever the rank started.
Rank start_rank(const Options& o, int local_rank, int master_port, int restart) {
  int out[2], err[2];
  DDP_CHECK(pipe2(out, O_CLOEXEC) == 0 && pipe2(err, O_CLOEXEC) == 0,
            "pipe2: ", errno_text());
  // Our read ends never block: at the end, a pipe that something the rank started in
  // the background still holds open must not keep ddprun waiting (the write ends, the
  // rank's stdout and stderr, stay blocking, as programs expect).
  for (int fd : {out[0], err[0]}) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);

  // Everything the child needs is built before fork(): the child should only make
  // simple system calls between fork and exec (ddprun has one thread, so a few libc
  // calls on the error path are safe too).
  std::map<std::string, std::string> vars;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const auto eq = entry.find('=');
    if (eq != std::string::npos) vars[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (auto& [key, value] : rank_environment(o, local_rank, master_port, restart)) {
    vars[key] = value;
  }
  std::vector<std::string> env_strings;
  for (const auto& [key, value] : vars) env_strings.push_back(key + "=" + value);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = o.program;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);

  // Signals are blocked across fork(): until the child has put back the default
  // handlers, a SIGTERM meant for it would run ddprun's handler in the child and look,
  // to the supervisor, like a SIGTERM sent to ddprun itself.
  sigset_t all, previous;
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, &previous);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {  // the child
    setpgid(0, 0);
    // If ddprun itself dies without a chance to stop the ranks (SIGKILL, a ctest
    // timeout), the kernel kills the rank processes too (not what they started
    // themselves) instead of leaving them on the ports and GPUs. Checked after setting
    // it: ddprun may already have died in between.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(128 + SIGKILL);
    const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);  // not left open in the rank
    dup2(null_fd, STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);  // dup2 clears O_CLOEXEC on the copy
    dup2(err[1], STDERR_FILENO);
    for (int sig : kForwarded) signal(sig, SIG_DFL);
    signal(SIGCHLD, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);  // an ignored signal would stay ignored across exec
    sigprocmask(SIG_SETMASK, &previous, nullptr);  // a pending SIGTERM now kills it
    execvpe(argv[0], argv.data(), envp.data());
    const char* why = std::strerror(errno);  // (no std::string between fork and _exit)
    dprintf(STDERR_FILENO, "ddprun: cannot run '%s': %s\n", argv[0], why);
    _exit(127);  // what a shell answers for "command not found"
  }
  const int fork_errno = errno;
  sigprocmask(SIG_SETMASK, &previous, nullptr);
  DDP_CHECK(pid >= 0, "fork: ", errno_text(fork_errno));
  setpgid(pid, pid);  // also here: whichever runs first, the group exists before kill()
  close(out[1]);
  close(err[1]);
  Rank r;
  r.rank = o.node_rank * o.nproc_per_node + local_rank;
  r.pid = pid;
  r.out_fd = out[0];
  r.err_fd = err[0];
  return r;
}

// ---- Signals, through a pipe --------------------------------------------------------------

// A signal handler may do almost nothing safely; it writes the signal's number into a
// pipe that the supervise loop polls along with the ranks' output (the "self-pipe
// trick"). The only global of ddprun, because a handler cannot be given arguments.
int signal_pipe_write = -1;

void on_signal(int sig) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(sig);
  [[maybe_unused]] const ssize_t n = write(signal_pipe_write, &byte, 1);
  errno = saved;
}

int install_signal_pipe() {
  int fds[2];
  DDP_CHECK(pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0, "pipe2: ", errno_text());
  signal_pipe_write = fds[1];
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (int sig : kForwarded) sigaction(sig, &action, nullptr);
  sigaction(SIGCHLD, &action, nullptr);
  // A reader of ddprun's output that goes away (`ddprun ... | head`) must not kill
  // ddprun before it has stopped the ranks: write() then fails with EPIPE instead.
  signal(SIGPIPE, SIG_IGN);
  return fds[0];
}

// ---- Supervising ------------------------------------------------------------------------

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

// Every rank's whole process group, of reaped ranks too: what a rank started (a data
// worker, a shell's background job) outlives it there. A group's id is not given to a
// new process while the group has members; once it has none, kill() finds nothing.
void signal_all(std::vector<Rank>& ranks, int sig) {
  for (const Rank& r : ranks) {
    if (r.pid > 0) kill(-r.pid, sig);  // (kill(-(-1)) would be kill(1): init)
  }
}

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
// get SIGTERM, then SIGKILL after kGracePeriod; the kForwarded signals sent to ddprun are
// passed on the same way, with kStopGracePeriod. A second ddprun knocking at `claim`
// stops the ranks too (Note [A launcher started twice]). `started`: when the job (its
// first start) began, for --timeout.
Outcome supervise(std::vector<Rank>& ranks, int signal_fd, const NodeClaim& claim,
                  const Options& o, int port, Clock::time_point started) {
  std::optional<Clock::time_point> kill_at;     // SIGKILL stragglers then
  std::optional<Clock::time_point> drain_until;  // all exited: stop reading then
  std::optional<int> first_failure;             // index into ranks
  std::vector<int> failures;                    // in the order they were reaped
  std::optional<Clock::time_point> blame_at;    // decide who failed first then
  int got_signal = 0;
  bool timed_out = false;
  bool duplicate = false;  // a second ddprun for this node knocked
  bool stop_passed_on = false;  // a rank exited kExitStopped: the others got SIGTERM

  // Sends `sig` to every rank, and SIGKILL after `grace` to whoever is left.
  const auto stop_everyone = [&](int sig, Clock::duration grace) {
    signal_all(ranks, sig);
    if (!kill_at) kill_at = Clock::now() + grace;
  };
  // Picks the rank to blame among the failures of the first kBlameWindow (see there),
  // says so, and stops the others.
  const auto blame = [&] {
    const auto first_of = [&](auto&& which) {
      return std::find_if(failures.begin(), failures.end(), [&](int i) { return which(ranks[i]); });
    };
    const auto killed = first_of([](const Rank& r) { return WIFSIGNALED(r.status); });
    // Exit code 4 says "a collective failed under me" (the watchdog, exit_codes.hpp): the
    // consequence of another rank's failure, blamed last.
    const auto own = first_of([](const Rank& r) {
      return WIFEXITED(r.status) && WEXITSTATUS(r.status) != kExitWatchdog;
    });
    first_failure = killed != failures.end() ? *killed
                    : own != failures.end()  ? *own
                                             : failures.front();
    const Rank& r = ranks[*first_failure];
    std::fprintf(stderr, "ddprun: rank %d (pid %d) failed first: %s; stopping the others\n",
                 r.rank, static_cast<int>(r.pid), describe_status(r.status).c_str());
    for (int i : failures) {
      if (i == *first_failure) continue;
      std::fprintf(stderr, "ddprun: rank %d also failed: %s\n", ranks[i].rank,
                   describe_status(ranks[i].status).c_str());
    }
    stop_everyone(SIGTERM, kGracePeriod);
  };

  for (;;) {
    // 1. Wait for output, a signal, or the next deadline.
    std::vector<pollfd> fds{{signal_fd, POLLIN, 0}, {claim.fd(), POLLIN, 0}};
    std::vector<std::pair<Rank*, bool>> owners;  // (rank, is stderr) per fds[i + 2]
    for (Rank& r : ranks) {
      if (r.out_fd >= 0) fds.push_back({r.out_fd, POLLIN, 0}), owners.emplace_back(&r, false);
      if (r.err_fd >= 0) fds.push_back({r.err_fd, POLLIN, 0}), owners.emplace_back(&r, true);
    }
    if (drain_until && (owners.empty() || Clock::now() >= *drain_until)) break;
    poll(fds.data(), fds.size(), blame_at && !first_failure ? 10 : 100);  // paces the checks

    // 2. Output: prefixed and passed on; stdout to stdout, stderr to stderr.
    for (std::size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      auto [r, is_err] = owners[i - 2];
      if (is_err) {
        forward_output(r->err_fd, r->err_partial, r->rank, STDERR_FILENO);
      } else {
        forward_output(r->out_fd, r->out_partial, r->rank, STDOUT_FILENO);
      }
    }

    // 3. Signals sent to ddprun (kForwarded) go to every rank.
    if (fds[0].revents != 0) {
      unsigned char sig = 0;
      while (read(signal_fd, &sig, 1) == 1) {
        if (sig == SIGCHLD) continue;  // reaped below
        if (got_signal == 0) {
          got_signal = sig;
          std::fprintf(stderr, "ddprun: got %s, forwarding it to every rank\n", strsignal(sig));
        }
        stop_everyone(sig == SIGQUIT ? SIGTERM : sig, kStopGracePeriod);
      }
    }

    // 3b. A second ddprun for this node of the job (Note [A launcher started twice]).
    if (fds[1].revents != 0 && claim.knocked() && !duplicate) {
      duplicate = true;
      std::fprintf(stderr, "ddprun: stopping the ranks: %s\n",
                   NodeClaim::duplicate_message(o, port).c_str());
      stop_everyone(SIGTERM, kGracePeriod);
    }

    // 4. Reap the ranks that exited; the first failure stops the others.
    for (Rank& r : ranks) {
      if (!r.running || waitpid(r.pid, &r.status, WNOHANG) != r.pid) continue;
      r.running = false;
      // A rank that stopped on request: in training the others agreed to stop after the
      // same step (ddp-train) and follow within moments; a rank signalled alone before
      // the ranks had met stops at once, and the others would wait for it. So the others
      // get SIGTERM too (a stop already agreed ignores it); kStopGracePeriod bounds the wait.
      const bool stopped = WIFEXITED(r.status) && WEXITSTATUS(r.status) == kExitStopped;
      if (stopped && !kill_at) {  // (a signal sent to ddprun, forwarded, set kill_at)
        std::fprintf(stderr, "ddprun: rank %d stopped on request (exit code %d); passing "
                     "SIGTERM on to the other ranks\n", r.rank, kExitStopped);
        stop_everyone(SIGTERM, kStopGracePeriod);
        stop_passed_on = true;
      }
      // A rank that dies of that SIGTERM (it has no handler) stopped as asked.
      const bool ended_by_us =
          stop_passed_on && WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGTERM;
      const bool failed =
          !ended_by_us && (!WIFEXITED(r.status) || (WEXITSTATUS(r.status) != 0 && !stopped));
      if (failed && !first_failure && got_signal == 0 && !timed_out && !duplicate) {
        failures.push_back(static_cast<int>(&r - ranks.data()));
        if (!blame_at) blame_at = Clock::now() + kBlameWindow;
      }
    }
    if (blame_at && !first_failure && Clock::now() >= *blame_at) blame();

    // 5. Deadlines: the job's --timeout, the grace period, the end of draining.
    const Clock::time_point now = Clock::now();
    if (o.timeout_s > 0 && !timed_out && !first_failure && got_signal == 0 && !duplicate &&
        now - started >= std::chrono::seconds(o.timeout_s)) {
      timed_out = true;
      std::fprintf(stderr, "ddprun: the job ran past --timeout %d s; stopping every rank\n",
                   o.timeout_s);
      stop_everyone(SIGTERM, kGracePeriod);
    }
    if (kill_at && now >= *kill_at) {
      signal_all(ranks, SIGKILL);
      kill_at = now + kGracePeriod;  // (again, should one survive the first)
    }
    const bool all_exited =
        std::none_of(ranks.begin(), ranks.end(), [](const Rank& r) { return r.running; });
    if (all_exited && !drain_until) drain_until = now + kDrainTime;
  }

  if (!failures.empty() && !first_failure) blame();  // all exited inside the window
  // A stopped job leaves nothing behind: whatever the ranks started goes too.
  if (first_failure || got_signal != 0 || timed_out || duplicate) signal_all(ranks, SIGKILL);
  for (Rank& r : ranks) {  // pipes some grandchild still holds open
    for (auto [fd, partial, to] : {std::tuple{&r.out_fd, &r.out_partial, STDOUT_FILENO},
                                   std::tuple{&r.err_fd, &r.err_partial, STDERR_FILENO}}) {
      if (*fd < 0) continue;
      forward_output(*fd, *partial, r.rank, to);
      if (*fd < 0) continue;  // reached the end and closed
      // A last line without its newline (often the error message) is not lost.
      if (!partial->empty()) write_all(to, "[rank " + std::to_string(r.rank) + "] " + *partial + "\n");
      close(*fd);
      *fd = -1;
    }
  }
  const auto stopped = [](const Rank& r) {
    return WIFEXITED(r.status) && WEXITSTATUS(r.status) == kExitStopped;
  };
  const bool all_stopped = std::all_of(ranks.begin(), ranks.end(), stopped);
  if (got_signal != 0) {
    // The ranks did what the signal asked of a program that stops on request.
    if (all_stopped) {
      std::fprintf(stderr, "ddprun: every rank stopped on request (exit code %d)\n",
                   kExitStopped);
      return {kExitStopped, false};
    }
    return {128 + got_signal, false};
  }
  if (timed_out) return {124, false};
  if (duplicate) return {kExitError, false};  // not restarted: the copy would knock again
  if (first_failure) {
    const Rank& r = ranks[*first_failure];
    std::fprintf(stderr, "ddprun: rank %d failed first (%s)\n", r.rank,
                 describe_status(r.status).c_str());
    return {exit_code_of(r.status), true};
  }
  // Signalled directly (SLURM signals every task itself), or one rank was and ddprun
  // passed it on: the ranks stopped, no failure.
  if (std::any_of(ranks.begin(), ranks.end(), stopped)) {
    std::fprintf(stderr, "ddprun: the ranks stopped on request (exit code %d)\n", kExitStopped);
    return {kExitStopped, false};
  }
  return {0, false};
}

// Note [Restarting on several nodes]
// --max-restarts restarts the ranks of this node only: ddprun knows no other node. On a
// job of several nodes every node's ddprun must be given the same --max-restarts. When a
// rank dies, the ranks of the other nodes fail too (their next collective finds a peer
// gone, or runs into --timeout), so each node's ddprun sees a failure and restarts its
// ranks, which meet at node 0's new store: the job restarts as a whole, every node
// counting its own restarts. What this does not do, and torchrun's rendezvous does: it
// has no notion of a round. A node whose ranks failed twice in one round (say, a rank
// restarted while the others were still timing out) spends two of its restarts and may
// run out before the others; a rank of an old round that is still alive on a node whose
// ddprun has not noticed can connect to the new store. Give the program a short --timeout
// so that every node notices a failure quickly, and prefer the batch system's requeue
// (sbatch --requeue, with ddp-train --resume auto) for multi-node jobs.

// Starts the ranks, supervises them, and with --max-restarts starts them all again after
// a rank failed, at most that many times. Returns ddprun's exit code.
int run_with_restarts(const Options& o, int signal_fd, const NodeClaim& claim, int port) {
  const Clock::time_point started = Clock::now();
  for (int restart = 0;; ++restart) {
    if (restart > 0) {
      std::fprintf(stderr, "ddprun: restart %d of %d (--max-restarts): starting %d ranks again\n",
                   restart, o.max_restarts, o.nproc_per_node);
    }
    std::vector<Rank> ranks;
    for (int local = 0; local < o.nproc_per_node; ++local) {
      try {
        ranks.push_back(start_rank(o, local, port, restart));
      } catch (...) {
        signal_all(ranks, SIGKILL);  // do not leave half a job behind
        throw;
      }
    }
    const Outcome outcome = supervise(ranks, signal_fd, claim, o, port, started);
    if (!outcome.rank_failed || o.max_restarts == 0) return outcome.exit_code;
    if (restart == o.max_restarts) {
      std::fprintf(stderr, "ddprun: no restarts left (--max-restarts %d); giving up\n",
                   o.max_restarts);
      return outcome.exit_code;
    }
  }
}

int run(const Options& o) {
  const int signal_fd = install_signal_pipe();
  std::optional<PortReservation> reserved;  // held until every rank has exited
  if (o.master_port == 0) reserved.emplace(o.master_addr);
  const int port = reserved ? reserved->port() : o.master_port;
  const NodeClaim claim(o, port);  // Note [A launcher started twice]
  return run_with_restarts(o, signal_fd, claim, port);
}

}  // namespace
}  // namespace ddp::run

int main(int argc, char** argv) {
  using namespace ddp::run;
  Options options;
  try {
    options = parse_options(argc, argv);
  } catch (const ddp::Error& e) {
    const std::string message = e.what();
    std::fprintf(stderr, "ddprun: %s\n", message.substr(0, message.find('\n')).c_str());
    return 2;
  }
  if (options.help) {
    std::fputs(usage().c_str(), stdout);
    return 0;
  }
  try {
    return run(options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddprun: error: %s\n", e.what());
    return 1;
  }
}

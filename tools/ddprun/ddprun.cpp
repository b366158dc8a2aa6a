// ddprun: starts the ranks of a job on one node and watches over them. Chapter 05.
//
//   ddprun --nproc-per-node 4 build/release/bin/ch05_rendezvous --backend tcp
//
// The three things a launcher does, each in its own file: tell rank r who it is and start
// it (rank_process.cpp: rank_environment, start_rank), and supervise the ranks
// (supervisor.cpp: supervise): prefix their output, forward Ctrl-C, stop them all when
// one fails. With --max-restarts N (chapter 08, torchrun's option of the same name) it then
// starts them all again, at most N times (run_with_restarts, here); the program resumes
// from its own checkpoint (ddp-train --resume auto). It does not change the number of ranks
// (torchrun's elastic --nnodes MIN:MAX) and does not reach other nodes: run one ddprun per
// node (srun, ssh, pdsh), each with its --node-rank (Note [Restarting on several nodes]).
#include <arpa/inet.h>
#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/errno_text.hpp"
#include "dist/shm_name.hpp"  // header-only, like dist/job_token.hpp
#include "tools/ddprun/node_claim.hpp"
#include "tools/ddprun/options.hpp"
#include "tools/ddprun/rank_process.hpp"
#include "tools/ddprun/signal_pipe.hpp"
#include "tools/ddprun/supervisor.hpp"

namespace ddp::run {
namespace {

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
    // Every rank has exited. A tcp group unlinks its shared-memory segment once all its
    // ranks have mapped it; a rank killed during that set-up leaves it behind: removed
    // here (and by the next job's set-up), with any other whose creator is gone.
    ddp::detail::remove_dead_shm_segments();
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

// NodeClaim: each ddprun claims its node of its job on this host before it starts any
// rank, so that a second ddprun for the same node is found out at once (Note [A launcher
// started twice]). Chapter 08. It does not stop the ranks itself: the supervisor does,
// when knocked() says a second ddprun came (supervisor.cpp).
#pragma once

#include <string>

#include "tools/ddprun/options.hpp"

namespace ddp::run {

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
  // Claims node o.node_rank of the job at o.master_addr:port; throws ddp::Error with
  // duplicate_message when another ddprun holds it (after knocking).
  NodeClaim(const Options& o, int port);
  ~NodeClaim();
  NodeClaim(const NodeClaim&) = delete;
  NodeClaim& operator=(const NodeClaim&) = delete;

  int fd() const { return fd_; }  // readable when someone knocks: see knocked()

  // Accepts what knocked; true when one of them was this user's (a second ddprun).
  bool knocked() const;

  static std::string duplicate_message(const Options& o, int port);

 private:
  int fd_ = -1;
};

}  // namespace ddp::run

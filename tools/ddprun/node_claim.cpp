// NodeClaim (see node_claim.hpp, Note [A launcher started twice]). Chapter 08.
#include "tools/ddprun/node_claim.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include "base/errno_text.hpp"
#include "base/error.hpp"
#include "dist/job_token.hpp"  // header-only too

namespace ddp::run {

NodeClaim::NodeClaim(const Options& o, int port) {
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

NodeClaim::~NodeClaim() {
  if (fd_ >= 0) close(fd_);
}

bool NodeClaim::knocked() const {
  bool ours = false;
  for (int peer; (peer = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC)) >= 0; close(peer)) {
    ucred who{};
    socklen_t length = sizeof who;
    ours = ours || (getsockopt(peer, SOL_SOCKET, SO_PEERCRED, &who, &length) == 0 &&
                    who.uid == getuid());
  }
  return ours;
}

std::string NodeClaim::duplicate_message(const Options& o, int port) {
  return detail::concat(
      "a second ddprun was started for node ", o.node_rank, " of the job at ", o.master_addr,
      ":", port, " on this host\nhint: the launcher was started twice on this node? (e.g. "
      "srun --ntasks-per-node=1 inside an allocation with 2 tasks per node starts 2 ddprun "
      "per node: give srun --ntasks=<nodes> too); or two of your jobs share --master-port");
}

}  // namespace ddp::run

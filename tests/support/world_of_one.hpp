// world_of_one(): a tcp process group of one rank, for unit tests of the DDP layer that
// need a group but no peer (every collective returns at once). Chapters 07 and 08.
#pragma once

#include <chrono>
#include <memory>

#include "dist/process_group_tcp.hpp"
#include "dist/tcp_store.hpp"

namespace ddp::testing {

// `timeout`: the group's deadline (ProcessGroup::timeout()); without it, the backend's default.
inline std::unique_ptr<ProcessGroupTcp> world_of_one(std::chrono::milliseconds timeout) {
  TCPStoreOptions o;
  o.port = 0;  // any free port: this rank serves its own store
  o.is_server = true;
  return std::make_unique<ProcessGroupTcp>(std::make_shared<TCPStore>(o), 0, 1, timeout);
}
inline std::unique_ptr<ProcessGroupTcp> world_of_one() {
  TCPStoreOptions o;
  o.port = 0;
  o.is_server = true;
  return std::make_unique<ProcessGroupTcp>(std::make_shared<TCPStore>(o), 0, 1);
}

}  // namespace ddp::testing

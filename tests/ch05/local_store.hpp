// Test helper for chapters 05-07: a TCPStore on 127.0.0.1 for forked ranks. The parent
// starts the server (any free port) before it forks; each rank connects a client.
#pragma once

#include <chrono>
#include <memory>

#include "dist/tcp_store.hpp"

namespace ddp::test {

inline std::unique_ptr<TCPStore> local_store_server() {
  TCPStoreOptions o;
  o.port = 0;
  o.is_server = true;
  o.timeout = std::chrono::seconds(20);
  return std::make_unique<TCPStore>(o);
}

inline std::shared_ptr<TCPStore> local_store_client(int port) {
  TCPStoreOptions o;
  o.port = port;
  o.timeout = std::chrono::seconds(20);
  return std::make_shared<TCPStore>(o);
}

}  // namespace ddp::test

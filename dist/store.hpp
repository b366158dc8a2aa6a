// ddp::Store, the key-value store through which the ranks of a job find each other
// (rendezvous). Chapter 05 introduces it.
//
// One interface, two implementations: TCPStore (rank 0 serves, everyone connects;
// dist/tcp_store.hpp) and FileStore (a file on a shared filesystem; dist/file_store.hpp).
// Process groups use it to swap addresses and NCCL ids; it is not a data path: values
// are small (bounded, see each implementation's limits) and every blocking call has a
// timeout whose error names the keys that never arrived.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "base/deadline.hpp"  // kDefaultTimeout

namespace ddp {

class Store {
 public:
  using Clock = std::chrono::steady_clock;

  virtual ~Store() = default;
  Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Values are byte strings: std::string holds any bytes, '\0' included. Gives up after
  // timeout() (or `timeout`) when the store does not answer.
  void set(const std::string& key, const std::string& value) { set(key, value, timeout_); }
  virtual void set(const std::string& key, const std::string& value,
                   std::chrono::milliseconds timeout) = 0;

  // Waits until `key` exists (at most timeout(), or `timeout`), then returns its value.
  // On expiry throws ddp::Error naming the key.
  std::string get(const std::string& key) { return get(key, timeout_); }
  virtual std::string get(const std::string& key, std::chrono::milliseconds timeout) = 0;

  // Atomically adds `delta` to the integer stored at `key` (a missing key counts as 0)
  // and returns the new value. The counter a barrier or a rank assignment is built on.
  virtual std::int64_t add(const std::string& key, std::int64_t delta) = 0;

  // If the current value equals `expected` (or the key is missing and `expected` is
  // empty), stores `desired`. Returns the value now stored, whichever happened.
  virtual std::string compare_set(const std::string& key, const std::string& expected,
                                  const std::string& desired) = 0;

  // Waits until every key exists. On expiry the error lists the keys still missing.
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }
  virtual void wait(const std::vector<std::string>& keys,
                    std::chrono::milliseconds timeout) = 0;

  // True when every key exists now (never waits).
  virtual bool check(const std::vector<std::string>& keys) = 0;

  // Removes `key`; returns whether it existed.
  virtual bool delete_key(const std::string& key) = 0;

  // Number of keys stored.
  virtual std::int64_t num_keys() = 0;

  std::chrono::milliseconds timeout() const { return timeout_; }
  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }

 private:
  std::chrono::milliseconds timeout_ = kDefaultTimeout;
};

}  // namespace ddp

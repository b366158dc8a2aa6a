// ddp::FileStore, the Store kept in one file on a filesystem every rank can see (NFS,
// Lustre, or /tmp when all ranks share a machine): `file:///shared/run42.store`.
// Chapter 05. No server and no sockets; the price is polling, so it suits a rendezvous
// (a few keys, once), not a data path. The design, and why it is safe with several
// processes writing at once, is Note [FileStore: an append-only log] in file_store.cpp.
//
// Use a fresh path per job: the file remembers everything ever written to it, and a
// previous job's keys would look like this job's. One FileStore per process (after
// fork(), make a new one in the child: flock(2) locks belong to the open file, which a
// forked child shares with its parent).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "dist/store.hpp"
#include "base/units.hpp"

namespace ddp {

class FileStore final : public Store {
 public:
  static constexpr std::size_t kMaxKeyBytes = 4 * kKiB;
  static constexpr std::size_t kMaxValueBytes = 64 * kMiB;

  // Opens (creating it when missing) the file at `path`; its folder must exist.
  // `timeout` bounds every wait: get, wait, and waiting for the file's lock.
  FileStore(std::string path, std::chrono::milliseconds timeout = kDefaultTimeout);
  ~FileStore() override;

  using Store::set;
  void set(const std::string& key, const std::string& value,
           std::chrono::milliseconds timeout) override;
  using Store::get;
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  // A missing key with a non-empty `expected` stores nothing and returns "".
  std::string compare_set(const std::string& key, const std::string& expected,
                          const std::string& desired) override;
  using Store::wait;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;
  std::int64_t num_keys() override;

  const std::string& path() const { return path_; }

 private:
  class Lock;  // flock(2) held for one operation, with a deadline

  void catch_up();  // replays records appended since offset_ into keys_ (lock held)
  void append(char op, const std::string& key, const std::string& value);  // lock held
  void check_sizes(const std::string& key, const std::string& value) const;
  // The keys of `keys` not in keys_ yet (taking the lock and catching up first).
  std::vector<std::string> missing(const std::vector<std::string>& keys);

  std::string path_;
  int fd_ = -1;
  std::mutex mutex_;                         // one operation at a time per FileStore
  std::uint64_t offset_ = 0;                 // bytes of the file replayed into keys_
  std::map<std::string, std::string> keys_;  // the store as of offset_
};

}  // namespace ddp

// Chapter 05, FileStore: every Store operation against what was written (read back through a
// second FileStore on the same file, as another rank would), timeouts that name the missing
// keys and the file, the size limits, corrupt and truncated files, and 4 forked processes
// adding to one counter at once (the total must be exact: no lost update).
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <iterator>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "dist/file_store.hpp"
#include "base/error.hpp"

using Catch::Contains;
using namespace std::chrono_literals;

namespace {

// A fresh path in the system's temporary folder, removed at the end of the test.
class StorePath {
 public:
  explicit StorePath(const std::string& tag)
      : path_(std::filesystem::temp_directory_path() /
              ("ddp_ch05_store_" + tag + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove(path_);
  }
  ~StorePath() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  std::string str() const { return path_.string(); }
  std::uintmax_t size() const { return std::filesystem::file_size(path_); }

 private:
  std::filesystem::path path_;
};

std::string file_bytes(const std::string& path) {
  std::string bytes(std::filesystem::file_size(path), '\0');
  std::ifstream(path, std::ios::binary)
      .read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return bytes;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

}  // namespace

TEST_CASE("file store: set, get, check, num_keys, delete_key", "[ch05][file_store]") {
  const StorePath path("basic");
  ddp::FileStore a(path.str(), 2s);
  ddp::FileStore b(path.str(), 2s);  // another "rank" on the same file
  CHECK(b.num_keys() == 0);
  a.set("addr/0", "10.0.0.1:4000");
  a.set("binary", std::string("a\0b\xff", 4));
  a.set("empty", "");
  CHECK(b.get("addr/0") == "10.0.0.1:4000");
  CHECK(b.get("binary") == std::string("a\0b\xff", 4));
  CHECK(b.get("empty").empty());
  CHECK(b.check({"addr/0", "empty"}));
  CHECK_FALSE(b.check({"addr/0", "addr/1"}));
  CHECK(b.num_keys() == 3);
  b.set("addr/0", "10.0.0.2:4000");  // overwrite
  CHECK(a.get("addr/0") == "10.0.0.2:4000");
  CHECK(a.delete_key("binary"));
  CHECK_FALSE(a.delete_key("binary"));
  CHECK_FALSE(b.check({"binary"}));
  CHECK(b.num_keys() == 2);
  // Replaying the whole file from the start gives the same store, tombstone included.
  ddp::FileStore c(path.str(), 2s);
  CHECK(c.num_keys() == 2);
  CHECK(c.get("addr/0") == "10.0.0.2:4000");
  CHECK_FALSE(c.check({"binary"}));
  c.set("binary", "back");
  CHECK(a.get("binary") == "back");
}

TEST_CASE("file store: add counts from 0, and refuses non-integers", "[ch05][file_store]") {
  const StorePath path("add");
  ddp::FileStore a(path.str(), 2s);
  ddp::FileStore b(path.str(), 2s);
  CHECK(a.add("n", 5) == 5);
  CHECK(b.add("n", -2) == 3);
  CHECK(a.add("n", 0) == 3);
  CHECK(b.get("n") == "3");
  a.set("word", "three");
  CHECK_THROWS_WITH(b.add("word", 1),
                    Contains("add(\"word\", 1)") && Contains("\"three\"") && Contains(path.str()));
  a.set("big", "9223372036854775807");
  CHECK_THROWS_WITH(a.add("big", 1), Contains("overflows"));
}

TEST_CASE("file store: compare_set", "[ch05][file_store]") {
  const StorePath path("cas");
  ddp::FileStore a(path.str(), 2s);
  ddp::FileStore b(path.str(), 2s);
  // Missing key, expected non-empty: nothing stored, "" returned.
  CHECK(a.compare_set("k", "x", "y").empty());
  CHECK_FALSE(b.check({"k"}));
  // Missing key, expected empty: stored.
  CHECK(a.compare_set("k", "", "first") == "first");
  CHECK(b.get("k") == "first");
  // Mismatch: unchanged, the current value returned.
  CHECK(b.compare_set("k", "other", "second") == "first");
  CHECK(a.get("k") == "first");
  // Match: swapped.
  CHECK(b.compare_set("k", "first", "second") == "second");
  CHECK(a.get("k") == "second");
}

TEST_CASE("file store: get and wait time out naming the keys and the file", "[ch05][file_store]") {
  const StorePath path("timeout");
  ddp::FileStore store(path.str(), 2s);
  store.set("here", "1");
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(store.get("rank/3/addr", 200ms),
                    Contains("get(\"rank/3/addr\") timed out after 200 ms") &&
                        Contains(path.str()) && Contains("hint:"));
  const auto waited = std::chrono::steady_clock::now() - start;
  CHECK(waited >= 200ms);  // the deadline was honoured, not skipped
  CHECK(waited < 5s);
  try {
    store.wait({"here", "a", "b"}, 200ms);
    FAIL("wait returned without keys a and b");
  } catch (const ddp::Error& e) {
    const std::string message = e.what();
    CHECK_THAT(message, Contains("missing keys: \"a\", \"b\""));
    CHECK_THAT(message, Contains(path.str()));
    CHECK_THAT(message, !Contains("\"here\""));
  }
  // The store's own timeout is the default for get(key).
  store.set_timeout(100ms);
  CHECK_THROWS_WITH(store.get("never"), Contains("timed out after 100 ms"));
}

TEST_CASE("file store: get and wait return once another process sets the key",
          "[ch05][file_store]") {
  const StorePath path("late");
  ddp::FileStore store(path.str(), 5s);
  std::thread writer([&] {
    ddp::FileStore other(path.str(), 5s);
    std::this_thread::sleep_for(50ms);
    other.set("a", "A");
    std::this_thread::sleep_for(50ms);
    other.set("b", "B");
  });
  CHECK(store.get("a") == "A");
  store.wait({"a", "b"});
  CHECK(store.get("b") == "B");
  writer.join();
}

TEST_CASE("file store: milliseconds::max() is no deadline", "[ch05][file_store]") {
  // now + max() would overflow into the past: get() used to time out at once.
  const StorePath path("forever");
  ddp::FileStore store(path.str(), std::chrono::milliseconds::max());
  std::thread writer([&] {
    ddp::FileStore other(path.str(), 5s);
    std::this_thread::sleep_for(50ms);
    other.set("a", "A");
  });
  CHECK(store.get("a", std::chrono::milliseconds::max()) == "A");
  store.wait({"a"}, std::chrono::milliseconds::max());
  store.set("b", "B");
  CHECK(store.get("b") == "B");
  writer.join();
}

TEST_CASE("file store: keys and values are bounded", "[ch05][file_store]") {
  const StorePath path("limits");
  ddp::FileStore store(path.str(), 2s);
  const std::string longest(ddp::FileStore::kMaxKeyBytes, 'k');
  store.set(longest, "ok");
  CHECK(store.get(longest) == "ok");
  CHECK_THROWS_WITH(store.set(longest + "k", "v"), Contains("4097 bytes"));
  CHECK_THROWS_WITH(store.set("big", std::string(ddp::FileStore::kMaxValueBytes + 1, 'v')),
                    Contains("\"big\"") && Contains("limit"));
  CHECK(store.num_keys() == 1);
}

TEST_CASE("file store: a foreign, truncated or damaged file is a clear error",
          "[ch05][file_store]") {
  const StorePath path("corrupt");
  write_bytes(path.str(), "hello, not a store\n");
  // ... and the store that failed to open leaves no file descriptor behind.
  auto open_fds = [] {
    const auto entries = std::filesystem::directory_iterator("/proc/self/fd");
    return std::distance(std::filesystem::begin(entries), std::filesystem::end(entries));
  };
  const auto fds_before = open_fds();
  CHECK_THROWS_WITH(ddp::FileStore(path.str(), 1s), Contains("corrupt file at byte 0") &&
                                                        Contains(path.str()) &&
                                                        Contains("does not start with"));
  CHECK(open_fds() == fds_before);
  std::filesystem::remove(path.str());
  {
    ddp::FileStore store(path.str(), 1s);
    store.set("key", "value");
    store.set("key2", "value2");
  }
  const std::string good = file_bytes(path.str());
  write_bytes(path.str(), good.substr(0, good.size() - 3));
  CHECK_THROWS_WITH(ddp::FileStore(path.str(), 1s), Contains("truncated"));
  std::string flipped = good;
  flipped[flipped.find("value2")] = 'V';
  write_bytes(path.str(), flipped);
  CHECK_THROWS_WITH(ddp::FileStore(path.str(), 1s), Contains("checksum"));
  std::string bad_op = good;
  bad_op[8] = 'X';  // the first record's type, right after the 8-byte magic
  write_bytes(path.str(), bad_op);
  CHECK_THROWS_WITH(ddp::FileStore(path.str(), 1s), Contains("unknown record type"));
  write_bytes(path.str(), good);
  ddp::FileStore store(path.str(), 1s);
  CHECK(store.get("key2") == "value2");
  // A file that shrinks under a live store (another job reused the path).
  write_bytes(path.str(), good.substr(0, 8));
  CHECK_THROWS_WITH(store.num_keys(), Contains("shrank"));
}

TEST_CASE("file store: 4 processes x 500 adds lose no update", "[ch05][file_store]") {
  const StorePath path("fork");
  constexpr int kChildren = 4;
  constexpr int kAdds = 500;
  std::vector<pid_t> children;
  for (int child = 0; child < kChildren; ++child) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      // Each child opens its own store: a forked descriptor would share the parent's lock.
      int status = 0;
      try {
        ddp::FileStore store(path.str(), 30s);
        for (int i = 0; i < kAdds; ++i) store.add("counter", 1);
        store.set("child/" + std::to_string(child), std::to_string(::getpid()));
      } catch (...) {
        status = 1;
      }
      ::_exit(status);
    }
    children.push_back(pid);
  }
  for (std::size_t child = 0; child < children.size(); ++child) {
    int status = -1;
    REQUIRE(::waitpid(children[child], &status, 0) == children[child]);
    INFO("child " << child);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  ddp::FileStore store(path.str(), 2s);
  CHECK(store.get("counter") == std::to_string(kChildren * kAdds));
  for (std::size_t child = 0; child < children.size(); ++child) {
    CHECK(store.get("child/" + std::to_string(child)) == std::to_string(children[child]));
  }
  CHECK(store.num_keys() == kChildren + 1);
}

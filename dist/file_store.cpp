// FileStore (see file_store.hpp): a key-value store in one shared file. Chapter 05.
//
// In reading order: the record format, the lock, construction, replaying the log, the
// operations. Nothing here knows about ranks or sockets.
//
// Note [FileStore: an append-only log]
// Several processes, maybe on several machines, share one file. Rewriting a table in place
// would need every reader to see either the old table or the new one, never half of each;
// an append-only log needs much less. The file is a magic string, then records:
//
//   op (1 byte: 'S' set, 'D' delete) | key length (u32) | value length (u64) | key | value
//   | checksum (u32, FNV-1a of the record's bytes before it)          integers little-endian
//
// The store is the log replayed from the start: a set overwrites, a delete (a "tombstone")
// removes. Each operation holds flock(2) on the file: shared to read, exclusive to write.
// Under the exclusive lock a writer first catches up (replays what others appended), then
// appends one record in one write(): so add() and compare_set() are read-modify-append,
// atomic across processes, and a reader never meets half a record (a half record in the
// file means a writer died mid-write or the file is not a store: a clear error, not a
// guess). Each FileStore remembers how far it replayed (offset_) and reads only what is
// new, so n operations cost O(n) bytes read, not O(n^2).
//
// get() and wait() poll: take the lock, catch up, look, release, sleep (1 ms doubling to
// 20 ms), until the deadline. Waiting for the lock polls too (flock with LOCK_NB), so that a
// process stopped while holding it costs a timeout, not a hang.
//
// flock locks belong to an open file description: two FileStores (two open() calls) exclude
// each other even in one process, but a child forked after the open shares its parent's and
// must open its own. On NFS, Linux turns flock into byte-range locks (NLM) and revalidates
// the cached file when a lock is taken: each operation sees every earlier append.
#include "dist/file_store.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <thread>

#include "base/deadline.hpp"
#include "base/errno_text.hpp"
#include "base/error.hpp"
#include "base/little_endian.hpp"

namespace ddp {
namespace {

// ---- The record format -----------------------------------------------------------------------
constexpr char kMagic[] = "DDPSTOR1";  // the file's first 8 bytes
constexpr std::size_t kMagicBytes = sizeof kMagic - 1;
constexpr std::size_t kHeaderBytes = 1 + 4 + 8;  // op, key length, value length
constexpr std::size_t kChecksumBytes = 4;
constexpr char kSet = 'S';
constexpr char kDelete = 'D';

constexpr auto kFirstPoll = std::chrono::milliseconds(1);
constexpr auto kMaxPoll = std::chrono::milliseconds(20);

std::uint32_t fnv1a(const char* data, std::size_t size) {
  std::uint32_t hash = 2166136261u;
  for (std::size_t i = 0; i < size; ++i)
    hash = (hash ^ static_cast<unsigned char>(data[i])) * 16777619u;
  return hash;
}

// One record, ready for a single write().
std::string encode(char op, const std::string& key, const std::string& value) {
  std::string record;
  record.reserve(kHeaderBytes + key.size() + value.size() + kChecksumBytes);
  record.push_back(op);
  put_le(record, key.size(), 4);
  put_le(record, value.size(), 8);
  record += key;
  record += value;
  put_le(record, fnv1a(record.data(), record.size()), 4);
  return record;
}

std::string quoted_list(const std::vector<std::string>& keys) {
  std::string out;
  for (const std::string& key : keys) out += (out.empty() ? "\"" : ", \"") + key + "\"";
  return out;
}

}  // namespace

// ---- The lock --------------------------------------------------------------------------------
// flock(fd, LOCK_SH or LOCK_EX) until the object dies. Polls with LOCK_NB so that waiting for
// it has a deadline like every other wait.
class FileStore::Lock {
 public:
  Lock(const FileStore& store, int mode, Clock::time_point deadline, const char* call)
      : fd_(store.fd_) {
    auto pause = std::chrono::microseconds(50);
    while (::flock(fd_, mode | LOCK_NB) != 0) {
      if (errno == EINTR) continue;
      DDP_CHECK(errno == EWOULDBLOCK, "FileStore ", store.path_, ": ", call,
                ": flock failed: ", errno_text(),
                "\n  hint: the filesystem must support locks (NFS: lockd running)");
      DDP_CHECK(Clock::now() < deadline, "FileStore ", store.path_, ": ", call,
                ": timed out waiting for the file's lock\n  hint: another process holds it; "
                "is one stopped (Ctrl-Z, a debugger) in the middle of an operation?");
      std::this_thread::sleep_for(pause);
      pause = std::min<std::chrono::microseconds>(pause * 2, kMaxPoll);
    }
  }
  ~Lock() { ::flock(fd_, LOCK_UN); }
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

 private:
  int fd_;
};

// ---- Construction ----------------------------------------------------------------------------
FileStore::FileStore(std::string path, std::chrono::milliseconds timeout) : path_(std::move(path)) {
  set_timeout(timeout);
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  DDP_CHECK(fd_ >= 0, "FileStore: cannot open ", path_, ": ", errno_text(),
            "\n  hint: the folder must exist and be writable on every rank (a shared "
            "filesystem when ranks run on several machines)");
  // Read what is there now: a file that is not a store fails here, not at the first get().
  // The destructor does not run when the constructor throws, so close the file here then.
  try {
    std::lock_guard<std::mutex> guard(mutex_);
    Lock lock(*this, LOCK_SH, deadline_after(this->timeout()), "open");
    catch_up();
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    throw;
  }
}

FileStore::~FileStore() {
  if (fd_ >= 0) ::close(fd_);
}

// ---- Replaying the log -----------------------------------------------------------------------
// Reads the bytes appended since offset_ and applies them to keys_. The caller holds the lock,
// so the file ends at a record boundary; anything else is corruption.
void FileStore::catch_up() {
  struct stat info {};
  DDP_CHECK(::fstat(fd_, &info) == 0, "FileStore ", path_, ": fstat failed: ", errno_text());
  const auto size = static_cast<std::uint64_t>(info.st_size);
  DDP_CHECK(size >= offset_, "FileStore ", path_, ": the file shrank from ", offset_, " to ", size,
            " bytes\n  hint: something removed or rewrote it during the job; give every job a "
            "fresh path");
  if (size == offset_) return;

  std::string bytes(size - offset_, '\0');
  std::size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n =
        ::pread(fd_, bytes.data() + got, bytes.size() - got, static_cast<off_t>(offset_ + got));
    if (n < 0 && errno == EINTR) continue;
    DDP_CHECK(n > 0, "FileStore ", path_, ": read failed at byte ", offset_ + got, ": ",
              n == 0 ? "unexpected end of file" : errno_text());
    got += static_cast<std::size_t>(n);
  }

  const auto corrupt = [&](std::size_t at, const std::string& why) {
    DDP_FAIL("FileStore ", path_, ": corrupt file at byte ", offset_ + at, ": ", why,
             "\n  hint: this is not a FileStore file, or a process died while writing it; "
             "start the job with a fresh path");
  };
  std::size_t pos = 0;
  if (offset_ == 0) {
    if (bytes.size() < kMagicBytes || bytes.compare(0, kMagicBytes, kMagic) != 0) {
      corrupt(0, "it does not start with \"" + std::string(kMagic) + "\"");
    }
    pos = kMagicBytes;
  }
  while (pos < bytes.size()) {
    const std::size_t left = bytes.size() - pos;
    if (left < kHeaderBytes) corrupt(pos, "a record is cut short (truncated file)");
    const char op = bytes[pos];
    const std::uint64_t key_bytes = get_le(&bytes[pos + 1], 4);
    const std::uint64_t value_bytes = get_le(&bytes[pos + 5], 8);
    if (op != kSet && op != kDelete) {
      corrupt(pos, "unknown record type " + std::to_string(static_cast<unsigned char>(op)));
    }
    if (key_bytes > kMaxKeyBytes || value_bytes > kMaxValueBytes ||
        (op == kDelete && value_bytes != 0)) {
      corrupt(pos, "a record claims a key of " + std::to_string(key_bytes) +
                       " bytes and a value of " + std::to_string(value_bytes) + " bytes");
    }
    const std::size_t total = kHeaderBytes + key_bytes + value_bytes + kChecksumBytes;
    if (left < total) corrupt(pos, "a record is cut short (truncated file)");
    const std::size_t body = total - kChecksumBytes;
    if (fnv1a(&bytes[pos], body) != get_le(&bytes[pos + body], 4)) {
      corrupt(pos, "a record's checksum does not match");
    }
    std::string key = bytes.substr(pos + kHeaderBytes, key_bytes);
    if (op == kSet) {
      keys_[std::move(key)] = bytes.substr(pos + kHeaderBytes + key_bytes, value_bytes);
    } else {
      keys_.erase(key);
    }
    pos += total;
  }
  offset_ = size;
}

// Appends one record (and the magic, to an empty file). The caller holds the exclusive lock
// and has caught up, so the file ends at offset_ and the record lands there.
void FileStore::append(char op, const std::string& key, const std::string& value) {
  std::string bytes = offset_ == 0 ? std::string(kMagic) : std::string();
  bytes += encode(op, key, value);
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = n == 0 ? "wrote nothing" : errno_text();
      // Take back the partial record, so that the other ranks do not read a corrupt file.
      if (::ftruncate(fd_, static_cast<off_t>(offset_)) != 0) {
        // Nothing more to do: the next reader reports the truncated record.
      }
      DDP_FAIL("FileStore ", path_, ": writing key \"", key, "\" failed: ", why,
               "\n  hint: is the filesystem full?");
    }
    done += static_cast<std::size_t>(n);
  }
  offset_ += bytes.size();
  if (op == kSet) {
    keys_[key] = value;
  } else {
    keys_.erase(key);
  }
}

void FileStore::check_sizes(const std::string& key, const std::string& value) const {
  DDP_CHECK(key.size() <= kMaxKeyBytes, "FileStore ", path_, ": a key of ", key.size(),
            " bytes is longer than the limit of ", kMaxKeyBytes);
  DDP_CHECK(value.size() <= kMaxValueBytes, "FileStore ", path_, ": the value for key \"", key,
            "\" has ", value.size(), " bytes, more than the limit of ", kMaxValueBytes,
            "\n  hint: a store is for rendezvous, not for data");
}

// ---- Writing ---------------------------------------------------------------------------------
void FileStore::set(const std::string& key, const std::string& value,
                    std::chrono::milliseconds timeout) {
  check_sizes(key, value);
  std::lock_guard<std::mutex> guard(mutex_);
  Lock lock(*this, LOCK_EX, deadline_after(timeout), "set");
  catch_up();
  append(kSet, key, value);
}

std::int64_t FileStore::add(const std::string& key, std::int64_t delta) {
  check_sizes(key, "");
  std::lock_guard<std::mutex> guard(mutex_);
  Lock lock(*this, LOCK_EX, deadline_after(timeout()), "add");
  catch_up();
  std::int64_t value = 0;
  if (const auto it = keys_.find(key); it != keys_.end()) {
    const std::string& text = it->second;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    DDP_CHECK(ec == std::errc() && ptr == text.data() + text.size() && !text.empty(), "FileStore ",
              path_, ": add(\"", key, "\", ", delta, "): the value \"", text,
              "\" is not an integer\n  hint: add() counts on keys that only add() writes");
  }
  std::int64_t sum = 0;
  DDP_CHECK(!__builtin_add_overflow(value, delta, &sum), "FileStore ", path_, ": add(\"", key,
            "\", ", delta, ") overflows int64 (the value is ", value, ")");
  append(kSet, key, std::to_string(sum));
  return sum;
}

std::string FileStore::compare_set(const std::string& key, const std::string& expected,
                                   const std::string& desired) {
  check_sizes(key, desired);
  std::lock_guard<std::mutex> guard(mutex_);
  Lock lock(*this, LOCK_EX, deadline_after(timeout()), "compare_set");
  catch_up();
  const auto it = keys_.find(key);
  const bool swap = it == keys_.end() ? expected.empty() : it->second == expected;
  if (swap) {
    append(kSet, key, desired);
    return desired;
  }
  return it == keys_.end() ? std::string() : it->second;
}

bool FileStore::delete_key(const std::string& key) {
  std::lock_guard<std::mutex> guard(mutex_);
  Lock lock(*this, LOCK_EX, deadline_after(timeout()), "delete_key");
  catch_up();
  if (keys_.count(key) == 0) return false;
  append(kDelete, key, "");
  return true;
}

// ---- Reading ---------------------------------------------------------------------------------
std::vector<std::string> FileStore::missing(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> guard(mutex_);
  Lock lock(*this, LOCK_SH, deadline_after(timeout()), "read");
  catch_up();
  std::vector<std::string> absent;
  for (const std::string& key : keys) {
    if (keys_.count(key) == 0) absent.push_back(key);
  }
  return absent;
}

std::string FileStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = deadline_after(timeout);
  auto pause = std::chrono::duration_cast<Clock::duration>(kFirstPoll);
  while (true) {
    {
      std::lock_guard<std::mutex> guard(mutex_);
      Lock lock(*this, LOCK_SH, std::max(deadline, deadline_after(this->timeout())), "get");
      catch_up();
      if (const auto it = keys_.find(key); it != keys_.end()) return it->second;
    }
    const Clock::time_point now = Clock::now();
    DDP_CHECK(now < deadline, "FileStore ", path_, ": get(\"", key, "\") timed out after ",
              timeout.count(), " ms; missing key: \"", key,
              "\"\n  hint: the rank that sets it has not got there (or failed); do all ranks use "
              "the same file?");
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
    pause = std::min<Clock::duration>(pause * 2, kMaxPoll);
  }
}

void FileStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = deadline_after(timeout);
  auto pause = std::chrono::duration_cast<Clock::duration>(kFirstPoll);
  while (true) {
    const std::vector<std::string> absent = missing(keys);
    if (absent.empty()) return;
    const Clock::time_point now = Clock::now();
    DDP_CHECK(now < deadline, "FileStore ", path_, ": wait(", keys.size(),
              " keys) timed out after ", timeout.count(),
              " ms; missing keys: ", quoted_list(absent),
              "\n  hint: the ranks that set them have not got there (or failed); do all ranks "
              "use the same file?");
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
    pause = std::min<Clock::duration>(pause * 2, kMaxPoll);
  }
}

bool FileStore::check(const std::vector<std::string>& keys) { return missing(keys).empty(); }

std::int64_t FileStore::num_keys() {
  std::lock_guard<std::mutex> guard(mutex_);
  Lock lock(*this, LOCK_SH, deadline_after(timeout()), "num_keys");
  catch_up();
  return static_cast<std::int64_t>(keys_.size());
}

}  // namespace ddp

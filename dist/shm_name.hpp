// How ShmGroup's segments in /dev/shm are named, and how one left behind by a crash is
// found and removed (Note [Shared-memory all-reduce], dist/shm_group.cpp). Chapter 05.
// Header-only, so that ddprun (which links ddp::tensor alone) cleans up as the ranks do.
// Names: "ddp-<job token>-<group prefix>-<creator pid>-<nonce>", each part cut to
// [A-Za-z0-9_.] so that the pid is always the second field from the end.
#pragma once

#include <signal.h>
#include <sys/mman.h>

#include <cctype>
#include <cerrno>
#include <filesystem>
#include <string>
#include <system_error>

namespace ddp::detail {

inline constexpr const char* kShmNameStart = "ddp-";

// `part` with every character outside [A-Za-z0-9_.] replaced by '_', at most 40 of them.
inline std::string shm_name_part(const std::string& part) {
  std::string out = part.substr(0, 40);
  for (char& c : out) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '_' && c != '.') c = '_';
  }
  return out;
}

// The creator pid in a segment name, or -1 when the name is not one of ours.
inline long shm_creator_pid(const std::string& name) {
  if (!name.starts_with(kShmNameStart)) return -1;
  const std::size_t last = name.rfind('-');
  if (last == std::string::npos || last == 0) return -1;
  const std::size_t before = name.rfind('-', last - 1);
  if (before == std::string::npos || before + 1 >= last) return -1;
  long pid = 0;
  for (std::size_t i = before + 1; i < last; ++i) {
    if (std::isdigit(static_cast<unsigned char>(name[i])) == 0) return -1;
    pid = pid * 10 + (name[i] - '0');
    if (pid > (1L << 31)) return -1;
  }
  return pid > 0 ? pid : -1;
}

// Unlinks every segment of ours in /dev/shm whose creator is no longer alive: a group's
// rank 0 unlinks its segment as soon as every rank has mapped it, so one still there
// with a dead creator was left by a crash during set-up. Returns how many it removed.
// (A creator in another pid namespace that shares this /dev/shm would look dead here;
// containers have a /dev/shm of their own.)
inline int remove_dead_shm_segments() {
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", ec)) {
    const std::string name = entry.path().filename().string();
    const long pid = shm_creator_pid(name);
    if (pid <= 0) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH)
      continue;  // alive (or not ours to see)
    if (::shm_unlink(("/" + name).c_str()) == 0) ++removed;
  }
  return removed;
}

}  // namespace ddp::detail

// state_dict files: named tensors saved to disk and read back, checked. Chapter 04.
//
// A StateDict is an ordered list of (name, tensor): a module's parameters and buffers
// (Module::state_dict), an optimizer's momentum buffers (SGD::state_dict). This file
// writes one to a small documented binary format, atomically, and reads it back with
// every byte accounted for. It does not pickle, compress or memory-map.
//
// Note [The DDPSTATE file format, version 1]
// All integers are little-endian, and so are the tensor bytes (float32 IEEE-754, int64
// two's complement), row-major:
//
//   size (bytes)     field
//   8                magic: the ASCII bytes "DDPSTATE"
//   4                version: uint32 = 1
//   8                count: uint64, the number of entries that follow
//   then `count` entries, each:
//   4 + n            name: uint32 length n, then n bytes (UTF-8, no terminating NUL)
//   1                dtype: uint8, 0 = float32, 1 = int64
//   4 + 8 * d        shape: uint32 ndim d, then d int64 sizes
//   8                byte length b: uint64, = numel(shape) * element size
//   4                checksum: uint32 CRC-32 of the b data bytes (zlib's crc32, the
//                    CRC of gzip and PNG)
//   b                data
//   and the file ends right after the last entry.
//
// Example: one float32 entry "w" of shape (2) takes 8+4+8 + 4+1 + 1 + 4+8 + 8 + 4 + 8 =
// 58 bytes. Python can read it with struct.unpack("<...") and zlib.crc32.
//
// Writing is atomic: the bytes go to a temporary file in the same folder, which is
// fsync'ed and then renamed over the target (and the folder fsync'ed), so a crash or a
// full disk leaves either the old file or the new one, never half of one. A process
// killed before the rename leaves its temporary file (PATH.tmp.<pid>) behind: nothing
// reads it, and nothing here deletes other processes' files (one may still be writing).
//
// Note [Testing a crash mid-save]
// That a kill leaves the previous file is a claim about every instant of the save. A
// SaveObserver is the seam that tests it deterministically: save_state_dict calls it at
// each SavePoint, and a test's observer can raise SIGKILL there (tests/ch08/lifecycle/
// test_save_crash.cpp kills a child process after N bytes, before and after the rename,
// and checks the target bit for bit). Production callers pass none; it costs nothing.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.hpp"
#include "base/units.hpp"

namespace ddp::nn {

class Module;

using StateDict = std::vector<std::pair<std::string, Tensor>>;

inline constexpr char kStateDictMagic[] = "DDPSTATE";  // 8 bytes in the file, no NUL
inline constexpr std::uint32_t kStateDictVersion = 1;

// Where a save is when the observer is called (Note [Testing a crash mid-save]).
enum class SavePoint {
  Written,       // after every write() into the temporary file (at most kSaveChunkBytes)
  BeforeRename,  // the temporary file complete, fsync'ed and closed; the target untouched
  Renamed,       // the target replaced by the new file; the folder not yet fsync'ed
};
// bytes_written: bytes in the temporary file so far (all of them after Written).
using SaveObserver = std::function<void(SavePoint point, std::size_t bytes_written)>;
// The temporary file is written in pieces of at most this many bytes.
inline constexpr std::size_t kSaveChunkBytes = 1 * kMiB;

// A whole file as written or read: its size and the CRC-32 of all its bytes. Chapter 09's
// sharded checkpoints record it for every shard file in their manifest, so that a file of
// another save (valid on its own, every entry's CRC right) is not taken for this one's.
struct FileSummary {
  std::uint64_t bytes = 0;
  std::uint32_t crc32 = 0;
};

// Writes `state` to `path` (tensors on any device; GPU ones are copied to the host) and
// returns what it wrote. Throws ddp::Error naming the path and the failing system call.
// `observer`, when given, is called at each SavePoint (for tests; Note [Testing a crash
// mid-save]).
FileSummary save_state_dict(const StateDict& state, const std::filesystem::path& path,
                            const SaveObserver& observer = {});

// Reads and checks the whole file: magic, version, every header, every CRC, nothing left
// over. The tensors come back on the CPU. Throws ddp::Error naming the path and the
// first bad entry (index and name) on a truncated, corrupted or malformed file.
// `summary`, when given, receives the file's size and whole-file CRC-32 (filled before
// the entries are checked, so also when the checks then throw).
StateDict read_state_dict(const std::filesystem::path& path, FileSummary* summary = nullptr);

// module.state_dict() to a file, and back. load_module reads and checks the whole file
// first, then hands it to Module::load_state_dict (which checks names, dtypes and shapes
// before copying anything), so a failed load leaves the module unchanged.
void save_module(const Module& module, const std::filesystem::path& path);
void load_module(Module& module, const std::filesystem::path& path);

}  // namespace ddp::nn

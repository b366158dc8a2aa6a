// state_dict files (see state_dict.hpp for the format, Note [The DDPSTATE file format]).
// Sections: byte encoding -> writing (atomic) -> reading (checked) -> modules.
#include "nn/state_dict.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <unordered_set>

#include "nn/module.hpp"
#include "base/errno_text.hpp"
#include "base/little_endian.hpp"

namespace ddp::nn {

namespace {

// The tensor bytes are copied as they lie in memory, so the host must be little-endian,
// as x86-64 and aarch64 (everything ddp.cpp runs on) are. The headers are encoded byte
// by byte below and would be portable anyway.
static_assert(std::endian::native == std::endian::little,
              "the DDPSTATE format stores tensor data little-endian");

constexpr std::size_t kMagicSize = 8;
constexpr std::uint32_t kMaxNameLength = 4096;  // larger means a corrupted header
constexpr std::uint32_t kMaxDims = 16;

std::uint8_t dtype_code(DType dtype) { return dtype == DType::Float32 ? 0 : 1; }

std::uint32_t crc32_of(const void* data, std::size_t size) {
  // crc32_z takes a size_t length (plain crc32 stops at 4 GiB).
  const uLong crc = crc32_z(0L, static_cast<const Bytef*>(data), size);
  return static_cast<std::uint32_t>(crc);
}

// ---- Byte encoding: little-endian (base/little_endian.hpp) --------------------------------

template <typename T>
void put(std::string& out, T value) {
  put_le(out, static_cast<std::uint64_t>(value), sizeof(T));
}

std::string encode(const StateDict& state) {
  std::string out(kStateDictMagic, kMagicSize);
  put<std::uint32_t>(out, kStateDictVersion);
  put<std::uint64_t>(out, state.size());
  for (const auto& [name, tensor] : state) {
    DDP_CHECK(tensor.defined(), "save_state_dict: entry '", name, "' is undefined");
    DDP_CHECK(name.size() <= kMaxNameLength, "save_state_dict: entry name of ", name.size(),
              " bytes is longer than ", kMaxNameLength);
    // cpu() and contiguous() return the tensor itself when it already is both.
    const Tensor host = tensor.cpu().contiguous();
    const std::size_t nbytes = static_cast<std::size_t>(host.numel()) * element_size(host.dtype());
    put<std::uint32_t>(out, static_cast<std::uint32_t>(name.size()));
    out += name;
    put<std::uint8_t>(out, dtype_code(host.dtype()));
    put<std::uint32_t>(out, static_cast<std::uint32_t>(host.dim()));
    for (std::int64_t size : host.shape()) put<std::int64_t>(out, size);
    put<std::uint64_t>(out, nbytes);
    const auto* bytes = static_cast<const char*>(host.raw_data());
    put<std::uint32_t>(out, crc32_of(bytes, nbytes));
    out.append(bytes, nbytes);
  }
  return out;
}

// ---- Writing: temporary file, fsync, rename, fsync the folder -------------------------------

std::string hex(std::uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%08x", value);
  return text;
}

// A file descriptor that is closed exactly once (move-only).
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  FileDescriptor& operator=(FileDescriptor&&) = delete;
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;

  int get() const { return fd_; }
  // close() can report a failed write-back (NFS, full disk): it must be checked.
  int close() { return ::close(std::exchange(fd_, -1)); }

 private:
  int fd_;
};

// Deletes the temporary file unless the rename went through.
class TemporaryFile {
 public:
  explicit TemporaryFile(std::filesystem::path path) : path_(std::move(path)) {}
  ~TemporaryFile() {
    if (!committed_) ::unlink(path_.c_str());
  }
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  void commit() { committed_ = true; }

 private:
  std::filesystem::path path_;
  bool committed_ = false;
};

void write_all(int fd, const std::string& bytes, const std::filesystem::path& target,
               const std::filesystem::path& temporary, const SaveObserver& observer) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const std::size_t piece = std::min(kSaveChunkBytes, bytes.size() - done);
    const ssize_t n = ::write(fd, bytes.data() + done, piece);
    if (n < 0 && errno == EINTR) continue;
    DDP_CHECK(n > 0, "save_state_dict(", target.string(), "): write(", temporary.string(),
              ") failed after ", done, " of ", bytes.size(), " bytes: ", errno_text());
    done += static_cast<std::size_t>(n);
    if (observer) observer(SavePoint::Written, done);
  }
}

}  // namespace

FileSummary save_state_dict(const StateDict& state, const std::filesystem::path& path,
                            const SaveObserver& observer) {
  const std::string bytes = encode(state);
  const std::filesystem::path folder =
      path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  // Same folder as the target: rename() is only atomic within one file system.
  TemporaryFile temporary(folder / (path.filename().string() + ".tmp." +
                                    std::to_string(::getpid())));
  {
    FileDescriptor file(
        ::open(temporary.path().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    DDP_CHECK(file.get() >= 0, "save_state_dict(", path.string(), "): cannot create ",
              temporary.path().string(), ": ", errno_text());
    write_all(file.get(), bytes, path, temporary.path(), observer);
    // The data must be on disk BEFORE the rename makes it the file: otherwise a crash
    // can leave the new name pointing at an empty or partial file.
    DDP_CHECK(::fsync(file.get()) == 0, "save_state_dict(", path.string(), "): fsync(",
              temporary.path().string(), ") failed: ", errno_text());
    DDP_CHECK(file.close() == 0, "save_state_dict(", path.string(), "): close(",
              temporary.path().string(), ") failed: ", errno_text());
  }
  if (observer) observer(SavePoint::BeforeRename, bytes.size());
  DDP_CHECK(::rename(temporary.path().c_str(), path.c_str()) == 0, "save_state_dict(",
            path.string(), "): rename(", temporary.path().string(), ") failed: ", errno_text());
  temporary.commit();
  if (observer) observer(SavePoint::Renamed, bytes.size());
  // The rename is an update of the folder; fsync on the folder makes it durable.
  FileDescriptor dir(::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  DDP_CHECK(dir.get() >= 0 && ::fsync(dir.get()) == 0, "save_state_dict(", path.string(),
            "): fsync of the folder ", folder.string(), " failed: ", errno_text());
  return FileSummary{.bytes = bytes.size(), .crc32 = crc32_of(bytes.data(), bytes.size())};
}

// ---- Reading: every field bounds-checked, every entry's CRC compared --------------------------

namespace {

// Walks the file's bytes; every read says what it is for, so a short file is reported
// as "truncated in entry 3 ('fc.bias') while reading its data".
class Reader {
 public:
  Reader(std::string bytes, const std::filesystem::path& path)
      : bytes_(std::move(bytes)), path_(path.string()) {}

  // Where the errors point: "entry 3 ('fc.bias')", or the file header.
  void set_context(std::string context) { context_ = std::move(context); }
  std::size_t left() const { return bytes_.size() - pos_; }
  bool at_end() const { return pos_ == bytes_.size(); }

  [[noreturn]] void fail(const std::string& what) const {
    DDP_FAIL("read_state_dict(", path_, "): ", context_, ": ", what);
  }
  void need(std::size_t n, const char* what) const {
    if (n > left()) {
      fail(detail::concat("the file is truncated: ", what, " needs ", n, " bytes at offset ",
                          pos_, " but only ", left(), " are left (file size ", bytes_.size(),
                          ")"));
    }
  }
  template <typename T>
  T get(const char* what) {
    need(sizeof(T), what);
    const std::uint64_t bits = get_le(bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return static_cast<T>(bits);
  }
  const char* take(std::size_t n, const char* what) {
    need(n, what);
    const char* at = bytes_.data() + pos_;
    pos_ += n;
    return at;
  }

 private:
  std::string bytes_;
  std::string path_;
  std::string context_ = "header";
  std::size_t pos_ = 0;
};

std::string read_file(const std::filesystem::path& path) {
  // A folder opens as a stream too, and its "size" is 2^63 - 1 on some file systems.
  std::error_code ec;
  DDP_CHECK(!std::filesystem::is_directory(path, ec), "read_state_dict(", path.string(),
            "): this is a folder, not a checkpoint file");
  std::ifstream in(path, std::ios::binary | std::ios::ate);  // opened at the end: the size
  DDP_CHECK(in.good(), "read_state_dict(", path.string(), "): cannot open the file: ",
            errno_text());
  const std::streamoff size = in.tellg();
  DDP_CHECK(size >= 0, "read_state_dict(", path.string(), "): cannot tell its size");
  std::string bytes(static_cast<std::size_t>(size), '\0');
  in.seekg(0);
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  DDP_CHECK(in.good(), "read_state_dict(", path.string(), "): read error: ", errno_text());
  return bytes;
}

}  // namespace

StateDict read_state_dict(const std::filesystem::path& path, FileSummary* summary) {
  std::string bytes = read_file(path);
  if (summary) {
    *summary = FileSummary{.bytes = bytes.size(), .crc32 = crc32_of(bytes.data(), bytes.size())};
  }
  Reader in(std::move(bytes), path);
  const std::string magic(in.take(kMagicSize, "the magic"), kMagicSize);
  if (magic != std::string(kStateDictMagic, kMagicSize)) {
    in.fail("not a DDPSTATE file (the first 8 bytes are not \"DDPSTATE\")");
  }
  const auto version = in.get<std::uint32_t>("the version");
  if (version != kStateDictVersion) {
    in.fail(detail::concat("format version ", version, ", this build reads version ",
                           kStateDictVersion));
  }
  const auto count = in.get<std::uint64_t>("the entry count");
  // Every entry takes at least 21 bytes: a corrupted count cannot make us reserve much.
  if (count > in.left() / 21) {
    in.fail(detail::concat("the entry count ", count, " cannot fit in the ", in.left(),
                           " bytes that follow: the file is truncated or corrupted"));
  }

  StateDict state;
  state.reserve(count);
  std::unordered_set<std::string> seen;
  for (std::uint64_t i = 0; i < count; ++i) {
    in.set_context(detail::concat("entry ", i, " (name not read yet)"));
    const auto name_length = in.get<std::uint32_t>("the name length");
    if (name_length > kMaxNameLength) {
      in.fail(detail::concat("name length ", name_length, " is over ", kMaxNameLength,
                             ": the file is corrupted"));
    }
    std::string name(in.take(name_length, "the name"), name_length);
    in.set_context(detail::concat("entry ", i, " ('", name, "')"));
    if (!seen.insert(name).second) in.fail("this name appears twice");

    const auto code = in.get<std::uint8_t>("the dtype");
    if (code > 1) in.fail(detail::concat("unknown dtype code ", int{code}));
    const DType dtype = code == 0 ? DType::Float32 : DType::Int64;
    const auto ndim = in.get<std::uint32_t>("the number of dimensions");
    if (ndim > kMaxDims) in.fail(detail::concat(ndim, " dimensions: the file is corrupted"));
    Shape shape(ndim);
    for (auto& size : shape) {
      size = in.get<std::int64_t>("the shape");
      if (size < 0) in.fail(detail::concat("invalid size ", size, " in the shape"));
    }
    const std::optional<std::int64_t> expected = checked_nbytes(shape, element_size(dtype));
    if (!expected) in.fail(detail::concat("the shape ", shape_str(shape), " is too large"));
    const auto nbytes = in.get<std::uint64_t>("the byte length");
    if (nbytes != static_cast<std::uint64_t>(*expected)) {
      in.fail(detail::concat("byte length ", nbytes, " does not match ", dtype_name(dtype), " ",
                             shape_str(shape), " (", *expected, " bytes)"));
    }
    const auto stored_crc = in.get<std::uint32_t>("the CRC-32");
    const char* data = in.take(nbytes, "the data");
    const std::uint32_t crc = crc32_of(data, nbytes);
    if (crc != stored_crc) {
      in.fail(detail::concat("CRC-32 mismatch (stored ", hex(stored_crc), ", computed ",
                             hex(crc), "): the data is corrupted"));
    }
    Tensor tensor = empty(shape, TensorOptions{dtype, Device::cpu()});
    if (nbytes > 0) std::memcpy(tensor.raw_data(), data, nbytes);
    state.emplace_back(std::move(name), std::move(tensor));
  }
  in.set_context(detail::concat("after the last entry (", count, ")"));
  if (!in.at_end()) in.fail(detail::concat(in.left(), " unexpected bytes at the end"));
  return state;
}

// ---- Modules ----------------------------------------------------------------------------------

void save_module(const Module& module, const std::filesystem::path& path) {
  save_state_dict(module.state_dict(), path);
}

void load_module(Module& module, const std::filesystem::path& path) {
  const StateDict state = read_state_dict(path);  // the whole file checked first
  module.load_state_dict(state, path.string());   // then names and shapes, then the copy
}

}  // namespace ddp::nn

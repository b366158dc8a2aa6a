// Chapter 04 test helpers: IDX files built byte by byte, gzip written with zlib's deflate
// (independently of the reader's inflate), a temporary folder that removes itself, and
// the message of a ddp::Error. Header-only: only the ch04_data tests use it.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include <unistd.h>

#include "base/error.hpp"

namespace ch04 {

using Bytes = std::vector<std::uint8_t>;

inline void put_u32(Bytes& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(v >> shift));
}

// magic, then one big-endian uint32 per dimension, then `data` as it is.
inline Bytes idx_bytes(std::uint32_t magic, const std::vector<std::uint32_t>& dims,
                       const Bytes& data) {
  Bytes out;
  put_u32(out, magic);
  for (std::uint32_t d : dims) put_u32(out, d);
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// n images of h x w with pixel k = (k * 7 + 3) mod 256: every byte value shows up.
inline Bytes pattern(std::size_t count) {
  Bytes out(count);
  for (std::size_t k = 0; k < count; ++k) out[k] = static_cast<std::uint8_t>((k * 7 + 3) % 256);
  return out;
}

inline Bytes images_file(std::uint32_t n, std::uint32_t h, std::uint32_t w) {
  return idx_bytes(0x00000803, {n, h, w}, pattern(std::size_t{n} * h * w));
}

inline Bytes labels_file(const Bytes& labels) {
  return idx_bytes(0x00000801, {static_cast<std::uint32_t>(labels.size())}, labels);
}

// One gzip member (RFC 1952) holding `raw`, written with deflate.
inline Bytes gzip(const Bytes& raw) {
  z_stream s{};
  if (deflateInit2(&s, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw std::runtime_error("deflateInit2 failed");
  }
  Bytes out(deflateBound(&s, static_cast<uLong>(raw.size())) + 64);
  s.next_in = const_cast<Bytef*>(raw.data());
  s.avail_in = static_cast<uInt>(raw.size());
  s.next_out = out.data();
  s.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&s, Z_FINISH);
  out.resize(s.total_out);
  deflateEnd(&s);
  if (rc != Z_STREAM_END) throw std::runtime_error("deflate did not finish");
  return out;
}

// A folder under the system's temporary folder, removed with everything in it.
class TempDir {
 public:
  explicit TempDir(const std::string& tag)
      : path_(std::filesystem::temp_directory_path() /
              ("ddp_ch04_" + tag + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;  // a destructor never throws
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // Writes `bytes` to <folder>/<name> and returns the full path.
  std::string write(const std::string& name, const Bytes& bytes) const {
    const std::filesystem::path file = path_ / name;
    std::ofstream out(file, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    if (!out) throw std::runtime_error("cannot write " + file.string());
    return file.string();
  }

 private:
  std::filesystem::path path_;
};

// Runs f and returns the message of the ddp::Error it throws, "" when it throws none.
// Any other exception escapes, and fails the test case.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const ddp::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace ch04

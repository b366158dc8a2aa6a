// IDX reading (see idx_reader.hpp). Chapter 04.
//
// In reading order: the byte sources (the bytes as they are, or inflated from gzip), then
// the parser, which pulls the header, checks it, and collects the data as it arrives.
// The parser never asks how big the input is: a gzip file does not say (its size field
// is a 32-bit hint that anyone can forge), so "is the data there?" is answered only by
// reading it.
#include "data/idx_reader.hpp"

// zlib declares `next_in` as pointing to const bytes only when asked, and we only ever
// read the compressed bytes.
#define ZLIB_CONST
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "data/idx_header.hpp"
#include "base/error.hpp"
#include "base/errno_text.hpp"

namespace ddp {
namespace {

// Bytes are pulled in pieces of this size: it bounds how far memory can run ahead of
// the data that really arrived.
constexpr std::size_t kChunk = std::size_t{1} << 16;

// ---- Byte sources ----------------------------------------------------------------------
// The parser reads through this interface, so a gzip file is read exactly like a raw
// one, and the decompressed file never has to exist in memory beyond what was asked for.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Copies up to out.size() bytes into `out` and returns how many; 0 means the end.
  // May return fewer than asked before the end; read_up_to() below loops.
  virtual std::size_t read(std::span<std::uint8_t> out) = 0;
};

class RawSource final : public ByteSource {
 public:
  explicit RawSource(std::span<const std::uint8_t> bytes) : bytes_(bytes) {}

  std::size_t read(std::span<std::uint8_t> out) override {
    const std::size_t n = std::min(out.size(), bytes_.size() - pos_);
    if (n > 0) std::memcpy(out.data(), bytes_.data() + pos_, n);
    pos_ += n;
    return n;
  }

 private:
  std::span<const std::uint8_t> bytes_;
  std::size_t pos_ = 0;
};

// Inflates a gzip stream with zlib's z_stream, piece by piece. Not gzread(): it passes a
// file that is not gzip through unchanged and reports a cut-off stream as a short read,
// and those are exactly the cases this reader has to name. Owns the z_stream (RAII).
class GunzipSource final : public ByteSource {
 public:
  GunzipSource(std::span<const std::uint8_t> compressed, const std::string& name)
      : compressed_(compressed), name_(name) {
    // 16 + MAX_WBITS: expect the gzip wrapper (header, CRC-32, length), not zlib's own.
    const int rc = inflateInit2(&stream_, 16 + MAX_WBITS);
    DDP_CHECK(rc == Z_OK, "file ", name_, ": zlib could not start inflating (", zError(rc), ")");
  }
  ~GunzipSource() override { inflateEnd(&stream_); }
  GunzipSource(const GunzipSource&) = delete;
  GunzipSource& operator=(const GunzipSource&) = delete;

  std::size_t read(std::span<std::uint8_t> out) override {
    if (finished_ || out.empty()) return 0;
    const auto asked = static_cast<uInt>(std::min<std::size_t>(out.size(), kChunk));
    stream_.next_out = out.data();
    stream_.avail_out = asked;
    while (stream_.avail_out > 0) {
      if (stream_.avail_in == 0) feed_input();
      const int rc = inflate(&stream_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        if (!start_next_member()) {
          finished_ = true;
          break;
        }
        continue;
      }
      // Z_BUF_ERROR = "no progress possible": with all input handed over, that means the
      // stream stopped before its end marker (and before the CRC could be checked).
      if (rc == Z_BUF_ERROR && stream_.avail_in == 0 && fed_ == compressed_.size()) {
        DDP_FAIL("file ", name_, ": truncated gzip stream: the file ends after ",
                 compressed_.size(),
                 " compressed bytes without the end-of-stream marker\n"
                 "hint: the download or copy was cut short; fetch the file again");
      }
      DDP_CHECK(rc == Z_OK, "file ", name_, ": corrupt gzip data near compressed byte ", consumed(),
                ": zlib says \"", stream_.msg ? stream_.msg : zError(rc), "\"\n",
                "hint: the file is damaged; fetch it again");
    }
    return asked - stream_.avail_out;
  }

 private:
  std::size_t consumed() const { return fed_ - stream_.avail_in; }

  // Hands zlib the next piece of the compressed bytes (avail_in is only 32 bits wide).
  void feed_input() {
    const std::size_t n = std::min<std::size_t>(compressed_.size() - fed_, std::size_t{1} << 30);
    stream_.next_in = compressed_.data() + fed_;
    stream_.avail_in = static_cast<uInt>(n);
    fed_ += n;
  }

  // After one gzip member ends: true when another follows (`cat a.gz b.gz` is a valid
  // gzip file, and gunzip reads both), false at the end of the input. Anything else
  // after the stream is an error: gunzip would warn "trailing garbage".
  bool start_next_member() {
    const std::size_t at = consumed();
    const std::size_t left = compressed_.size() - at;
    if (left == 0) return false;
    DDP_CHECK(left >= 2 && compressed_[at] == 0x1f && compressed_[at + 1] == 0x8b, "file ", name_,
              ": ", left, " bytes of trailing garbage after the end of the ",
              "gzip stream (at compressed byte ", at, ")");
    inflateReset(&stream_);  // keeps next_in / avail_in: the next member starts there
    return true;
  }

  std::span<const std::uint8_t> compressed_;
  std::size_t fed_ = 0;  // bytes of compressed_ handed to zlib so far
  const std::string& name_;
  z_stream stream_{};  // zero-initialised: zalloc = zfree = Z_NULL picks malloc/free
  bool finished_ = false;
};

// ---- Parsing -----------------------------------------------------------------------------
// Reads until `out` is full or the source ends; returns how many bytes arrived.
std::size_t read_up_to(ByteSource& source, std::span<std::uint8_t> out) {
  std::size_t got = 0;
  while (got < out.size()) {
    const std::size_t n = source.read(out.subspan(got));
    if (n == 0) break;
    got += n;
  }
  return got;
}

std::uint32_t big_endian_u32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}

IdxArray parse_idx(ByteSource& source, const std::string& name) {
  // Header, byte by byte (all numbers big-endian):
  //   0..1  zero   2  element type (0x08 = uint8)   3  number of dimensions
  //   4..   one uint32 per dimension, then the elements, row-major
  std::array<std::uint8_t, 4> magic_bytes{};
  const std::size_t got_magic = read_up_to(source, magic_bytes);
  DDP_CHECK(got_magic == 4, "file ", name, ": too short to be an IDX file: it ends after ",
            got_magic, " bytes, and the magic number alone takes 4");
  const std::size_t ndim = idx_ndim(magic_bytes, name);

  std::array<std::uint8_t, 12> dim_bytes{};
  const std::size_t got_dims = read_up_to(source, std::span(dim_bytes).first(4 * ndim));
  DDP_CHECK(got_dims == 4 * ndim, "file ", name, ": truncated header: ", ndim, " dimensions take ",
            4 * ndim, " bytes after the magic number, but the file ends after ", got_dims);
  IdxArray out;
  for (std::size_t d = 0; d < ndim; ++d) {
    out.dims.push_back(std::int64_t{big_endian_u32(dim_bytes.data() + 4 * d)});
  }
  const std::uint64_t claimed = idx_claimed_bytes(out.dims, name);

  // The data, collected as it arrives: grow by one chunk, fill it, keep what came. A
  // header that lies about the size costs at most what the file really holds.
  while (out.data.size() < claimed) {
    const std::size_t have = out.data.size();
    const std::size_t want =
        static_cast<std::size_t>(std::min<std::uint64_t>(kChunk, claimed - have));
    out.data.resize(have + want);
    const std::size_t got = read_up_to(source, std::span(out.data).subspan(have, want));
    out.data.resize(have + got);
    DDP_CHECK(got == want, "file ", name, ": header claims ", describe_claim(out.dims), " (",
              claimed, " bytes) but the data ends after ", out.data.size(), " bytes\n",
              "hint: the file is truncated, or its header is wrong");
  }

  // Nothing may follow: extra bytes mean the header and the data disagree. They are
  // counted, not kept.
  std::array<std::uint8_t, 4096> scratch{};
  std::uint64_t trailing = 0;
  for (std::size_t n; (n = source.read(scratch)) > 0;) trailing += n;
  DDP_CHECK(trailing == 0, "file ", name, ": ", trailing, " trailing bytes after the ", claimed,
            " bytes of data that the header describes (", describe_claim(out.dims), ")");
  return out;
}

// Closes a FILE* when it goes out of scope.
struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

}  // namespace

// ---- Helpers for messages (idx_header.hpp) -------------------------------------------------
std::string hex32(std::uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", value);
  return text;
}

std::string describe_claim(const std::vector<std::int64_t>& dims) {
  if (dims.size() == 3) return detail::concat(dims[0], " images of ", dims[1], "x", dims[2]);
  return detail::concat(dims[0], " labels");
}

// ---- Entry points ------------------------------------------------------------------------
IdxArray read_idx_bytes(std::span<const std::uint8_t> bytes, const std::string& name) {
  // A gzip stream starts with 1f 8b (RFC 1952); an IDX file starts with 00 00.
  if (bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b) {
    GunzipSource source(bytes, name);
    return parse_idx(source, name);
  }
  RawSource source(bytes);
  return parse_idx(source, name);
}

IdxArray read_idx_file(const std::string& path) {
  const File file(std::fopen(path.c_str(), "rb"));
  DDP_CHECK(file != nullptr, "file ", path, ": cannot open it: ", errno_text());
  // The file's bytes as they are (compressed, for a .gz): their size is real, unlike the
  // sizes in the header. Read in pieces rather than trusting a size asked of the OS.
  std::vector<std::uint8_t> bytes;
  while (true) {
    const std::size_t have = bytes.size();
    bytes.resize(have + kChunk);
    const std::size_t n = std::fread(bytes.data() + have, 1, kChunk, file.get());
    bytes.resize(have + n);
    if (n < kChunk) break;
  }
  DDP_CHECK(!std::ferror(file.get()), "file ", path, ": read error after ", bytes.size(),
            " bytes: ", errno_text());
  return read_idx_bytes(bytes, path);
}

}  // namespace ddp

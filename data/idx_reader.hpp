// Reads IDX files, the format MNIST ships in, raw or gzip-compressed. Chapter 04.
//
// Only what MNIST uses: unsigned bytes (type code 0x08) in 1 dimension (labels, magic
// 0x00000801) or 3 dimensions (images N x H x W, magic 0x00000803). Nothing the file says
// is trusted before it is checked: the header is validated, the data is collected as it
// really arrives (a header that claims terabytes costs nothing), and a truncated, corrupt
// or over-long file is a ddp::Error that names the file. It does not know what MNIST
// is: equal image and label counts and labels 0..9 are checked by mnist.hpp.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ddp {

// One IDX array: its dimensions as the header gives them, and the bytes, row-major.
struct IdxArray {
  std::vector<std::int64_t> dims;  // {N} for labels, {N, H, W} for images
  std::vector<std::uint8_t> data;  // product(dims) bytes
};

// Parses the bytes of a whole IDX file (gzip when it starts with 1f 8b, raw otherwise).
// `name` is what error messages call it (a path, or "<fuzz input>"). Throws ddp::Error.
IdxArray read_idx_bytes(std::span<const std::uint8_t> bytes, const std::string& name);

// Reads the file at `path` into memory and hands it to read_idx_bytes.
IdxArray read_idx_file(const std::string& path);

}  // namespace ddp

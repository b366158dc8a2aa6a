// The checks of an IDX header (exercise 04.2): what idx_reader.cpp asks before it trusts
// a number of the file. Chapter 04. All numbers of the header are big-endian.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ddp {

// The 4 bytes of the magic number (00 00 08 01 for labels, 00 00 08 03 for images) ->
// the number of dimensions that follow, 1 or 3. Anything else is a ddp::Error that names
// the file (`name`), the magic number in hex, and what was expected.
std::size_t idx_ndim(std::span<const std::uint8_t, 4> magic, const std::string& name);

// The dimensions the header gives ({N} or {N, H, W}, each below 2^32) -> the bytes of
// data they claim, their product. Images of 0 rows or 0 columns, and a product past
// 2^63 - 1, are a ddp::Error that names the file and the claim (describe_claim).
std::uint64_t idx_claimed_bytes(const std::vector<std::int64_t>& dims, const std::string& name);

// For messages (idx_reader.cpp): "0x00000803"; "8000 images of 28x28" or "8000 labels".
std::string hex32(std::uint32_t value);
std::string describe_claim(const std::vector<std::int64_t>& dims);

}  // namespace ddp

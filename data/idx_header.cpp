// The IDX header's checks (see idx_header.hpp). This file holds exactly the two functions
// of exercise 04.2: the exercise build links the participant's copy in its place
// (tutorial/EXERCISES.md, Note [How an exercise replaces the reference]).
#include "data/idx_header.hpp"

#include <limits>

#include "base/error.hpp"

namespace ddp {

std::size_t idx_ndim(std::span<const std::uint8_t, 4> magic, const std::string& name) {
  const std::uint32_t value = (std::uint32_t{magic[0]} << 24) | (std::uint32_t{magic[1]} << 16) |
                              (std::uint32_t{magic[2]} << 8) | std::uint32_t{magic[3]};
  DDP_CHECK(magic[0] == 0 && magic[1] == 0, "file ", name, ": not an IDX file: magic number ",
            hex32(value), " should start with two zero ",
            "bytes (0x00000803 for images, 0x00000801 for labels)");
  DDP_CHECK(magic[2] == 0x08, "file ", name, ": magic number ", hex32(value),
            " has element type ", static_cast<int>(magic[2]),
            "; only unsigned bytes (type 8, as in MNIST) are supported");
  const std::size_t ndim = magic[3];
  DDP_CHECK(ndim == 1 || ndim == 3, "file ", name, ": magic number ", hex32(value), " says ",
            ndim, " dimensions; expected 3 (images, 0x00000803) or 1 (labels, 0x00000801)");
  return ndim;
}

std::uint64_t idx_claimed_bytes(const std::vector<std::int64_t>& dims, const std::string& name) {
  if (dims.size() == 3) {
    DDP_CHECK(dims[1] > 0 && dims[2] > 0, "file ", name, ": header claims images of ", dims[1],
              "x", dims[2], " pixels; both sizes must be at least 1");
  }
  // Each size is below 2^32, so three of them multiplied can overflow 64 bits; such a
  // claim cannot be true either.
  std::uint64_t claimed = 1;
  for (const std::int64_t d : dims) {
    const auto size = static_cast<std::uint64_t>(d);
    DDP_CHECK(size == 0 || claimed <= std::numeric_limits<std::int64_t>::max() / size, "file ",
              name, ": header claims ", describe_claim(dims), ", more than 2^63 bytes");
    claimed *= size;
  }
  return claimed;
}

}  // namespace ddp

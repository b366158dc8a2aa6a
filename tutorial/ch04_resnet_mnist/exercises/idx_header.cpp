// Exercise 04.2: checking an IDX header (tutorial/ch04_resnet_mnist/README.md#exercise-2).
// Your copy: tutorial/ch04_resnet_mnist/mine/idx_header.cpp (tools/exercise start 04.2).
// Write idx_ndim and idx_claimed_bytes (data/idx_header.hpp): trust no number of the file
// before it is checked, and say in the error what was wrong and what was expected (the
// expected messages are in tests/ch04_data/test_idx_reader.cpp). Check them with
// tools/exercise check 04.2.
#include "data/idx_header.hpp"

#include <limits>

#include "base/error.hpp"

namespace ddp {

std::size_t idx_ndim(std::span<const std::uint8_t, 4> magic, const std::string& name) {
  (void)magic, (void)name;
  DDP_FAIL("exercise 04.2 is not done yet: see tutorial/ch04_resnet_mnist/README.md#exercise-2");
}

std::uint64_t idx_claimed_bytes(const std::vector<std::int64_t>& dims, const std::string& name) {
  (void)dims, (void)name;
  DDP_FAIL("exercise 04.2 is not done yet: see tutorial/ch04_resnet_mnist/README.md#exercise-2");
}

}  // namespace ddp

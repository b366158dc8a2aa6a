// libFuzzer target for the IDX reader (chapter 04): any bytes at all go to
// read_idx_bytes(), which must return an IdxArray or throw ddp::Error. A crash, a
// sanitizer report, another exception or a runaway allocation is a finding; built and
// run by tools/fuzz-idx.sh, and its findings are replayed by the ch04 tests.
#include <cstddef>
#include <cstdint>
#include <span>

#include "data/idx_reader.hpp"
#include "base/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const ddp::IdxArray array = ddp::read_idx_bytes(std::span(data, size), "<fuzz input>");
    // Accepted: the dimensions must describe exactly the bytes returned.
    std::size_t product = 1;
    for (const std::int64_t d : array.dims) product *= static_cast<std::size_t>(d);
    if (product != array.data.size()) __builtin_trap();
  } catch (const ddp::Error&) {
    // A rejected input is the expected outcome for almost all of them.
  }
  return 0;
}

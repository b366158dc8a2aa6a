// all_gather_text (see all_gather_text.hpp).
#include "dist/all_gather_text.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>

namespace ddp {

std::vector<std::string> all_gather_text(ProcessGroup& group, const std::string& text,
                                         Device device) {
  // First the lengths, then every text padded to the longest, 8 bytes per int64 element.
  const auto world = static_cast<std::int64_t>(group.size());
  const std::int64_t mine = static_cast<std::int64_t>(text.size());
  const TensorOptions int64s{.dtype = DType::Int64, .device = device};
  Tensor length = from_data(std::span<const std::int64_t>(&mine, 1), {1}).to(device);
  Tensor lengths = empty({world}, int64s);
  group.all_gather(lengths, length)->wait();
  const std::vector<std::int64_t> all_lengths = lengths.to_vector<std::int64_t>();
  const std::int64_t longest = *std::max_element(all_lengths.begin(), all_lengths.end());
  const std::int64_t words = (longest + 7) / 8;
  std::vector<std::int64_t> packed(static_cast<std::size_t>(words), 0);
  std::memcpy(packed.data(), text.data(), text.size());
  Tensor input = from_data(std::span<const std::int64_t>(packed), {words}).to(device);
  Tensor output = empty({world * words}, int64s);
  group.all_gather(output, input)->wait();
  const std::vector<std::int64_t> all = output.to_vector<std::int64_t>();
  std::vector<std::string> texts;
  for (std::int64_t r = 0; r < world; ++r) {
    const char* bytes = reinterpret_cast<const char*>(all.data() + r * words);
    texts.emplace_back(bytes, static_cast<std::size_t>(all_lengths[static_cast<std::size_t>(r)]));
  }
  return texts;
}

}  // namespace ddp

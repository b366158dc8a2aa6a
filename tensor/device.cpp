// Device names (see device.hpp).
#include "tensor/device.hpp"

#include <charconv>

#include "base/error.hpp"

namespace ddp {

std::string Device::str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }

Device Device::parse(std::string_view text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(0);
  if (text.starts_with("cuda:")) {
    std::string_view digits = text.substr(5);
    int index = -1;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec == std::errc() && end == digits.data() + digits.size() && index >= 0) {
      return cuda(index);
    }
  }
  DDP_FAIL("unknown device '", text, "'; expected 'cpu', 'cuda' or 'cuda:N'");
}

std::string gpu_uuid_text(std::span<const unsigned char, 16> bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string text = "GPU-";
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text += '-';
    text += kHex[bytes[i] >> 4];
    text += kHex[bytes[i] & 0xf];
  }
  return text;
}

}  // namespace ddp

// Where a tensor's memory lives: the CPU, or one CUDA GPU by index. Chapter 01/02.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace ddp {

enum class DeviceType : std::uint8_t { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;  // the GPU's ordinal; always 0 for the CPU

  static constexpr Device cpu() { return {DeviceType::CPU, 0}; }
  static constexpr Device cuda(int index = 0) { return {DeviceType::CUDA, index}; }

  constexpr bool is_cpu() const { return type == DeviceType::CPU; }
  constexpr bool is_cuda() const { return type == DeviceType::CUDA; }
  constexpr bool operator==(const Device&) const = default;

  // "cpu", "cuda:0".
  std::string str() const;
  // Parses "cpu", "cuda" (= cuda:0) or "cuda:N"; throws ddp::Error on anything else.
  static Device parse(std::string_view text);
};

// A GPU's 16-byte UUID (cudaDeviceProp::uuid) as nvidia-smi writes it:
// "GPU-" then 8-4-4-4-12 lowercase hex digits. The words of cuda::device_uuid; here so
// that a build without CUDA can test it.
std::string gpu_uuid_text(std::span<const unsigned char, 16> bytes);

}  // namespace ddp

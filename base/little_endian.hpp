// Little-endian integers in byte strings: the one encoding of every file and wire format
// of ddp.cpp (state_dict files, nn/state_dict.cpp; the FileStore log and the TCPStore
// protocol, dist/). Byte by byte, so the bytes are the same on any host.
#pragma once

#include <cstdint>
#include <string>

namespace ddp {

// Appends the low `bytes` bytes (1 to 8) of `value` to `out`, least significant first.
inline void put_le(std::string& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

// The integer held by the `bytes` bytes (1 to 8) at `data`, least significant first.
inline std::uint64_t get_le(const char* data, int bytes) {
  std::uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) {
    value |= std::uint64_t{static_cast<unsigned char>(data[i])} << (8 * i);
  }
  return value;
}

}  // namespace ddp

// The TCPStore's field encoding (see tcp_store_protocol.hpp and its Note [TCPStore wire
// protocol]): little-endian integers and length-prefixed strings, written whole and read
// as far as they have arrived.
#include "dist/tcp_store_protocol.hpp"

#include "base/error.hpp"
#include "base/little_endian.hpp"

namespace ddp::detail {

// Integers: put_le and get_le (base/little_endian.hpp).
void put_u8(std::string& out, std::uint8_t v) { out.push_back(static_cast<char>(v)); }
void put_u32(std::string& out, std::uint32_t v) { put_le(out, v, 4); }
void put_u64(std::string& out, std::uint64_t v) { put_le(out, v, 8); }
void put_str32(std::string& out, const std::string& s) {
  put_u32(out, static_cast<std::uint32_t>(s.size()));
  out += s;
}
void put_str64(std::string& out, const std::string& s) {
  put_u64(out, s.size());
  out += s;
}

bool StoreReader::u8(std::uint8_t& v) {
  if (!need(1)) return false;
  v = static_cast<std::uint8_t>(buffer[pos++]);
  return true;
}

bool StoreReader::u32(std::uint32_t& v) {
  if (!need(4)) return false;
  v = static_cast<std::uint32_t>(get_le(&buffer[pos], 4));
  pos += 4;
  return true;
}

bool StoreReader::u64(std::uint64_t& v) {
  if (!need(8)) return false;
  v = get_le(&buffer[pos], 8);
  pos += 8;
  return true;
}

bool StoreReader::bytes(std::string& s, std::uint64_t n, std::uint64_t bound, const char* what) {
  if (n > bound) {
    violation = detail::concat(what, " of ", n, " bytes is over the limit of ", bound);
    return false;
  }
  if (!need(n)) return false;
  s.assign(buffer, pos, n);
  pos += n;
  return true;
}

bool StoreReader::str32(std::string& s, std::uint64_t bound, const char* what) {
  std::uint32_t n = 0;
  return u32(n) && bytes(s, n, bound, what);
}

bool StoreReader::str64(std::string& s, std::uint64_t bound, const char* what) {
  std::uint64_t n = 0;
  return u64(n) && bytes(s, n, bound, what);
}

}  // namespace ddp::detail

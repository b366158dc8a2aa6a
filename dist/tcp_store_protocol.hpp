// The bytes a TCPStore client and its server exchange (dist/tcp_store.hpp): the ops and
// reply statuses, and how their fields are written and read. Chapter 05. Only the encoding:
// what the server does with a request is tcp_store_server.cpp, how the client waits for
// its reply tcp_store.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ddp::detail {

// Note [TCPStore wire protocol]
// -----------------------------
// Every integer is little-endian. str32 = u32 length + bytes (keys, tokens, messages);
// str64 = u64 length + bytes (values, which may hold any bytes).
//
//   handshake  client -> server   u32 magic 0x53504444 ("DDPS")  u32 version (1)  str32 token
//              server -> client   u8 status  str32 message ("" when accepted)
//   request    client -> server   u8 op, then its arguments:
//     SET 1          str32 key  str64 value                   -> OK
//     GET 2          str32 key  u64 timeout_ms                -> OK str64 value | TIMEOUT
//     ADD 3          str32 key  i64 delta                     -> OK i64 new value
//     COMPARE_SET 4  str32 key  str64 expected  str64 desired -> OK str64 value now stored
//     WAIT 5         u32 n  n x str32 key  u64 timeout_ms     -> OK | TIMEOUT
//     CHECK 6        u32 n  n x str32 key                     -> OK u8 all exist
//     DELETE 7       str32 key                                -> OK u8 existed
//     NUM_KEYS 8                                              -> OK i64 count
//   reply      server -> client   u8 status: OK 0 | TIMEOUT 1 (u32 n  n x str32 missing key)
//                                 | ERROR 2 (str32 message)
//
// Bounds: key <= kMaxKeyBytes (4 KiB), value <= kMaxValueBytes (64 MiB), n <=
// kMaxKeysPerRequest, token <= kMaxTokenBytes. A bad magic, version or token, an unknown
// op or a length over its bound is a protocol violation: the server answers ERROR (the
// client can print why) and closes that one connection. An ADD on a value that is not
// an integer is an ERROR too, but the connection stays. GET and WAIT wait on the server
// (Note [TCPStore server], tcp_store_server.cpp); their timeout travels with the request.
// ADD keeps the number as decimal text, so get() of a counter reads "3", as in PyTorch.

inline constexpr std::uint32_t kStoreMagic = 0x53504444;  // the bytes 'D' 'D' 'P' 'S' on the wire
inline constexpr std::uint32_t kStoreVersion = 1;

// Hello is the handshake (not a request op: its bytes are the handshake's own).
enum class StoreOp : std::uint8_t {
  Hello = 0, Set, Get, Add, CompareSet, Wait, Check, Delete, NumKeys
};
enum class StoreStatus : std::uint8_t { Ok = 0, Timeout = 1, Error = 2 };

// ---- Writing: appends one field to `out` ------------------------------------------------

void put_u8(std::string& out, std::uint8_t v);
void put_u32(std::string& out, std::uint32_t v);
void put_u64(std::string& out, std::uint64_t v);
void put_str32(std::string& out, const std::string& s);
void put_str64(std::string& out, const std::string& s);

// ---- Reading ------------------------------------------------------------------------------

// Reads fields from the front of a buffer that may not hold the whole message yet.
// Each read returns false when the bytes have not arrived (try again after the next
// recv); a length over its bound sets `violation` (and returns false) at once, before
// the server has buffered a single byte of the oversized field.
struct StoreReader {
  const std::string& buffer;
  std::size_t pos;
  std::string violation;

  bool need(std::size_t n) const { return buffer.size() - pos >= n; }
  bool u8(std::uint8_t& v);
  bool u32(std::uint32_t& v);
  bool u64(std::uint64_t& v);
  bool bytes(std::string& s, std::uint64_t n, std::uint64_t bound, const char* what);
  bool str32(std::string& s, std::uint64_t bound, const char* what);
  bool str64(std::string& s, std::uint64_t bound, const char* what);
};

}  // namespace ddp::detail

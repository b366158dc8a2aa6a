// Bytes in binary units: 25 * kMiB is a bucket cap of 25 MiB, as PyTorch's bucket_cap_mb
// means it (mebibytes). One definition for every buffer size, cap and benchmark size that
// is written in KiB or MiB.
#pragma once

#include <cstdint>

namespace ddp {

inline constexpr std::int64_t kKiB = 1024;
inline constexpr std::int64_t kMiB = 1024 * kKiB;

}  // namespace ddp

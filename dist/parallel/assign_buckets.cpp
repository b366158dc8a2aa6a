// assign_buckets (see reducer.hpp). This file holds exactly the function of exercise 07.1:
// the exercise build links the participant's copy in its place (tutorial/EXERCISES.md,
// Note [How an exercise replaces the reference]).
#include "dist/parallel/reducer.hpp"

#include "base/error.hpp"

namespace ddp {

std::vector<std::vector<std::size_t>> assign_buckets(const std::vector<std::int64_t>& bytes,
                                                     const std::vector<std::size_t>& order,
                                                     std::int64_t first_cap, std::int64_t cap) {
  DDP_CHECK(first_cap > 0 && cap > 0,
            "assign_buckets: bucket caps must be positive, got "
            "first ",
            first_cap, " bytes and ", cap, " bytes");
  std::vector<std::vector<std::size_t>> buckets;
  std::vector<std::size_t> open;
  std::int64_t open_bytes = 0;
  for (const std::size_t i : order) {
    DDP_CHECK(i < bytes.size(), "assign_buckets: parameter index ", i, " out of range (",
              bytes.size(), " parameters)");
    open.push_back(i);
    open_bytes += bytes[i];
    const std::int64_t limit = buckets.empty() ? first_cap : cap;
    if (open_bytes >= limit) {
      buckets.push_back(std::move(open));
      open.clear();
      open_bytes = 0;
    }
  }
  if (!open.empty()) buckets.push_back(std::move(open));
  return buckets;
}

}  // namespace ddp

// NumPy broadcasting of two shapes (see shape.hpp). This file holds exactly the function of
// exercise 01.1: the exercise build links the participant's copy in its place
// (tutorial/EXERCISES.md, Note [How an exercise replaces the reference]).
#include <algorithm>

#include "base/error.hpp"
#include "tensor/shape.hpp"

namespace ddp {

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  const std::size_t ndim = std::max(a.size(), b.size());
  Shape out(ndim);
  for (std::size_t i = 0; i < ndim; ++i) {  // i counts from the right
    const std::int64_t sa = i < a.size() ? a[a.size() - 1 - i] : 1;
    const std::int64_t sb = i < b.size() ? b[b.size() - 1 - i] : 1;
    DDP_CHECK(sa == sb || sa == 1 || sb == 1, "shapes ", shape_str(a), " and ", shape_str(b),
              " cannot be broadcast: size ", sa, " vs ", sb, " at dimension ",
              static_cast<std::int64_t>(ndim - 1 - i),
              "\nhint: sizes must match or be 1, aligned from the last dimension");
    out[ndim - 1 - i] = sa == 1 ? sb : sa;
  }
  return out;
}

}  // namespace ddp

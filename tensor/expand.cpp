// Tensor::expand, the view behind broadcasting (see tensor.hpp). This file holds exactly
// the function of exercise 01.2: the exercise build links the participant's copy in its
// place (tutorial/EXERCISES.md, Note [How an exercise replaces the reference]).
#include "tensor/tensor.hpp"

namespace ddp {

Tensor Tensor::expand(const Shape& shape) const {
  DDP_CHECK(shape.size() >= shape_.size(), "expand: cannot expand ", describe(), " to ",
            shape_str(shape), " (fewer dimensions)");
  const std::size_t lead = shape.size() - shape_.size();
  Shape sizes(shape.size()), strides(shape.size(), 0);
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (d < lead) {  // new leading dimension: every index reads the same elements
      DDP_CHECK(shape[d] >= 0, "expand: size -1 is not allowed for a new dimension in ",
                shape_str(shape));
      sizes[d] = shape[d];
      continue;
    }
    const std::int64_t old = shape_[d - lead];
    const std::int64_t want = shape[d] == -1 ? old : shape[d];
    DDP_CHECK(want == old || old == 1, "expand: cannot expand ", shape_str(shape_), " to ",
              shape_str(shape), ": size ", old, " at dimension ", d - lead,
              " is neither equal nor 1");
    sizes[d] = want;
    strides[d] = want == old ? strides_[d - lead] : 0;  // a repeated size-1 dim: stride 0
  }
  return Tensor(storage_, std::move(sizes), std::move(strides), offset_, dtype_);
}

}  // namespace ddp

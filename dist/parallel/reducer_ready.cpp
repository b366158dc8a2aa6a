// Reducer::mark_ready and Reducer::launch_ready_buckets (see reducer.hpp). This file holds
// exactly the two functions of exercise 07.2: the exercise build links the participant's
// copy in its place (tutorial/EXERCISES.md, Note [How an exercise replaces the reference]).
#include "dist/parallel/reducer.hpp"

#include "base/error.hpp"

namespace ddp {

// Parameter i's gradient is final for this backward (on_gradient_ready, or an unused
// parameter under find_unused_parameters): one fewer pending in its bucket.
void Reducer::mark_ready(std::size_t parameter) {
  DDP_CHECK(!ready_[parameter], who(), ": parameter '", parameters_[parameter].first,
            "' was marked ready twice in one backward");
  ready_[parameter] = true;
  Bucket& bucket = buckets_[slots_[parameter].bucket];
  if (--bucket.pending == 0) launch_ready_buckets();
}

// Note [Launch order] (reducer.cpp): launch every complete bucket from next_bucket_ on, stop
// at the first incomplete one. (A hook whose launch throws breaks the step: finish_backward
// never runs, and the next forward refuses.)
void Reducer::launch_ready_buckets() {
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending == 0) {
    launch_bucket(next_bucket_);
    ++next_bucket_;
  }
}

}  // namespace ddp

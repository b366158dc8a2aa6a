// ddp-trace-merge --svg: the merged timeline drawn as a picture that any browser opens
// offline (an SVG file: no scripts, no fonts to fetch). Chapter 07.
//
// One row per rank: the main thread's spans stacked by nesting (forward + loss > model >
// block1 > block1.conv1, backward likewise, the optimizer, waits), and under them the
// communication thread's collectives, each bucket's all-reduce named by its bucket. The
// exposed communication (Note [Overlap summary] in base/trace.hpp: the main thread
// waiting) is shaded across the rank's row. A time axis in ms and a legend. It draws a
// window of the run (the first steps by default), not the whole of a long run, and shows
// no GPU kernels (the recorder has none).
#pragma once

#include <string>

#include "tools/trace_merge/trace_merge.hpp"

namespace ddp::trace_merge {

struct TimelineOptions {
  // The window: from the first forward span to the end of the steps-th optimizer span of
  // the rank that finishes it last. 0: the whole trace.
  int steps = 3;
};

// The SVG document. ddp::Error when the window holds no span to draw.
std::string draw_timeline(const Merged& merged, const TimelineOptions& options);

}  // namespace ddp::trace_merge

// ddp-trace-merge --metrics-svg: ddp-train's --metrics CSV drawn as curves, an SVG that any
// browser opens offline. Chapter 07.
//
// Two panels over the epochs: train and test loss, and test accuracy (%), one point per
// row of the file. It reads the columns by their names in the header (epoch, train_loss,
// test_loss, test_accuracy) and ignores the others; it does not smooth or compare runs.
#pragma once

#include <string>
#include <vector>

namespace ddp::trace_merge {

struct MetricsRow {
  double epoch = 0, train_loss = 0, test_loss = 0, test_accuracy = 0;
};

// The rows of a --metrics file. ddp::Error naming the file (and the line) when it is
// missing, lacks one of the four columns, has a row of another width or a field that is
// not a number, or has no rows.
std::vector<MetricsRow> read_metrics(const std::string& path);

// The SVG document; `source` names the file in the title.
std::string draw_metrics(const std::vector<MetricsRow>& rows, const std::string& source);

}  // namespace ddp::trace_merge

// Drawing the --metrics CSV (see metrics_svg.hpp).
#include "tools/trace_merge/metrics_svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "base/error.hpp"
#include "tools/trace_merge/svg.hpp"

namespace ddp::trace_merge {

namespace {

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> fields;
  std::stringstream in(line);
  std::string field;
  while (std::getline(in, field, ',')) fields.push_back(field);
  if (!line.empty() && line.back() == ',') fields.emplace_back();
  return fields;
}

}  // namespace

std::vector<MetricsRow> read_metrics(const std::string& path) {
  std::ifstream in(path);
  DDP_CHECK(in.is_open(), "ddp-trace-merge: cannot open ", path,
            " (missing?)\nhint: ddp-train --metrics FILE.csv writes it (rank 0, one row per "
            "epoch)");
  std::string line;
  DDP_CHECK(static_cast<bool>(std::getline(in, line)), "ddp-trace-merge: ", path,
            " is empty: expected ddp-train --metrics' header line");
  if (!line.empty() && line.back() == '\r') line.pop_back();
  const std::vector<std::string> header = split(line);
  const char* const wanted[] = {"epoch", "train_loss", "test_loss", "test_accuracy"};
  std::size_t column[4];
  for (int c = 0; c < 4; ++c) {
    const auto at = std::find(header.begin(), header.end(), wanted[c]);
    DDP_CHECK(at != header.end(), "ddp-trace-merge: ", path, ": the header '", line,
              "' has no column ", wanted[c],
              "\nhint: give the file ddp-train --metrics wrote (epoch,train_loss,test_loss,"
              "test_accuracy,...)");
    column[c] = static_cast<std::size_t>(at - header.begin());
  }
  std::vector<MetricsRow> rows;
  for (int number = 2; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const std::vector<std::string> fields = split(line);
    DDP_CHECK(fields.size() == header.size(), "ddp-trace-merge: ", path, ":", number, ": expected ",
              header.size(), " fields as in the header, found ", fields.size());
    double values[4];
    for (int c = 0; c < 4; ++c) {
      const std::string& field = fields[column[c]];
      char* end = nullptr;
      values[c] = std::strtod(field.c_str(), &end);
      DDP_CHECK(!field.empty() && end == field.c_str() + field.size() && std::isfinite(values[c]),
                "ddp-trace-merge: ", path, ":", number, ": ", wanted[c], " is '", field,
                "', not a number");
    }
    rows.push_back(MetricsRow{values[0], values[1], values[2], values[3]});
  }
  DDP_CHECK(!rows.empty(), "ddp-trace-merge: ", path,
            " has a header but no rows: the run finished no epoch");
  return rows;
}

// Note [Metrics layout]
//   Two panels side by side, each kPanelWidth wide: a plot area inset by kInsetLeft (tick
//   labels) and kInsetBottom (the epoch axis). In a panel whose plot area starts at
//   (left, top) and is w x h pixels, with y running over [0, y_max]:
//
//     x(epoch) = left + epoch / last_epoch * w        (epoch 0, before training, at the left)
//     y(value) = top + h - value / y_max * h          (SVG's y grows downwards)
//
//   y_max is a whole number of ticks above the largest value (losses) or 100 (accuracy
//   in %). Every row is one point of each curve: a polyline through them and a circle on
//   each, with the value on hover.

namespace {

constexpr double kWidth = 900, kHeight = 340, kTop = 50, kPanelWidth = 450;
constexpr double kInsetLeft = 60, kInsetRight = 20, kInsetBottom = 56;

constexpr const char* kCss = R"(.background { fill: #fff; }
text { font-family: monospace; font-size: 11px; fill: #222; }
.title { font-size: 14px; font-weight: bold; }
.panel-title { font-size: 12px; font-weight: bold; }
.axis { stroke: #222; stroke-width: 1; }
.grid { stroke: #e4e4e4; stroke-width: 1; }
.curve { fill: none; stroke-width: 2; }
.train_loss { stroke: #4e79a7; fill: #4e79a7; }
.test_loss { stroke: #f28e2b; fill: #f28e2b; }
.test_accuracy { stroke: #59a14f; fill: #59a14f; }
.curve.train_loss, .curve.test_loss, .curve.test_accuracy { fill: none; }
)";

struct Curve {
  const char* name;  // the CSV column, also the CSS class
  double MetricsRow::*value;
};

std::string format(const char* pattern, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, pattern, value);
  return buffer;
}

void draw_panel(svg::Writer& out, const std::vector<MetricsRow>& rows, double panel_left,
                const char* title, const std::vector<Curve>& curves, double y_max_fixed) {
  const double left = panel_left + kInsetLeft, top = kTop + 10;
  const double w = kPanelWidth - kInsetLeft - kInsetRight, h = kHeight - top - kInsetBottom;
  double last_epoch = 1, largest = 0;
  for (const MetricsRow& r : rows) {
    last_epoch = std::max(last_epoch, r.epoch);
    for (const Curve& c : curves) largest = std::max(largest, r.*c.value);
  }
  double y_step = 0, y_max = y_max_fixed;
  if (y_max_fixed > 0) {
    y_step = svg::tick_step(y_max, 5);
  } else {
    y_step = svg::tick_step(largest > 0 ? largest : 1, 5);
    y_max = std::ceil(largest / y_step) * y_step;
    if (y_max <= 0) y_max = y_step;
  }
  const auto x = [&](double epoch) { return left + epoch / last_epoch * w; };
  const auto y = [&](double value) { return top + h - value / y_max * h; };

  out.open_group("panel", std::string("data-title=\"") + svg::escape(title) + "\"");
  out.text(left, top - 8, title, "panel-title");
  for (int k = 0; k * y_step <= y_max * (1 + 1e-9); ++k) {
    out.line(left, y(k * y_step), left + w, y(k * y_step), "grid");
    out.text(left - 6, y(k * y_step) + 4, format("%g", k * y_step), "tick", "end");
  }
  const double x_step = std::max(1.0, svg::tick_step(last_epoch, 10));
  for (int k = 0; k * x_step <= last_epoch * (1 + 1e-9); ++k) {
    out.line(x(k * x_step), top + h, x(k * x_step), top + h + 5, "axis");
    out.text(x(k * x_step), top + h + 17, format("%g", k * x_step), "tick", "middle");
  }
  out.line(left, top + h, left + w, top + h, "axis");
  out.line(left, top, left, top + h, "axis");
  out.text(left + w / 2, top + h + 33, "epoch", "axis-label", "middle");
  for (std::size_t c = 0; c < curves.size(); ++c) {
    std::vector<std::pair<double, double>> points;
    for (const MetricsRow& r : rows) points.emplace_back(x(r.epoch), y(r.*curves[c].value));
    out.open_group("series", std::string("data-column=\"") + curves[c].name + "\"");
    out.polyline(points, std::string("curve ") + curves[c].name);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      out.circle(points[i].first, points[i].second, 3, std::string("point ") + curves[c].name,
                 format("epoch %g: ", rows[i].epoch) + format("%g", rows[i].*curves[c].value));
    }
    // The legend entry: a short line in the curve's colour, then its name.
    const double ly = top + h + 48, lx = left + 150.0 * static_cast<double>(c);
    out.line(lx, ly - 4, lx + 18, ly - 4, std::string("curve ") + curves[c].name);
    out.text(lx + 24, ly, curves[c].name, "legend-text");
    out.close_group();
  }
  out.close_group();
}

}  // namespace

std::string draw_metrics(const std::vector<MetricsRow>& rows, const std::string& source) {
  svg::Writer out(kWidth, kHeight, kCss);
  out.set_root_attributes("data-rows=\"" + std::to_string(rows.size()) + "\"");
  out.rect(0, 0, kWidth, kHeight, "background");
  out.text(8, 20,
           "ddp-train --metrics: " + source + " (" + std::to_string(rows.size()) + " epoch" +
               (rows.size() == 1 ? ")" : "s)") + ", final test accuracy " +
               format("%.2f%%", rows.back().test_accuracy),
           "title");
  draw_panel(out, rows, 0, "loss",
             {{"train_loss", &MetricsRow::train_loss}, {"test_loss", &MetricsRow::test_loss}}, 0);
  draw_panel(out, rows, kPanelWidth, "test accuracy (%)",
             {{"test_accuracy", &MetricsRow::test_accuracy}}, 100);
  return out.str();
}

}  // namespace ddp::trace_merge

// The SVG writer (see svg.hpp).
#include "tools/trace_merge/svg.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>

#include "base/error.hpp"

namespace ddp::svg {

std::string escape(std::string_view text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string px(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f", value);
  return buffer;
}

double tick_step(double span, int pieces) {
  const double raw = span / pieces;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double m : {1.0, 2.0, 5.0}) {
    if (m * magnitude >= raw) return m * magnitude;
  }
  return 10.0 * magnitude;
}

Writer::Writer(double width, double height, std::string_view css)
    : width_(width), height_(height), css_(css) {}

void Writer::rect(double x, double y, double width, double height, std::string_view css_class,
                  std::string_view title) {
  body_ += std::string(2 * depth_, ' ') + "<rect class=\"" + escape(css_class) + "\" x=\"" + px(x) +
           "\" y=\"" + px(y) + "\" width=\"" + px(width) + "\" height=\"" + px(height) + "\"";
  body_ += title.empty() ? "/>\n" : "><title>" + escape(title) + "</title></rect>\n";
}

void Writer::line(double x1, double y1, double x2, double y2, std::string_view css_class) {
  body_ += std::string(2 * depth_, ' ') + "<line class=\"" + escape(css_class) + "\" x1=\"" +
           px(x1) + "\" y1=\"" + px(y1) + "\" x2=\"" + px(x2) + "\" y2=\"" + px(y2) + "\"/>\n";
}

void Writer::text(double x, double y, std::string_view content, std::string_view css_class,
                  std::string_view anchor) {
  body_ += std::string(2 * depth_, ' ') + "<text class=\"" + escape(css_class) + "\" x=\"" + px(x) +
           "\" y=\"" + px(y) + "\" text-anchor=\"" + escape(anchor) + "\">" + escape(content) +
           "</text>\n";
}

void Writer::polyline(const std::vector<std::pair<double, double>>& points,
                      std::string_view css_class) {
  std::string list;
  for (const auto& [x, y] : points) {
    if (!list.empty()) list += ' ';
    list += px(x);
    list += ',';
    list += px(y);
  }
  body_ += std::string(2 * depth_, ' ') + "<polyline class=\"" + escape(css_class) +
           "\" points=\"" + list + "\"/>\n";
}

void Writer::circle(double cx, double cy, double r, std::string_view css_class,
                    std::string_view title) {
  body_ += std::string(2 * depth_, ' ') + "<circle class=\"" + escape(css_class) + "\" cx=\"" +
           px(cx) + "\" cy=\"" + px(cy) + "\" r=\"" + px(r) + "\"";
  body_ += title.empty() ? "/>\n" : "><title>" + escape(title) + "</title></circle>\n";
}

void Writer::open_group(std::string_view css_class, std::string_view attributes) {
  body_ += std::string(2 * depth_, ' ') + "<g class=\"" + escape(css_class) + "\"" +
           (attributes.empty() ? "" : " ") + std::string(attributes) + ">\n";
  ++depth_;
}

void Writer::close_group() {
  DDP_CHECK(depth_ > 1, "svg::Writer: close_group without open_group");
  --depth_;
  body_ += std::string(2 * depth_, ' ') + "</g>\n";
}

std::string Writer::str() const {
  DDP_CHECK(depth_ == 1, "svg::Writer: ", depth_ - 1, " group(s) left open");
  // width/height and a viewBox: drawn at its size, and scaled as a whole when embedded.
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
         "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
         px(width_) + "\" height=\"" + px(height_) + "\" viewBox=\"0 0 " + px(width_) + " " +
         px(height_) + "\"" + (root_attributes_.empty() ? "" : " ") + root_attributes_ +
         ">\n<style>\n" + css_ + "</style>\n" + body_ + "</svg>\n";
}

void write_file(const std::string& path, const std::string& document) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  DDP_CHECK(out.is_open(), "ddp-trace-merge: cannot open ", path, " for writing");
  out << document;
  out.close();
  DDP_CHECK(out.good(), "ddp-trace-merge: writing ", path, " failed (disk full?)");
}

}  // namespace ddp::svg

// A small SVG writer: the handful of elements ddp-trace-merge's pictures are made of
// (rect, line, text, polyline, circle, groups), as text. Chapter 07.
//
// The pictures must open anywhere, offline: no scripts, no fonts to fetch, no links. The
// colours live in one <style> block, by class, so that a reader of the file (or a test)
// sees what each shape is: <rect class="span backward" ...>. Coordinates are in pixels
// from the top left corner, y growing downwards, written with two decimals. It does not
// lay anything out: the callers' arithmetic does (Note [Timeline layout]).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ddp::svg {

class Writer {
 public:
  // An image of width x height pixels; `css` is the <style> block's content.
  Writer(double width, double height, std::string_view css);

  // `title` (optional): the tooltip a browser shows on hover.
  void rect(double x, double y, double width, double height, std::string_view css_class,
            std::string_view title = "");
  void line(double x1, double y1, double x2, double y2, std::string_view css_class);
  // anchor: "start", "middle" or "end" of the text at x; y is the baseline.
  void text(double x, double y, std::string_view content, std::string_view css_class,
            std::string_view anchor = "start");
  void polyline(const std::vector<std::pair<double, double>>& points, std::string_view css_class);
  void circle(double cx, double cy, double r, std::string_view css_class,
              std::string_view title = "");
  // `attributes`: extra attributes written as given (already escaped: numbers, names),
  // e.g. R"(data-rank="0")".
  void open_group(std::string_view css_class, std::string_view attributes = "");
  void close_group();
  // Attributes for the <svg> element itself (data-* describing the picture's scale).
  void set_root_attributes(std::string attributes) { root_attributes_ = std::move(attributes); }

  // The whole document.
  std::string str() const;

 private:
  double width_, height_;
  std::string css_;
  std::string root_attributes_;
  std::string body_;
  int depth_ = 1;  // indentation of the next element
};

// `text` with &, <, >, " escaped for an attribute or element content.
std::string escape(std::string_view text);
// A coordinate or a length: fixed, two decimals ("12.50").
std::string px(double value);
// A tick spacing of 1, 2 or 5 x 10^k that cuts `span` into at most `pieces` pieces.
double tick_step(double span, int pieces);
// Writes `document` to `path`; ddp::Error naming `path` when it cannot.
void write_file(const std::string& path, const std::string& document);

}  // namespace ddp::svg

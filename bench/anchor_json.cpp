// Anchor readers (see anchor_json.hpp): a scan that tracks brace depth and skips over
// strings, enough for the flat result objects that the anchors' scripts write.
#include "bench/anchor_json.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

namespace ddp::bench {

// DDP_BENCH_ANCHORS_DIR: set by bench/CMakeLists.txt for this file alone.
std::string default_anchors_dir() { return DDP_BENCH_ANCHORS_DIR; }

namespace {

// The objects of the array that follows `"results"`, each as its text "{...}".
std::vector<std::string_view> result_objects(std::string_view text) {
  std::vector<std::string_view> objects;
  std::size_t pos = text.find("\"results\"");
  if (pos == std::string_view::npos) return objects;
  pos = text.find('[', pos);
  if (pos == std::string_view::npos) return objects;
  int depth = 0;
  std::size_t start = 0;
  bool in_string = false;
  for (std::size_t i = pos + 1; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // skip the escaped character
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{') {
      if (depth++ == 0) start = i;
    } else if (c == '}') {
      if (--depth == 0) objects.push_back(text.substr(start, i - start + 1));
    } else if (c == ']' && depth == 0) {
      break;  // end of "results"
    }
  }
  return objects;
}

// The raw value text of `"key": value` found at the top level of `object` ("{...}"):
// a number as written, or a string without its quotes. Empty when absent.
std::string_view top_level_value(std::string_view object, std::string_view key) {
  int depth = 0;
  for (std::size_t i = 0; i < object.size(); ++i) {
    const char c = object[i];
    if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      --depth;
    } else if (c == '"') {
      const std::size_t end = object.find('"', i + 1);
      if (end == std::string_view::npos) return {};
      const std::string_view name = object.substr(i + 1, end - i - 1);
      i = end;
      if (depth != 1 || name != key) continue;
      std::size_t v = object.find(':', end);
      if (v == std::string_view::npos) return {};
      v = object.find_first_not_of(" \t\r\n", v + 1);
      if (v == std::string_view::npos) return {};
      if (object[v] == '"') {
        const std::size_t close = object.find('"', v + 1);
        return object.substr(v + 1, close - v - 1);
      }
      const std::size_t stop = object.find_first_of(",}\n", v);
      return object.substr(v, stop - v);
    }
  }
  return {};
}

double to_double(std::string_view text) {
  return text.empty() ? 0.0 : std::strtod(std::string(text).c_str(), nullptr);
}

}  // namespace

std::optional<std::vector<AnchorRow>> read_sgemm_anchor(const std::string& file,
                                                        const std::string& default_path) {
  std::ifstream in(file);
  if (!in) return std::nullopt;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();

  const std::vector<std::string_view> objects = result_objects(text);
  if (objects.empty()) return std::nullopt;
  std::vector<AnchorRow> rows;
  for (std::string_view object : objects) {
    AnchorRow row;
    const std::string_view path = top_level_value(object, "path");
    row.path = path.empty() ? default_path : std::string(path);
    row.n = static_cast<int>(to_double(top_level_value(object, "n")));
    row.threads = static_cast<int>(to_double(top_level_value(object, "threads")));
    row.gflops_median = to_double(top_level_value(object, "GFLOPs_median"));
    row.gflops_best = to_double(top_level_value(object, "GFLOPs_best"));
    rows.push_back(row);
  }
  return rows;
}

std::optional<std::string> read_anchor_cpu_model(const std::string& machine_json) {
  std::ifstream in(machine_json);
  if (!in) return std::nullopt;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  const std::string_view model = top_level_value(text, "cpu_model");
  if (model.empty()) return std::nullopt;
  return std::string(model);
}

std::optional<double> read_anchor_number(const std::string& file,
                                         const std::vector<std::string>& keys) {
  std::ifstream in(file);
  if (!in) return std::nullopt;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  std::string_view object = text;
  for (std::size_t k = 0; k < keys.size(); ++k) {
    const std::string_view value = top_level_value(object, keys[k]);
    if (value.empty()) return std::nullopt;
    if (k + 1 == keys.size()) {
      if (value.front() == '{' || value.front() == '[') return std::nullopt;
      return to_double(value);
    }
    if (value.front() != '{') return std::nullopt;
    // top_level_value stops a non-string value at the first ',' or '}': find the
    // object's own closing brace instead, so the next key is looked up inside it.
    const std::size_t begin = static_cast<std::size_t>(value.data() - object.data());
    int depth = 0;
    bool in_string = false;
    std::size_t end = begin;
    for (; end < object.size(); ++end) {
      const char c = object[end];
      if (in_string) {
        if (c == '\\') ++end;
        else if (c == '"') in_string = false;
      } else if (c == '"') {
        in_string = true;
      } else if (c == '{') {
        ++depth;
      } else if (c == '}' && --depth == 0) {
        break;
      }
    }
    if (end == object.size()) return std::nullopt;
    object = object.substr(begin, end - begin + 1);
  }
  return std::nullopt;
}

std::string this_cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("model name")) {
      const std::size_t colon = line.find(':');
      if (colon != std::string::npos && colon + 2 <= line.size()) return line.substr(colon + 2);
    }
  }
  return "unknown";
}

}  // namespace ddp::bench

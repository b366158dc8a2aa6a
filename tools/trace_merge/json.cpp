// The JSON reader and writer (see json.hpp): recursive descent, one function per kind.
#include "tools/trace_merge/json.hpp"

#include <charconv>
#include <cstdio>

#include "base/error.hpp"

namespace ddp::json {

const Value* Value::find(std::string_view key) const {
  if (!is_object()) return nullptr;
  for (const auto& [k, value] : std::get<Object>(v)) {
    if (k == key) return &value;
  }
  return nullptr;
}

Value* Value::find(std::string_view key) {
  return const_cast<Value*>(static_cast<const Value&>(*this).find(key));
}

namespace {

class Parser {
 public:
  Parser(std::string_view text, std::string_view source) : text_(text), source_(source) {}

  Value document() {
    Value value = parse_value(0);
    skip_space();
    if (pos_ != text_.size()) fail("the end of the text after the top-level value");
    return value;
  }

 private:
  static constexpr int kMaxDepth = 64;  // a corrupt file must not overflow the stack

  [[noreturn]] void fail(std::string_view expected) const {
    DDP_FAIL(source_, ": not valid JSON at byte ", pos_, ": expected ", expected,
             pos_ < text_.size() ? detail::concat(", found '", text_[pos_], "'")
                                 : std::string(", found the end of the file"));
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\r' || text_[pos_] == '\t')) {
      ++pos_;
    }
  }
  bool take(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!take(c)) fail(detail::concat("'", c, "'"));
  }
  bool take_word(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  Value parse_value(int depth) {
    if (depth > kMaxDepth) fail("at most 64 levels of nesting");
    skip_space();
    if (pos_ >= text_.size()) fail("a value");
    const char c = text_[pos_];
    if (c == '{') return Value{parse_object(depth)};
    if (c == '[') return Value{parse_array(depth)};
    if (c == '"') return Value{parse_string()};
    if (take_word("true")) return Value{true};
    if (take_word("false")) return Value{false};
    if (take_word("null")) return Value{nullptr};
    return Value{parse_number()};
  }

  Object parse_object(int depth) {
    expect('{');
    Object object;
    if (take('}')) return object;
    do {
      skip_space();
      std::string key = parse_string();
      expect(':');
      object.emplace_back(std::move(key), parse_value(depth + 1));
    } while (take(','));
    expect('}');
    return object;
  }

  Array parse_array(int depth) {
    expect('[');
    Array array;
    if (take(']')) return array;
    do {
      array.push_back(parse_value(depth + 1));
    } while (take(','));
    expect(']');
    return array;
  }

  // Escapes are kept as written (\n stays backslash-n): dump() writes them back unchanged.
  std::string parse_string() {
    if (pos_ >= text_.size() || text_[pos_] != '"') fail("a string");
    ++pos_;
    std::string out;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      if (static_cast<unsigned char>(text_[pos_]) < 0x20) fail("no control character in a string");
      if (text_[pos_] == '\\') {
        if (pos_ + 1 >= text_.size()) fail("an escaped character");
        out += text_[pos_++];
      }
      out += text_[pos_++];
    }
    if (pos_ >= text_.size()) fail("'\"' closing the string");
    ++pos_;
    return out;
  }

  double parse_number() {
    double value = 0.0;
    const char* begin = text_.data() + pos_;
    const auto [end, ec] = std::from_chars(begin, text_.data() + text_.size(), value);
    if (ec != std::errc() || end == begin) fail("a value (object, array, string, number)");
    pos_ += static_cast<std::size_t>(end - begin);
    return value;
  }

  std::string_view text_;
  std::string_view source_;
  std::size_t pos_ = 0;
};

void dump_into(const Value& value, std::string& out) {
  if (std::holds_alternative<std::nullptr_t>(value.v)) {
    out += "null";
  } else if (const bool* b = std::get_if<bool>(&value.v)) {
    out += *b ? "true" : "false";
  } else if (const double* d = std::get_if<double>(&value.v)) {
    char text[32];
    const auto end = std::to_chars(text, text + sizeof text, *d).ptr;
    out.append(text, end);
  } else if (const std::string* s = std::get_if<std::string>(&value.v)) {
    out += '"';
    out += *s;  // still escaped as read (parse_string)
    out += '"';
  } else if (const Array* a = std::get_if<Array>(&value.v)) {
    out += '[';
    for (std::size_t i = 0; i < a->size(); ++i) {
      if (i > 0) out += ',';
      dump_into((*a)[i], out);
    }
    out += ']';
  } else {
    const Object& o = std::get<Object>(value.v);
    out += '{';
    for (std::size_t i = 0; i < o.size(); ++i) {
      if (i > 0) out += ',';
      out += '"' + o[i].first + "\":";
      dump_into(o[i].second, out);
    }
    out += '}';
  }
}

}  // namespace

Value parse(std::string_view text, std::string_view source) {
  return Parser(text, source).document();
}

std::string dump(const Value& value) {
  std::string out;
  dump_into(value, out);
  return out;
}

}  // namespace ddp::json

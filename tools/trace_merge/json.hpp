// A small JSON reader and writer: what ddp-trace-merge needs to read Chrome trace files.
// Chapter 07. Objects keep their keys in file order; numbers are doubles (a trace's
// timestamps, microseconds with three decimals, fit). It does not validate UTF-8 or
// decode \u escapes beyond copying them through.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace ddp::json {

struct Value;
using Object = std::vector<std::pair<std::string, Value>>;
using Array = std::vector<Value>;

struct Value {
  // null, bool, number, string, array, object
  std::variant<std::nullptr_t, bool, double, std::string, Array, Object> v = nullptr;

  bool is_object() const { return std::holds_alternative<Object>(v); }
  bool is_array() const { return std::holds_alternative<Array>(v); }
  bool is_number() const { return std::holds_alternative<double>(v); }
  bool is_string() const { return std::holds_alternative<std::string>(v); }
  // The member `key` of an object; null when absent or not an object.
  const Value* find(std::string_view key) const;
  Value* find(std::string_view key);
};

// Parses `text`; ddp::Error "<source>: not valid JSON at byte N: <what was expected>".
Value parse(std::string_view text, std::string_view source);
// Compact JSON, numbers in their shortest exact form.
std::string dump(const Value& value);

}  // namespace ddp::json

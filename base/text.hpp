// Text in fields and lines: splitting a line at a separator, flattening a message onto
// one line, reading a whole field as an integer: the pieces that the text formats of
// ddp.cpp share (ddp-doctor's reports, chapter 00; the ledger's tails, chapter 08). Each
// format keeps its grammar and the errors that name its bad fields.
#pragma once

#include <charconv>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ddp {

// "a\tb\t" -> {"a", "b", ""}: every field, empty ones included; "" -> {}.
std::vector<std::string> split(std::string_view text, char separator);

// Tabs and newlines to spaces: a label or a reason that must fit on one line (one field
// of a line, one line of a listing).
std::string one_line(std::string text);

// "42" -> 42; nullopt unless ALL of `text` is a number that fits T (no spaces, no '+',
// no '-' for an unsigned T).
template <typename T>
std::optional<T> to_integer(std::string_view text) {
  T value{};
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

}  // namespace ddp

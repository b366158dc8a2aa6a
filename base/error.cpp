// ddp::Error formatting (see error.hpp).
#include "base/error.hpp"

namespace ddp::detail {

void throw_error(const char* file, int line, const char* condition, const std::string& message) {
  std::ostringstream os;
  os << message << "\n  at " << file << ':' << line;
  if (condition != nullptr) os << " (check `" << condition << "` failed)";
  throw Error(os.str());
}

}  // namespace ddp::detail

// Names of the reduce operations, for messages (see dist/process_group.hpp).
#include "dist/process_group.hpp"

namespace ddp {

const char* to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
  }
  return "?";
}

}  // namespace ddp

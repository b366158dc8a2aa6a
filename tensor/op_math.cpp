// Names of the ops in op_math.hpp, for error messages.
#include "tensor/op_math.hpp"

namespace ddp {

const char* op_name(UnaryOp op) {
  constexpr const char* kNames[] = {"neg",  "exp",  "log",  "sqrt",    "rsqrt",
                                    "abs",  "relu", "tanh", "sigmoid", "square"};
  return kNames[static_cast<int>(op)];
}

const char* op_name(BinaryOp op) {
  constexpr const char* kNames[] = {"add", "sub", "mul", "div", "maximum", "minimum", "pow",
                                    "eq",  "ne",  "lt",  "le",  "gt",      "ge"};
  return kNames[static_cast<int>(op)];
}

const char* op_name(Reduction op) {
  constexpr const char* kNames[] = {"sum", "max", "min", "argmax"};
  return kNames[static_cast<int>(op)];
}

}  // namespace ddp

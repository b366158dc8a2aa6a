// ch01_tensor: a tour of the tensor library of chapter 01, printed step by step.
//
// Every line it prints is checked against a hand computation before it is printed;
// the program exits 1 if one disagrees (its ctest entry relies on that). Read it next to
// tutorial/ch01_tensor/README.md.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <vector>

#include "tensor/ops.hpp"
#include "tensor/random.hpp"
#include "tensor/threads.hpp"

namespace {

int g_failures = 0;

void expect(bool ok, const char* what) {
  std::printf("  [%s] %s\n", ok ? "ok" : "WRONG", what);
  if (!ok) ++g_failures;
}

}  // namespace

int main() {
  using namespace ddp;
  std::printf("ddp.cpp chapter 01: tensors on the CPU (%d threads)\n\n", get_num_threads());

  // 1. Storage, shape, strides. A (2, 3) tensor is 6 floats; row-major strides (3, 1).
  std::printf("1. shape and strides\n");
  Tensor a = from_data(std::vector<float>{0, 1, 2, 3, 4, 5}, {2, 3});
  std::cout << "  a = " << a << "\n";
  expect(a.strides() == Shape{3, 1}, "a has strides (3, 1): next row is 3 elements on");

  // 2. Views share storage: the transpose is the same memory with swapped strides.
  std::printf("2. views\n");
  Tensor at = a.t();
  std::cout << "  a.t() = " << at << " strides " << shape_str(at.strides()) << "\n";
  expect(at.storage() == a.storage() && !at.is_contiguous(),
         "a.t() shares a's storage and is not contiguous");
  Tensor column = a.select(1, 2);  // a[:, 2] = (2, 5)
  column.fill_(-1.0);
  expect(a.to_vector<float>()[2] == -1.0f && a.to_vector<float>()[5] == -1.0f,
         "writing through the view a[:, 2] changed a");

  // 3. Broadcasting: (2, 3) + (3,) repeats the row; expand() uses stride 0, no copy.
  std::printf("3. broadcasting\n");
  Tensor row = from_data(std::vector<float>{10, 20, 30}, {3});
  Tensor sum_ab = a + row;
  std::cout << "  a + [10, 20, 30] = " << sum_ab << "\n";
  expect(sum_ab.to_vector<float>() == std::vector<float>{10, 21, 29, 13, 24, 29},
         "each row of a gained (10, 20, 30)");
  expect(row.expand({2, 3}).strides() == Shape{0, 1}, "row.expand({2, 3}) has stride 0");

  // 4. Reductions and argmax.
  std::printf("4. reductions\n");
  Tensor s = sum(a, 1);
  std::cout << "  sum(a, 1) = " << s << "  argmax(a, 1) = " << argmax(a, 1) << "\n";
  expect(s.to_vector<float>() == std::vector<float>{0, 6}, "row sums are 0+1-1 and 3+4-1");

  // 5. matmul reads a transposed view without copying it.
  std::printf("5. matmul\n");
  Tensor gram = matmul(a, a.t());  // (2, 3) @ (3, 2)
  std::cout << "  a @ a.t() = " << gram << "\n";
  expect(gram.to_vector<float>() == std::vector<float>{2, 5, 5, 26},
         "a @ a^T by hand: 0+1+1, 0+4+1, 9+16+1");

  // 6. Seeded random numbers: the same seed gives the same tensor (on any device).
  std::printf("6. random numbers\n");
  Generator g1(42), g2(42);
  Tensor r1 = randn({4}, g1), r2 = randn({4}, g2);
  std::cout << "  randn(seed 42) = " << r1 << "\n";
  expect(r1.to_vector<float>() == r2.to_vector<float>(), "two generators seeded 42 agree");

  // 7. Errors name both shapes and say what to do.
  std::printf("7. a clear error\n");
  try {
    (void)(a + from_data(std::vector<float>{1, 2}, {2}));
    expect(false, "adding (2, 3) and (2,) should have failed");
  } catch (const Error& e) {
    std::printf("  ddp::Error: %s\n", e.what());
    expect(std::string(e.what()).find("(2, 3)") != std::string::npos, "the error names (2, 3)");
  }

  std::printf("\n%s\n", g_failures == 0 ? "all checks passed" : "SOME CHECKS FAILED");
  return g_failures == 0 ? 0 : 1;
}

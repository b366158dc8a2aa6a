// Chapter 01, threads.hpp: the thread count round-trips, SerialEigen holds Eigen to one
// thread and gives the count back, and elementwise ops and random draws give
// bit-identical results with 1 and 2 threads (each element is computed by
// one thread from its own inputs, so splitting the loop must not change a bit).
#include <catch2/catch.hpp>

#include <random>
#include <thread>
#include <vector>

#include <Eigen/Core>

#include "tensor/ops.hpp"
#include "tensor/random.hpp"
#include "tensor/tensor.hpp"
#include "tensor/threads.hpp"
#include "tests/support/reference.hpp"

using ddp::Shape;
using ddp::Tensor;
namespace ref = ddp::ref;

TEST_CASE("set_num_threads and get_num_threads round-trip", "[ch01][threads]") {
  const int saved = ddp::get_num_threads();
  CHECK(saved >= 1);
  ddp::set_num_threads(1);
  CHECK(ddp::get_num_threads() == 1);
  ddp::set_num_threads(2);
  CHECK(ddp::get_num_threads() == 2);
  ddp::set_num_threads(5);
  CHECK(ddp::get_num_threads() == 5);
  CHECK_THROWS_AS(ddp::set_num_threads(0), ddp::Error);
  CHECK_THROWS_AS(ddp::set_num_threads(-3), ddp::Error);
  CHECK(ddp::get_num_threads() == 5);  // a refused call changes nothing
  ddp::set_num_threads(saved);
  CHECK(ddp::get_num_threads() == saved);
}

TEST_CASE("SerialEigen keeps Eigen serial while held, then restores set_num_threads' count",
          "[ch01][threads]") {
  // Note [Eigen inside our loops]: the holders are counted, so the first one sets Eigen to
  // one thread and only the last one gives back the count that set_num_threads asked for,
  // even when that changed while they were held.
  const int saved = ddp::get_num_threads();
  ddp::set_num_threads(2);
  CHECK(Eigen::nbThreads() == 2);
  {
    const ddp::SerialEigen outer;
    CHECK(Eigen::nbThreads() == 1);
    {
      const ddp::SerialEigen inner;  // nested
      CHECK(Eigen::nbThreads() == 1);
    }
    CHECK(Eigen::nbThreads() == 1);  // the inner one left, the outer one still holds
    ddp::set_num_threads(3);         // asked for while held: applied when the last leaves
    CHECK(Eigen::nbThreads() == 1);
    CHECK(ddp::get_num_threads() == 3);
    int seen_there = 0;  // (Catch2's CHECK is for the test's own thread only)
    std::thread other([&seen_there] {  // a holder on another thread, inside the outer one
      const ddp::SerialEigen held;
      seen_there = Eigen::nbThreads();
    });
    other.join();
    CHECK(seen_there == 1);
    CHECK(Eigen::nbThreads() == 1);  // its leaving did not end the outer hold
  }
  CHECK(Eigen::nbThreads() == 3);
  ddp::set_num_threads(saved);
  CHECK(Eigen::nbThreads() == saved);
}

TEST_CASE("elementwise ops and random draws are bit-identical with 1 and 2 threads",
          "[ch01][threads]") {
  std::mt19937 rng(701);
  // Large enough that a parallel loop really splits; strided and broadcast inputs.
  const ref::Array xa = ref::random_array(rng, {64, 33, 40}, 0.1, 4);
  const ref::Array ya = ref::random_array(rng, {33, 1}, 0.5, 2);
  const ref::Layout layout = ref::random_layout(rng, xa.shape);
  const Tensor x = ref::make_tensor(xa, layout.strides, layout.offset);
  const Tensor y = ref::make_contiguous(ya);

  const auto compute = [&](int threads) {
    ref::ThreadCountGuard guard(threads);
    std::vector<Tensor> out;
    out.push_back(ddp::exp(x));
    out.push_back(ddp::sigmoid(ddp::neg(x)));
    out.push_back(ddp::tanh(x));
    out.push_back(ddp::add(x, y));
    out.push_back(ddp::div(x, y));
    out.push_back(ddp::pow(x, y));
    out.push_back(ddp::lt(x, y));
    out.push_back(ddp::mul(x, 0.37));
    Tensor inplace = x.clone();
    inplace.add_(y, 0.5f);
    out.push_back(inplace);
    Tensor strided_out = ddp::zeros({40, 33, 64}).permute({2, 1, 0});
    strided_out.copy_(x);
    strided_out.mul_(y);
    out.push_back(strided_out);
    ddp::Generator gen(123);
    out.push_back(ddp::rand({50001}, gen));
    out.push_back(ddp::randn({50001}, gen));
    return out;
  };
  const std::vector<Tensor> one = compute(1);
  const std::vector<Tensor> two = compute(2);
  REQUIRE(one.size() == two.size());
  for (std::size_t k = 0; k < one.size(); ++k) {
    INFO("result " << k);
    CHECK(ref::bitwise_mismatch(one[k], two[k]) == "");
  }
  // And the threaded results are right, not just consistent.
  CHECK(ref::mismatch(two[3], ref::zip(xa, ya, [](double a, double b) { return a + b; }),
                      ref::kFloat) == "");
  CHECK(ref::mismatch(two[9], ref::zip(xa, ya, [](double a, double b) { return a * b; }),
                      ref::kFloat) == "");
}

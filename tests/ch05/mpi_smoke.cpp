// Smoke test of the mpi process group (dist/process_group_mpi.hpp), run by ctest under
// `mpirun -np 2`. Chapter 05. Every rank checks closed-form results; the full matrix of
// sizes, dtypes and ops is the collective driver's job (collectives_main.cpp).
//   ch05_mpi_smoke [--device cuda]
// With --device cuda every tensor lives on the GPU (all ranks share GPU 0): the group
// stages them through pinned host memory, as the tcp group does.
// Exit code 0 when every check passed on this rank, 1 otherwise; 77 (ctest: Skipped)
// for --device cuda where no GPU is usable.
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string_view>
#include <vector>

#include "dist/process_group_mpi.hpp"
#include "tensor/cuda/device_info.hpp"
#include "tensor/tensor.hpp"
#include "tests/support/no_gpu.hpp"

namespace {

int failures = 0;

void expect(bool ok, int rank, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "rank %d: FAILED %s\n", rank, what);
    ++failures;
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ddp;
  const bool gpu =
      argc == 3 && std::string_view(argv[1]) == "--device" && std::string_view(argv[2]) == "cuda";
  if (argc != 1 && !gpu) {
    std::fprintf(stderr, "usage: ch05_mpi_smoke [--device cuda]\n");
    return 2;
  }
  if (gpu && cuda::device_count() == 0) return test::skip_without_gpu();  // every rank: 77
  const Device device = gpu ? Device::cuda(0) : Device::cpu();
  const TensorOptions f32{DType::Float32, device};
  try {
    std::unique_ptr<ProcessGroup> group = make_process_group_mpi(std::chrono::seconds(60));
    const int rank = group->rank();
    const int world = group->size();
    expect(group->backend_name() == "mpi", rank, "backend_name() == mpi");
    expect(world >= 2, rank, "at least 2 ranks (run under mpirun -np 2)");

    // all_reduce sum: element i of rank r is r + i -> w(w-1)/2 + w*i.
    const std::int64_t n = 1000;
    Tensor x = arange(0.0, static_cast<double>(n), 1.0, f32);
    x.add_(static_cast<float>(rank));
    group->all_reduce(x, ReduceOp::Sum)->wait();
    const std::vector<float> sum = x.to_vector<float>();
    bool ok = true;
    for (std::int64_t i = 0; i < n; ++i) {
      ok = ok && sum[i] == static_cast<float>(world * (world - 1) / 2 + world * i);
    }
    expect(ok, rank, "all_reduce sum float32 == w(w-1)/2 + w*i");

    // all_reduce avg on int64: rank r holds 10*(r+1) -> 5(w+1), truncated.
    Tensor k = full({4}, 10.0 * (rank + 1), {DType::Int64, device});
    group->all_reduce(k, ReduceOp::Avg)->wait();
    for (std::int64_t v : k.to_vector<std::int64_t>()) {
      expect(v == 10 * world * (world + 1) / 2 / world, rank, "all_reduce avg int64");
    }

    // Two collectives in flight at once, then max; and a barrier.
    Tensor a = full({3}, rank, f32), b = full({3}, -rank, f32);
    auto wa = group->all_reduce(a, ReduceOp::Max);
    auto wb = group->all_reduce(b, ReduceOp::Min);
    wb->wait();
    wa->wait();
    expect(a.to_vector<float>()[0] == world - 1, rank, "all_reduce max == w-1");
    expect(b.to_vector<float>()[0] == -(world - 1), rank, "all_reduce min == -(w-1)");
    group->barrier()->wait();

    // broadcast from the last rank; all_gather and reduce_scatter of the rank.
    Tensor c = full({5}, rank, f32);
    group->broadcast(c, world - 1)->wait();
    expect(c.to_vector<float>()[4] == world - 1, rank, "broadcast from rank w-1");
    Tensor gathered = zeros({world * 2}, f32);
    group->all_gather(gathered, full({2}, rank, f32))->wait();
    const std::vector<float> g = gathered.to_vector<float>();
    for (int r = 0; r < world; ++r) expect(g[2 * r] == r && g[2 * r + 1] == r, rank, "all_gather");
    Tensor part = zeros({2}, f32);
    group->reduce_scatter(part, arange(0.0, 2.0 * world, 1.0, f32), ReduceOp::Sum)->wait();
    // Every rank sends 0..2w-1; rank r receives w * (2r, 2r+1).
    expect(part.to_vector<float>()[1] == world * (2 * rank + 1), rank, "reduce_scatter sum");

    for (const Tensor* t : {&x, &k, &a, &b, &c, &gathered, &part}) {
      expect(t->device() == device, rank, "results stay on the device they were given on");
    }
    if (failures == 0) {
      std::printf("rank %d/%d: mpi smoke test passed (%s tensors)\n", rank, world,
                  device.str().c_str());
    }
    group.reset();  // MPI_Finalize
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return failures == 0 ? 0 : 1;
}

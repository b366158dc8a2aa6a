// The nccl process group (dist/process_group_nccl.hpp) at world size 1, on GPU 0, over a
// FileStore. Chapter 05. With one rank every collective has a closed form (a sum over
// one rank is the input), which still exercises the whole path: the unique id through the
// store, the nonblocking communicator, the stream ordering and the Work's event. Needs
// a GPU (reports Skipped without one); several ranks are the collective driver's job.
// Also chapter 07's Work::block_stream: the compute stream waits, the host does not.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "dist/file_store.hpp"
#include "dist/new_group.hpp"
#include "dist/process_group_nccl.hpp"
#include "tensor/cuda/runtime.hpp"  // Event::query
#include "tensor/cuda/streams.hpp"
#include "tensor/ops.hpp"
#include "tensor/tensor.hpp"

namespace {

using namespace ddp;
constexpr Device kGpu = Device::cuda(0);

// Rank 0 of a group of `size` on GPU 0, over a fresh FileStore.
std::unique_ptr<ProcessGroup> make_group(
    int size = 1, std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  const std::string path =
      "/tmp/ddp_test_nccl_" + std::to_string(getpid()) + "_" + std::to_string(now);
  auto store = std::make_shared<FileStore>(path, std::chrono::seconds(30));
  struct Remove {
    std::string path;
    ~Remove() { std::remove(path.c_str()); }
  } remove{path};  // also when creation throws
  return make_process_group_nccl(store, 0, size, 0, timeout);
}

// 0, 1, ..., n-1 as float32 on the GPU, made by a kernel on the compute stream (so the
// collective must be ordered after it).
Tensor iota(std::int64_t n) {
  return arange(0.0, static_cast<double>(n), 1.0, {DType::Float32, kGpu});
}

}  // namespace

TEST_CASE("nccl group of one: rank, size and backend name", "[ch05][nccl]") {
  auto group = make_group();
  CHECK(group->rank() == 0);
  CHECK(group->size() == 1);
  CHECK(group->backend_name() == "nccl");
}

TEST_CASE("nccl all_reduce of one rank returns its input, float32 and int64, every op",
          "[ch05][nccl]") {
  auto group = make_group();
  const std::int64_t n = (1 << 20) + 3;  // not a multiple of any vector width
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min}) {
    INFO(to_string(op));
    Tensor x = iota(n);
    x.mul_(2.0f);  // queued on the compute stream just before the collective
    auto work = group->all_reduce(x, op);
    work->wait(std::chrono::seconds(30));
    CHECK(work->is_completed());
    CHECK(work->exception() == nullptr);
    const std::vector<float> got = x.to_vector<float>();
    bool ok = true;
    for (std::int64_t i = 0; i < n; ++i) ok = ok && got[i] == 2.0f * static_cast<float>(i);
    CHECK(ok);

    Tensor k = full({7}, -5.0, {DType::Int64, kGpu});
    group->all_reduce(k, op)->wait();
    for (std::int64_t v : k.to_vector<std::int64_t>()) CHECK(v == -5);
  }
}

TEST_CASE("nccl broadcast, all_gather, reduce_scatter and barrier at world size 1",
          "[ch05][nccl]") {
  auto group = make_group();
  Tensor b = iota(10);
  group->broadcast(b, 0)->wait();
  CHECK(b.to_vector<float>()[9] == 9.0f);

  Tensor gathered = zeros({6}, {DType::Float32, kGpu});
  group->all_gather(gathered, iota(6))->wait();
  CHECK(gathered.to_vector<float>() == std::vector<float>{0, 1, 2, 3, 4, 5});

  Tensor part = zeros({4}, {DType::Int64, kGpu});
  const std::vector<std::int64_t> values{7, -8, 9, 1 << 30};
  group->reduce_scatter(part, from_data(values, {4}, kGpu), ReduceOp::Sum)->wait();
  CHECK(part.to_vector<std::int64_t>() == values);

  auto barrier = group->barrier();
  barrier->wait(std::chrono::seconds(30));
  CHECK(barrier->is_completed());
}

TEST_CASE("nccl new_group at world size 1: a split of one rank, bad lists refused",
          "[ch05][nccl]") {
  // ncclCommSplit (NCCL >= 2.18; otherwise a communicator through the store) of the
  // only rank; several ranks need several GPUs (ch05_subgroups covers tcp and mpi).
  auto group = make_group();
  auto sub = new_group(*group, {0});
  CHECK(sub->rank() == 0);
  CHECK(sub->size() == 1);
  CHECK(sub->backend_name() == "nccl");
  CHECK(sub->timeout() == group->timeout());
  CHECK_THAT(sub->who(), Catch::Contains("rank 0/1 of group [0] (nccl,") &&
                             Catch::Contains("parent rank 0/1)"));
  Tensor x = iota(1001);
  sub->all_reduce(x, ReduceOp::Sum)->wait(std::chrono::seconds(30));
  CHECK(x.to_vector<float>()[1000] == 1000.0f);
  Tensor gathered = zeros({6}, {DType::Float32, kGpu});
  sub->all_gather(gathered, iota(6))->wait();
  CHECK(gathered.to_vector<float>() == std::vector<float>{0, 1, 2, 3, 4, 5});
  sub->barrier()->wait(std::chrono::seconds(30));
  sub->destroy();  // the sub-group ends, the parent goes on
  Tensor y = iota(5);
  group->all_reduce(y, ReduceOp::Sum)->wait(std::chrono::seconds(30));
  CHECK(y.to_vector<float>() == std::vector<float>{0, 1, 2, 3, 4});
  CHECK_THROWS_WITH(new_group(*group, {1}),
                    Catch::Contains("rank 1 (at index 0) is not a rank of the parent"));
  CHECK_THROWS_WITH(new_group(*group, {}), Catch::Contains("the list is empty"));
}

TEST_CASE("nccl collectives check device, shape and dtype before queuing", "[ch05][nccl]") {
  auto group = make_group();
  Tensor on_cpu = zeros({4});
  CHECK_THROWS_WITH(group->all_reduce(on_cpu, ReduceOp::Sum),
                    Catch::Contains("but this rank's group is on cuda:0"));
  Tensor small = zeros({3}, {DType::Float32, kGpu});
  CHECK_THROWS_WITH(group->all_gather(small, iota(2)),
                    Catch::Contains("expected size() * input.numel()"));
  Tensor ints = zeros({2}, {DType::Int64, kGpu});
  CHECK_THROWS_WITH(group->all_gather(ints, iota(2)), Catch::Contains("but output is"));
  Tensor x = iota(4);
  CHECK_THROWS_WITH(group->broadcast(x, 1), Catch::Contains("is not a rank"));
}

TEST_CASE("nccl creation that a rank never joins times out and aborts", "[ch05][nccl]") {
  // World size 2, and rank 1 never comes (one GPU, one process). Rank 0's nonblocking
  // ncclCommInitRankConfig stays in progress; the group's timeout must end it with an
  // error saying what did not finish, instead of a hang (ctest's TIMEOUT would catch
  // that). On the way, settle() aborts the communicator: not visible from here, except
  // that the GPU then serves a new group. (The bootstrap thread that ncclGetUniqueId
  // started lives on until the process ends.) A real GPU is the only place this can run.
  CHECK_THROWS_WITH(make_group(2, std::chrono::seconds(2)),
                    Catch::Contains("rank 0/2 (nccl, cuda:0") &&
                        Catch::Contains("ncclCommInitRankConfig did not finish within 2000 ms") &&
                        Catch::Contains("communicator aborted"));
  // The GPU is still usable afterwards: a group of one works.
  auto group = make_group();
  Tensor x = iota(5);
  group->all_reduce(x, ReduceOp::Sum)->wait(std::chrono::seconds(30));
  CHECK(x.to_vector<float>() == std::vector<float>{0, 1, 2, 3, 4});
}

TEST_CASE("nccl block_stream orders the compute stream after the collective, host free",
          "[ch05][nccl]") {
  // Chapter 07's Reducer ends backward with block_stream: the compute stream must see the
  // collective's result, and the host must not wait for the GPU to get there. A chain of
  // products queued BEFORE the collective keeps the GPU busy for about half a second; the
  // collective waits for it (Note [Ordering the communication stream]) and block_stream
  // must return long before it is done (the host-blocking wait() would not).
  auto group = make_group();
  const std::int64_t side = 4096;
  const Tensor w = full({side, side}, 1.0 / side, {DType::Float32, kGpu});
  auto chain = [&](int count) {
    Tensor x = w;
    for (int i = 0; i < count; ++i) x = matmul(x, w);
    return x;
  };
  chain(2);  // warm up cuBLAS and the allocator
  cuda::record_on_compute_stream(0)->synchronize();
  auto start = std::chrono::steady_clock::now();
  chain(8);
  cuda::record_on_compute_stream(0)->synchronize();
  const double per_product =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() /
      8;
  const int count = static_cast<int>(500.0 / per_product) + 1;

  // all_gather into a separate output that starts at -1, of 64 Mi ones: a kernel on the
  // compute stream that ran before the collective's copy would see some -1s.
  const std::int64_t n = std::int64_t{1} << 26;
  Tensor in = full({n}, 1.0, {DType::Float32, kGpu});
  Tensor out = full({n}, -1.0, {DType::Float32, kGpu});
  cuda::record_on_compute_stream(0)->synchronize();  // made before the chain starts
  const Tensor busy = chain(count);
  const std::shared_ptr<cuda::Event> busy_done = cuda::record_on_compute_stream(0);
  auto work = group->all_gather(out, in);
  start = std::chrono::steady_clock::now();
  work->block_stream(std::chrono::seconds(30));
  const double blocked_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const bool busy_finished = busy_done->query();
  INFO("block_stream held the host " << blocked_ms << " ms; " << count << " products of " << side
                                     << "^2 queued before the collective");
  CHECK_FALSE(busy_finished);

  const Tensor seen = ddp::min(out.clone());  // both kernels queued after block_stream
  CHECK(seen.to_vector<float>() == std::vector<float>{1.0f});
  CHECK(work->is_completed());  // the compute stream waited for it
  CHECK(work->exception() == nullptr);
}

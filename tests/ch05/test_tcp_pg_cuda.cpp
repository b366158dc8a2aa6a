// Chapter 05, ProcessGroupTcp on CUDA tensors: staged through host memory, the results
// land back on the GPU. Two ranks as two threads of one process, sharing GPU 0.
// Skipped (exit 77) without a GPU.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "dist/process_group_tcp.hpp"
#include "dist/tcp_store.hpp"
#include "tensor/tensor.hpp"

using namespace std::chrono_literals;

TEST_CASE("tcp all_reduce, broadcast and all_gather of CUDA tensors", "[ch05][tcp][cuda]") {
  ddp::TCPStoreOptions server_options;
  server_options.port = 0;
  server_options.is_server = true;
  auto server = std::make_shared<ddp::TCPStore>(server_options);
  ddp::TCPStoreOptions client_options;
  client_options.port = server->port();
  auto client = std::make_shared<ddp::TCPStore>(client_options);

  std::vector<std::vector<float>> reduced(2), broadcast(2), gathered(2);
  auto rank_main = [&](int rank, std::shared_ptr<ddp::Store> store) {
    ddp::ProcessGroupTcp group(store, rank, 2, 20s, "cuda");
    ddp::Tensor t = ddp::full({1001}, rank + 1.0).cuda();
    group.all_reduce(t)->wait(20s);
    REQUIRE(t.is_cuda());
    reduced[static_cast<std::size_t>(rank)] = t.to_vector<float>();
    ddp::Tensor b = ddp::full({77}, rank * 10.0).cuda();
    group.broadcast(b, 1)->wait(20s);
    broadcast[static_cast<std::size_t>(rank)] = b.to_vector<float>();
    ddp::Tensor in = ddp::full({5}, static_cast<double>(rank)).cuda();
    ddp::Tensor out = ddp::zeros({10}).cuda();
    group.all_gather(out, in)->wait(20s);
    gathered[static_cast<std::size_t>(rank)] = out.to_vector<float>();
    group.barrier()->wait(20s);
  };
  std::thread other(rank_main, 1, client);
  rank_main(0, server);
  other.join();
  for (int r = 0; r < 2; ++r) {
    CHECK(reduced[r] == std::vector<float>(1001, 3.0f));
    CHECK(broadcast[r] == std::vector<float>(77, 10.0f));
    CHECK(gathered[r] == std::vector<float>{0, 0, 0, 0, 0, 1, 1, 1, 1, 1});
  }
}

// Chapter 05, init_process_group: the three rendezvous (env://, tcp://, file://) bring 3
// forked processes to a working tcp group; a wrong backend or init method is named.
#include <catch2/catch.hpp>

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "dist/init.hpp"
#include "base/error.hpp"
#include "tensor/tensor.hpp"
#include "tests/ch05/fork_ranks.hpp"
#include "tests/ch05/test_port.hpp"

using namespace std::chrono_literals;

namespace {

// In a child: joins through `options`, all-reduces its rank, checks 0 + 1 + 2.
int all_reduce_ranks(ddp::InitOptions options) {
  options.timeout = 20s;
  auto group = ddp::init_process_group(options);
  ddp::Tensor t = ddp::full({5}, static_cast<double>(group->rank()));
  group->all_reduce(t)->wait(20s);
  const int w = group->size();
  const float want = static_cast<float>(w * (w - 1) / 2);
  for (float v : t.to_vector<float>()) {
    if (v != want) return 2;
  }
  group->barrier()->wait(20s);
  return group->backend_name() == "tcp" ? 0 : 3;
}

void set_torchrun_env(int rank, int world, int port) {
  ::setenv("RANK", std::to_string(rank).c_str(), 1);
  ::setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
  ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
  ::setenv("LOCAL_WORLD_SIZE", std::to_string(world).c_str(), 1);
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
}

}  // namespace

TEST_CASE("init_process_group env:// joins 3 processes over tcp", "[ch05][init]") {
  const int port = ddp::test::free_test_port();
  const auto codes = ddp::test::run_forked(3, [port](int rank) {
    set_torchrun_env(rank, 3, port);
    return all_reduce_ranks({});
  });
  CHECK(codes == std::vector<int>{0, 0, 0});
}

TEST_CASE("init_process_group tcp://host:port takes rank and size from options", "[ch05][init]") {
  const int port = ddp::test::free_test_port();
  const auto codes = ddp::test::run_forked(3, [port](int rank) {
    ddp::InitOptions o;
    o.init_method = "tcp://127.0.0.1:" + std::to_string(port);
    o.rank = rank;
    o.world_size = 3;
    return all_reduce_ranks(o);
  });
  CHECK(codes == std::vector<int>{0, 0, 0});
}

TEST_CASE("init_process_group file:// meets through a FileStore", "[ch05][init]") {
  const std::filesystem::path path = std::filesystem::temp_directory_path() /
                                     ("ddp_init_test_" + std::to_string(::getpid()) + ".store");
  std::filesystem::remove(path);
  const auto codes = ddp::test::run_forked(3, [&path](int rank) {
    ddp::InitOptions o;
    o.init_method = "file://" + path.string();
    o.rank = rank;
    o.world_size = 3;
    return all_reduce_ranks(o);
  });
  std::filesystem::remove(path);
  CHECK(codes == std::vector<int>{0, 0, 0});
}

TEST_CASE("init_process_group auto: ranks on the CPU agree on tcp through the store, and say why",
          "[ch05][init]") {
  const int port = ddp::test::free_test_port();
  const auto codes = ddp::test::run_forked(3, [port](int rank) {
    set_torchrun_env(rank, 3, port);
    ddp::InitOptions o;
    o.backend = "auto";  // o.device: the CPU
    o.timeout = 20s;
    ddp::BackendChoice chosen;
    auto group = ddp::init_process_group(o, chosen);
    if (chosen.backend != "tcp" || chosen.reason != "the ranks train on the CPU") return 4;
    group->barrier()->wait(20s);
    return group->backend_name() == "tcp" ? 0 : 3;
  });
  CHECK(codes == std::vector<int>{0, 0, 0});
}

TEST_CASE("init_process_group names a wrong backend or init method", "[ch05][init]") {
  ddp::InitOptions o;
  o.rank = 0;
  o.world_size = 1;
  o.backend = "gloo";
  CHECK_THROWS_WITH(ddp::init_process_group(o),
                    Catch::Contains("\"gloo\"") && Catch::Contains("tcp, mpi, nccl"));
  if (!ddp::nccl_built()) {  // a build without NCCL says so, and how to get it
    o.backend = "nccl";
    CHECK_THROWS_WITH(ddp::init_process_group(o),
                      Catch::Contains("not in this build") && Catch::Contains("NCCL_HOME"));
  }
  o.backend = "tcp";
  o.init_method = "carrier-pigeon://";
  CHECK_THROWS_WITH(ddp::init_process_group(o), Catch::Contains("carrier-pigeon://"));
  o.init_method = "tcp://127.0.0.1";
  CHECK_THROWS_WITH(ddp::init_process_group(o), Catch::Contains("no port"));
}

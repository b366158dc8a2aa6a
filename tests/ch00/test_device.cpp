// Chapter 00: device names. Device::parse reads what a user types on the command line
// ("cpu", "cuda", "cuda:N"); Device::str writes it back; bad text is named in the error.
#include <catch2/catch.hpp>

#include <string>

#include "tensor/device.hpp"
#include "base/error.hpp"

using Catch::Contains;
using ddp::Device;
using ddp::DeviceType;

TEST_CASE("Device::parse accepts cpu, cuda and cuda:N", "[ch00][device]") {
  const Device cpu = Device::parse("cpu");
  CHECK(cpu.type == DeviceType::CPU);
  CHECK(cpu.index == 0);
  CHECK(cpu.is_cpu());
  CHECK_FALSE(cpu.is_cuda());

  const Device bare = Device::parse("cuda");
  CHECK(bare.type == DeviceType::CUDA);
  CHECK(bare.index == 0);

  CHECK(Device::parse("cuda:0") == Device::cuda(0));
  CHECK(Device::parse("cuda:3").index == 3);
  CHECK(Device::parse("cuda:3").is_cuda());
  CHECK(Device::parse("cuda:12") == Device::cuda(12));
}

TEST_CASE("Device::str writes what Device::parse reads", "[ch00][device]") {
  CHECK(Device::cpu().str() == "cpu");
  CHECK(Device::cuda().str() == "cuda:0");
  CHECK(Device::cuda(7).str() == "cuda:7");
  for (const char* text : {"cpu", "cuda:0", "cuda:1", "cuda:15"}) {
    CHECK(Device::parse(text).str() == text);
  }
  CHECK(Device::parse("cuda").str() == "cuda:0");
}

TEST_CASE("Device equality compares type and index", "[ch00][device]") {
  CHECK(Device::cpu() == Device{});
  CHECK(Device::cuda(0) == Device::cuda());
  CHECK_FALSE(Device::cuda(0) == Device::cuda(1));
  CHECK_FALSE(Device::cpu() == Device::cuda(0));
}

TEST_CASE("Device::parse rejects anything else and names the bad text", "[ch00][device]") {
  for (const char* text : {"gpu", "CPU", "", "cuda:", "cuda:-1", "cuda:1x", "cuda:x", "cuda0",
                           " cpu", "cpu:0", "cuda:+1", "cuda:99999999999"}) {
    INFO("text: '" << text << "'");
    CHECK_THROWS_AS(Device::parse(text), ddp::Error);
    CHECK_THROWS_WITH(Device::parse(text), Contains("'" + std::string(text) + "'"));
  }
  CHECK_THROWS_WITH(Device::parse("tpu:0"), Contains("'tpu:0'") && Contains("cuda:N"));
}

// The PyTorch parity fixture of chapter 04 (tests/data/resnet_mnist/README.md): PyTorch's
// initial weights, one batch of 16 images, and what PyTorch computed from them (logits,
// loss, gradients, the state after 3 SGD steps): the reference that ResNetMnist is held
// to. Read by tutorial/ch04_resnet_mnist and by tests/ch04 (test_parity.cpp,
// test_nn_cuda.cpp); it is part of ddp::nn so that a program may read it too.
#pragma once

#include <filesystem>
#include <string>
#include <unordered_map>
#include <vector>

#include "nn/state_dict.hpp"
#include "tensor/tensor.hpp"

namespace ddp::nn {

struct ResNetFixture {
  std::filesystem::path dir;
  std::vector<std::string> names;  // in the order of tensors.txt
  std::unordered_map<std::string, Tensor> tensors;  // float32, on the CPU
  Tensor labels;                                    // int64 (16)

  // The tensor called `name` ("batch/x"); throws ddp::Error naming the fixture if absent.
  const Tensor& at(const std::string& name) const;
  // The entries whose names start with `prefix` ("init/"), prefix removed, in file order.
  nn::StateDict with_prefix(const std::string& prefix) const;
};

// Reads tensors.txt, tensors.bin and labels.txt from `dir`. Throws ddp::Error naming the
// file and line at fault.
ResNetFixture load_resnet_fixture(const std::filesystem::path& dir);

// ||a - b|| / ||b|| over all elements (as the fixture's README measures), in double;
// a and b must have the same number of elements (their shapes may differ: (1) vs ()).
double relative_error(const Tensor& a, const Tensor& b);

}  // namespace ddp::nn

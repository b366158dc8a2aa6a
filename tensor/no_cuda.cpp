// What a build without CUDA (-DDDP_CUDA=OFF, or AUTO without nvcc) answers when a
// program asks for a GPU. Chapter 02. Compiled instead of tensor/cuda/backend.cu and its
// kernels, so that every program links either way: the queries say "no GPU", and
// anything that needs one throws a ddp::Error that says how to get a CUDA build.
#include <string>

#include "tensor/backend.hpp"
#include "tensor/cuda/device_info.hpp"
#include "tensor/cuda/matmul_tiled.hpp"
#include "tensor/cuda/streams.hpp"
#include "base/error.hpp"

namespace ddp {
namespace {

[[noreturn]] void fail_not_built(const char* what, int index) {
  DDP_FAIL(what, " (cuda:", index, "): ddp.cpp was built without CUDA",
           "\nhint: reconfigure with -DDDP_CUDA=ON (or AUTO with nvcc on PATH, e.g. "
           "/usr/local/cuda/bin) and rebuild, or use Device::cpu()");
}

}  // namespace

Backend& cuda_backend(int index) { fail_not_built("a CUDA device was requested", index); }

namespace cuda {

bool is_built() { return false; }
int device_count() noexcept { return 0; }
bool is_available() { return false; }
std::string device_name(int index) { fail_not_built("device_name", index); }
std::string device_uuid(int index) { fail_not_built("device_uuid", index); }
AllocatorStats allocator_stats(int index) { fail_not_built("allocator_stats", index); }
void empty_cache(int index) { fail_not_built("empty_cache", index); }
void use_device(int index) { fail_not_built("use_device", index); }
void* pinned_allocate(std::size_t) { fail_not_built("pinned host memory", 0); }
void pinned_free(void*) noexcept {}

std::shared_ptr<Event> record_on_compute_stream(int device) {
  fail_not_built("record_on_compute_stream", device);
}
void compute_stream_wait(const Event&, int device) {
  fail_not_built("compute_stream_wait", device);
}
void copy_on_copy_stream(const Tensor& src, const Tensor&, const Event*) {
  fail_not_built("copy_on_copy_stream", src.defined() && src.is_cuda() ? src.device().index : 0);
}

void matmul_tiled(const Tensor& a, const Tensor&, const Tensor&) {
  fail_not_built("matmul_tiled", a.defined() && a.is_cuda() ? a.device().index : 0);
}

}  // namespace cuda
}  // namespace ddp

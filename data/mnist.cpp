// MnistDataset (see mnist.hpp): finding the four files, checking that they belong
// together, and turning bytes into normalised batches. Chapter 04.
#include "data/mnist.hpp"

#include <array>
#include <cstdlib>
#include <filesystem>
#include <utility>

#include "base/error.hpp"

namespace ddp {
namespace {

// "<folder>/<stem>.gz" when it exists, else "<folder>/<stem>"; "" when neither does.
std::string find_idx_file(const std::string& folder, const std::string& stem) {
  namespace fs = std::filesystem;
  std::error_code ec;  // an unreadable folder reads as "not there"; the message says where
  for (const fs::path& path : {fs::path(folder) / (stem + ".gz"), fs::path(folder) / stem}) {
    if (fs::is_regular_file(path, ec)) return path.string();
  }
  return "";
}

// All 256 pixel values converted once, with the float32 operations of the anchor
// ((x / 255 - mean) / std, each step rounded to float32 as numpy does), so that a
// lookup gives exactly the values PyTorch sees, at the cost of one load per pixel.
const std::array<float, 256>& normalised_pixels() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int p = 0; p < 256; ++p) {
      t[p] = (static_cast<float>(p) / 255.0f - MnistDataset::kMean) / MnistDataset::kStd;
    }
    return t;
  }();
  return table;
}

}  // namespace

// ---- Where the data lives ------------------------------------------------------------------
std::string bundled_mnist_folder() {
  // Set by data/CMakeLists.txt to <source>/data/mnist-10k, so every program built from
  // this tree finds the bundled digits whatever its working directory.
  return DDP_MNIST_BUNDLED_DIR;
}

std::string default_mnist_folder() {
  const char* env = std::getenv("MNIST_DIR");
  return env != nullptr && env[0] != '\0' ? std::string(env) : bundled_mnist_folder();
}

// ---- Construction --------------------------------------------------------------------------
namespace {

// Finds both files of a split, or says which names were looked for, and where.
std::pair<std::string, std::string> find_split(MnistSplit split, const std::string& folder) {
  const std::string prefix = split == MnistSplit::Train ? "train" : "t10k";
  const std::string images_stem = prefix + "-images-idx3-ubyte";
  const std::string labels_stem = prefix + "-labels-idx1-ubyte";
  std::string images = find_idx_file(folder, images_stem);
  std::string labels = find_idx_file(folder, labels_stem);
  DDP_CHECK(!images.empty() && !labels.empty(), "MNIST ", prefix, " split: looked in ", folder,
            " for ", images_stem, "[.gz] and ", labels_stem, "[.gz], but ",
            images.empty() && labels.empty() ? "found neither"
            : images.empty()                 ? "the images file is missing"
                                             : "the labels file is missing",
            "\nhint: tools/fetch-mnist.sh <folder> downloads the full set; the 8,000/2,000 ",
            "subset is in ", bundled_mnist_folder(), "; pass the folder or set MNIST_DIR");
  return {std::move(images), std::move(labels)};
}

}  // namespace

MnistDataset::MnistDataset(MnistSplit split, const std::string& folder) {
  auto [images_path, labels_path] = find_split(split, folder);
  *this = MnistDataset(read_idx_file(images_path), read_idx_file(labels_path), images_path,
                       labels_path);
}

MnistDataset::MnistDataset(IdxArray images, IdxArray labels, const std::string& images_name,
                           const std::string& labels_name) {
  // The reader checked each file on its own; here, that they are the right kinds and
  // belong together.
  DDP_CHECK(images.dims.size() == 3, "file ", images_name, ": expected images (3 dimensions, ",
            "magic 0x00000803), got an IDX array of ", images.dims.size(), " dimension(s)");
  DDP_CHECK(labels.dims.size() == 1, "file ", labels_name, ": expected labels (1 dimension, ",
            "magic 0x00000801), got an IDX array of ", labels.dims.size(), " dimensions");
  size_ = images.dims[0];
  height_ = images.dims[1];
  width_ = images.dims[2];
  DDP_CHECK(size_ > 0, "file ", images_name, ": holds no images (its header says 0)");
  DDP_CHECK(labels.dims[0] == size_, "MNIST: ", images_name, " holds ", size_, " images but ",
            labels_name, " holds ", labels.dims[0], " labels; they must ",
            "match one to one\nhint: are both files from the same split and the same copy?");
  DDP_CHECK(images.data.size() == static_cast<std::size_t>(size_ * height_ * width_) &&
                labels.data.size() == static_cast<std::size_t>(size_),
            "MNIST: ", images_name, " / ", labels_name, ": the byte counts do not match the ",
            "dimensions (", images.data.size(), " and ", labels.data.size(), " bytes)");
  for (std::size_t i = 0; i < labels.data.size(); ++i) {
    DDP_CHECK(labels.data[i] <= 9, "file ", labels_name, ": label ",
              static_cast<int>(labels.data[i]), " at index ", i, "; MNIST labels are 0..9");
  }
  images_ = std::move(images.data);
  labels_ = std::move(labels.data);
}

// ---- Access and batches -------------------------------------------------------------------
void MnistDataset::check_index(std::int64_t i) const {
  DDP_CHECK(i >= 0 && i < size_, "MnistDataset: index ", i, " is out of range for ", size_,
            " images");
}

std::span<const std::uint8_t> MnistDataset::image(std::int64_t i) const {
  check_index(i);
  const auto pixels = static_cast<std::size_t>(height_ * width_);
  return std::span(images_).subspan(static_cast<std::size_t>(i) * pixels, pixels);
}

std::uint8_t MnistDataset::label(std::int64_t i) const {
  check_index(i);
  return labels_[static_cast<std::size_t>(i)];
}

Batch MnistDataset::get_host_batch(std::span<const std::int64_t> indices) const {
  DDP_CHECK(!indices.empty(), "MnistDataset::get_batch: no indices");
  const auto batch = static_cast<std::int64_t>(indices.size());
  const std::int64_t pixels = height_ * width_;
  Tensor images = empty({batch, 1, height_, width_});
  Tensor labels = empty({batch}, {DType::Int64});
  float* x = images.data<float>();
  std::int64_t* y = labels.data<std::int64_t>();
  const std::array<float, 256>& normalised = normalised_pixels();
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t i = indices[static_cast<std::size_t>(b)];
    check_index(i);
    const std::uint8_t* src = images_.data() + i * pixels;
    float* dst = x + b * pixels;
    for (std::int64_t p = 0; p < pixels; ++p) dst[p] = normalised[src[p]];
    y[b] = labels_[static_cast<std::size_t>(i)];
  }
  return {std::move(images), std::move(labels)};
}

Batch MnistDataset::get_batch(std::span<const std::int64_t> indices, Device device) const {
  Batch host = get_host_batch(indices);
  return {host.images.to(device), host.labels.to(device)};  // no copy when device is the CPU
}

}  // namespace ddp

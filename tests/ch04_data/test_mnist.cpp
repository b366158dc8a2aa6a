// Chapter 04, MnistDataset: the bundled digits load (8,000 / 2,000) and agree byte for
// byte with an independent reading through zlib's gzread; batches are normalised exactly
// as the PyTorch anchor normalises them; the four files are found (.gz first) and checked
// to belong together (counts equal, labels 0..9), with errors that say what was wrong.
#include <catch2/catch.hpp>

#include <zlib.h>

#include <cmath>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include "data/mnist.hpp"
#include "tests/ch04_data/idx_files.hpp"

using Catch::Contains;
using ch04::Bytes;
using ch04::error_of;

namespace {

// The whole decompressed file through gzopen/gzread: a second, independent path through
// zlib (the reader uses inflate directly).
Bytes gunzip_whole(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  REQUIRE(f != nullptr);
  Bytes out;
  std::vector<char> buffer(1 << 16);
  int n = 0;
  while ((n = gzread(f, buffer.data(), static_cast<unsigned>(buffer.size()))) > 0) {
    out.insert(out.end(), buffer.begin(), buffer.begin() + n);
  }
  gzclose(f);
  REQUIRE(n == 0);
  return out;
}

std::string bundled(const std::string& file) { return ddp::bundled_mnist_folder() + "/" + file; }

}  // namespace

// ---- The bundled digits ----------------------------------------------------------------------
TEST_CASE("The bundled MNIST subset loads: 8,000 train and 2,000 test digits", "[ch04][mnist]") {
  const ddp::MnistDataset train(ddp::MnistSplit::Train, ddp::bundled_mnist_folder());
  const ddp::MnistDataset test(ddp::MnistSplit::Test, ddp::bundled_mnist_folder());
  CHECK(train.size() == 8000);
  CHECK(test.size() == 2000);
  CHECK((train.height() == 28 && train.width() == 28));

  // Against gzread: the 16-byte image header and the 8-byte label header stripped, every
  // byte the same.
  const Bytes images = gunzip_whole(bundled("train-images-idx3-ubyte.gz"));
  const Bytes labels = gunzip_whole(bundled("train-labels-idx1-ubyte.gz"));
  REQUIRE(images.size() == 16 + 8000 * 784);
  REQUIRE(labels.size() == 8 + 8000);
  CHECK(std::equal(images.begin() + 16, images.end(), train.image(0).data()));
  CHECK(std::equal(labels.begin() + 8, labels.end(), train.labels().begin()));

  // Numbers taken from the files with Python's gzip module when they were bundled.
  std::uint64_t train_sum = 0;
  std::uint64_t test_sum = 0;
  for (std::int64_t i = 0; i < train.size(); ++i) {
    for (std::uint8_t p : train.image(i)) train_sum += p;
  }
  for (std::int64_t i = 0; i < test.size(); ++i) {
    for (std::uint8_t p : test.image(i)) test_sum += p;
  }
  CHECK(train_sum == 209293928);
  CHECK(test_sum == 52852672);
  const std::vector<int> first_train = {8, 0, 2, 0, 0, 0, 9, 6, 4, 1, 4, 1};
  const std::vector<int> first_test = {9, 8, 7, 4, 2, 6, 9, 9, 4, 5, 3, 0};
  for (std::size_t i = 0; i < first_train.size(); ++i) {
    CHECK(train.label(static_cast<std::int64_t>(i)) == first_train[i]);
    CHECK(test.label(static_cast<std::int64_t>(i)) == first_test[i]);
  }
  std::vector<int> counts(10, 0);
  for (std::uint8_t y : train.labels()) ++counts[y];
  CHECK(counts == std::vector<int>{810, 913, 786, 805, 799, 685, 807, 862, 745, 788});
}

// ---- Normalisation -------------------------------------------------------------------------
TEST_CASE("get_batch normalises as (x / 255 - 0.1307) / 0.3081, bit for bit as PyTorch",
          "[ch04][mnist]") {
  const ddp::MnistDataset train(ddp::MnistSplit::Train, ddp::bundled_mnist_folder());
  std::vector<std::int64_t> first16(16);
  std::iota(first16.begin(), first16.end(), 0);
  const ddp::Batch batch = train.get_batch(first16);
  CHECK(batch.images.shape() == ddp::Shape{16, 1, 28, 28});
  CHECK(batch.images.dtype() == ddp::DType::Float32);
  CHECK(batch.labels.shape() == ddp::Shape{16});
  CHECK(batch.labels.dtype() == ddp::DType::Int64);
  const std::vector<float> x = batch.images.to_vector<float>();

  // By hand, in double: within float32 rounding of the formula.
  for (std::size_t k = 0; k < x.size(); ++k) {
    const double p = train.image(static_cast<std::int64_t>(k / 784))[k % 784];
    CHECK(x[k] == Approx((p / 255.0 - 0.1307) / 0.3081).epsilon(1e-6).margin(1e-6));
  }

  // Against shared/anchors/fixtures/resnet_mnist (PyTorch 1.13, batch/x = these 16
  // images): the value of each pixel level there, and the sum over the batch in order.
  const std::vector<std::pair<int, float>> torch_values = {
      {0, -0x1.b264e2p-2f},  {1, -0x1.a55c4p-2f},   {2, -0x1.9853a0p-2f},
      {50, 0x1.b29540p-3f},  {100, 0x1.b27d10p-1f}, {128, 0x1.347af4p+0f},
      {200, 0x1.0f8b26p+1f}, {253, 0x1.65e452p+1f}, {255, 0x1.69267ap+1f}};
  int matched = 0;
  for (std::size_t k = 0; k < x.size(); ++k) {
    const int p = train.image(static_cast<std::int64_t>(k / 784))[k % 784];
    for (const auto& [level, value] : torch_values) {
      if (p == level) {
        CHECK(x[k] == value);
        ++matched;
      }
    }
  }
  CHECK(matched > 1000);
  double sum = 0;
  for (float v : x) sum += v;
  CHECK(sum == 0x1.81d35360d4p+7);  // 192.9127455004491, summed in the same order
  CHECK(batch.labels.to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{8, 0, 2, 0, 0, 0, 9, 6, 4, 1, 4, 1, 4, 0, 6, 5});
}

TEST_CASE("get_batch gathers the requested images of any H x W, in order", "[ch04][mnist]") {
  // 4 images of 5 x 7, image i filled with the value 10 * i.
  Bytes pixels(4 * 35);
  for (std::size_t k = 0; k < pixels.size(); ++k)
    pixels[k] = static_cast<std::uint8_t>(10 * (k / 35));
  ddp::IdxArray images{{4, 5, 7}, pixels};
  ddp::IdxArray labels{{4}, {3, 1, 4, 1}};
  const ddp::MnistDataset data(std::move(images), std::move(labels), "imgs", "labs");
  const std::vector<std::int64_t> pick = {2, 0, 2};
  const ddp::Batch batch = data.get_batch(pick);
  CHECK(batch.images.shape() == ddp::Shape{3, 1, 5, 7});
  const std::vector<float> x = batch.images.to_vector<float>();
  for (std::size_t k = 0; k < x.size(); ++k) {
    const float p = 10.0f * static_cast<float>(pick[k / 35]);
    CHECK(x[k] == (p / 255.0f - 0.1307f) / 0.3081f);
  }
  CHECK(batch.labels.to_vector<std::int64_t>() == std::vector<std::int64_t>{4, 3, 4});
  CHECK_THAT(error_of([&] {
               data.get_batch(std::vector<std::int64_t>{1, 4});
             }),
             Contains("index 4 is out of range for 4 images"));
  CHECK_THAT(error_of([&] { data.get_batch(std::vector<std::int64_t>{-1}); }),
             Contains("index -1 is out of range"));
}

// ---- Finding and checking the files ----------------------------------------------------------
TEST_CASE("MnistDataset prefers .gz, falls back to raw, and lists what it looked for",
          "[ch04][mnist]") {
  ch04::TempDir dir("folder");
  const std::string folder = dir.path().string();
  const std::string missing = error_of([&] { ddp::MnistDataset(ddp::MnistSplit::Test, folder); });
  CHECK_THAT(missing, Contains("MNIST t10k split: looked in " + folder +
                               " for t10k-images-idx3-ubyte[.gz] and t10k-labels-idx1-ubyte[.gz], "
                               "but found neither"));
  CHECK_THAT(missing, Contains("hint: tools/fetch-mnist.sh"));

  // Raw files only: they are read.
  dir.write("train-images-idx3-ubyte", ch04::images_file(2, 3, 3));
  CHECK_THAT(error_of([&] { ddp::MnistDataset(ddp::MnistSplit::Train, folder); }),
             Contains("the labels file is missing"));
  dir.write("train-labels-idx1-ubyte", ch04::labels_file({1, 2}));
  CHECK(ddp::MnistDataset(ddp::MnistSplit::Train, folder).size() == 2);

  // With a .gz beside each (holding 3 digits), the .gz wins.
  dir.write("train-images-idx3-ubyte.gz", ch04::gzip(ch04::images_file(3, 3, 3)));
  dir.write("train-labels-idx1-ubyte.gz", ch04::gzip(ch04::labels_file({7, 8, 9})));
  const ddp::MnistDataset both(ddp::MnistSplit::Train, folder);
  CHECK(both.size() == 3);
  CHECK(both.label(2) == 9);
}

TEST_CASE("Image and label files must match: kinds, counts, labels 0..9", "[ch04][mnist]") {
  ch04::TempDir dir("mismatch");
  const std::string folder = dir.path().string();
  const std::string images =
      dir.write("train-images-idx3-ubyte.gz", ch04::gzip(ch04::images_file(5, 4, 4)));
  SECTION("count mismatch") {
    const std::string labels =
        dir.write("train-labels-idx1-ubyte.gz", ch04::gzip(ch04::labels_file({1, 2, 3, 4})));
    CHECK_THAT(error_of([&] { ddp::MnistDataset(ddp::MnistSplit::Train, folder); }),
               Contains("MNIST: " + images + " holds 5 images but " + labels + " holds 4 labels"));
  }
  SECTION("label 10") {
    const std::string labels =
        dir.write("train-labels-idx1-ubyte.gz", ch04::gzip(ch04::labels_file({1, 2, 10, 4, 5})));
    CHECK_THAT(error_of([&] { ddp::MnistDataset(ddp::MnistSplit::Train, folder); }),
               Contains("file " + labels + ": label 10 at index 2; MNIST labels are 0..9"));
  }
  SECTION("labels where the images belong") {
    dir.write("train-images-idx3-ubyte.gz", ch04::gzip(ch04::labels_file({1, 2})));
    dir.write("train-labels-idx1-ubyte.gz", ch04::gzip(ch04::labels_file({1, 2})));
    CHECK_THAT(error_of([&] { ddp::MnistDataset(ddp::MnistSplit::Train, folder); }),
               Contains("file " + images + ": expected images (3 dimensions"));
  }
  SECTION("no images") {
    dir.write("train-images-idx3-ubyte.gz", ch04::gzip(ch04::images_file(0, 4, 4)));
    dir.write("train-labels-idx1-ubyte.gz", ch04::gzip(ch04::labels_file({})));
    CHECK_THAT(error_of([&] { ddp::MnistDataset(ddp::MnistSplit::Train, folder); }),
               Contains("file " + images + ": holds no images"));
  }
  SECTION("a broken file inside: the reader's error, naming it") {
    Bytes cut = ch04::gzip(ch04::images_file(5, 4, 4));
    cut.resize(cut.size() / 2);
    dir.write("train-images-idx3-ubyte.gz", cut);
    dir.write("train-labels-idx1-ubyte.gz", ch04::gzip(ch04::labels_file({1, 2, 3, 4, 5})));
    CHECK_THAT(error_of([&] { ddp::MnistDataset(ddp::MnistSplit::Train, folder); }),
               Contains("file " + images + ": truncated gzip stream"));
  }
}

TEST_CASE("The default folder is $MNIST_DIR when set, else the bundled copy", "[ch04][mnist]") {
  ::unsetenv("MNIST_DIR");
  CHECK(ddp::default_mnist_folder() == ddp::bundled_mnist_folder());
  CHECK_THAT(ddp::bundled_mnist_folder(), Catch::EndsWith("data/mnist-10k"));
  ::setenv("MNIST_DIR", "/some/where", 1);
  CHECK(ddp::default_mnist_folder() == "/some/where");
  ::unsetenv("MNIST_DIR");
}

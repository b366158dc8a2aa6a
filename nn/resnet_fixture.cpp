// Reading the PyTorch parity fixture (see resnet_fixture.hpp). Chapter 04.
#include "nn/resnet_fixture.hpp"

#include <cmath>
#include <cstdint>
#include <fstream>
#include <sstream>

namespace ddp::nn {

const Tensor& ResNetFixture::at(const std::string& name) const {
  auto it = tensors.find(name);
  DDP_CHECK(it != tensors.end(), "parity fixture ", (dir / "tensors.txt").string(),
            ": no tensor named '", name, "'");
  return it->second;
}

nn::StateDict ResNetFixture::with_prefix(const std::string& prefix) const {
  nn::StateDict out;
  for (const std::string& name : names) {
    if (name.starts_with(prefix)) out.emplace_back(name.substr(prefix.size()), at(name));
  }
  return out;
}

namespace {

Shape parse_shape(const std::string& text, const std::string& where) {
  Shape shape;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    DDP_CHECK(!part.empty() && part.find_first_not_of("0123456789") == std::string::npos,
              where, ": bad shape '", text, "'");
    shape.push_back(std::stoll(part));
  }
  return shape;
}

}  // namespace

ResNetFixture load_resnet_fixture(const std::filesystem::path& dir) {
  ResNetFixture fx;
  fx.dir = dir;
  const std::filesystem::path txt = dir / "tensors.txt";
  const std::filesystem::path bin = dir / "tensors.bin";
  const std::filesystem::path lab = dir / "labels.txt";

  std::ifstream bin_in(bin, std::ios::binary | std::ios::ate);
  DDP_CHECK(bin_in.good(), "parity fixture: cannot open ", bin.string(),
            "\nhint: the fixture lives in tests/data/resnet_mnist/");
  const auto floats = static_cast<std::int64_t>(bin_in.tellg()) /
                      static_cast<std::int64_t>(sizeof(float));
  std::vector<float> values(static_cast<std::size_t>(floats));
  bin_in.seekg(0);
  bin_in.read(reinterpret_cast<char*>(values.data()),
              static_cast<std::streamsize>(values.size() * sizeof(float)));
  DDP_CHECK(bin_in.good(), "parity fixture: cannot read ", bin.string());

  std::ifstream txt_in(txt);
  DDP_CHECK(txt_in.good(), "parity fixture: cannot open ", txt.string());
  std::string line;
  int line_number = 0;
  while (std::getline(txt_in, line)) {
    ++line_number;
    if (line.empty() || line[0] == '#') continue;
    const std::string where = txt.string() + ":" + std::to_string(line_number);
    std::istringstream fields(line);
    std::string name, shape_text;
    std::int64_t offset = -1;
    fields >> name >> shape_text >> offset;
    DDP_CHECK(!fields.fail(), where, ": expected `NAME SHAPE OFFSET`, got '", line, "'");
    const Shape shape = parse_shape(shape_text, where);
    DDP_CHECK(offset >= 0 && offset + numel(shape) <= floats, where, ": '", name,
              "' reaches past the end of ", bin.string());
    const std::span<const float> span(values.data() + offset,
                                      static_cast<std::size_t>(numel(shape)));
    fx.names.push_back(name);
    fx.tensors.emplace(name, from_data(span, shape));
  }

  std::ifstream lab_in(lab);
  DDP_CHECK(lab_in.good(), "parity fixture: cannot open ", lab.string());
  std::vector<std::int64_t> labels;
  for (std::int64_t y = 0; lab_in >> y;) labels.push_back(y);
  DDP_CHECK(!labels.empty(), "parity fixture: no labels in ", lab.string());
  fx.labels = from_data(std::span<const std::int64_t>(labels),
                        {static_cast<std::int64_t>(labels.size())});
  return fx;
}

double relative_error(const Tensor& a, const Tensor& b) {
  DDP_CHECK(a.numel() == b.numel(), "relative_error: ", a.describe(), " vs ", b.describe());
  const std::vector<float> x = a.cpu().to_vector<float>();
  const std::vector<float> y = b.cpu().to_vector<float>();
  double diff = 0.0;
  double norm = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double d = static_cast<double>(x[i]) - static_cast<double>(y[i]);
    diff += d * d;
    norm += static_cast<double>(y[i]) * static_cast<double>(y[i]);
  }
  if (norm == 0.0) return std::sqrt(diff);  // an all-zero reference: the absolute error
  return std::sqrt(diff / norm);
}

}  // namespace ddp::nn

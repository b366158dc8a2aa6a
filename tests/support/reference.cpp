// Independent references for the tensor tests (see reference.hpp): loops and index
// arithmetic only, no calls into ddp's ops or views.
#include "tests/support/reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "tensor/storage.hpp"
#include "tensor/threads.hpp"

namespace ddp::ref {

// ---- Index arithmetic -----------------------------------------------------------------

std::int64_t count(const Shape& shape) {
  std::int64_t n = 1;
  for (std::int64_t size : shape) n *= size;
  return n;
}

Shape row_major_strides(const Shape& shape) {
  Shape strides(shape.size(), 1);
  for (std::size_t d = shape.size(); d > 1; --d) {
    strides[d - 2] = strides[d - 1] * std::max<std::int64_t>(shape[d - 1], 1);
  }
  return strides;
}

std::int64_t ravel(const std::vector<std::int64_t>& index, const Shape& shape) {
  std::int64_t flat = 0;
  for (std::size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + index[d];
  return flat;
}

std::string index_str(const std::vector<std::int64_t>& index) {
  std::ostringstream os;
  os << '(';
  for (std::size_t d = 0; d < index.size(); ++d) os << (d ? ", " : "") << index[d];
  os << ')';
  return os.str();
}

std::string shape_text(const Shape& shape) {
  std::string s = index_str(shape);
  if (shape.size() == 1) s.insert(s.size() - 1, ",");
  return s;
}

// ---- Between tensors and arrays -------------------------------------------------------

std::int64_t storage_index(const Tensor& t, const std::vector<std::int64_t>& index) {
  std::int64_t pos = t.offset();
  for (std::size_t d = 0; d < index.size(); ++d) pos += index[d] * t.strides()[d];
  return pos;
}

Array read(const Tensor& t) {
  if (!t.defined()) throw std::invalid_argument("ref::read: undefined tensor");
  if (!t.device().is_cpu()) throw std::invalid_argument("ref::read: tensor not on the CPU");
  if (t.strides().size() != t.shape().size()) {
    throw std::logic_error("ref::read: " + std::to_string(t.shape().size()) + " sizes but " +
                           std::to_string(t.strides().size()) + " strides");
  }
  const std::int64_t slots =
      static_cast<std::int64_t>(t.storage()->nbytes() / element_size(t.dtype()));
  const auto* base = static_cast<const unsigned char*>(t.storage()->data());
  Array out{t.shape(), {}};
  out.v.reserve(static_cast<std::size_t>(count(t.shape())));
  for_each_index(t.shape(), [&](const std::vector<std::int64_t>& index) {
    const std::int64_t pos = storage_index(t, index);
    if (pos < 0 || pos >= slots) {
      throw std::out_of_range("ref::read: element " + index_str(index) + " of " + t.describe() +
                              " is at storage slot " + std::to_string(pos) +
                              ", outside the storage's " + std::to_string(slots) + " slots");
    }
    if (t.dtype() == DType::Float32) {
      float value;
      std::memcpy(&value, base + pos * 4, 4);
      out.v.push_back(value);
    } else {
      std::int64_t value;
      std::memcpy(&value, base + pos * 8, 8);
      out.v.push_back(static_cast<double>(value));
    }
  });
  return out;
}

Tensor make_tensor(const Array& values, const Shape& strides, std::int64_t offset, DType dtype) {
  if (static_cast<std::int64_t>(values.v.size()) != count(values.shape)) {
    throw std::invalid_argument("ref::make_tensor: " + std::to_string(values.v.size()) +
                                " values for shape " + shape_text(values.shape));
  }
  std::int64_t slots = offset + 1;
  if (count(values.shape) > 0) {
    for (std::size_t d = 0; d < values.shape.size(); ++d) {
      slots += (values.shape[d] - 1) * strides[d];
    }
  }
  const std::size_t elem = element_size(dtype);
  auto storage = std::make_shared<Storage>(static_cast<std::size_t>(slots) * elem, Device::cpu());
  auto* base = static_cast<unsigned char*>(storage->data());
  for (std::int64_t i = 0; i < slots; ++i) {
    if (dtype == DType::Float32) {
      const float poison = static_cast<float>(kPoison);
      std::memcpy(base + i * 4, &poison, 4);
    } else {
      const auto poison = static_cast<std::int64_t>(kPoison);
      std::memcpy(base + i * 8, &poison, 8);
    }
  }
  std::size_t k = 0;
  for_each_index(values.shape, [&](const std::vector<std::int64_t>& index) {
    std::int64_t pos = offset;
    for (std::size_t d = 0; d < index.size(); ++d) pos += index[d] * strides[d];
    if (dtype == DType::Float32) {
      const auto value = static_cast<float>(values.v[k++]);
      std::memcpy(base + pos * 4, &value, 4);
    } else {
      const auto value = static_cast<std::int64_t>(values.v[k++]);
      std::memcpy(base + pos * 8, &value, 8);
    }
  });
  return Tensor(storage, values.shape, strides, offset, dtype);
}

Tensor make_contiguous(const Array& values, DType dtype) {
  return make_tensor(values, row_major_strides(values.shape), 0, dtype);
}

Layout random_layout(std::mt19937& rng, const Shape& shape) {
  // Lay the dimensions out innermost-first in a shuffled order, each with a gap of
  // 0..2 elements after its extent, so the strides are neither sorted nor tight.
  std::vector<std::size_t> order(shape.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::shuffle(order.begin(), order.end(), rng);
  std::uniform_int_distribution<std::int64_t> gap(0, 2), start(1, 5);
  Layout layout{Shape(shape.size(), 0), start(rng)};
  std::int64_t stride = 1;
  for (std::size_t d : order) {
    layout.strides[d] = stride;
    stride *= std::max<std::int64_t>(shape[d], 1) + gap(rng);
  }
  return layout;
}

std::vector<float> storage_floats(const Tensor& t) {
  const std::size_t n = t.storage()->nbytes() / sizeof(float);
  std::vector<float> out(n);
  std::memcpy(out.data(), t.storage()->data(), n * sizeof(float));
  return out;
}

// ---- Random inputs --------------------------------------------------------------------

Shape random_shape(std::mt19937& rng, int min_dims, int max_dims, std::int64_t max_size) {
  std::uniform_int_distribution<int> ndim(min_dims, max_dims);
  std::uniform_int_distribution<int> kind(0, 19);
  std::uniform_int_distribution<std::int64_t> big(2, std::max<std::int64_t>(max_size, 2));
  Shape shape(static_cast<std::size_t>(ndim(rng)));
  for (auto& size : shape) {
    const int k = kind(rng);
    size = k < 2 ? 0 : k < 7 ? 1 : big(rng);
  }
  return shape;
}

Shape random_broadcast_partner(std::mt19937& rng, const Shape& shape) {
  std::uniform_int_distribution<std::size_t> drop(0, shape.size());
  std::uniform_int_distribution<int> coin(0, 2);
  std::uniform_int_distribution<std::int64_t> size(2, 4);
  Shape partner(shape.begin() + static_cast<std::ptrdiff_t>(drop(rng)), shape.end());
  for (auto& s : partner) {
    const int c = coin(rng);
    if (c == 0)
      s = 1;  // the partner broadcasts here
    else if (c == 1 && s == 1)
      s = size(rng);  // `shape` broadcasts here
  }
  return partner;
}

Array random_array(std::mt19937& rng, const Shape& shape, double low, double high) {
  std::uniform_real_distribution<double> dist(low, high);
  Array out{shape, std::vector<double>(static_cast<std::size_t>(count(shape)))};
  // Round through float so the array holds exactly what a float32 tensor will.
  for (double& x : out.v) x = static_cast<float>(dist(rng));
  return out;
}

Array random_ints(std::mt19937& rng, const Shape& shape, std::int64_t low, std::int64_t high) {
  std::uniform_int_distribution<std::int64_t> dist(low, high);
  Array out{shape, std::vector<double>(static_cast<std::size_t>(count(shape)))};
  for (double& x : out.v) x = static_cast<double>(dist(rng));
  return out;
}

// ---- Naive operations -----------------------------------------------------------------

std::optional<Shape> broadcast_shape(const Shape& a, const Shape& b) {
  const std::size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (std::size_t d = 0; d < n; ++d) {  // d indexes `out` from the left
    const std::size_t from_right = n - 1 - d;
    const std::int64_t sa = from_right < a.size() ? a[a.size() - 1 - from_right] : 1;
    const std::int64_t sb = from_right < b.size() ? b[b.size() - 1 - from_right] : 1;
    if (sa != sb && sa != 1 && sb != 1) return std::nullopt;
    out[d] = sa == 1 ? sb : sa;
  }
  return out;
}

Array broadcast_to(const Array& x, const Shape& shape) {
  if (shape.size() < x.shape.size()) throw std::invalid_argument("ref::broadcast_to: rank");
  const std::size_t lead = shape.size() - x.shape.size();
  Array out{shape, {}};
  for_each_index(shape, [&](const std::vector<std::int64_t>& index) {
    std::int64_t flat = 0;
    for (std::size_t d = 0; d < x.shape.size(); ++d) {
      const std::int64_t size = x.shape[d];
      if (size != 1 && size != shape[lead + d]) {
        throw std::invalid_argument("ref::broadcast_to: " + shape_text(x.shape) + " to " +
                                    shape_text(shape));
      }
      flat = flat * size + (size == 1 ? 0 : index[lead + d]);
    }
    out.v.push_back(x.v[static_cast<std::size_t>(flat)]);
  });
  return out;
}

Array map(const Array& x, const std::function<double(double)>& f) {
  Array out{x.shape, {}};
  out.v.reserve(x.v.size());
  for (double value : x.v) out.v.push_back(f(value));
  return out;
}

double apply(BinaryOp op, double a, double b) {
  switch (op) {
    case BinaryOp::Add:
      return a + b;
    case BinaryOp::Sub:
      return a - b;
    case BinaryOp::Mul:
      return a * b;
    case BinaryOp::Div:
      return a / b;
    case BinaryOp::Maximum:  // NaN on either side propagates (PyTorch's rule)
      return std::isnan(a) || std::isnan(b) ? std::nan("") : std::max(a, b);
    case BinaryOp::Minimum:
      return std::isnan(a) || std::isnan(b) ? std::nan("") : std::min(a, b);
    case BinaryOp::Pow:
      return std::pow(a, b);
    case BinaryOp::Eq:
      return a == b ? 1.0 : 0.0;
    case BinaryOp::Ne:
      return a != b ? 1.0 : 0.0;
    case BinaryOp::Lt:
      return a < b ? 1.0 : 0.0;
    case BinaryOp::Le:
      return a <= b ? 1.0 : 0.0;
    case BinaryOp::Gt:
      return a > b ? 1.0 : 0.0;
    case BinaryOp::Ge:
      return a >= b ? 1.0 : 0.0;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

Array zip(const Array& a, const Array& b, const std::function<double(double, double)>& f) {
  const auto shape = broadcast_shape(a.shape, b.shape);
  if (!shape) throw std::invalid_argument("ref::zip: shapes do not broadcast");
  const Array ea = broadcast_to(a, *shape), eb = broadcast_to(b, *shape);
  Array out{*shape, {}};
  out.v.reserve(ea.v.size());
  for (std::size_t i = 0; i < ea.v.size(); ++i) out.v.push_back(f(ea.v[i], eb.v[i]));
  return out;
}

Array reduce_dim(const Array& x, std::int64_t dim, bool keepdim, Reduce op) {
  if (x.shape.empty()) {  // a 0-d array reduces over its single element
    if (dim != 0) throw std::invalid_argument("ref::reduce_dim: dim of a 0-d array");
    return reduce_all(x, op);
  }
  const auto d = static_cast<std::size_t>(dim);
  std::int64_t outer = 1, inner = 1;
  for (std::size_t i = 0; i < d; ++i) outer *= x.shape[i];
  for (std::size_t i = d + 1; i < x.shape.size(); ++i) inner *= x.shape[i];
  const std::int64_t n = x.shape[d];
  Shape shape = x.shape;
  if (keepdim)
    shape[d] = 1;
  else
    shape.erase(shape.begin() + static_cast<std::ptrdiff_t>(d));
  Array out{shape, std::vector<double>(static_cast<std::size_t>(outer * inner))};
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t in = 0; in < inner; ++in) {
      double sum = 0.0, best = 0.0;
      std::int64_t best_at = 0;
      for (std::int64_t k = 0; k < n; ++k) {
        const double value = x.v[static_cast<std::size_t>((o * n + k) * inner + in)];
        sum += value;
        const bool better = op == Reduce::Min ? value < best : value > best;
        if (k == 0 || better) {
          best = value;
          best_at = k;
        }
      }
      double result = 0.0;
      switch (op) {
        case Reduce::Sum:
          result = sum;
          break;
        case Reduce::Mean:
          result = sum / static_cast<double>(n);
          break;  // 0/0 = NaN
        case Reduce::Max:
        case Reduce::Min:
          result = best;
          break;
        case Reduce::ArgMax:
          result = static_cast<double>(best_at);
          break;
      }
      out.v[static_cast<std::size_t>(o * inner + in)] = result;
    }
  }
  return out;
}

Array reduce_all(const Array& x, Reduce op) {
  Array flat{Shape{static_cast<std::int64_t>(x.v.size())}, x.v};
  Array out = reduce_dim(flat, 0, false, op);
  out.shape = {};
  return out;
}

Array sum_to(const Array& x, const Shape& shape) {
  if (shape.size() > x.shape.size()) throw std::invalid_argument("ref::sum_to: rank");
  const std::size_t lead = x.shape.size() - shape.size();
  Array out{shape, std::vector<double>(static_cast<std::size_t>(count(shape)), 0.0)};
  std::size_t k = 0;
  for_each_index(x.shape, [&](const std::vector<std::int64_t>& index) {
    std::int64_t flat = 0;
    for (std::size_t d = 0; d < shape.size(); ++d) {
      flat = flat * shape[d] + (shape[d] == 1 ? 0 : index[lead + d]);
    }
    out.v[static_cast<std::size_t>(flat)] += x.v[k++];
  });
  return out;
}

Array matmul(const Array& a, const Array& b) {
  const bool batched = a.shape.size() == 3;
  const std::int64_t batch = batched ? a.shape[0] : 1;
  const std::size_t r = batched ? 1 : 0;
  const std::int64_t m = a.shape[r], k = a.shape[r + 1], n = b.shape[r + 1];
  if (b.shape[r] != k || b.shape.size() != a.shape.size()) {
    throw std::invalid_argument("ref::matmul: shapes " + shape_text(a.shape) + " and " +
                                shape_text(b.shape));
  }
  Array out{batched ? Shape{batch, m, n} : Shape{m, n},
            std::vector<double>(static_cast<std::size_t>(batch * m * n), 0.0)};
  for (std::int64_t p = 0; p < batch; ++p) {
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j) {
        double acc = 0.0;
        for (std::int64_t q = 0; q < k; ++q) {
          acc += a.v[static_cast<std::size_t>((p * m + i) * k + q)] *
                 b.v[static_cast<std::size_t>((p * k + q) * n + j)];
        }
        out.v[static_cast<std::size_t>((p * m + i) * n + j)] = acc;
      }
    }
  }
  return out;
}

Array permute(const Array& x, const std::vector<std::int64_t>& dims) {
  Shape shape(dims.size());
  for (std::size_t d = 0; d < dims.size(); ++d) {
    shape[d] = x.shape[static_cast<std::size_t>(dims[d])];
  }
  Array out{shape, {}};
  std::vector<std::int64_t> source(dims.size());
  for_each_index(shape, [&](const std::vector<std::int64_t>& index) {
    for (std::size_t d = 0; d < dims.size(); ++d) {
      source[static_cast<std::size_t>(dims[d])] = index[d];
    }
    out.v.push_back(x.v[static_cast<std::size_t>(ravel(source, x.shape))]);
  });
  return out;
}

Array slice(const Array& x, std::int64_t dim, std::int64_t start, std::int64_t end,
            std::int64_t step) {
  const auto d = static_cast<std::size_t>(dim);
  Shape shape = x.shape;
  shape[d] = end > start ? (end - start + step - 1) / step : 0;
  Array out{shape, {}};
  std::vector<std::int64_t> source;
  for_each_index(shape, [&](const std::vector<std::int64_t>& index) {
    source = index;
    source[d] = start + index[d] * step;
    out.v.push_back(x.v[static_cast<std::size_t>(ravel(source, x.shape))]);
  });
  return out;
}

Array select(const Array& x, std::int64_t dim, std::int64_t index) {
  Array out = slice(x, dim, index, index + 1, 1);
  out.shape.erase(out.shape.begin() + dim);
  return out;
}

Array with_shape(const Array& x, const Shape& shape) {
  if (count(shape) != static_cast<std::int64_t>(x.v.size())) {
    throw std::invalid_argument("ref::with_shape: " + shape_text(x.shape) + " to " +
                                shape_text(shape));
  }
  return Array{shape, x.v};
}

// ---- Comparison -----------------------------------------------------------------------

namespace {

std::string format(double x) {
  std::ostringstream os;
  os.precision(9);
  os << x;
  return os.str();
}

}  // namespace

std::string mismatch(const Array& got, const Array& want, Tol tol,
                     const std::vector<double>& scale) {
  if (got.shape != want.shape) {
    return "shape " + shape_text(got.shape) + ", expected " + shape_text(want.shape);
  }
  if (got.v.size() != want.v.size()) {
    return std::to_string(got.v.size()) + " values, expected " + std::to_string(want.v.size());
  }
  std::string first;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < want.v.size(); ++i) {
    const double g = got.v[i], w = want.v[i];
    bool ok;
    if (std::isnan(w) || std::isnan(g)) {
      ok = std::isnan(w) && std::isnan(g);
    } else if (std::isinf(w) || std::isinf(g)) {
      ok = g == w;
    } else {
      const double s = scale.empty() ? 0.0 : scale[i];
      ok = std::fabs(g - w) <= tol.atol + tol.rtol * std::max(std::fabs(w), s);
    }
    if (!ok && bad++ == 0) {
      std::vector<std::int64_t> index(want.shape.size());
      auto rest = static_cast<std::int64_t>(i);
      for (std::size_t d = want.shape.size(); d-- > 0;) {
        index[d] = rest % want.shape[d];
        rest /= want.shape[d];
      }
      first = "element " + index_str(index) + " of " + shape_text(want.shape) + ": got " +
              format(g) + ", expected " + format(w) + " (rtol " + format(tol.rtol) + ", atol " +
              format(tol.atol) + ")";
    }
  }
  if (bad == 0) return "";
  return first + "; " + std::to_string(bad) + " of " + std::to_string(want.v.size()) +
         " elements differ";
}

std::string mismatch(const Tensor& got, const Array& want, Tol tol,
                     const std::vector<double>& scale) {
  return mismatch(read(got), want, tol, scale);
}

std::string bitwise_mismatch(const Tensor& a, const Tensor& b) {
  const Array x = read(a), y = read(b);
  if (x.shape != y.shape) return "shapes " + shape_text(x.shape) + " and " + shape_text(y.shape);
  for (std::size_t i = 0; i < x.v.size(); ++i) {
    const auto fx = static_cast<float>(x.v[i]), fy = static_cast<float>(y.v[i]);
    if (std::memcmp(&fx, &fy, sizeof(float)) != 0) {
      return "element " + std::to_string(i) + ": " + format(x.v[i]) + " vs " + format(y.v[i]);
    }
  }
  return "";
}

// ---- Threads --------------------------------------------------------------------------

ThreadCountGuard::ThreadCountGuard(int n) : saved_(get_num_threads()) { set_num_threads(n); }
ThreadCountGuard::~ThreadCountGuard() { set_num_threads(saved_); }

}  // namespace ddp::ref

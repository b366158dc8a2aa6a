// Winograd's F(2x2, 3x3) convolution of one image, on the CPU, and its weight gradient.
// Chapter 03; conv_cpu.cpp picks it for block1's two 3x3 layers and block2.conv2 of
// ResNet-MNIST (winograd_applies says which; Note [Winograd F(2x2, 3x3)]). Three steps:
// transform the tiles, 16 small matrix products, transform back. Not here: other shapes
// (conv_cpu.cpp's patch matrix does those).
#include "autograd/ops/conv_winograd_cpu.hpp"

#include <Eigen/Core>
#include <algorithm>

namespace ddp::detail {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Note [Winograd F(2x2, 3x3)]
// In one dimension, two outputs of a 3-tap filter g over four inputs d,
//     y0 = d0 g0 + d1 g1 + d2 g2        y1 = d1 g0 + d2 g1 + d3 g2      (6 multiplications)
// come from 4 products of a transformed input and a transformed filter (Winograd 1980;
// Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", 2016):
//     m0 = (d0 - d2) g0               m1 = (d1 + d2) (g0 + g1 + g2) / 2
//     m2 = (d2 - d1) (g0 - g1 + g2) / 2   m3 = (d1 - d3) g2
//     y0 = m0 + m1 + m2               y1 = m1 - m2 - m3
// (expand m1 + m2 and m1 - m2 to check). Nesting it in rows and columns gives 2x2 outputs
// of a 3x3 filter from a 4x4 input tile: transform the tile along its columns and then its
// rows (16 values), multiply element by element with the filter's 4x4 transform, and
// transform the 16 products back to 2x2: 16 multiplications instead of 36. In matrices:
//     y = A^T [(G g G^T) . (B^T d B)] A      (. = element by element)
// with B^T, G and A^T as listed at transform_input, transform_filter and transform_output.
// A convolution sums over input channels before transforming back, so for tile t and
// each of the 16 positions xi the multiplications become a matrix product:
//     M[xi] (O, T) = U[xi] (O, C) @ V[xi] (C, T)
// where V holds every tile's transformed input and U every filter's transform. The
// products cost 16*O*C*T multiply-adds where direct convolution needs 36*O*C*T (9 per
// output pixel, 4 pixels per tile): 2.25x fewer (the code adds one spare tile slot per
// row of tiles, Note [Tiles as shifted planes]). The transforms are additions only; V
// is 4 floats per input pixel where the patch matrix (conv_cpu.cpp) is 9; and there is
// no col2im: the backward's input gradient is the same convolution of dy with the
// flipped filters.
// The weight gradient follows from y_t = A^T (U . V_t) A, linear in U = G g G^T: with
// dy_t the 2x2 gradient of tile t, dL/dU = sum_t (A dy_t A^T) . V_t and dL/dg =
// G^T (dL/dU) G. The sum over tiles is again 16 matrix products, (O, T) @ (T, C), whose
// inner dimension is the tiles: summed over a chunk of images in the transformed space,
// transformed back once per chunk.
// Rounding: the input transform adds 4 terms, the filter and output transforms 9 (scaled
// by 1/2 or 1/4), so results differ from the direct sum by ~1e-6 of the largest output
// (tests/ch03/test_fused_cpu.cpp holds them to 1e-5 of it).
// Tiles start at even rows and columns; the input tile of output tile (ty, tx) is rows
// 2ty-1 .. 2ty+2 and columns 2tx-1 .. 2tx+2, zero outside the image (the padding, and
// the overhang of the last tile when H or W is odd).
// What it bought per layer: bench/README.md, "Chapter 03: the fused CPU paths".

// With few channels the transforms cost more than the products save (the stem, 1 -> 16
// channels, took about three times as long).
constexpr std::int64_t kMinChannels = 8;

// And with small images the 16 matrix products are too narrow to gain: a 7x7 image has 16
// tiles (block3.conv2 was no faster, even with two or five images per product).
constexpr std::int64_t kMinPixels = 100;
// (Unlike the patch matrix's bands, the scratch grows with the image: 16 (C + O) T
// floats a thread, 0.4 MB for block1, ~100 MB for 64 channels of 224x224.)

bool winograd_applies(const ConvShape& s) {
  return s.kh == 3 && s.kw == 3 && s.stride == 1 && s.padding == 1 && s.C >= kMinChannels &&
         s.O >= kMinChannels && s.H * s.W >= kMinPixels;
}

namespace {

// Note [Tiles as shifted planes]
// Tile (ty, tx) reads input rows 2ty-1 .. 2ty+2 and columns 2tx-1 .. 2tx+2. Split the
// zero-padded channel into its four phase planes by the parity of row and column,
//     q[a][b][i][k] = x[2i + a - 1][2k + b - 1]    (zero outside the image),
// and input pixel (r, j) of every tile is one plane, shifted: q[r%2][j%2][ty + r/2][tx +
// j/2]. With the planes' rows tw + 1 long, "every tile's pixel (r, j)" is one contiguous
// run of q, starting r/2 rows and j/2 columns in. So the transforms run along long
// contiguous rows, in SIMD, with no gather -- at the price of one spare tile slot per row
// of tiles (tx = tw: its outputs are thrown away, its output gradient is zero). Its
// reads run into the next plane row, the last one a float past the plane: the + 1 in
// plane_floats.
// The output goes the same way back: the four output pixels of every tile come out as
// four planes, interleaved into the rows of y at the end.

// Scratch layout of one image; T = th * (tw + 1) tile slots.
struct Scratch {
  float* q;     // (4, (th + 1) * (tw + 1) + 1): one input channel's phase planes
  float* v;     // (16, C, T): transformed input tiles
  float* m;     // (16, O, T): U @ V; for dW, the transformed output gradient
  float* ybuf;  // (4, T): one output channel's pixels, (a, b) = (row, column) in the tile
};

std::int64_t slots(const WinogradShape& s) { return s.th() * (s.tw() + 1); }
std::int64_t plane_floats(const WinogradShape& s) { return (s.th() + 1) * (s.tw() + 1) + 1; }

Scratch carve(const WinogradShape& s, float* scratch) {
  const std::int64_t T = slots(s);
  Scratch out{};
  out.q = scratch;
  out.v = out.q + 4 * plane_floats(s);
  out.m = out.v + 16 * s.C * T;
  out.ybuf = out.m + 16 * s.O * T;
  return out;
}

// g: one 3x3 filter, row-major -> out: its 4x4 transform G g G^T at out[xi * stride],
// xi = 4*i + j. G's rows are (1, 0, 0), (1/2, 1/2, 1/2), (1/2, -1/2, 1/2), (0, 0, 1).
void transform_filter(const float g[3][3], float* out, std::int64_t stride) {
  auto along = [](float g0, float g1, float g2, float t[4]) {
    t[0] = g0;
    t[1] = 0.5f * (g0 + g1 + g2);
    t[2] = 0.5f * (g0 - g1 + g2);
    t[3] = g2;
  };
  float cols[3][4];  // each filter row, transformed
  for (int r = 0; r < 3; ++r) along(g[r][0], g[r][1], g[r][2], cols[r]);
  for (int j = 0; j < 4; ++j) {
    float t[4];
    along(cols[0][j], cols[1][j], cols[2][j], t);
    for (int i = 0; i < 4; ++i) out[(4 * i + j) * stride] = t[i];
  }
}

// One row of W values -> its even columns 2k at even[k] and its odd ones 2k + 1 at odd[k]
// (for odd W the last, even, column too); merge_columns puts them back.
void split_columns(const float* in, std::int64_t W, float* even, float* odd) {
  for (std::int64_t k = 0; k < W / 2; ++k) {
    even[k] = in[2 * k];
    odd[k] = in[2 * k + 1];
  }
  if (W % 2 == 1) even[W / 2] = in[W - 1];
}
void merge_columns(const float* even, const float* odd, std::int64_t W, float* out) {
  for (std::int64_t k = 0; k < W / 2; ++k) {
    out[2 * k] = even[k];
    out[2 * k + 1] = odd[k];
  }
  if (W % 2 == 1) out[W - 1] = even[W / 2];
}

// x: one channel (H, W) -> q: its four phase planes (Note [Tiles as shifted planes]; not
// conv_cpu.cpp's to_phase_planes, which splits a whole unpadded image for any stride).
// Row h of x is row i = (h + 1) / 2 of the planes with a = (h + 1) % 2; its even columns
// 2k go to the plane with b = 1 at k, its odd columns 2k + 1 to b = 0 at k + 1.
void to_tile_planes(const float* x, const WinogradShape& s, float* q) {
  const std::int64_t row = s.tw() + 1, planes = plane_floats(s);
  std::fill(q, q + 4 * planes, 0.0f);
  for (std::int64_t h = 0; h < s.H; ++h) {
    const std::int64_t a = (h + 1) % 2, i = (h + 1) / 2;
    float* even = q + (2 * a + 1) * planes + i * row;
    float* odd = q + (2 * a) * planes + i * row + 1;
    split_columns(x + h * s.W, s.W, even, odd);
  }
}

// q: channel c's phase planes -> v[xi][c][t] = (B^T d B)[i][j], xi = 4i + j, for every
// tile's input d. B^T's rows: (1, 0, -1, 0), (0, 1, 1, 0), (0, -1, 1, 0), (0, 1, 0, -1).
void transform_input(const WinogradShape& s, std::int64_t c, const Scratch& sc) {
  const std::int64_t T = slots(s), row = s.tw() + 1, planes = plane_floats(s);
  const float* d[4][4];  // d[r][j] + t: pixel (r, j) of tile slot t
  for (int r = 0; r < 4; ++r) {
    for (int j = 0; j < 4; ++j) {
      d[r][j] = sc.q + (2 * (r % 2) + j % 2) * planes + (r / 2) * row + j / 2;
    }
  }
  float* v = sc.v + c * T;
  const std::int64_t step = s.C * T;  // from v[xi] to v[xi + 1]
#pragma omp simd
  for (std::int64_t t = 0; t < T; ++t) {
    float p[4][4];  // along the columns: p[r][j]
    for (int r = 0; r < 4; ++r) {
      p[r][0] = d[r][0][t] - d[r][2][t];
      p[r][1] = d[r][1][t] + d[r][2][t];
      p[r][2] = d[r][2][t] - d[r][1][t];
      p[r][3] = d[r][1][t] - d[r][3][t];
    }
    for (int j = 0; j < 4; ++j) {  // along the rows
      v[j * step + t] = p[0][j] - p[2][j];
      v[(4 + j) * step + t] = p[1][j] + p[2][j];
      v[(8 + j) * step + t] = p[2][j] - p[1][j];
      v[(12 + j) * step + t] = p[1][j] - p[3][j];
    }
  }
}

// x: one image (C, H, W) -> v: every channel's tiles, transformed.
void transform_image(const float* x, const WinogradShape& s, const Scratch& sc) {
  for (std::int64_t c = 0; c < s.C; ++c) {
    to_tile_planes(x + c * s.H * s.W, s, sc.q);
    transform_input(s, c, sc);
  }
}

// m[xi][o][t] -> channel o of y (H, W), plus `bias`: A^T m A for each tile, A^T's rows
// being (1, 1, 1, 0) and (0, 1, -1, -1).
void transform_output(const WinogradShape& s, std::int64_t o, float bias, const Scratch& sc,
                      float* y) {
  const std::int64_t T = slots(s), row = s.tw() + 1;
  const float* m = sc.m + o * T;
  const std::int64_t step = s.O * T;  // from m[xi] to m[xi + 1]
  float* yb = sc.ybuf;                // yb[2a + b][t]: pixel (a, b) of tile slot t
#pragma omp simd
  for (std::int64_t t = 0; t < T; ++t) {
    float e[2][4];  // along the rows: e[a][j]
    for (int j = 0; j < 4; ++j) {
      const float m0 = m[j * step + t], m1 = m[(4 + j) * step + t];
      const float m2 = m[(8 + j) * step + t], m3 = m[(12 + j) * step + t];
      e[0][j] = m0 + m1 + m2;
      e[1][j] = m1 - m2 - m3;
    }
    for (int a = 0; a < 2; ++a) {  // along the columns
      yb[(2 * a) * T + t] = e[a][0] + e[a][1] + e[a][2] + bias;
      yb[(2 * a + 1) * T + t] = e[a][1] - e[a][2] - e[a][3] + bias;
    }
  }
  // Interleave the planes into y's rows; tiles hanging over the edge are cut.
  for (std::int64_t h = 0; h < s.H; ++h) {
    const float* even = yb + (2 * (h % 2)) * T + (h / 2) * row;  // columns 2tx
    merge_columns(even, even + T, s.W, y + h * s.W);             // odd ones: the next plane
  }
}

// dy: the gradient of output channel o (H, W) -> m[xi][o][t] = (A dy_t A^T)[i][j] for
// every tile's 2x2 gradient dy_t, zero for the spare slots; A's rows are (1, 0), (1, 1), (1, -1),
// (0, -1). The transpose of transform_output, as the weight gradient needs it.
void transform_output_grad(const float* dy, const WinogradShape& s, std::int64_t o,
                           const Scratch& sc) {
  const std::int64_t T = slots(s), row = s.tw() + 1;
  float* gb = sc.ybuf;  // gb[2a + b][t]: pixel (a, b) of tile slot t
  std::fill(gb, gb + 4 * T, 0.0f);
  for (std::int64_t h = 0; h < s.H; ++h) {  // transform_output's interleave, undone
    float* even = gb + (2 * (h % 2)) * T + (h / 2) * row;
    split_columns(dy + h * s.W, s.W, even, even + T);
  }
  float* m = sc.m + o * T;
  const std::int64_t step = s.O * T;  // from m[xi] to m[xi + 1]
#pragma omp simd
  for (std::int64_t t = 0; t < T; ++t) {
    float e[2][4];  // along the columns: e[a][j]
    for (int a = 0; a < 2; ++a) {
      const float g0 = gb[(2 * a) * T + t], g1 = gb[(2 * a + 1) * T + t];
      e[a][0] = g0;
      e[a][1] = g0 + g1;
      e[a][2] = g0 - g1;
      e[a][3] = -g1;
    }
    for (int j = 0; j < 4; ++j) {  // along the rows
      m[j * step + t] = e[0][j];
      m[(4 + j) * step + t] = e[0][j] + e[1][j];
      m[(8 + j) * step + t] = e[0][j] - e[1][j];
      m[(12 + j) * step + t] = -e[1][j];
    }
  }
}

}  // namespace

std::int64_t WinogradShape::scratch_floats() const {
  return 4 * plane_floats(*this) + 16 * (C + O) * slots(*this) + 4 * slots(*this);
}

void winograd_weight(const float* w, std::int64_t O, std::int64_t C, bool flipped, float* u) {
  for (std::int64_t o = 0; o < O; ++o) {
    for (std::int64_t c = 0; c < C; ++c) {
      const float* k = w + (o * C + c) * 9;
      float g[3][3];
      for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 3; ++j) g[i][j] = flipped ? k[(2 - i) * 3 + (2 - j)] : k[i * 3 + j];
      }
      // u[xi][o][c], or u[xi][c][o] for the flipped (C outputs, O inputs) weight.
      if (flipped) {
        transform_filter(g, u + c * O + o, C * O);
      } else {
        transform_filter(g, u + o * C + c, O * C);
      }
    }
  }
}

void winograd_conv_image(const float* x, const float* u, const float* bias, const WinogradShape& s,
                         float* scratch, float* y) {
  const std::int64_t T = slots(s), plane = s.H * s.W;
  const Scratch sc = carve(s, scratch);
  transform_image(x, s, sc);
  for (std::int64_t xi = 0; xi < 16; ++xi) {  // M[xi] (O, T) = U[xi] (O, C) @ V[xi] (C, T)
    Eigen::Map<RowMajor>(sc.m + xi * s.O * T, s.O, T).noalias() =
        Eigen::Map<const RowMajor>(u + xi * s.O * s.C, s.O, s.C) *
        Eigen::Map<const RowMajor>(sc.v + xi * s.C * T, s.C, T);
  }
  for (std::int64_t o = 0; o < s.O; ++o) {
    transform_output(s, o, bias != nullptr ? bias[o] : 0.0f, sc, y + o * plane);
  }
}

void winograd_weight_grad_image(const float* x, const float* dy, const WinogradShape& s,
                                bool accumulate, float* scratch, float* dw_hat) {
  const std::int64_t T = slots(s), plane = s.H * s.W;
  const Scratch sc = carve(s, scratch);
  transform_image(x, s, sc);
  for (std::int64_t o = 0; o < s.O; ++o) transform_output_grad(dy + o * plane, s, o, sc);
  for (std::int64_t xi = 0; xi < 16; ++xi) {  // dW^[xi] (O, C) += DY[xi] (O, T) @ V[xi]^T
    Eigen::Map<RowMajor> dw(dw_hat + xi * s.O * s.C, s.O, s.C);
    const Eigen::Map<const RowMajor> dyt(sc.m + xi * s.O * T, s.O, T);
    const Eigen::Map<const RowMajor> v(sc.v + xi * s.C * T, s.C, T);
    if (accumulate) {
      dw.noalias() += dyt * v.transpose();
    } else {
      dw.noalias() = dyt * v.transpose();
    }
  }
}

void winograd_weight_grad_finish(const float* dw_hat, std::int64_t O, std::int64_t C, float* dw) {
  // G^T X G for X 4x4 -> 3x3: the transpose of transform_filter's G g G^T.
  auto back = [](float x0, float x1, float x2, float x3, float out[3]) {
    out[0] = x0 + 0.5f * (x1 + x2);
    out[1] = 0.5f * (x1 - x2);
    out[2] = 0.5f * (x1 + x2) + x3;
  };
  const float* h = dw_hat;
  const std::int64_t step = O * C;  // dw_hat[xi] at xi*O*C
  for (std::int64_t oc = 0; oc < O * C; ++oc) {
    float rows[4][3];  // along the columns, for each of the four rows i
    for (int i = 0; i < 4; ++i) {
      back(h[(4 * i) * step + oc], h[(4 * i + 1) * step + oc], h[(4 * i + 2) * step + oc],
           h[(4 * i + 3) * step + oc], rows[i]);
    }
    for (int j = 0; j < 3; ++j) {  // along the rows
      float col[3];
      back(rows[0][j], rows[1][j], rows[2][j], rows[3][j], col);
      for (int i = 0; i < 3; ++i) dw[oc * 9 + i * 3 + j] = col[i];
    }
  }
}

}  // namespace ddp::detail

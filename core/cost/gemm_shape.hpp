// How much of a GEMM's compute roof its shape lets a tiled kernel reach on hardware with no
// fitted GEMM table: the output is cut into tiles, one per SM at a time, so a last partial
// wave leaves SMs idle (wave quantization), and each tile's K loop pays a fixed prologue and
// epilogue (the main loop's share of a short K is small). A GEMM too small to fill one wave is
// split along K, as cuBLAS does, trading idle SMs for shorter K loops.
//   NVIDIA, "Matrix Multiplication Background User's Guide" (docs.nvidia.com/deeplearning/
//   performance/dl-performance-matrix-multiplication), "Tile quantization" and "Wave
//   quantization": 128×128 output tiles, waves of one tile per SM.
#pragma once
#include <cstdint>

namespace perfsim {

// Output tile edge (elements) of the tiled kernels the model assumes.
inline constexpr int64_t gemm_tile = 128;
// K elements whose worth of main-loop time a tile's prologue and epilogue cost: the main loop's
// share is K / (K + gemm_k_overhead). Fitted to the bf16 GEMM grid measured on an H100
// (stdlib/profiles/h100-local.lua, m = 8192, n = 5120: efficiency 0.64 at k = 320, 0.87 at
// k = 20480, whose ratio K/(K + 118) gives; rounded to a tile's 128).
inline constexpr double gemm_k_overhead = 128;

struct GemmShapeEfficiency {
  int64_t tiles = 0;      // output tiles (× batch)
  int64_t splits = 1;     // K splits (1 unless the tiles fill less than one wave)
  int64_t waves = 0;      // waves of one work unit (tile × split) per SM
  double wave = 1;        // work units / (waves × SMs)
  double k_loop = 1;      // K per split / (K per split + gemm_k_overhead)
  [[nodiscard]] double factor() const { return wave * k_loop; }
};

// The shape factor of C[m,n] += A[m,k]·B[k,n] (`batch` of them) on `sms` SMs; factor() is 1
// when sms <= 0 or a dimension is not positive (nothing known to quantize).
[[nodiscard]] GemmShapeEfficiency gemm_shape_efficiency(int64_t m, int64_t n, int64_t k, int64_t batch, int sms);

}  // namespace perfsim

// The four products of materialized attention and its backward (scores, context, and their
// gradients) as one batched, strided, shared-memory tiled matmul: C = alpha · Σ_group A·B.
// Each operand is addressed through strides, so Q/K/V/O keep their [b, s, heads, d] layouts
// and S/P theirs [b, h, sq, skv] with no transposes; the GQA sum over the query heads of a
// kv group (dK, dV) runs inside the kernel so it is rounded once. 32×32 output tiles,
// 32-deep k slices staged in shared memory, fp32 accumulation. Clarity over speed.
#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/attention_materialized.cuh"
#include "backends/cuda/kernels/kernel_util.cuh"

namespace perfsim::cuda {

namespace {

constexpr int tile = 32, rows_per_pass = 8;

// Element (r, c) of one operand for grid batch z = (b, hh) and group member gi:
// base + b·outer + ((hh / div)·mul + gi·gstep)·head + r·rs + c·cs.
struct Operand {
  int64_t outer = 0, head = 0, div = 1, mul = 1, gstep = 0, rs = 0, cs = 0;
  [[nodiscard]] __device__ int64_t offset(int64_t b, int64_t hh, int64_t gi) const {
    return b * outer + ((hh / div) * mul + gi * gstep) * head;
  }
};

struct Problem {
  int64_t m = 0, n = 0, k = 0;
  int64_t heads = 1;  // grid z = batch · heads
  int64_t groups = 1; // products summed into each C
  float alpha = 1.0f;
  Operand a, b, c;
};

template <class T>
__global__ void tiled_matmul_kernel(const T* __restrict__ a, const T* __restrict__ b,
                                    T* __restrict__ c, Problem pr) {
  __shared__ float as[tile][tile + 1];  // [m, k] slice
  __shared__ float bs[tile][tile + 1];  // [k, n] slice
  const int64_t z = blockIdx.z, bi = z / pr.heads, hh = z % pr.heads;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * tile, col0 = static_cast<int64_t>(blockIdx.x) * tile;
  const int tx = threadIdx.x, ty = threadIdx.y;
  float acc[tile / rows_per_pass] = {};
  for (int64_t gi = 0; gi < pr.groups; ++gi) {
    const T* ag = a + pr.a.offset(bi, hh, gi);
    const T* bg = b + pr.b.offset(bi, hh, gi);
    for (int64_t k0 = 0; k0 < pr.k; k0 += tile) {
      for (int r = ty; r < tile; r += rows_per_pass) {
        const int64_t ar = row0 + r, ak = k0 + tx;
        as[r][tx] = ar < pr.m && ak < pr.k ? detail::to_f32(ag[ar * pr.a.rs + ak * pr.a.cs]) : 0.0f;
        const int64_t bk = k0 + r, bc = col0 + tx;
        bs[r][tx] = bk < pr.k && bc < pr.n ? detail::to_f32(bg[bk * pr.b.rs + bc * pr.b.cs]) : 0.0f;
      }
      __syncthreads();
#pragma unroll 8
      for (int kk = 0; kk < tile; ++kk) {
        const float bv = bs[kk][tx];
#pragma unroll
        for (int i = 0; i < tile / rows_per_pass; ++i) acc[i] += as[ty + i * rows_per_pass][kk] * bv;
      }
      __syncthreads();
    }
  }
  T* cz = c + pr.c.offset(bi, hh, 0);
#pragma unroll
  for (int i = 0; i < tile / rows_per_pass; ++i) {
    const int64_t r = row0 + ty + i * rows_per_pass, col = col0 + tx;
    if (r < pr.m && col < pr.n) cz[r * pr.c.rs + col * pr.c.cs] = detail::from_f32<T>(pr.alpha * acc[i]);
  }
}

template <class T>
void run(const T* a, const T* b, T* c, const Problem& pr, int64_t batch, cudaStream_t stream) {
  if (pr.m <= 0 || pr.n <= 0 || batch * pr.heads <= 0) return;
  const dim3 grid(static_cast<unsigned>((pr.n + tile - 1) / tile), static_cast<unsigned>((pr.m + tile - 1) / tile),
                  static_cast<unsigned>(batch * pr.heads));
  tiled_matmul_kernel<T><<<grid, dim3(tile, rows_per_pass), 0, stream>>>(a, b, c, pr);
  PERFSIM_CUDA_CHECK_LAUNCH();
}

// Operand layouts for shape a. "q": [b, sq, h, d] rows i; "kv": [b, cap, kvh, d] rows j, read
// by query head h as kv head h/g; "s": [b, h, sq, skv]. rows/cols pick which index is which.
Operand q_rows(const cpu::AttnShape& a) { return {a.seq_q * a.heads * a.head_dim, a.head_dim, 1, 1, 0, a.heads * a.head_dim, 1}; }
Operand kv_rows(const cpu::AttnShape& a) { return {a.kv_capacity * a.kv_heads * a.head_dim, a.head_dim, a.group(), 1, 0, a.kv_heads * a.head_dim, 1}; }
Operand kv_cols(const cpu::AttnShape& a) { return {a.kv_capacity * a.kv_heads * a.head_dim, a.head_dim, a.group(), 1, 0, 1, a.kv_heads * a.head_dim}; }
Operand s_rows(const cpu::AttnShape& a) { return {a.heads * a.seq_q * a.seq_kv, a.seq_q * a.seq_kv, 1, 1, 0, a.seq_kv, 1}; }

// C[b,h] = alpha · X[b,:,h,:] · KV[b,:,h/g,:]^T: scores (X = Q) and dP (X = dO).
template <class T>
void rows_times_kv_t(const T* x, const T* kv, T* s, float alpha, const cpu::AttnShape& a, cudaStream_t stream) {
  Problem pr;
  pr.m = a.seq_q; pr.n = a.seq_kv; pr.k = a.head_dim; pr.heads = a.heads; pr.alpha = alpha;
  pr.a = q_rows(a); pr.b = kv_cols(a); pr.c = s_rows(a);
  run(x, kv, s, pr, a.batch, stream);
}

// O[b,:,h,:] = alpha · W[b,h] · KV[b,:,h/g,:]: context (W = P) and dQ (W = dS).
template <class T>
void scores_times_kv(const T* w, const T* kv, T* o, float alpha, const cpu::AttnShape& a, cudaStream_t stream) {
  Problem pr;
  pr.m = a.seq_q; pr.n = a.head_dim; pr.k = a.seq_kv; pr.heads = a.heads; pr.alpha = alpha;
  pr.a = s_rows(a); pr.b = kv_rows(a); pr.c = q_rows(a);
  run(w, kv, o, pr, a.batch, stream);
}

// out[b, j, kh, :] = alpha · Σ_{h in group(kh)} W[b,h]^T · X[b,:,h,:] for j < skv, zero for
// skv ≤ j < grad_capacity: dV (W = P, X = dO) and dK (W = dS, X = Q).
template <class T>
void reduce_to_kv(const T* w, const T* x, T* out, float alpha, const cpu::AttnShape& a, cudaStream_t stream) {
  const int64_t g = a.group(), d = a.head_dim;
  Problem pr;
  pr.m = a.seq_kv; pr.n = d; pr.k = a.seq_q; pr.heads = a.kv_heads; pr.groups = g; pr.alpha = alpha;
  pr.a = {a.heads * a.seq_q * a.seq_kv, a.seq_q * a.seq_kv, 1, g, 1, 1, a.seq_kv};  // W^T
  pr.b = {a.seq_q * a.heads * d, d, 1, g, 1, a.heads * d, 1};
  pr.c = {a.grad_capacity * a.kv_heads * d, d, 1, 1, 0, a.kv_heads * d, 1};
  run(w, x, out, pr, a.batch, stream);
  if (a.grad_capacity > a.seq_kv && a.batch > 0) {
    const size_t row = static_cast<size_t>(a.kv_heads * d) * sizeof(T);
    PERFSIM_CUDA_CHECK(cudaMemset2DAsync(out + a.seq_kv * a.kv_heads * d, static_cast<size_t>(a.grad_capacity) * row, 0,
                                         static_cast<size_t>(a.grad_capacity - a.seq_kv) * row,
                                         static_cast<size_t>(a.batch), stream));
  }
}

}  // namespace

template <class T>
void attn_scores(const T* q, const T* k, T* s, const cpu::AttnShape& a, cudaStream_t stream) {
  rows_times_kv_t(q, k, s, a.scale(), a, stream);
}
template <class T>
void attn_context(const T* p, const T* v, T* o, const cpu::AttnShape& a, cudaStream_t stream) {
  scores_times_kv(p, v, o, 1.0f, a, stream);
}
template <class T>
void attn_context_bwd(const T* d_o, const T* p, const T* v, T* dp, T* dv, const cpu::AttnShape& a,
                      cudaStream_t stream) {
  rows_times_kv_t(d_o, v, dp, 1.0f, a, stream);
  reduce_to_kv(p, d_o, dv, 1.0f, a, stream);
}
template <class T>
void attn_scores_bwd(const T* ds, const T* q, const T* k, T* dq, T* dk, const cpu::AttnShape& a,
                     cudaStream_t stream) {
  scores_times_kv(ds, k, dq, a.scale(), a, stream);
  reduce_to_kv(ds, q, dk, a.scale(), a, stream);
}

#define PERFSIM_CUDA_INSTANTIATE_ATTN_MATMUL(T)                                                        \
  template void attn_scores<T>(const T*, const T*, T*, const cpu::AttnShape&, cudaStream_t);          \
  template void attn_context<T>(const T*, const T*, T*, const cpu::AttnShape&, cudaStream_t);         \
  template void attn_context_bwd<T>(const T*, const T*, const T*, T*, T*, const cpu::AttnShape&,      \
                                    cudaStream_t);                                                    \
  template void attn_scores_bwd<T>(const T*, const T*, const T*, T*, T*, const cpu::AttnShape&,       \
                                   cudaStream_t);
PERFSIM_CUDA_INSTANTIATE_ATTN_MATMUL(float)
PERFSIM_CUDA_INSTANTIATE_ATTN_MATMUL(__nv_bfloat16)
PERFSIM_CUDA_INSTANTIATE_ATTN_MATMUL(__half)

}  // namespace perfsim::cuda

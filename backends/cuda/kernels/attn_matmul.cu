// The four products of materialized attention and its backward (scores, context, and their
// gradients) as cuBLAS strided-batched GEMMs (cublasGemmStridedBatchedEx), fp32 accumulation
// on tensor cores (TF32 only when the op asks for it), as a framework's eager attention runs.
// cuBLAS is column-major: a row-major X[r, c] with row stride ld is the column-major X^T with
// leading dimension ld, so Q/K/V/O keep their [b, s, heads, d] layouts (ld = heads·d) and
// S/P theirs [b, h, sq, skv] (ld = skv): no transposes, no copies.
// One strided batch needs one stride per operand, but the heads of a (b, h) pair are not one
// arithmetic progression across both b and GQA (query head h reads kv head h/g). Two
// schedules, the one with fewer calls is used:
//   per (b, j), batch over the kv heads kvh: query head h = kvh·g + j (Q stride g·d, K/V
//     stride d, S stride g·sq·skv): b·g calls;
//   per query head h, batch over b: H calls.
// dK/dV sum the g query heads of a group: successive calls accumulate (beta = 1) in a fixed
// order, so the result is deterministic; with 16-bit storage and g > 1 the sum builds in an
// fp32 workspace and is rounded once. Rows skv..grad_capacity of dK/dV are zeroed.
#include <limits>
#include <stdexcept>
#include <string>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_convert.hpp"
#include "backends/cuda/kernels/attention_materialized.cuh"
#include "core/errors.hpp"

namespace perfsim::cuda {

namespace {

template <class T> constexpr cudaDataType_t data_type();
template <> constexpr cudaDataType_t data_type<float>() { return CUDA_R_32F; }
template <> constexpr cudaDataType_t data_type<__nv_bfloat16>() { return CUDA_R_16BF; }
template <> constexpr cudaDataType_t data_type<__half>() { return CUDA_R_16F; }

template <class T> constexpr Elem elem_type();
template <> constexpr Elem elem_type<float>() { return Elem::f32; }
template <> constexpr Elem elem_type<__nv_bfloat16>() { return Elem::bf16; }
template <> constexpr Elem elem_type<__half>() { return Elem::f16; }

int as_int(int64_t v, const char* what) {
  if (v < 0 || v > std::numeric_limits<int>::max())
    throw NotExecutable("cuda materialized attention: " + std::string(what) + " = " + std::to_string(v) +
                        " exceeds cuBLAS's int range");
  return static_cast<int>(v);
}

// One operand of a head's matrix: element offset of head (b, h) = b·b_stride + hh·h_stride
// with hh = h/g for a kv tensor, h for a query-head tensor.
struct Operand {
  const void* data = nullptr;
  cudaDataType_t type = CUDA_R_32F;
  int elem_bytes = 4;
  int64_t ld = 0, b_stride = 0, h_stride = 0;
  bool per_kv = false;
};

struct Product {
  cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
  int64_t m = 0, n = 0, k = 0;  // column-major: C[m, n] = op(A)[m, k]·op(B)[k, n]
  float alpha = 1.0f;
  Operand a, b, c;
  bool reduce_group = false;  // C is per kv head: sum the g query heads of its group
};

const void* at(const Operand& o, int64_t elems) {
  return static_cast<const char*>(o.data) + elems * o.elem_bytes;
}

void bind(const AttnGemm& blas, cudaStream_t stream) {
  PERFSIM_CUBLAS_CHECK(cublasSetStream(blas.handle, stream));
  // cublasSetStream resets the workspace to cuBLAS's pool: hand ours back.
  if (blas.blas_workspace != nullptr)
    PERFSIM_CUBLAS_CHECK(cublasSetWorkspace(blas.handle, blas.blas_workspace, blas.blas_workspace_bytes));
}

void run(const Product& p, const ops::AttnShape& s, const AttnGemm& blas, bool fp32_storage) {
  if (p.m <= 0 || p.n <= 0 || s.batch <= 0 || s.heads <= 0) return;
  if (blas.handle == nullptr) throw std::logic_error("cuda materialized attention: no cuBLAS handle");
  const cublasComputeType_t compute = fp32_storage && blas.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const int m = as_int(p.m, "m"), n = as_int(p.n, "n"), k = as_int(p.k, "k");
  const int lda = as_int(p.a.ld, "lda"), ldb = as_int(p.b.ld, "ldb"), ldc = as_int(p.c.ld, "ldc");
  const int64_t g = s.group();
  const float zero = 0.0f, one = 1.0f;
  auto call = [&](int64_t off_a, int64_t off_b, int64_t off_c, int64_t sa, int64_t sb, int64_t sc, int64_t count,
                  bool accumulate) {
    PERFSIM_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        blas.handle, p.ta, p.tb, m, n, k, &p.alpha, at(p.a, off_a), p.a.type, lda, sa, at(p.b, off_b), p.b.type, ldb,
        sb, accumulate ? &one : &zero, const_cast<void*>(at(p.c, off_c)), p.c.type, ldc, sc, as_int(count, "batch"),
        compute, CUBLAS_GEMM_DEFAULT));
  };
  // Offset of head (b, h) and the stride between heads kvh·g + j of consecutive kvh.
  auto head = [&](const Operand& o, int64_t b, int64_t h) { return b * o.b_stride + (o.per_kv ? h / g : h) * o.h_stride; };
  auto kv_step = [&](const Operand& o) { return o.per_kv ? o.h_stride : g * o.h_stride; };
  if (s.batch * g <= s.heads) {
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t j = 0; j < g; ++j)
        call(head(p.a, b, j), head(p.b, b, j), head(p.c, b, j), kv_step(p.a), kv_step(p.b), kv_step(p.c), s.kv_heads,
             p.reduce_group && j > 0);
  } else {
    for (int64_t h = 0; h < s.heads; ++h)
      call(head(p.a, 0, h), head(p.b, 0, h), head(p.c, 0, h), p.a.b_stride, p.b.b_stride, p.c.b_stride, s.batch,
           p.reduce_group && h % g != 0);
  }
}

template <class T> Operand q_like(const T* x, const ops::AttnShape& s) {  // [b, sq, H, d]
  return {x, data_type<T>(), sizeof(T), s.heads * s.head_dim, s.seq_q * s.heads * s.head_dim, s.head_dim, false};
}
template <class T> Operand kv_like(const T* x, const ops::AttnShape& s, int64_t capacity) {  // [b, cap, Hkv, d]
  return {x, data_type<T>(), sizeof(T), s.kv_heads * s.head_dim, capacity * s.kv_heads * s.head_dim, s.head_dim, true};
}
template <class T> Operand s_like(const T* x, const ops::AttnShape& s) {  // [b, H, sq, skv]
  return {x, data_type<T>(), sizeof(T), s.seq_kv, s.heads * s.seq_q * s.seq_kv, s.seq_q * s.seq_kv, false};
}

// S[b,h] = alpha · X[b,:,h,:] · KV[b,:,h/g,:]^T (scores: X = Q; dP: X = dO).
// Column-major S^T[skv, sq] = KV^T(op T of [d, skv]) · X^T[d, sq].
template <class T>
void rows_times_kv_t(const T* x, const T* kv, T* out, float alpha, const ops::AttnShape& s, const AttnGemm& blas) {
  Product p;
  p.ta = CUBLAS_OP_T, p.tb = CUBLAS_OP_N;
  p.m = s.seq_kv, p.n = s.seq_q, p.k = s.head_dim, p.alpha = alpha;
  p.a = kv_like(kv, s, s.kv_capacity), p.b = q_like(x, s), p.c = s_like(out, s);
  run(p, s, blas, sizeof(T) == 4);
}

// O[b,:,h,:] = alpha · W[b,h] · KV[b,:,h/g,:] (context: W = P; dQ: W = dS).
// Column-major O^T[d, sq] = KV^T[d, skv] · W^T[skv, sq].
template <class T>
void scores_times_kv(const T* w, const T* kv, T* out, float alpha, const ops::AttnShape& s, const AttnGemm& blas) {
  Product p;
  p.m = s.head_dim, p.n = s.seq_q, p.k = s.seq_kv, p.alpha = alpha;
  p.a = kv_like(kv, s, s.kv_capacity), p.b = s_like(w, s), p.c = q_like(out, s);
  run(p, s, blas, sizeof(T) == 4);
}

// Zero rows skv ≤ j < grad_capacity of a [b, grad_capacity, Hkv, d] tensor.
void zero_tail_rows(void* out, int elem_bytes, const ops::AttnShape& s, cudaStream_t stream) {
  if (s.grad_capacity <= s.seq_kv || s.batch <= 0) return;
  const auto row = static_cast<size_t>(s.kv_heads * s.head_dim * elem_bytes);
  PERFSIM_CUDA_CHECK(cudaMemset2DAsync(static_cast<char*>(out) + static_cast<size_t>(s.seq_kv) * row,
                                       static_cast<size_t>(s.grad_capacity) * row, 0,
                                       static_cast<size_t>(s.grad_capacity - s.seq_kv) * row,
                                       static_cast<size_t>(s.batch), stream));
}

bool needs_fp32_sum(const ops::AttnShape& s, int elem_bytes) { return elem_bytes < 4 && s.group() > 1; }

// out[b, j, kh, :] = alpha · Σ_{h in group(kh)} W[b,h]^T · X[b,:,h,:] for j < skv, zero for
// skv ≤ j < grad_capacity (dV: W = P, X = dO; dK: W = dS, X = Q).
// Column-major out^T[d, skv] = X^T[d, sq] · W(op T of [skv, sq]).
template <class T>
void reduce_to_kv(const T* w, const T* x, T* out, float alpha, const ops::AttnShape& s, const AttnGemm& blas,
                  cudaStream_t stream) {
  const bool fp32_sum = needs_fp32_sum(s, sizeof(T));
  if (fp32_sum && blas.workspace == nullptr)
    throw std::logic_error("cuda materialized attention: the GQA gradient sum needs AttnGemm::workspace");
  Product p;
  p.ta = CUBLAS_OP_N, p.tb = CUBLAS_OP_T;
  p.m = s.head_dim, p.n = s.seq_kv, p.k = s.seq_q, p.alpha = alpha, p.reduce_group = true;
  p.a = q_like(x, s), p.b = s_like(w, s);
  void* target = fp32_sum ? blas.workspace : static_cast<void*>(out);
  p.c = {target, fp32_sum ? CUDA_R_32F : data_type<T>(), fp32_sum ? 4 : static_cast<int>(sizeof(T)),
         s.kv_heads * s.head_dim, s.grad_capacity * s.kv_heads * s.head_dim, s.head_dim, true};
  run(p, s, blas, sizeof(T) == 4);
  zero_tail_rows(target, p.c.elem_bytes, s, stream);
  if (fp32_sum)
    convert(blas.workspace, Elem::f32, out, elem_type<T>(), s.batch * s.grad_capacity * s.kv_heads * s.head_dim,
            stream);
}

}  // namespace

int64_t attn_grad_workspace_bytes(const ops::AttnShape& a, int elem_bytes) {
  if (!needs_fp32_sum(a, elem_bytes)) return 0;
  return a.batch * a.grad_capacity * a.kv_heads * a.head_dim * static_cast<int64_t>(sizeof(float));
}

template <class T>
void attn_scores(const T* q, const T* k, T* s, const ops::AttnShape& a, const AttnGemm& blas, cudaStream_t stream) {
  bind(blas, stream);
  rows_times_kv_t(q, k, s, a.scale(), a, blas);
}
template <class T>
void attn_context(const T* p, const T* v, T* o, const ops::AttnShape& a, const AttnGemm& blas, cudaStream_t stream) {
  bind(blas, stream);
  scores_times_kv(p, v, o, 1.0f, a, blas);
}
template <class T>
void attn_context_bwd(const T* d_o, const T* p, const T* v, T* dp, T* dv, const ops::AttnShape& a,
                      const AttnGemm& blas, cudaStream_t stream) {
  bind(blas, stream);
  rows_times_kv_t(d_o, v, dp, 1.0f, a, blas);
  reduce_to_kv(p, d_o, dv, 1.0f, a, blas, stream);
}
template <class T>
void attn_scores_bwd(const T* ds, const T* q, const T* k, T* dq, T* dk, const ops::AttnShape& a,
                     const AttnGemm& blas, cudaStream_t stream) {
  bind(blas, stream);
  scores_times_kv(ds, k, dq, a.scale(), a, blas);
  reduce_to_kv(ds, q, dk, a.scale(), a, blas, stream);
}

#define PERFSIM_CUDA_INSTANTIATE_ATTN_MATMUL(T)                                                             \
  template void attn_scores<T>(const T*, const T*, T*, const ops::AttnShape&, const AttnGemm&, cudaStream_t); \
  template void attn_context<T>(const T*, const T*, T*, const ops::AttnShape&, const AttnGemm&, cudaStream_t); \
  template void attn_context_bwd<T>(const T*, const T*, const T*, T*, T*, const ops::AttnShape&, const AttnGemm&, \
                                    cudaStream_t);                                                          \
  template void attn_scores_bwd<T>(const T*, const T*, const T*, T*, T*, const ops::AttnShape&, const AttnGemm&, \
                                   cudaStream_t);
PERFSIM_CUDA_INSTANTIATE_ATTN_MATMUL(float)
PERFSIM_CUDA_INSTANTIATE_ATTN_MATMUL(__nv_bfloat16)
PERFSIM_CUDA_INSTANTIATE_ATTN_MATMUL(__half)

}  // namespace perfsim::cuda

// Materialized (naive) attention on the GPU, mirroring cpu::attn_* (backends/cpu/cpu_kernels.hpp,
// AttnShape): Q, O [b, sq, h, d]; K, V [b, cap, kvh, d]; S, P, dP, dS [b, h, sq, skv];
// dK, dV [b, grad_cap, kvh, d] (rows ≥ skv zeroed). The score and probability tensors are
// really written to memory: this is the baseline flash attention is compared with. The four
// products run as cuBLAS strided-batched GEMMs on tensor cores with fp32 accumulation, as a
// framework's eager softmax(QK^T)V does (attn_matmul.cu); softmax and its backward are
// perfsim kernels. Asynchronous on `stream`, capturable.
#pragma once
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backends/ops/kernel_shapes.hpp"

namespace perfsim::cuda {

// What the cuBLAS products need: a handle (the launcher binds it to `stream`), cuBLAS's own
// workspace (rebound on every call so capture never allocates), the TF32 tensor-core mode
// for fp32 storage (the op's dtype is tf32), and, for the backward products, a workspace of
// attn_grad_workspace_bytes() bytes.
struct AttnGemm {
  cublasHandle_t handle = nullptr;
  void* blas_workspace = nullptr;
  std::size_t blas_workspace_bytes = 0;
  bool tf32 = false;
  void* workspace = nullptr;  // attn_context_bwd / attn_scores_bwd only
};

// Bytes of AttnGemm::workspace the backward products need for elements of elem_bytes bytes:
// a GQA group's dK/dV sum is accumulated in fp32 there (rounded once) when the storage is
// 16-bit; 0 otherwise.
[[nodiscard]] int64_t attn_grad_workspace_bytes(const ops::AttnShape& a, int elem_bytes);

// S = Q·K^T · scale (every pair; masking is the softmax's job).
template <class T> void attn_scores(const T* q, const T* k, T* s, const ops::AttnShape& a,
                                    const AttnGemm& blas, cudaStream_t stream);
// P = softmax over the visible kv positions of each row (causal mask); masked entries are 0.
template <class T> void attn_softmax(const T* s, T* p, const ops::AttnShape& a, cudaStream_t stream);
// O[b,i,h,:] = Σ_j P[b,h,i,j] · V[b,j,h/g,:].
template <class T> void attn_context(const T* p, const T* v, T* o, const ops::AttnShape& a,
                                     const AttnGemm& blas, cudaStream_t stream);
// dP = dO·V^T; dV = Σ over the query heads of a group of P^T·dO.
template <class T> void attn_context_bwd(const T* d_o, const T* p, const T* v, T* dp, T* dv,
                                         const ops::AttnShape& a, const AttnGemm& blas,
                                         cudaStream_t stream);
// dS = P ⊙ (dP − rowsum(dP ⊙ P)).
template <class T> void attn_softmax_bwd(const T* p, const T* dp, T* ds, const ops::AttnShape& a,
                                         cudaStream_t stream);
// dQ = scale · dS·K; dK = scale · Σ over the group of dS^T·Q.
template <class T> void attn_scores_bwd(const T* ds, const T* q, const T* k, T* dq, T* dk,
                                        const ops::AttnShape& a, const AttnGemm& blas,
                                        cudaStream_t stream);

}  // namespace perfsim::cuda

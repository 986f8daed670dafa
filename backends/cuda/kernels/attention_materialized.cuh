// Materialized (naive) attention on the GPU, mirroring cpu::attn_* (backends/cpu/cpu_kernels.hpp,
// AttnShape): Q, O [b, sq, h, d]; K, V [b, cap, kvh, d]; S, P, dP, dS [b, h, sq, skv];
// dK, dV [b, grad_cap, kvh, d] (rows ≥ skv zeroed). The score and probability tensors are
// really written to memory: this is the baseline flash attention is compared with. The
// products use perfsim's own shared-memory tiled kernel (no cuBLAS), fp32 accumulation.
// Asynchronous on `stream`, capturable.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "backends/cpu/cpu_kernels.hpp"

namespace perfsim::cuda {

// S = Q·K^T · scale (every pair; masking is the softmax's job).
template <class T> void attn_scores(const T* q, const T* k, T* s, const cpu::AttnShape& a,
                                    cudaStream_t stream);
// P = softmax over the visible kv positions of each row (causal mask); masked entries are 0.
template <class T> void attn_softmax(const T* s, T* p, const cpu::AttnShape& a, cudaStream_t stream);
// O[b,i,h,:] = Σ_j P[b,h,i,j] · V[b,j,h/g,:].
template <class T> void attn_context(const T* p, const T* v, T* o, const cpu::AttnShape& a,
                                     cudaStream_t stream);
// dP = dO·V^T; dV = Σ over the query heads of a group of P^T·dO.
template <class T> void attn_context_bwd(const T* d_o, const T* p, const T* v, T* dp, T* dv,
                                         const cpu::AttnShape& a, cudaStream_t stream);
// dS = P ⊙ (dP − rowsum(dP ⊙ P)).
template <class T> void attn_softmax_bwd(const T* p, const T* dp, T* ds, const cpu::AttnShape& a,
                                         cudaStream_t stream);
// dQ = scale · dS·K; dK = scale · Σ over the group of dS^T·Q.
template <class T> void attn_scores_bwd(const T* ds, const T* q, const T* k, T* dq, T* dk,
                                        const cpu::AttnShape& a, cudaStream_t stream);

}  // namespace perfsim::cuda

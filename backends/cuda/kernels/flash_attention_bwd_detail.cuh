// Internal to the flash attention backward: the parameter block its launches share and the
// tensor-core main kernel's launcher (flash_attention_bwd_tc.cu), called by
// flash_attention_bwd (flash_attention_bwd.cu) between its preprocess and dQ-convert passes.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace perfsim::cuda::flash_bwd_detail {

struct BwdParams {
  const void *q, *k, *v, *o, *d_o;
  const float* lse;
  void *dq, *dk, *dv;
  float* dq_acc;  // [b, seq_q, H, d]
  float* delta;   // [b, H, seq_q]
  // Split GQA groups: fp32 dK then dV accumulators, [b, grad_capacity, Hkv, d] each (zeroed by
  // the caller), one CTA per query head adding into its kv head's rows; nullptr: one CTA per kv
  // head walks its whole group and writes dK/dV itself.
  float* dkv_acc;
  int seq_q, seq_kv, heads, kv_heads, group, d;
  int64_t kv_capacity, grad_capacity;
  bool causal;
  float scale;
  int q_first;  // query rows before it take no part (a ring-attention block): their dQ stays 0
};

// Whether the tensor-core kernel handles T (bf16/fp16) at this head_dim (64, 128).
template <class T> [[nodiscard]] bool bwd_tc_supported(int head_dim);

// dK, dV written (rows up to grad_capacity; with p.dkv_acc, added into those accumulators
// instead) and dQ accumulated (fp32 atomics into p.dq_acc, which the caller zeroed) from D in
// p.delta. block_n: kv rows per CTA, 64 or 128 (0 = default). Requires bwd_tc_supported<T>(p.d).
template <class T>
void flash_bwd_tc(const BwdParams& p, int batch, int block_n, cudaStream_t stream);

}  // namespace perfsim::cuda::flash_bwd_detail

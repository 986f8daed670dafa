// A named view of the operands of each op kind whose float operands share one storage T (the
// kernel's: float, bf16 or half on the CPU; the matching CUDA types on the GPU). Each view reads
// its operands in the order of the kind's line in core/graph/op_kind.hpp (read()); int32
// operands (ids, tables, slots) and fp32 ones (LSEs, losses, routing weights) keep their fixed
// types (fixed_operand_dtype). GEMMs, AdamW and copies take operands of several storages: they
// are named by tensor id instead (op_shapes.hpp: gemm_ids, adamw_groups, copy_ids).
#pragma once
#include <cstdint>

#include "backends/ops/operands.hpp"

namespace perfsim::ops {

// ---- materialized attention ------------------------------------------------------------
template <class T> struct AttnScoresIO {
  const T *q, *k; T* s;
  static AttnScoresIO read(OperandReader& r) { return {r.in<T>(), r.in<T>(), r.out<T>()}; }
};
template <class T> struct AttnSoftmaxIO {
  const T* s; T* p;
  static AttnSoftmaxIO read(OperandReader& r) { return {r.in<T>(), r.out<T>()}; }
};
template <class T> struct AttnContextIO {
  const T *p, *v; T* o;
  static AttnContextIO read(OperandReader& r) { return {r.in<T>(), r.in<T>(), r.out<T>()}; }
};
template <class T> struct AttnContextBwdIO {
  const T *d_o, *p, *v; T *dp, *dv;
  static AttnContextBwdIO read(OperandReader& r) { return {r.in<T>(), r.in<T>(), r.in<T>(), r.out<T>(), r.out<T>()}; }
};
template <class T> struct AttnSoftmaxBwdIO {
  const T *p, *dp; T* ds;
  static AttnSoftmaxBwdIO read(OperandReader& r) { return {r.in<T>(), r.in<T>(), r.out<T>()}; }
};
template <class T> struct AttnScoresBwdIO {
  const T *ds, *q, *k; T *dq, *dk;
  static AttnScoresBwdIO read(OperandReader& r) { return {r.in<T>(), r.in<T>(), r.in<T>(), r.out<T>(), r.out<T>()}; }
};

// ---- flash attention -------------------------------------------------------------------
template <class T> struct FlashAttnIO {  // dense K, V
  const T *q, *k, *v; T* o; float* lse;
  static FlashAttnIO read(OperandReader& r) { return {r.in<T>(), r.in<T>(), r.in<T>(), r.out<T>(), r.out<float>()}; }
};
template <class T> struct PagedFlashAttnIO {  // K, V in pages named by a block table
  const T *q, *k_pages, *v_pages; const int32_t* table; T* o; float* lse;
  static PagedFlashAttnIO read(OperandReader& r) {
    return {r.in<T>(), r.in<T>(), r.in<T>(), r.in<int32_t>(), r.out<T>(), r.out<float>()};
  }
};
template <class T> struct VarlenFlashAttnIO {  // a serving step's packed sequences over pages
  const T *q, *k_pages, *v_pages; const int32_t *table, *query_start, *kv_len; T* o; float* lse;
  static VarlenFlashAttnIO read(OperandReader& r) {
    return {r.in<T>(), r.in<T>(), r.in<T>(), r.in<int32_t>(), r.in<int32_t>(), r.in<int32_t>(), r.out<T>(),
            r.out<float>()};
  }
};
template <class T> struct FlashAttnBwdIO {
  const T *q, *k, *v, *o, *d_o; const float* lse; T *dq, *dk, *dv;
  static FlashAttnBwdIO read(OperandReader& r) {
    return {r.in<T>(), r.in<T>(), r.in<T>(), r.in<T>(), r.in<T>(), r.in<float>(), r.out<T>(), r.out<T>(), r.out<T>()};
  }
};
template <class T> struct AttnMergeIO {
  const T* o_a; const float* lse_a; const T* o_b; const float* lse_b; T* o; float* lse;
  static AttnMergeIO read(OperandReader& r) {
    return {r.in<T>(), r.in<float>(), r.in<T>(), r.in<float>(), r.out<T>(), r.out<float>()};
  }
};

// ---- norms ------------------------------------------------------------------------------
template <class T> struct LayernormIO {
  const T *x, *gamma, *beta; T* y;
  static LayernormIO read(OperandReader& r) { return {r.in<T>(), r.in<T>(), r.in<T>(), r.out<T>()}; }
};
template <class T> struct LayernormBwdIO {
  const T *x, *gamma, *dy; T *dx, *dgamma, *dbeta;
  static LayernormBwdIO read(OperandReader& r) {
    return {r.in<T>(), r.in<T>(), r.in<T>(), r.out<T>(), r.out<T>(), r.out<T>()};
  }
};
template <class T> struct RmsnormIO {
  const T *x, *gamma; T* y;
  static RmsnormIO read(OperandReader& r) { return {r.in<T>(), r.in<T>(), r.out<T>()}; }
};
template <class T> struct RmsnormBwdIO {
  const T *x, *gamma, *dy; T *dx, *dgamma;
  static RmsnormBwdIO read(OperandReader& r) { return {r.in<T>(), r.in<T>(), r.in<T>(), r.out<T>(), r.out<T>()}; }
};
template <class T> struct AddRmsnormIO {
  const T *a, *b, *gamma; T *sum, *y;
  static AddRmsnormIO read(OperandReader& r) { return {r.in<T>(), r.in<T>(), r.in<T>(), r.out<T>(), r.out<T>()}; }
};
template <class T> struct AddLayernormIO {
  const T *a, *b, *gamma, *beta; T *sum, *y;
  static AddLayernormIO read(OperandReader& r) {
    return {r.in<T>(), r.in<T>(), r.in<T>(), r.in<T>(), r.out<T>(), r.out<T>()};
  }
};

// ---- pointwise --------------------------------------------------------------------------
template <class T> struct UnaryIO {  // gelu {x} -> {y}
  const T* x; T* y;
  static UnaryIO read(OperandReader& r) { return {r.in<T>(), r.out<T>()}; }
};
template <class T> struct GeluBwdIO {
  const T *x, *dy; T* dx;
  static GeluBwdIO read(OperandReader& r) { return {r.in<T>(), r.in<T>(), r.out<T>()}; }
};
template <class T> struct SiluMulIO {
  const T *gate, *up; T* y;
  static SiluMulIO read(OperandReader& r) { return {r.in<T>(), r.in<T>(), r.out<T>()}; }
};
template <class T> struct SiluMulBwdIO {
  const T *gate, *up, *dy; T *dgate, *dup;
  static SiluMulBwdIO read(OperandReader& r) { return {r.in<T>(), r.in<T>(), r.in<T>(), r.out<T>(), r.out<T>()}; }
};
template <class T> struct ResidualAddIO {
  const T *a, *b; T* out;
  static ResidualAddIO read(OperandReader& r) { return {r.in<T>(), r.in<T>(), r.out<T>()}; }
};
template <class T> struct RopeIO {  // rope {x} -> {y}; rope_bwd {dy} -> {dx}
  const T* x; T* y;
  static RopeIO read(OperandReader& r) { return {r.in<T>(), r.out<T>()}; }
};
template <class T> struct VarlenRopeIO {  // varlen_rope: row t at positions[t]
  const T* x; const int32_t* positions; T* y;
  static VarlenRopeIO read(OperandReader& r) { return {r.in<T>(), r.in<int32_t>(), r.out<T>()}; }
};

// ---- embedding and loss -----------------------------------------------------------------
template <class T> struct EmbeddingIO {
  const int32_t* ids; const T* table; const T* positions /* learned; nullptr when none */; T* x;
  static EmbeddingIO read(OperandReader& r) {
    return {r.in<int32_t>(), r.in<T>(), r.in_if_present<T>(), r.out<T>()};
  }
};
template <class T> struct EmbeddingBwdIO {
  const int32_t* ids; const T* dx; T* dtable; T* dpositions /* nullptr when none */;
  // attrs.accumulate: the tables' current values are further inputs, copied into the outputs.
  static EmbeddingBwdIO read(OperandReader& r) {
    const int32_t* ids = r.in<int32_t>();
    const T* dx = r.in<T>();
    r.rest_in_place();
    return {ids, dx, r.out<T>(), r.out_if_present<T>()};
  }
};
// ---- convolutional networks (NHWC) ----------------------------------------------------------
template <class T> struct Conv2dIO {  // conv2d {x, w (, bias)} -> {y}
  const T *x, *w, *bias /* nullptr: none */; T* y;
  static Conv2dIO read(OperandReader& r) {
    const T* x = r.in<T>();
    const T* w = r.in<T>();
    const T* bias = r.in_if_present<T>();
    return {x, w, bias, r.out<T>()};
  }
};
template <class T> struct Conv2dDgradIO {
  const T *dy, *w; T* dx;
  static Conv2dDgradIO read(OperandReader& r) { return {r.in<T>(), r.in<T>(), r.out<T>()}; }
};
template <class T> struct Conv2dWgradIO {
  const T *x, *dy; T* dw;
  static Conv2dWgradIO read(OperandReader& r) { return {r.in<T>(), r.in<T>(), r.out<T>()}; }
};
template <class T> struct BatchnormIO {
  const T *x, *gamma, *beta; T* y; float *mean, *rstd;
  static BatchnormIO read(OperandReader& r) {
    return {r.in<T>(), r.in<T>(), r.in<T>(), r.out<T>(), r.out<float>(), r.out<float>()};
  }
};
template <class T> struct BatchnormInferIO {
  const T *x, *gamma, *beta; const float *mean, *var; T* y;
  static BatchnormInferIO read(OperandReader& r) {
    return {r.in<T>(), r.in<T>(), r.in<T>(), r.in<float>(), r.in<float>(), r.out<T>()};
  }
};
template <class T> struct BatchnormBwdIO {
  const T *x, *gamma; const float *mean, *rstd; const T* dy; T *dx, *dgamma, *dbeta;
  static BatchnormBwdIO read(OperandReader& r) {
    return {r.in<T>(), r.in<T>(), r.in<float>(), r.in<float>(), r.in<T>(), r.out<T>(), r.out<T>(), r.out<T>()};
  }
};
template <class T> struct ReluBwdIO {
  const T *y, *dy; T* dx;
  static ReluBwdIO read(OperandReader& r) { return {r.in<T>(), r.in<T>(), r.out<T>()}; }
};
template <class T> struct MaxpoolBwdIO {
  const T *x, *dy; T* dx;
  static MaxpoolBwdIO read(OperandReader& r) { return {r.in<T>(), r.in<T>(), r.out<T>()}; }
};

template <class T> struct CrossEntropyIO {
  const T* logits; const int32_t* targets; float* loss; T* dlogits /* nullptr: forward only */;
  static CrossEntropyIO read(OperandReader& r) {
    return {r.in<T>(), r.in<int32_t>(), r.out<float>(), r.out_if_present<T>()};
  }
};

// ---- KV cache and slicing ---------------------------------------------------------------
template <class T> struct KvAppendIO {  // the cache updated in place
  const T* k_new; T* cache;
  static KvAppendIO read(OperandReader& r) {
    const T* k_new = r.in<T>();
    r.in_place();
    return {k_new, r.out<T>()};
  }
};
template <class T> struct PagedKvAppendIO {
  const T* k_new; const int32_t* table; T* pages;
  static PagedKvAppendIO read(OperandReader& r) {
    const T* k_new = r.in<T>();
    r.in_place();
    const int32_t* table = r.in<int32_t>();
    return {k_new, table, r.out<T>()};
  }
};
template <class T> struct VarlenKvAppendIO {  // row t into pool row slots[t]
  const T* k_new; const int32_t* slots; T* pages;
  static VarlenKvAppendIO read(OperandReader& r) {
    const T* k_new = r.in<T>();
    r.in_place();
    const int32_t* slots = r.in<int32_t>();
    return {k_new, slots, r.out<T>()};
  }
};
template <class T> struct SliceLastTokenIO {
  const T* x; T* y;
  static SliceLastTokenIO read(OperandReader& r) { return {r.in<T>(), r.out<T>()}; }
};
template <class T> struct GatherRowsIO {  // varlen_slice_last_token: y[i] = x[rows[i]]
  const T* x; const int32_t* rows; T* y;
  static GatherRowsIO read(OperandReader& r) { return {r.in<T>(), r.in<int32_t>(), r.out<T>()}; }
};

// ---- mixture of experts -----------------------------------------------------------------
template <class T> struct MoeRouteIO {
  const T* logits; float* weights; int32_t *experts, *slots;
  static MoeRouteIO read(OperandReader& r) {
    return {r.in<T>(), r.out<float>(), r.out<int32_t>(), r.out<int32_t>()};
  }
};
template <class T> struct MoeRouteBwdIO {
  const T* logits; const int32_t* experts; const float* dweights; float* dlogits;
  static MoeRouteBwdIO read(OperandReader& r) {
    return {r.in<T>(), r.in<int32_t>(), r.in<float>(), r.out<float>()};
  }
};
template <class T> struct MoeDispatchIO {  // dispatch {x} -> {xe}; its backward {dxe} -> {dx}
  const T* x; const int32_t *experts, *slots; T* y;
  static MoeDispatchIO read(OperandReader& r) {
    return {r.in<T>(), r.in<int32_t>(), r.in<int32_t>(), r.out<T>()};
  }
};
template <class T> struct MoeCombineIO {
  const T* ye; const int32_t *experts, *slots; const float* weights; T* y;
  static MoeCombineIO read(OperandReader& r) {
    return {r.in<T>(), r.in<int32_t>(), r.in<int32_t>(), r.in<float>(), r.out<T>()};
  }
};
template <class T> struct MoeCombineBwdIO {
  const T *dy, *ye; const int32_t *experts, *slots; const float* weights; T* dye; float* dweights;
  static MoeCombineBwdIO read(OperandReader& r) {
    return {r.in<T>(), r.in<T>(), r.in<int32_t>(), r.in<int32_t>(), r.in<float>(), r.out<T>(), r.out<float>()};
  }
};

}  // namespace perfsim::ops

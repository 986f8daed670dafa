// The graph passes behind apply_graph_pass (passes.cpp), one file each.
#pragma once
#include "core/graph/graph.hpp"
#include "core/config/dtype.hpp"

namespace perfsim::passes {

// fp32 / bf16 / fp16: every op and non-input tensor in `t`; training keeps fp32 master
// weights and AdamW states under bf16/fp16 (mixed precision). fp32 drops the masters.
void set_precision(Graph& g, DType t);
// fp32 GEMMs compute in tf32; storage is unchanged.
void apply_tf32(Graph& g);
// Linear-layer GEMMs compute in fp8; inference stores the weights only GEMMs read in fp8.
void apply_fp8(Graph& g);
// Inference: the weights only linear-layer GEMMs read stored in int8 or int4 (`bits`), with a
// bf16 scale per `group` of each output channel's inputs (0: one per channel) and, for int4, a
// bf16 zero point beside each (AWQ/GPTQ's layout); the GEMMs still compute in the activations'
// type, dequantizing as they load (W8A16, W4A16). Throws ConfigError on a training step.
void apply_weight_only(Graph& g, int bits, int64_t group);
// Inference: linear-layer GEMMs compute in int8 on int8 weights with a scale per output channel
// (activations quantized per token, as SmoothQuant's W8A8). Throws ConfigError on a training step.
void apply_w8a8(Graph& g);
// Inference: the weights only linear-layer GEMMs read pruned 2:4 (two of every four values
// kept, with 2-bit indices) and their GEMMs on the sparse tensor cores. Throws ConfigError on a
// training step.
void apply_sparse_24(Graph& g);
// Inference: the KV cache (cache or pages) stored in fp8 e4m3 with a per-tensor scale (1),
// half of bf16's bytes. Every op on the cache must have an fp8 path (the appends and the
// flash kinds): throws ConfigError otherwise, or without a cache.
void apply_fp8_kv(Graph& g);
// scores -> softmax -> context (and their backward) become flash_attention (_bwd).
void apply_flash_attention(Graph& g);
// The KV cache becomes pages of `block` rows read through one block table (needs flash
// attention: materialized attention cannot read pages). Throws ConfigError without a cache.
void apply_paged_kv(Graph& g, int64_t block);
// residual_add followed by its norm becomes add_rmsnorm / add_layernorm.
void apply_fusion(Graph& g);
// All adamw ops become one single-pass adamw op.
void apply_fused_optimizer(Graph& g);
// Per-layer activation checkpointing: forward ops rerun before each layer's backward. After
// selective recompute it takes the place of that one.
void apply_recompute(Graph& g);
// Selective recompute: each layer's attention core (scores, softmax, context) reruns before
// its backward, and the softmax output is no longer saved; nothing to do with flash attention
// or after full recompute.
void apply_selective_recompute(Graph& g);
// Every host tensor becomes page-locked (host_pinned).
void apply_pinned_memory(Graph& g);
// Each upload becomes a prefetch of the next step's input into `<dst>.next` on side stream 1,
// issued at the start of the step. Throws ConfigError without uploads or from pageable memory.
void apply_prefetch(Graph& g);

}  // namespace perfsim::passes

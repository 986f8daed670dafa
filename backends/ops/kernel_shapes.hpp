// The shapes the kernels of every backend take: plain structs, derived from a graph op by
// op_shapes.hpp. Layouts follow core/graph/op_kind.hpp (row-major; T = tokens = batch·seq).
// constexpr where GPU kernels call them too.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backends/common/scalar.hpp"

namespace perfsim::ops {

using host::Storage;

// C[batch][m, n] (+)= op(A)[m, k] · op(B)[k, n].
struct GemmShape {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool trans_a = false;      // A stored [k, m] instead of [m, k]
  bool trans_b = false;      // B stored [n, k] instead of [k, n]
  bool accumulate = false;   // C += A·B instead of C = A·B
  bool broadcast_a = false;  // one A shared by every batch entry (otherwise [batch, ...])
  bool broadcast_b = false;  // one B shared by every batch entry
};

// A paged KV cache (the paged_kv pass): pages [num_blocks, block, row] and a block table
// [batch, max_blocks] int32; kv position j of sequence b lives in page table[b][j / block]
// at row j % block. Shapes then give the logical capacity max_blocks · block per sequence.
struct PagedLayout {
  int64_t block = 0, max_blocks = 0, num_blocks = 0;
  // The page row of position j of sequence b as the table gives it, unchecked (paged_row checks).
  [[nodiscard]] int64_t row(const int32_t* table, int64_t b, int64_t j) const {
    return int64_t{table[b * max_blocks + j / block]} * block + j % block;
  }
};

// Q [batch, seq_q, heads, head_dim]; K, V [batch, kv_capacity, kv_heads, head_dim] (first
// seq_kv rows used); S, P [batch, heads, seq_q, seq_kv]; O like Q; dK, dV
// [batch, grad_capacity, kv_heads, head_dim] (rows >= seq_kv written as 0).
// GQA: query head h reads kv head h / (heads / kv_heads). Causal: query i sits at position
// seq_kv - seq_q + i and sees kv positions <= that.
// How K/V rows of a cache are stored: in the op's float type, or (the fp8_kv pass) as OCP fp8
// e4m3 bytes whose value is stored · scale; the appends store round(x / scale), saturated to
// ±448. Ops that read or write no cache keep the default.
struct KvStorage {
  bool fp8 = false;
  float scale = 1;
};

struct AttnShape {
  int64_t batch = 1, seq_q = 0, seq_kv = 0, heads = 0, kv_heads = 0, head_dim = 0;
  int64_t kv_capacity = 0;    // rows allocated in K and V
  int64_t grad_capacity = 0;  // rows allocated in dK and dV
  // Flash attention: query rows 0 .. q_first − 1 of each sequence take no part (a ring-attention
  // block whose keys all lie after them): their O and dQ rows are written 0, their LSE −inf.
  int64_t q_first = 0;
  PagedLayout paged;          // flash_attention over a paged cache; block 0: contiguous K, V
  bool causal = false;
  int64_t alibi_heads = 0;    // ALiBi over this many heads (OpAttrs::alibi_heads); 0: no bias
  KvStorage kv;               // K and V (forward kinds over a cache)
  [[nodiscard]] float scale() const { return 1.0f / std::sqrt(static_cast<float>(head_dim)); }
  [[nodiscard]] int64_t group() const { return heads / kv_heads; }
  // Number of kv positions query row i may attend to.
  [[nodiscard]] int64_t visible(int64_t i) const {
    return causal ? std::min(seq_kv, seq_kv - seq_q + i + 1) : seq_kv;
  }
};

// Where row i = t % seq of a sequence sits: position + i, or under context parallelism
// (chunk > 0) the rank's two chunks of `chunk` rows, the second from position `second`.
// constexpr: the GPU kernels call it too.
[[nodiscard]] constexpr int64_t sequence_position(int64_t t, int64_t seq, int64_t position, int64_t chunk,
                                               int64_t second) {
  const int64_t i = t % seq;
  return chunk > 0 && i >= chunk ? second + i - chunk : position + i;
}
// x, y [tokens, heads, head_dim]; token t sits at sequence_position(t, ...). Pairs (i, i + d/2)
// rotate by angle pos · 10000^(−2i/d).
struct RopeShape {
  int64_t tokens = 0, heads = 0, head_dim = 0, seq = 1, position = 0;
  int64_t chunk = 0, second = 0;  // context parallelism (sequence_position)
  [[nodiscard]] constexpr int64_t position_of(int64_t t) const { return sequence_position(t, seq, position, chunk, second); }
};

// A convolution or a pooling window over NHWC images (core/graph/graph.hpp, ConvGeometry):
// x [batch, height, width, channels]; conv2d's w [filters, kernel_h, kernel_w, channels /
// groups]; y [batch, out_h, out_w, filters] (a pool: filters = channels). Tap (r, s) of output
// (p, q) reads input row p·stride − pad + r·dilation, column q·stride − pad + s·dilation
// (outside the image: zero for a convolution, skipped by a pool).
struct ConvShape {
  int64_t batch = 1, height = 0, width = 0, channels = 0, filters = 0;
  int64_t kernel_h = 1, kernel_w = 1, stride = 1, pad = 0, dilation = 1, groups = 1;
  int64_t out_h = 0, out_w = 0;
  bool relu = false;  // conv2d: max(·, 0) after the bias
  [[nodiscard]] constexpr int64_t x_elements() const { return batch * height * width * channels; }
  [[nodiscard]] constexpr int64_t y_elements() const { return batch * out_h * out_w * filters; }
  [[nodiscard]] constexpr int64_t w_elements() const { return filters * kernel_h * kernel_w * (channels / groups); }
};

// ids [tokens] int32 in [0, vocab); table [vocab, hidden]; positions [max_positions, hidden]
// (optional, learned); x [tokens, hidden]. Token t sits at sequence_position(t, ...).
struct EmbeddingShape {
  int64_t tokens = 0, vocab = 0, hidden = 0, seq = 1, position = 0, max_positions = 0;
  int64_t chunk = 0, second = 0;  // context parallelism (sequence_position)
  bool accumulate = false;  // embedding_bwd adds into dtable/dpositions instead of overwriting
  [[nodiscard]] constexpr int64_t position_of(int64_t t) const { return sequence_position(t, seq, position, chunk, second); }
};

// Mixture of experts (core/graph/op_kind.hpp): `tokens` rows routed to `top_k` of `experts`,
// each expert's buffer holding `capacity` rows of `hidden` features. logits, dlogits
// [tokens, experts]; weights, dweights, experts, slots [tokens, top_k] (choice (t, j) at
// t·top_k + j); x, dx, y, dy [tokens, hidden]; xe, dxe, ye, dye [experts, capacity, hidden].
// A choice with slot −1 was dropped and contributes nothing. The kernels taking experts and
// slots throw std::out_of_range on an expert outside [0, experts) or a slot outside
// [−1, capacity), and std::invalid_argument when two kept choices name one buffer row.
struct MoeShape {
  int64_t tokens = 0, experts = 0, top_k = 0, capacity = 0, hidden = 0;
  // moe_combine_bwd's dye is scaled by it, moe_dispatch_bwd's dx divided by it
  // (OpAttrs::expert_grad_scale: 1/ep under expert parallelism).
  float expert_grad_scale = 1;
};

// One parameter tensor of an AdamW step; every pointer holds n elements of its storage.
struct AdamWGroup {
  void* param = nullptr;        Storage param_type = Storage::f32;  // updated in place
  const void* grad = nullptr;   Storage grad_type = Storage::f32;
  void* m = nullptr;            Storage m_type = Storage::f32;      // first moment
  void* v = nullptr;            Storage v_type = Storage::f32;      // second moment
  void* weight = nullptr;       Storage weight_type = Storage::bf16; // low-precision copy of
                                                                     // an fp32 master (optional)
  int64_t n = 0;
};
struct AdamWParams {
  float lr = 1e-4f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.1f;
  int64_t step = 1;  // bias correction uses 1 − beta^step
};

// k_new [batch, seq_new, row] written into cache [batch, capacity, row] at rows
// position .. position + seq_new − 1 (row = kv_heads · head_dim).
struct KvAppendShape {
  int64_t batch = 1, seq_new = 0, capacity = 0, row = 0, position = 0;
  PagedLayout paged;  // block 0: a contiguous cache
  KvStorage kv;       // the cache's
};

// Q, O [T, heads, head_dim]; LSE [heads, T] fp32; K/V pages [num_blocks, block, kv_heads,
// head_dim]; table [S, max_blocks]; query_start [S + 1] (0 first, nondecreasing, T last);
// kv_len [S]. Query i of sequence s (q_len = query_start[s+1] − query_start[s] ≤ kv_len[s] ≤
// max_kv) sees its keys 0 .. kv_len[s] − q_len + i, key j at page table[s][j / block], row
// j % block. A sequence with no query writes nothing. GQA as AttnShape.
struct VarlenAttnShape {
  int64_t seqs = 0, tokens = 0, heads = 0, kv_heads = 0, head_dim = 0;
  int64_t max_q = 0, max_kv = 0;  // the longest query run and KV length (attrs.seq_q, seq_kv)
  int64_t decode_seqs = 0;        // leading sequences with exactly one query
  int64_t alibi_heads = 0;        // as AttnShape
  PagedLayout paged;
  KvStorage kv;                   // the pages'

  [[nodiscard]] float scale() const { return 1.0f / std::sqrt(static_cast<float>(head_dim)); }
  [[nodiscard]] int64_t group() const { return heads / kv_heads; }
};

}  // namespace perfsim::ops

// The CPU backend's kernels: free functions, one op family per cpu_*.cpp file, shapes
// passed explicitly (backends/ops/kernel_shapes.hpp, shared with every backend). They compute
// in float and store in the storage type T (float, bf16, half); templates are instantiated for
// exactly those three. The kernels over a KV cache also take the cache's storage C: T itself or
// fp8 e4m3 (the fp8_kv pass), which they read and write in place, a row at a time, with the
// scale of the shape's KvStorage (a C the shape does not name throws std::logic_error).
// Layouts follow core/graph/op_kind.hpp (row-major; T = tokens = batch·seq).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "backends/cpu/host_names.hpp"
#include "backends/ops/kernel_shapes.hpp"

namespace perfsim::cpu {

// The shared kernel shapes, by the short names the CPU code uses.
using ops::AdamWGroup;
using ops::AdamWParams;
using ops::AttnShape;
using ops::ConvShape;
using ops::EmbeddingShape;
using ops::GemmShape;
using ops::KvAppendShape;
using ops::KvStorage;
using ops::MoeShape;
using ops::PagedLayout;
using ops::RopeShape;
using ops::sequence_position;
using ops::VarlenAttnShape;

// ---- cpu_gemm.cpp -------------------------------------------------------------------
// Float elements of workspace gemm() needs: 0 when A, B and C are all fp32; m·k (A widened)
// when m <= 8 and B is 16-bit (B is then streamed once); otherwise blocks of A, B and C
// converted to fp32 (bounded, independent of the problem size).
[[nodiscard]] int64_t gemm_workspace_floats(const GemmShape& s, Storage a, Storage b, Storage c);
// C[batch][m, n] (+)= op(A)[m, k] · op(B)[k, n] with fp32 accumulation (OpenBLAS sgemm).
// Operands may use different storages; 16-bit ones are converted block by block.
void gemm(const void* a, Storage a_type,  // [batch?][m,k] or [k,m]
          const void* b, Storage b_type,  // [batch?][k,n] or [n,k]
          void* c, Storage c_type,        // [batch][m,n]
          const GemmShape& s, float* workspace);


// ---- cpu_attention.cpp / cpu_flash_attention.cpp ------------------------------------

// S = Q·K^T · scale for every (query, kv) pair (masking is the softmax's job).
template <class T> void attn_scores(const T* q, const T* k, T* s, const AttnShape& a);
// P = softmax over the visible kv positions of each row; masked entries are 0.
template <class T> void attn_softmax(const T* s, T* p, const AttnShape& a);
// O[b,i,h,:] = Σ_j P[b,h,i,j] · V[b,j,h/g,:].
template <class T> void attn_context(const T* p, const T* v, T* o, const AttnShape& a);
// dP = dO·V^T; dV = Σ over the query heads of a group of P^T·dO.
template <class T> void attn_context_bwd(const T* d_o, const T* p, const T* v, T* dp, T* dv,
                                         const AttnShape& a);
// dS = P ⊙ (dP − rowsum(dP ⊙ P)).
template <class T> void attn_softmax_bwd(const T* p, const T* dp, T* ds, const AttnShape& a);
// dQ = scale · dS·K; dK = scale · Σ over the group of dS^T·Q.
template <class T> void attn_scores_bwd(const T* ds, const T* q, const T* k, T* dq, T* dk,
                                        const AttnShape& a);
// Tiled online-softmax attention: O and LSE[b, h, seq_q] (natural log of the softmax
// denominator of the scaled scores). Never holds more than a tile×tile block of scores.
// K and V in the cache's storage C (a.kv).
template <class T, class C = T> void flash_attention(const T* q, const C* k, const C* v, T* o, float* lse,
                                                     const AttnShape& a, int64_t tile = 64);
// Backward of flash_attention recomputing scores tile by tile from Q, K and LSE:
// one sweep owns dK/dV per kv tile, a second owns dQ per query tile (no atomics, no S).
template <class T> void flash_attention_bwd(const T* q, const T* k, const T* v, const T* o,
                                            const T* d_o, const float* lse, T* dq, T* dk, T* dv,
                                            const AttnShape& a, int64_t tile = 64);
// Two attention outputs over disjoint keys joined (cpu_attention_merge.cpp): per query row and
// head, lse = log(e^lse_a + e^lse_b) and o = e^(lse_a − lse)·o_a + e^(lse_b − lse)·o_b; a row
// neither block saw (both −inf) stays empty (o 0, lse −inf). O like Q, LSE [b, h, seq_q].
template <class T> void attn_merge(const T* o_a, const float* lse_a, const T* o_b, const float* lse_b, T* o,
                                   float* lse, const AttnShape& a);

// ---- cpu_norms.cpp: x, y, dx, sum [rows, cols]; gamma, beta, dgamma, dbeta [cols] -----
template <class T> void layernorm(const T* x, const T* gamma, const T* beta, T* y,
                                  int64_t rows, int64_t cols, float eps);
// dgamma and dbeta are overwritten (summed over rows); statistics recomputed from x.
template <class T> void layernorm_bwd(const T* x, const T* gamma, const T* dy, T* dx, T* dgamma,
                                      T* dbeta, int64_t rows, int64_t cols, float eps);
template <class T> void rmsnorm(const T* x, const T* gamma, T* y, int64_t rows, int64_t cols,
                                float eps);
template <class T> void rmsnorm_bwd(const T* x, const T* gamma, const T* dy, T* dx, T* dgamma,
                                    int64_t rows, int64_t cols, float eps);
// sum = a + b (stored, then normalized as stored) and y = rmsnorm(sum), in one pass.
template <class T> void add_rmsnorm(const T* a, const T* b, const T* gamma, T* sum, T* y,
                                    int64_t rows, int64_t cols, float eps);
template <class T> void add_layernorm(const T* a, const T* b, const T* gamma, const T* beta,
                                      T* sum, T* y, int64_t rows, int64_t cols, float eps);

// ---- cpu_pointwise.cpp: n elements ---------------------------------------------------
// y = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
template <class T> void gelu(const T* x, T* y, int64_t n);
template <class T> void gelu_bwd(const T* x, const T* dy, T* dx, int64_t n);
// y = silu(gate) ⊙ up, silu(g) = g·sigmoid(g)
template <class T> void silu_mul(const T* gate, const T* up, T* y, int64_t n);
template <class T> void silu_mul_bwd(const T* gate, const T* up, const T* dy, T* dgate, T* dup,
                                     int64_t n);
template <class T> void residual_add(const T* a, const T* b, T* out, int64_t n);
template <class T> void relu(const T* x, T* y, int64_t n);
template <class T> void relu_bwd(const T* y, const T* dy, T* dx, int64_t n);  // dx = dy where y > 0

// ---- cpu_conv.cpp, cpu_pool.cpp, cpu_batchnorm.cpp (NHWC images, core/graph/op_kind.hpp) ---
// bias [filters] (nullptr: none) added to y, then max(y, 0) when s.relu.
template <class T> void conv2d(const T* x, const T* w, const T* bias, T* y, const ConvShape& s);
template <class T> void conv2d_dgrad(const T* dy, const T* w, T* dx, const ConvShape& s);
template <class T> void conv2d_wgrad(const T* x, const T* dy, T* dw, const ConvShape& s);
template <class T> void maxpool(const T* x, T* y, const ConvShape& s);
template <class T> void maxpool_bwd(const T* x, const T* dy, T* dx, const ConvShape& s);
template <class T> void avgpool(const T* x, T* y, const ConvShape& s);
template <class T> void avgpool_bwd(const T* dy, T* dx, const ConvShape& s);
// x, y [rows, cols] (rows = batch·height·width, cols = channels); mean, rstd, var [cols] fp32.
template <class T> void batchnorm(const T* x, const T* gamma, const T* beta, T* y, float* mean, float* rstd,
                                  int64_t rows, int64_t cols, float eps);
template <class T> void batchnorm_infer(const T* x, const T* gamma, const T* beta, const float* mean,
                                        const float* var, T* y, int64_t rows, int64_t cols, float eps);
template <class T> void batchnorm_bwd(const T* x, const T* gamma, const float* mean, const float* rstd, const T* dy,
                                      T* dx, T* dgamma, T* dbeta, int64_t rows, int64_t cols);
template <class T> void rope(const T* x, T* y, const RopeShape& r);
// The inverse rotation (the transpose of rope's Jacobian).
template <class T> void rope_bwd(const T* dy, T* dx, const RopeShape& r);

// ---- cpu_embedding.cpp ---------------------------------------------------------------
template <class T> void embedding(const int32_t* ids, const T* table,
                                  const std::type_identity_t<T>* positions, T* x,
                                  const EmbeddingShape& e);
// dtable (and dpositions when given) receive the scatter-added dx rows: overwritten, or
// added into with e.accumulate.
template <class T> void embedding_bwd(const int32_t* ids, const T* dx, T* dtable,
                                      std::type_identity_t<T>* dpositions,
                                      const EmbeddingShape& e);

// ---- cpu_loss.cpp --------------------------------------------------------------------
// logits [rows, cols]; targets [rows] int32; loss [rows] fp32 = −log softmax(logits)[target];
// dlogits [rows, cols] (optional) = (softmax − onehot(target)) / mean_rows: the gradient of the
// mean loss over mean_rows rows (0: rows; more when micro-batches share the mean).
template <class T> void cross_entropy(const T* logits, const int32_t* targets, float* loss,
                                      std::type_identity_t<T>* dlogits, int64_t rows, int64_t cols,
                                      int64_t mean_rows = 0);

// ---- cpu_moe.cpp ---------------------------------------------------------------------
// Each token's top_k largest logits (ties: the lower expert) in descending order, weights =
// their softmax; slots assigned in choice order, −1 once the expert holds `capacity` rows.
template <class T> void moe_route(const T* logits, float* weights, int32_t* experts, int32_t* slots,
                                  const MoeShape& s);
// dlogits[t, e_j] = w_j·(dw_j − Σ_i w_i·dw_i) with w recomputed from the chosen logits; 0
// off the chosen experts.
template <class T> void moe_route_bwd(const T* logits, const int32_t* experts, const float* dweights,
                                      float* dlogits, const MoeShape& s);
// xe[e_j, s_j] = x[t]; rows no choice fills are 0.
template <class T> void moe_dispatch(const T* x, const int32_t* experts, const int32_t* slots, T* xe,
                                     const MoeShape& s);
// dx[t] = Σ_j dxe[e_j, s_j] / expert_grad_scale over the kept choices.
template <class T> void moe_dispatch_bwd(const T* dxe, const int32_t* experts, const int32_t* slots,
                                         T* dx, const MoeShape& s);
// y[t] = Σ_j weights[t, j]·ye[e_j, s_j] over the kept choices.
template <class T> void moe_combine(const T* ye, const int32_t* experts, const int32_t* slots,
                                    const float* weights, T* y, const MoeShape& s);
// dye[e_j, s_j] = expert_grad_scale·weights[t, j]·dy[t] (rows no choice fills are 0); dweights[t, j] =
// dy[t]·ye[e_j, s_j] (0 for a dropped choice).
template <class T> void moe_combine_bwd(const T* dy, const T* ye, const int32_t* experts,
                                        const int32_t* slots, const float* weights, T* dye,
                                        float* dweights, const MoeShape& s);

// ---- cpu_adamw.cpp -------------------------------------------------------------------
// Decoupled weight decay then the Adam update (Loshchilov & Hutter, AdamW):
//   p ← p·(1 − lr·wd);  m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²;
//   p ← p − lr · m̂ / (√v̂ + eps),  m̂ = m/(1−β1^t), v̂ = v/(1−β2^t);  weight ← p.
// passes = 1: one sweep over each tensor doing every stage (fused). passes > 1: the four
// stages (decay; m; v; update) are split over min(passes, 4) separate sweeps, as unfused
// framework kernels do. Results are identical either way.
void adamw(const std::vector<AdamWGroup>& groups, const AdamWParams& p, int passes);

// ---- cpu_memory_ops.cpp --------------------------------------------------------------
// k_new's rows into the cache, stored as its storage C says (s.kv).
template <class T, class C = T> void kv_append(const T* k_new, C* cache, const KvAppendShape& s);
// The page row (in units of a kv row) of position j of sequence b; throws std::out_of_range
// when the table names a page outside the pool.
[[nodiscard]] int64_t paged_row(const int32_t* table, const PagedLayout& p, int64_t b, int64_t j);
// kv_append into pages.
template <class T, class C = T> void paged_kv_append(const T* k_new, C* pages, const int32_t* table,
                                                     const KvAppendShape& s, const PagedLayout& p);
// flash_attention reading K and V from pages (a.kv_capacity: the logical rows per sequence).
template <class T, class C = T> void paged_flash_attention(const T* q, const C* k_pages, const C* v_pages,
                                                           const int32_t* table, const PagedLayout& p, T* o,
                                                           float* lse, const AttnShape& a);
// x [batch·seq, cols] -> y [batch, cols]: each sequence's last row.
template <class T> void slice_last_token(const T* x, T* y, int64_t batch, int64_t seq, int64_t cols);
// y = x, converting between float storages when they differ.
void copy_tensor(const void* x, Storage x_type, void* y, Storage y_type, int64_t n);

// ---- cpu_varlen.cpp: a serving engine's step, T tokens of S sequences packed (varlen kinds) --
// Throws std::out_of_range when the metadata breaks the rules above or names a page outside
// the pool.
// K/V pages in the cache's storage C (a.kv).
template <class T, class C = T> void varlen_flash_attention(const T* q, const C* k_pages, const C* v_pages,
                                                            const int32_t* table, const int32_t* query_start,
                                                            const int32_t* kv_len, T* o, float* lse,
                                                            const VarlenAttnShape& a);
// rope with token t at positions[t] (r.seq and r.position unused); a negative position throws
// std::out_of_range. Defined beside rope (cpu_pointwise.cpp), whose rotation it shares.
template <class T> void rope_at(const T* x, const int32_t* positions, T* y, const RopeShape& r);
// Row t of k_new [tokens, row] into pool row slots[t] of pages [pool_rows, row], stored as the
// pages' storage C says (kv); a slot of −1 is skipped, one past the pool throws std::out_of_range.
template <class T, class C = T> void kv_append_slots(const T* k_new, C* pages, const int32_t* slots, int64_t tokens,
                                                     int64_t row, int64_t pool_rows, const ops::KvStorage& kv = {});
// y[i] = x[rows[i]] for i < n; x [x_rows, cols], y [n, cols]; a row outside x throws.
template <class T> void gather_rows(const T* x, const int32_t* rows, T* y, int64_t n, int64_t x_rows,
                                    int64_t cols);

}  // namespace perfsim::cpu

// GEMMs through cuBLASLt with cpu::gemm's row-major semantics:
//   C[batch][m, n] (+)= op(A)[m, k] · op(B)[k, n],  A stored [m, k] or [k, m] (trans_a),
//   B stored [k, n] or [n, k] (trans_b), broadcast_a/b: one operand shared by every batch.
// cuBLASLt is column-major; a row-major X[r, c] is the column-major X^T, so the engine
// computes C^T = op(B)^T · op(A)^T: cuBLASLt's "A" is our B and its "B" is our A, with
// M = n, N = m, K = k. Batches are strided (stride 0 for a broadcast operand).
// Precisions: fp32 (compute 32F), tf32 (32F_FAST_TF32 on fp32 storage), bf16/fp16 inputs
// with fp32 accumulation (C fp32 or the input type), fp8 e4m3 inputs with per-tensor
// dequantization scales (device pointers) and a bf16/fp16/fp32 C. cuBLASLt's fp8 kernels
// take only the "TN" form (its A transposed, its B not), which in row-major terms means
// trans_b = true and trans_a = false; gemm() refuses other fp8 layouts. fp8 inference
// weights are stored in that form once at fill time (cuda_fp8_gemm.cpp); other operands are
// quantized/transposed into it per call.
// Plans are cached per (shape, types, layout); the 32 MiB workspace is allocated once per
// engine. Autotuning (on by default): the first call of a new plan on a stream that is not
// capturing times cuBLASLt's top autotune_candidates heuristic algorithms on the call's own
// operands (warm-up launches, then the median of autotune_timed launches each) and keeps the
// fastest, where a later candidate must be autotune_margin faster than the best so far. When
// the operands would fit in L2, each timed launch starts with it flushed (a memset of twice
// its size, untimed): in a step they come from memory, and a skinny GEMM's weight would
// otherwise be timed from L2, where another algorithm wins. The timing launches write a
// scratch C (cudaMalloc'd for the tuning and freed before the real launch, outside the
// backend's allocator: not in the measured peak), zeroed
// first, with the call's beta, so an accumulating C is written once, by the real launch. A
// plan first needed while its stream captures a CUDA graph keeps the first heuristic for that
// capture (no synchronization is allowed there) and is tuned at its next eager call.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "backends/ops/kernel_shapes.hpp"
#include "backends/cuda/cuda_convert.hpp"

namespace perfsim::cuda {

class NcclRanks;

struct GemmOperand {
  const void* data = nullptr;
  Elem type = Elem::f32;
  const float* scale = nullptr;  // e4m3 only: device pointer to the dequantization scale
};

class GemmEngine {
 public:
  GemmEngine();
  GemmEngine(const GemmEngine&) = delete;
  GemmEngine& operator=(const GemmEngine&) = delete;
  ~GemmEngine();

  static constexpr std::size_t workspace_bytes = 32u << 20;

  // c (+)= op(a)·op(b) per `s`; tf32 selects the TF32 tensor-core mode for fp32 storage.
  // Asynchronous on `stream`, capturable. Throws NotExecutable for type combinations or
  // fp8 layouts cuBLASLt does not run (see supported()).
  void gemm(const GemmOperand& a, const GemmOperand& b, void* c, Elem c_type, const ops::GemmShape& s,
            bool tf32, cudaStream_t stream);

  // W8A8 (cuda_int8_gemm.cpp): c [m, n] int32 = a [m, k] int8 · w^T with w stored [n, k] int8,
  // the only form cuBLASLt's int8 tensor-core kernels take (TN). Plans cached per shape, with
  // cuBLASLt's first heuristic algorithm. Asynchronous on `stream`, capturable once planned.
  void int8_gemm(const int8_t* a, const int8_t* w_nk, int32_t* c, int64_t m, int64_t n, int64_t k,
                 cudaStream_t stream);
  // "" when int8_gemm() runs this shape; otherwise why not.
  [[nodiscard]] static std::string int8_unsupported(int64_t m, int64_t n, int64_t k);

  // "" when gemm() runs these types and this layout directly; otherwise why not.
  [[nodiscard]] static std::string unsupported(Elem a, Elem b, Elem c, const ops::GemmShape& s);

  // Heuristic cache entries (for tests: a repeated shape must not add one).
  [[nodiscard]] std::size_t cached_plans() const { return m_plans.size(); }

  // Autotuning on (default) or off (every plan keeps cuBLASLt's first heuristic algorithm).
  // Switching it on later tunes existing plans at their next eager call.
  void set_autotune(bool on) { m_autotune = on; }
  [[nodiscard]] bool autotune() const { return m_autotune; }
  // Plans whose algorithm was chosen by timing (for tests and benchmarks).
  [[nodiscard]] std::size_t tuned_plans() const;
  // A rank of a parallel run (null: none): tuning waits for its stream by polling, watching the
  // NCCL communicators (stream_wait.hpp), since collectives may be queued ahead of it.
  void watch(NcclRanks* ranks) { m_ranks = ranks; }

  static constexpr int autotune_candidates = 8;  // heuristic algorithms requested and timed
  static constexpr int autotune_warmup = 2;      // untimed launches per candidate
  static constexpr int autotune_timed = 5;       // timed launches per candidate (median kept)
  static constexpr float autotune_margin = 0.03f; // a candidate must be this much faster to win

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;  // cuBLASLt's A, B, C=D
    cublasLtMatmulAlgo_t algo{};                     // the algorithm gemm() launches
    std::vector<cublasLtMatmulAlgo_t> candidates;     // heuristic order; candidates[0] is the default
    bool tuned = false;                               // algo chosen by timing the candidates
  };
  // batch, m, n, k, trans_a, trans_b, broadcast_a, broadcast_b, a, b, c, tf32
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, bool, bool, bool, bool, int, int, int, bool>;
  Plan& plan_for(const GemmOperand& a, const GemmOperand& b, Elem c_type, const ops::GemmShape& s, bool tf32);
  // Times p.candidates on these operands into a scratch C and sets p.algo to the fastest.
  void tune(Plan& p, const GemmOperand& a, const GemmOperand& b, Elem c_type, const ops::GemmShape& s, float beta,
            cudaStream_t stream);

  static void destroy(Plan& p);

  // The L2 flush buffer, allocated at the first tuning (0 bytes: none could be).
  void ensure_flush_buffer();

  cublasLtHandle_t m_handle = nullptr;
  void* m_workspace = nullptr;  // [workspace_bytes]
  void* m_flush = nullptr;      // [m_flush_bytes], outside the backend's allocator
  std::size_t m_flush_bytes = 0;
  bool m_flush_tried = false;
  std::map<Key, Plan> m_plans;
  std::map<std::tuple<int64_t, int64_t, int64_t>, Plan> m_int8_plans;  // by m, n, k
  bool m_autotune = true;
  NcclRanks* m_ranks = nullptr;
};

}  // namespace perfsim::cuda

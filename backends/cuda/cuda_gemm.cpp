// GemmEngine (see cuda_gemm.hpp): operand swap for row-major data, one cached cuBLASLt plan
// (descriptor, layouts, heuristic candidates, chosen algorithm) per shape/type/layout key, and
// the autotuning that times the candidates on the first eager call.
#include "backends/cuda/cuda_gemm.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/stream_wait.hpp"
#include "core/errors.hpp"

namespace perfsim::cuda {

namespace {

cudaDataType_t cuda_type(Elem e) {
  switch (e) {
    case Elem::f32: return CUDA_R_32F;
    case Elem::bf16: return CUDA_R_16BF;
    case Elem::f16: return CUDA_R_16F;
    case Elem::e4m3: return CUDA_R_8F_E4M3;
    default: throw NotExecutable(fmt::format("cuda gemm: no cuBLASLt type for {} operands", name_of(e)));
  }
}

bool is_float(Elem e) { return e == Elem::f32 || e == Elem::bf16 || e == Elem::f16; }

// A row-major [rows, cols] block seen by cuBLASLt (column-major): cols rows of length... i.e.
// a column-major matrix with `cols` rows, `rows` columns and leading dimension cols.
cublasLtMatrixLayout_t make_layout(cudaDataType_t t, int64_t rows_rm, int64_t cols_rm, int64_t batch,
                                   int64_t stride) {
  cublasLtMatrixLayout_t l = nullptr;
  PERFSIM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, t, static_cast<uint64_t>(cols_rm),
                                                  static_cast<uint64_t>(rows_rm), cols_rm));
  if (batch > 1) {
    const auto count = static_cast<int32_t>(batch);
    PERFSIM_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
    PERFSIM_CUBLAS_CHECK(
        cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
  }
  return l;
}

// True when `stream` is capturing a CUDA graph, or when asking is itself illegal (the legacy
// stream while another stream captures in global mode): then nothing may synchronize.
bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
    (void)cudaGetLastError();
    return true;
  }
  return status != cudaStreamCaptureStatusNone;
}

// Events and scratch of one tuning, released on every exit path.
struct TuningResources {
  std::array<cudaEvent_t, 2 * GemmEngine::autotune_timed> events{};  // before, after each timed launch
  void* scratch = nullptr;  // [batch, m, n] of the C type
  ~TuningResources() {
    for (cudaEvent_t e : events)
      if (e != nullptr) (void)cudaEventDestroy(e);
    if (scratch != nullptr) (void)cudaFree(scratch);
  }
};

}  // namespace

GemmEngine::GemmEngine() {
  PERFSIM_CUBLAS_CHECK(cublasLtCreate(&m_handle));
  PERFSIM_CUDA_CHECK(cudaMalloc(&m_workspace, workspace_bytes));
}

void GemmEngine::destroy(Plan& p) {
  (void)cublasLtMatrixLayoutDestroy(p.a);
  (void)cublasLtMatrixLayoutDestroy(p.b);
  (void)cublasLtMatrixLayoutDestroy(p.c);
  (void)cublasLtMatmulDescDestroy(p.desc);
}

GemmEngine::~GemmEngine() {
  for (auto& [key, p] : m_plans) destroy(p);
  for (auto& [key, p] : m_int8_plans) destroy(p);
  (void)cudaFree(m_workspace);
  if (m_flush != nullptr) (void)cudaFree(m_flush);
  (void)cublasLtDestroy(m_handle);
}

void GemmEngine::ensure_flush_buffer() {
  if (m_flush_tried) return;
  m_flush_tried = true;
  int device = 0, l2 = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device) != cudaSuccess || l2 <= 0) {
    (void)cudaGetLastError();
    return;
  }
  const std::size_t bytes = 2 * static_cast<std::size_t>(l2);
  if (cudaMalloc(&m_flush, bytes) != cudaSuccess) {
    (void)cudaGetLastError();  // no room: tuning times warm operands
    m_flush = nullptr;
    return;
  }
  m_flush_bytes = bytes;
}

std::string GemmEngine::unsupported(Elem a, Elem b, Elem c, const ops::GemmShape& s) {
  if (!is_float(c)) return fmt::format("cuda gemm writes f32, bf16 or f16, not {}", name_of(c));
  if (a == Elem::e4m3 || b == Elem::e4m3) {
    if (a != b) return "cuda fp8 gemm needs both inputs in e4m3";
    if (s.trans_a || !s.trans_b)
      return "cuBLASLt fp8 gemm takes only the TN layout (row-major: trans_a = false, trans_b = true)";
    if (s.k % 16 != 0 || s.n % 16 != 0)
      return fmt::format("cuBLASLt fp8 gemm needs k and n to be multiples of 16 (k = {}, n = {})", s.k, s.n);
    return {};
  }
  if (!is_float(a) || a != b)
    return fmt::format("cuda gemm needs A and B of one float type (got {} and {})", name_of(a), name_of(b));
  if (a == Elem::f32 && c != Elem::f32) return "cuda fp32 gemm writes fp32 only";
  if (a != Elem::f32 && c != a && c != Elem::f32)
    return fmt::format("cuda {} gemm writes {} or f32, not {}", name_of(a), name_of(a), name_of(c));
  return {};
}

GemmEngine::Plan& GemmEngine::plan_for(const GemmOperand& a, const GemmOperand& b, Elem c_type,
                                       const ops::GemmShape& s, bool tf32) {
  const Key key{s.batch, s.m, s.n, s.k, s.trans_a, s.trans_b, s.broadcast_a, s.broadcast_b,
                static_cast<int>(a.type), static_cast<int>(b.type), static_cast<int>(c_type), tf32};
  if (auto it = m_plans.find(key); it != m_plans.end()) return it->second;

  const bool fp8 = a.type == Elem::e4m3;
  const cublasComputeType_t compute =
      tf32 && a.type == Elem::f32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  Plan p;
  PERFSIM_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, compute, CUDA_R_32F));
  // cuBLASLt's A is our B, its B our A (C^T = op(B)^T · op(A)^T).
  const cublasOperation_t op_lt_a = s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_lt_b = s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  PERFSIM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_lt_a, sizeof(op_lt_a)));
  PERFSIM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_lt_b, sizeof(op_lt_b)));
  if (fp8) {
    // Hopper's fp8 kernels accumulate in fp22 unless asked to promote to fp32 regularly.
    const int8_t fast_accum = 0;
    PERFSIM_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast_accum, sizeof(fast_accum)));
  }
  // Stored (row-major) shapes of our operands.
  const int64_t b_rows = s.trans_b ? s.n : s.k, b_cols = s.trans_b ? s.k : s.n;
  const int64_t a_rows = s.trans_a ? s.k : s.m, a_cols = s.trans_a ? s.m : s.k;
  p.a = make_layout(cuda_type(b.type), b_rows, b_cols, s.batch, s.broadcast_b ? 0 : s.k * s.n);
  p.b = make_layout(cuda_type(a.type), a_rows, a_cols, s.batch, s.broadcast_a ? 0 : s.m * s.k);
  p.c = make_layout(cuda_type(c_type), s.m, s.n, s.batch, s.m * s.n);

  cublasLtMatmulPreference_t pref = nullptr;
  PERFSIM_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = workspace_bytes;
  PERFSIM_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                            sizeof(ws)));
  std::array<cublasLtMatmulHeuristicResult_t, autotune_candidates> results{};
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(m_handle, p.desc, p.a, p.b, p.c, p.c, pref,
                                                           autotune_candidates, results.data(), &found);
  (void)cublasLtMatmulPreferenceDestroy(pref);
  if (st == CUBLAS_STATUS_SUCCESS)
    for (int i = 0; i < found; ++i)
      if (results[static_cast<std::size_t>(i)].state == CUBLAS_STATUS_SUCCESS)
        p.candidates.push_back(results[static_cast<std::size_t>(i)].algo);
  if (p.candidates.empty()) {
    (void)cublasLtMatrixLayoutDestroy(p.a);
    (void)cublasLtMatrixLayoutDestroy(p.b);
    (void)cublasLtMatrixLayoutDestroy(p.c);
    (void)cublasLtMatmulDescDestroy(p.desc);
    throw NotExecutable(fmt::format(
        "cuBLASLt has no algorithm for batch {} m {} n {} k {} ({}·{} -> {}, trans_a {}, trans_b {}) (status {})",
        s.batch, s.m, s.n, s.k, name_of(a.type), name_of(b.type), name_of(c_type), s.trans_a, s.trans_b,
        static_cast<int>(st)));
  }
  p.algo = p.candidates.front();
  return m_plans.emplace(key, std::move(p)).first->second;
}

std::size_t GemmEngine::tuned_plans() const {
  return static_cast<std::size_t>(
      std::count_if(m_plans.begin(), m_plans.end(), [](const auto& kv) { return kv.second.tuned; }));
}

void GemmEngine::tune(Plan& p, const GemmOperand& a, const GemmOperand& b, Elem c_type, const ops::GemmShape& s,
                      float beta, cudaStream_t stream) {
  p.tuned = true;  // also when it fails below: the first heuristic stays, no retry per call
  if (p.candidates.size() < 2) return;
  ensure_flush_buffer();
  TuningResources r;
  const std::size_t c_bytes = static_cast<std::size_t>(s.batch * s.m * s.n) * static_cast<std::size_t>(bytes_of(c_type));
  if (cudaMalloc(&r.scratch, c_bytes) != cudaSuccess) {
    (void)cudaGetLastError();  // no room for a scratch C: keep the first heuristic
    r.scratch = nullptr;
    return;
  }
  // Finite, so that beta = 1 reads the same kind of values as the real launch does.
  PERFSIM_CUDA_CHECK(cudaMemsetAsync(r.scratch, 0, c_bytes, stream));
  for (cudaEvent_t& e : r.events) PERFSIM_CUDA_CHECK(cudaEventCreate(&e));
  // Flush only operands that L2 could hold between launches: a larger GEMM streams them from
  // memory anyway, and its timings back to back stay as steady as in a step.
  const auto bytes = [](Elem e, int64_t copies, int64_t rows, int64_t cols) {
    return static_cast<std::size_t>(copies * rows * cols) * static_cast<std::size_t>(bytes_of(e));
  };
  const std::size_t operand_bytes = bytes(a.type, s.broadcast_a ? 1 : s.batch, s.m, s.k) +
                                    bytes(b.type, s.broadcast_b ? 1 : s.batch, s.k, s.n) + c_bytes;
  const bool flush = m_flush != nullptr && operand_bytes <= m_flush_bytes;
  const float alpha = 1.0f;
  auto launch = [&](const cublasLtMatmulAlgo_t& algo) {
    return cublasLtMatmul(m_handle, p.desc, &alpha, b.data, p.a, a.data, p.b, &beta, r.scratch, p.c, r.scratch, p.c,
                          &algo, m_workspace, workspace_bytes, stream);
  };
  float best_ms = 0;
  const cublasLtMatmulAlgo_t* best = nullptr;
  for (const cublasLtMatmulAlgo_t& algo : p.candidates) {
    bool ok = true;
    for (int i = 0; i < autotune_warmup && ok; ++i) ok = launch(algo) == CUBLAS_STATUS_SUCCESS;
    if (!ok) continue;  // the heuristic offered it, but it refuses these operands: skip it
    for (int i = 0; i < autotune_timed && ok; ++i) {
      if (flush) PERFSIM_CUDA_CHECK(cudaMemsetAsync(m_flush, i, m_flush_bytes, stream));
      PERFSIM_CUDA_CHECK(cudaEventRecord(r.events[2 * static_cast<std::size_t>(i)], stream));
      ok = launch(algo) == CUBLAS_STATUS_SUCCESS;
      PERFSIM_CUDA_CHECK(cudaEventRecord(r.events[2 * static_cast<std::size_t>(i) + 1], stream));
    }
    wait_event(r.events.back(), m_ranks);
    if (!ok) continue;
    std::array<float, autotune_timed> ms{};
    for (std::size_t i = 0; i < ms.size(); ++i)
      PERFSIM_CUDA_CHECK(cudaEventElapsedTime(&ms[i], r.events[2 * i], r.events[2 * i + 1]));
    std::sort(ms.begin(), ms.end());
    const float median = ms[ms.size() / 2];
    // A later candidate must beat the best so far (the heuristic's order first) by a clear
    // margin: between near-equal algorithms, timing noise would otherwise pick differently
    // in each process and the same op would run at different speeds from run to run.
    if (best == nullptr || median < best_ms * (1 - autotune_margin)) best = &algo, best_ms = median;
  }
  if (best != nullptr) p.algo = *best;
}

void GemmEngine::gemm(const GemmOperand& a, const GemmOperand& b, void* c, Elem c_type, const ops::GemmShape& s,
                      bool tf32, cudaStream_t stream) {
  if (const std::string why = unsupported(a.type, b.type, c_type, s); !why.empty()) throw NotExecutable(why);
  Plan& p = plan_for(a, b, c_type, s, tf32);
  if (a.type == Elem::e4m3) {
    if (a.scale == nullptr || b.scale == nullptr) throw NotExecutable("cuda fp8 gemm needs scale pointers for A and B");
    // Per call: the scales live with the operands (cuBLASLt's A scale is our B's).
    PERFSIM_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &b.scale, sizeof(b.scale)));
    PERFSIM_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &a.scale, sizeof(a.scale)));
  }
  const float alpha = 1.0f, beta = s.accumulate ? 1.0f : 0.0f;
  if (m_autotune && !p.tuned && !capturing(stream)) tune(p, a, b, c_type, s, beta, stream);
  PERFSIM_CUBLAS_CHECK(cublasLtMatmul(m_handle, p.desc, &alpha, b.data, p.a, a.data, p.b, &beta, c, p.c, c, p.c,
                                      &p.algo, m_workspace, workspace_bytes, stream));
}

}  // namespace perfsim::cuda

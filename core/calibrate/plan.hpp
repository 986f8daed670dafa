// What `perfsim calibrate` measures on a backend: the GEMM grid, the calibration models and
// workloads whose graphs give the kernel curves, the launch chain, host-copy sizes and
// collective sizes, in a full and a --quick variant. Sizes are chosen off the validation
// models (Llama-3-8B, GPT-2 medium) so validation never reads a curve at a fitted point.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/graph/op_kind.hpp"
#include "core/passes/passes.hpp"
#include "core/run/backend.hpp"
#include "core/config/model.hpp"
#include "core/config/workload.hpp"

namespace perfsim {

struct GemmSweepPlan {
  std::vector<DType> dtypes;
  std::vector<int64_t> m, n, k;        // ascending grid axes (m counts rows)
  // Budgets (0: none). A FLOP cap gives every dtype the same shapes; a time cap at the
  // datasheet peak would stop fp32 cells (15x slower peak than bf16) where their efficiency
  // still climbs. The CPU plans use the time cap: it bounds calibration time on any host.
  double max_roofline_seconds = 0;     // cells slower than this at the datasheet peak are skipped
  double max_cell_flops = 0;           // cells of more FLOPs than this are skipped
  double max_cell_bytes = 0;           // cells whose operands exceed this are skipped
  double max_graph_bytes = 0;          // operands of the cells packed into one graph
};

// One graph of the kernel sweep: a calibration model, a workload, the stack it is built with.
struct KernelCase {
  ModelConfig model;
  Workload workload;
  std::vector<StackStep> stack;        // all steps applied (the last step's graph is run)
  bool eager_pair = false;             // also run eagerly: pairs for launch_eager
};

// Decode steps of the serving engine, as it runs them (its step graph on an engine session):
// `seqs` sequences at `context` keys each, over a paged cache (fp8 when `fp8_kv`); their varlen
// attention kernels feed the "varlen_decode" curves.
struct EngineAttentionCase {
  ModelConfig model;
  int64_t seqs = 1, context = 512;
  bool fp8_kv = false;
};

struct CalibrationPlan {
  std::string mode;                    // "full" or "quick"
  RunOptions run;
  // CUDA: graphs are replayed from CUDA graphs, so per-op times are kernel + graph gap, and
  // eager runs of some cases give the eager launch cost. The CPU backend has no graph mode.
  bool graph_mode = false;
  GemmSweepPlan gemm;
  // fp8 on a grid of its own: its weights are quantized on the host at fill time, so the grid
  // is smaller (empty dtypes: none).
  GemmSweepPlan fp8_gemm;
  // GEMMs with a leading dimension off 16 bytes (odd n or k, as a 50257-token vocabulary
  // makes): only the grid's unaligned cells run, into curves of their own (empty dtypes: none).
  GemmSweepPlan unaligned_gemm;
  std::vector<KernelCase> kernels;
  std::vector<EngineAttentionCase> engine_attention;  // empty: no such sweep
  int launch_chain_ops = 200;
  int64_t launch_chain_elements = 256;
  std::vector<double> copy_bytes;      // empty: no host-link sweep
  std::string copy_skip_reason;
  std::vector<Collective> collectives;
  std::vector<double> collective_bytes;
};

// The plan for a backend ("cuda" or "cpu"; other names get the CPU plan: small sizes).
[[nodiscard]] CalibrationPlan make_calibration_plan(const std::string& backend, bool quick);

}  // namespace perfsim

// Runs one graph op on the GPU: derives its shapes with backends/ops/op_shapes.hpp, stages operands whose storage differs from what the kernel takes, and calls the
// launcher of backends/cuda/kernels/<op>.cuh, or cuBLASLt for GEMMs, on the op's stream. A
// `copy` with a host side is a cudaMemcpyAsync on that stream (upload or download, by the
// residences). Converted copies and kernel workspaces are carved out of ONE block per op of
// exactly workspace_bytes(op, g, device_profile) (core/cost/workspace.hpp), taken from the caching
// allocator under TensorRole::workspace: the memory model plans the same bytes. A kernel
// whose workspace does not fit the planned block is not launched (std::logic_error).
#pragma once
#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/cuda_allocator.hpp"
#include "backends/cuda/cuda_blas.hpp"
#include "backends/cuda/cuda_gemm.hpp"
#include "backends/cuda/nccl_ranks.hpp"
#include "backends/ops/kernel_table.hpp"
#include "core/cost/hardware.hpp"
#include "core/graph/graph.hpp"

namespace perfsim::cuda {

// "" when the CUDA backend can run op; otherwise why not (a collective, a host op, an op
// whose kernel is not built yet, an fp8 GEMM shape cuBLASLt refuses, a copy between two host
// tensors, a copy from or to pageable memory in a graph that cuda_graphs captures when
// such copies cannot be captured).
[[nodiscard]] std::string op_unsupported_reason(const Op& op, const Graph& g);

// Whether a cudaMemcpyAsync between pageable host memory and the device can be captured into
// a CUDA graph and replays correctly. It can on the H100 with CUDA 13 / driver 580: the copy
// becomes a memcpy node and each replay moves the host buffer's current contents, both ways
// (tests/gpu/test_cuda_host_copy.cpp checks the driver against this constant). When false,
// graphed graphs with a pageable copy are unsupported with pageable_capture_message.
inline constexpr bool pageable_copies_capturable = true;
inline constexpr const char* pageable_capture_message =
    "cuda_graphs cannot capture a copy from pageable memory: add pinned_memory before cuda_graphs";

// How an e4m3 tensor is stored. cuBLASLt's fp8 kernels take only the TN form (row-major B
// stored [n, k]), so a persistent e4m3 tensor that fp8 GEMMs read only as operand B with
// trans_b = false, all with one [batch][k, n] layout, is stored transposed, [batch][n, k],
// quantized once at fill time (GraphRunner): the GEMM then reads it in place, as real fp8
// inference stores its weights. Its bytes per element (1) are those of the graph's tensor.
struct Fp8Storage {
  bool transposed = false;  // stored [batch][n, k] instead of the graph's [batch][k, n]
  int64_t batch = 1, k = 0, n = 0;
};
// By tensor id (default entries for every other tensor).
[[nodiscard]] std::vector<Fp8Storage> fp8_storage(const Graph& g);

class OpExecutor {
 public:
  // Plans every op's workspace for the current device and allocates what the executor holds
  // all step (fused AdamW descriptors; the cuBLAS workspace is counted under workspace).
  // With `ranks`, g is one rank's graph: its vocabulary-parallel ops (ops::on_vocab_shard) run
  // with their NCCL exchanges (cuda_vocab_parallel.hpp), and the executor's waits for a stream
  // watch the communicators (stream_wait.hpp).
  OpExecutor(const Graph& g, CachingAllocator& alloc, GemmEngine& gemm, cudaStream_t stream,
             NcclRanks* ranks = nullptr);
  OpExecutor(const OpExecutor&) = delete;
  OpExecutor& operator=(const OpExecutor&) = delete;
  ~OpExecutor();

  // Whether the executor runs kind k: one of its own paths or an entry of the kernel table.
  [[nodiscard]] static bool runs(OpKind k);

  // op: checked by the caller once per graph (ops::check_op, op_unsupported_reason: the
  // GraphRunner's constructor does), not again here, on the eager dispatch path.
  // buffers[id]: device data of tensor id (every operand of op allocated by the caller);
  // scales[id]: device dequantization scale of an e4m3 tensor (nullptr otherwise).
  // capturing: a CUDA graph is being captured (no host-to-device uploads allowed).
  // stream: where the op runs. hold_scratch: keep the op's kernel workspaces until
  // release_held_scratch() (an op on a side stream may still be running when the next op is
  // issued, so its workspace must not go back to the allocator yet).
  void run(const Op& op, const std::vector<void*>& buffers, const std::vector<float*>& scales,
           bool capturing, cudaStream_t stream, bool hold_scratch = false);
  // Returns the held workspaces to the allocator (call once the side streams are joined).
  void release_held_scratch();
  // Ops whose kernels used fewer workspace bytes than planned ("name: used / planned"); empty
  // when core/cost/workspace.cpp mirrors the kernels exactly (checked by the GPU tests).
  [[nodiscard]] const std::vector<std::string>& workspace_mismatches() const { return m_ws_mismatches; }
  // fp8_storage(graph), by tensor id: the runner fills and reads e4m3 tensors accordingly.
  [[nodiscard]] const std::vector<Fp8Storage>& fp8_layouts() const { return m_fp8_storage; }

 private:
  // The kinds with a path of their own (operands in several storages, the executor's state):
  // GEMMs (cuBLASLt, fp8), AdamW (device descriptors), copies (host transfers). Every other
  // kind is run_generic's: staged operands and the kernel table (cuda_kernel_table.hpp).
  using OwnPath = void (OpExecutor::*)(const Op&, const std::vector<void*>&, const std::vector<float*>&, bool);
  [[nodiscard]] static const ops::KernelTable<OwnPath>& own_paths();
  void run_any_gemm(const Op& op, const std::vector<void*>& buf, const std::vector<float*>& scales, bool capturing);
  void run_adamw(const Op& op, const std::vector<void*>& buf, const std::vector<float*>& scales, bool capturing);
  void run_copy(const Op& op, const std::vector<void*>& buf, const std::vector<float*>& scales, bool capturing);
  void run_gemm(const Op& op, const std::vector<void*>& buf, const std::vector<float*>& scales);
  // run_gemm after C holds what it accumulates onto; b_ready: a B operand already in the op's
  // float type (a dequantized weight) instead of the graph's.
  void run_float_gemm(const Op& op, const std::vector<void*>& buf, const std::optional<GemmOperand>& b_ready);
  void run_quantized_gemm(const Op& op, const std::vector<void*>& buf);  // cuda_quantized_gemm.cpp
  void run_fp8_gemm(const Op& op, const std::vector<void*>& buf, const std::vector<float*>& scales);
  void run_generic(const Op& op, const std::vector<void*>& buf);
  void run_host_copy(const Op& op, const std::vector<void*>& buf, bool capturing);
  void run_device_copy(const Op& op, const std::vector<void*>& buf);
  void copy_if_distinct(const std::vector<void*>& buf, int from, int to);
  // The next `bytes` (rounded to workspace_alignment) of the op's workspace block.
  void* scratch(std::size_t bytes);
  // Scratch the plan may not hold (core/cost/workspace.cpp has no entry for the
  // vocabulary-parallel loss's row statistics): from the block when it has the room left, else
  // allocated beside it and released (or held) with it.
  void* scratch_or_extra(std::size_t bytes);
  void begin_workspace(const Op& op);
  void end_workspace(const Op& op, bool hold);
  // A cuBLAS handle when g has materialized attention products (created here, before any
  // capture, since cublasCreate allocates), else null.
  [[nodiscard]] static std::unique_ptr<BlasHandle> make_attention_blas(const Graph& g);

  struct UploadedDescriptors {
    std::vector<unsigned char> host;  // what the device copy holds
    void* device = nullptr;
  };

  const Graph& m_graph;
  CachingAllocator& m_alloc;
  GemmEngine& m_gemm;
  cudaStream_t m_stream;                             // the current op's stream
  std::vector<Fp8Storage> m_fp8_storage;             // by tensor id
  std::vector<void*> m_in, m_out;                    // run_generic's operands, reused per op
  std::map<int, std::size_t> m_ws_planned;           // op id -> workspace_bytes (non-zero only)
  void* m_ws_block = nullptr;                        // the current op's workspace
  std::size_t m_ws_size = 0, m_ws_used = 0;          // its planned and carved bytes
  std::vector<std::string> m_ws_mismatches;
  std::vector<void*> m_extra;                        // the current op's scratch_or_extra allocations
  std::vector<void*> m_held_scratch;                 // side-stream ops' workspaces, until the join
  NcclRanks* m_ranks = nullptr;                      // a rank's graph: vocabulary ops, polled waits
  std::map<int, UploadedDescriptors> m_adamw_desc;   // op id -> fused AdamW descriptors
  std::unique_ptr<BlasHandle> m_blas;                // materialized attention's batched GEMMs
};

}  // namespace perfsim::cuda

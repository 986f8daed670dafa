-- hardware.lua: the hardware catalog. Peaks are dense (no 2:4 sparsity) FLOP/s from the
-- vendor datasheets cited per entry; 0 means the precision has no hardware support.
-- Units: bytes, bytes/s (decimal, as datasheets print them; L2 sizes in MiB), seconds.
-- Efficiency tables are datasheet-era defaults, uncalibrated (`perfsim calibrate` fits them).
-- price_per_hour: USD per GPU-hour, an on-demand cloud list price cited per entry (0 = unknown);
-- prices move, so override it with your own: hardware("A100-80GB", {price_per_hour = 1.5}).
local T = 1e12      -- tera (FLOP/s, bytes/s)
local GB = 1e9
local MiB = 1024 * 1024

-- Typical figures, not datasheet values: a CUDA kernel launch costs ~4 us of CPU/GPU
-- latency when issued eagerly and ~1 us per kernel when replayed from a CUDA graph.
local LAUNCH_EAGER = 4e-6
local LAUNCH_GRAPH = 1e-6
-- Host seconds to issue one kernel eagerly: the same ~4 us (the host issues kernels no faster
-- than it launches them), so an op of many kernels (materialized attention's per-head GEMM
-- calls) waits for its issue. Calibration measures it per op kind.
local DISPATCH_EAGER = LAUNCH_EAGER
-- Typical host work per step of a lean C++ runtime (sampling, bookkeeping); Python serving
-- frameworks spend 10-100x more. Calibration replaces it.
local HOST_OVERHEAD = 10e-6
-- Host work of perfsim's own serving engine per eagerly run engine step (building the step's
-- graph, writing its inputs, planning): what `perfsim calibrate` fitted on an H200's machine on
-- 2026-11-29 (stdlib/profiles/h200-local.lua: 611 µs per step and 1.23 µs per op). A property of
-- the host CPU more than of the GPU; CUDA-graph replays skip it. Calibration replaces it.
local ENGINE_HOST_PER_STEP = 611e-6
local ENGINE_HOST_PER_OP = 1.23e-6
-- Typical per-message latencies (alpha) of NCCL point-to-point transfers on each link kind.
local NVLINK_LATENCY = 2e-6
local PCIE_LATENCY = 5e-6
local IB_LATENCY = 5e-6
-- Bytes/s one host thread copies in DRAM, which bounds the staging copy of a transfer from
-- pageable memory: a single core reaches ~10-20 GB/s in STREAM Copy on current x86 servers
-- (McCalpin, STREAM benchmark, https://www.cs.virginia.edu/stream/); the low end, to be
-- conservative.
local HOST_COPY_BANDWIDTH = 10 * GB
-- GPUs one NVLink board joins in the 8-GPU HGX/DGX servers of the SXM parts (the largest
-- single-node configuration their datasheets list); a collective over more GPUs crosses nodes
-- and runs over InfiniBand. PCIe cards leave it unknown (0).
local HGX_GPUS = 8
-- One InfiniBand NDR 400 Gb/s NIC per GPU = 50 GB/s per direction
-- (https://www.nvidia.com/en-us/networking/infiniband-adapters/).
local INFINIBAND_NDR = 50 * GB

-- Fraction of the dense peak reached per op class (documented defaults, not measurements).
local COMPUTE_EFFICIENCY = {
  gemm = 0.75,      -- large cuBLAS GEMMs reach ~70-80% of dense peak (NVIDIA Matrix Multiplication
                    -- Background guide, docs.nvidia.com/deeplearning/performance)
  attention = 0.5,  -- FlashAttention-2 forward reaches 50-73% of A100 peak (Dao 2023, arXiv:2307.08691);
                    -- unfused attention runs small per-head GEMMs that do no better
  conv = 0.6,       -- a convolution runs as an implicit GEMM (NVIDIA, Convolutional Layers User's
                    -- Guide, docs.nvidia.com/deeplearning/performance): its gathers and a CNN's
                    -- small channel counts keep it below a GEMM of its size
  norm = 0.5,       -- the classes below are memory-bound; their compute figure rarely binds,
  pointwise = 0.5,  -- half of peak is a neutral default
  embedding = 0.5,
  loss = 0.5,
  optimizer = 0.5,
  memory = 0.5,
}
-- Hopper reaches a smaller share of its dense peak than Ampere: its tensor cores need
-- warpgroup-wide asynchronous kernels to be fed, and library kernels of the generation before
-- (FlashAttention-2 among them) leave much of it idle. Measured, not datasheet: the class
-- efficiencies `perfsim calibrate` fitted on an H100 SXM over every GEMM and flash-attention
-- kernel it timed (stdlib/profiles/h100-local.lua: gemm 0.664, attention 0.387);
-- FlashAttention-2 reaches 35-37% of H100 peak forward (Shah et al. 2024, FlashAttention-3,
-- arXiv:2407.08608, Fig. 5), in line with it.
-- Convolutions are given the GEMM's Hopper share less the same gap as above, until calibrated.
local HOPPER_COMPUTE = {gemm = 0.66, attention = 0.39, conv = 0.53}

-- Fraction of the HBM bandwidth reached per op class (documented defaults, not measurements).
local MEMORY_EFFICIENCY = {
  gemm = 0.8,           -- weight-streaming GEMV/skinny GEMMs (decode) reach ~80% of HBM bandwidth
  attention = 0.8,      -- decode attention streaming the KV cache (FlashDecoding-style kernels) ~80%
  conv = 0.8,           -- a depthwise or 1×1 convolution over a large map streams like a GEMV
  norm = 0.8,           -- row reductions: streaming with a short reduction tail
  pointwise = 0.85,     -- streaming kernels reach ~80-90% of HBM bandwidth (BabelStream on HBM GPUs)
  embedding = 0.6,      -- row gathers touch scattered rows; lower than a stream
  loss = 0.8,           -- softmax + cross-entropy over logits rows: a streaming reduction
  optimizer = 0.85,     -- AdamW is a streaming update over params, grads and states
  memory = 0.9,         -- device-to-device copies reach ~90% of bandwidth
  communication = 0.8,  -- NCCL bus bandwidth reaches ~75-85% of link bandwidth on large messages
                        -- (nccl-tests, github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md)
}

local function copy(t)
  local c = {}
  for k, v in pairs(t) do c[k] = v end
  return c
end

local function link(bandwidth, latency)
  return {bandwidth = bandwidth, latency = bandwidth > 0 and latency or 0}
end

-- SMs a collective in flight takes from compute kernels: NCCL runs one CTA per channel, each
-- holding an SM of its own (github.com/NVIDIA/nccl/issues/689); 16 channels is what NCCL
-- logs on H100 nodes (NCCL_DEBUG=INFO, "Channel 00/16", github.com/NVIDIA/nccl/issues/1453).
-- It varies with the topology and the message size: set it from your own NCCL log.
local COLLECTIVE_SMS = 16

-- A GPU entry with the shared defaults filled in.
local function gpu(e)
  e.kind = "gpu"
  e.collective_sms = e.collective_sms or COLLECTIVE_SMS
  e.launch_eager = LAUNCH_EAGER
  e.launch_graph = LAUNCH_GRAPH
  e.dispatch_eager = DISPATCH_EAGER
  e.host_overhead = HOST_OVERHEAD
  e.engine_host_per_step = ENGINE_HOST_PER_STEP
  e.engine_host_per_op = ENGINE_HOST_PER_OP
  e.host_copy_bandwidth = e.host_copy_bandwidth or HOST_COPY_BANDWIDTH
  -- 2:4 structured sparsity doubles the tensor-core peak from Ampere on (each datasheet's
  -- "with sparsity" figures are twice the dense ones); Volta has none.
  e.sparse_speedup = e.sparse_speedup or 2
  e.nvlink = link(e.nvlink or 0, NVLINK_LATENCY)
  e.pcie = link(e.pcie, PCIE_LATENCY)
  e.infiniband = link(INFINIBAND_NDR, IB_LATENCY)
  e.compute_efficiency = copy(COMPUTE_EFFICIENCY)
  for class, share in pairs(e.compute_share or {}) do e.compute_efficiency[class] = share end
  e.compute_share = nil
  e.memory_efficiency = copy(MEMORY_EFFICIENCY)
  e.calibrated = false
  return e
end

local catalog = {
  -- V100 SXM2 32GB: https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf
  -- (int8 via DP4A on CUDA cores; no tf32/bf16/fp8). SMs and L2: Volta whitepaper.
  gpu {
    name = "V100", aliases = {"v100-sxm2", "v100-32gb", "v100-sxm2-32gb"},
    sparse_speedup = 1,  -- no sparse tensor cores
    peak_flops = {fp32 = 15.7 * T, tf32 = 0, bf16 = 0, fp16 = 125 * T, fp8 = 0, int8 = 62 * T},
    memory_bytes = 32 * GB, memory_bandwidth = 900 * GB, l2_bytes = 6 * MiB, sm_count = 80,
    gpus_per_node = HGX_GPUS,
    nvlink = 150 * GB,  -- NVLink 2: 300 GB/s total, 150 per direction
    pcie = 16 * GB,     -- PCIe 3.0 x16
    source = "https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf",
    -- No on-demand list price found for the 32 GB SXM2 part: price_per_hour stays 0 (unknown).
  },
  -- A100 SXM4: https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf
  -- SMs and L2: https://images.nvidia.com/aem-dam/en-zz/Solutions/data-center/nvidia-ampere-architecture-whitepaper.pdf
  gpu {
    name = "A100-40GB", aliases = {"a100-40g", "a100-sxm4-40gb"},
    peak_flops = {fp32 = 19.5 * T, tf32 = 156 * T, bf16 = 312 * T, fp16 = 312 * T, fp8 = 0, int8 = 624 * T},
    memory_bytes = 40 * GB, memory_bandwidth = 1555 * GB, l2_bytes = 40 * MiB, sm_count = 108,
    gpus_per_node = HGX_GPUS,
    nvlink = 300 * GB,  -- NVLink 3: 600 GB/s total, 300 per direction
    pcie = 32 * GB,     -- PCIe 4.0 x16
    source = "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf",
    -- Lambda on-demand list price, 8x A100 SXM 40 GB instance, per GPU (https://lambda.ai/pricing),
    -- September 2026.
    price_per_hour = 1.99,
  },
  gpu {
    name = "A100-80GB", aliases = {"a100", "a100-80g", "a100-sxm4-80gb"},
    peak_flops = {fp32 = 19.5 * T, tf32 = 156 * T, bf16 = 312 * T, fp16 = 312 * T, fp8 = 0, int8 = 624 * T},
    memory_bytes = 80 * GB, memory_bandwidth = 2039 * GB, l2_bytes = 40 * MiB, sm_count = 108,
    gpus_per_node = HGX_GPUS,
    nvlink = 300 * GB,
    pcie = 32 * GB,
    source = "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf",
    -- Lambda on-demand list price, 8x A100 SXM 80 GB instance, per GPU (https://lambda.ai/pricing),
    -- September 2026.
    price_per_hour = 2.79,
  },
  -- H100 SXM5 and PCIe: https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet
  -- SMs and L2: https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper
  gpu {
    name = "H100-SXM", aliases = {"h100", "h100-sxm5", "h100-80gb"},
    compute_share = HOPPER_COMPUTE,
    peak_flops = {fp32 = 67 * T, tf32 = 494.7 * T, bf16 = 989.4 * T, fp16 = 989.4 * T,
                  fp8 = 1978.9 * T, int8 = 1978.9 * T},
    memory_bytes = 80 * GB, memory_bandwidth = 3350 * GB, l2_bytes = 50 * MiB, sm_count = 132,
    gpus_per_node = HGX_GPUS,
    nvlink = 450 * GB,  -- NVLink 4: 900 GB/s total, 450 per direction
    pcie = 64 * GB,     -- PCIe 5.0 x16
    source = "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet",
    -- Lambda on-demand list price, 8x H100 SXM instance, per GPU (https://lambda.ai/pricing),
    -- September 2026 ($4.29 for a single GPU).
    price_per_hour = 3.99,
  },
  gpu {
    name = "H100-PCIe", aliases = {"h100-pcie-80gb"},
    compute_share = HOPPER_COMPUTE,
    peak_flops = {fp32 = 51 * T, tf32 = 378 * T, bf16 = 756 * T, fp16 = 756 * T,
                  fp8 = 1513 * T, int8 = 1513 * T},
    memory_bytes = 80 * GB, memory_bandwidth = 2000 * GB, l2_bytes = 50 * MiB, sm_count = 114,
    pcie = 64 * GB,     -- PCIe 5.0 x16; the optional NVLink bridge pairs two cards only
    source = "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet",
    -- Lambda on-demand list price, 1x H100 PCIe instance (https://lambda.ai/pricing),
    -- September 2026.
    price_per_hour = 3.29,
  },
  -- H200 SXM: https://www.nvidia.com/en-us/data-center/h200/ (H100 SXM compute, HBM3e)
  gpu {
    name = "H200", aliases = {"h200-sxm", "h200-141gb"},
    compute_share = HOPPER_COMPUTE,
    peak_flops = {fp32 = 67 * T, tf32 = 494.7 * T, bf16 = 989.4 * T, fp16 = 989.4 * T,
                  fp8 = 1978.9 * T, int8 = 1978.9 * T},
    memory_bytes = 141 * GB, memory_bandwidth = 4800 * GB, l2_bytes = 50 * MiB, sm_count = 132,
    gpus_per_node = HGX_GPUS,
    nvlink = 450 * GB,
    pcie = 64 * GB,
    source = "https://www.nvidia.com/en-us/data-center/h200/",
    -- RunPod on-demand list price, H200 pod on Secure Cloud (https://www.runpod.io/pricing),
    -- September 2026.
    price_per_hour = 4.59,
  },
  -- B200 (HGX B200, per GPU): https://www.nvidia.com/en-us/data-center/hgx/
  -- The datasheet gives no L2 size (0 = unknown).
  gpu {
    name = "B200", aliases = {"b200-sxm", "hgx-b200"},
    peak_flops = {fp32 = 80 * T, tf32 = 1100 * T, bf16 = 2250 * T, fp16 = 2250 * T,
                  fp8 = 4500 * T, int8 = 4500 * T},
    memory_bytes = 192 * GB, memory_bandwidth = 8000 * GB, l2_bytes = 0, sm_count = 148,
    gpus_per_node = HGX_GPUS,
    nvlink = 900 * GB,  -- NVLink 5: 1.8 TB/s total, 900 per direction
    pcie = 64 * GB,     -- host link: PCIe 5.0 x16
    source = "https://www.nvidia.com/en-us/data-center/hgx/",
    -- Lambda on-demand list price, 8x B200 SXM6 instance, per GPU (https://lambda.ai/pricing),
    -- September 2026.
    price_per_hour = 6.69,
  },
  -- L4: https://www.nvidia.com/en-us/data-center/l4/ ; SMs and L2: Ada Lovelace whitepaper
  -- (https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf)
  gpu {
    name = "L4", aliases = {"l4-24gb"},
    peak_flops = {fp32 = 30.3 * T, tf32 = 60 * T, bf16 = 121 * T, fp16 = 121 * T,
                  fp8 = 242.5 * T, int8 = 242.5 * T},
    memory_bytes = 24 * GB, memory_bandwidth = 300 * GB, l2_bytes = 48 * MiB, sm_count = 58,
    pcie = 32 * GB,     -- PCIe 4.0 x16; no NVLink
    source = "https://www.nvidia.com/en-us/data-center/l4/",
    -- Modal on-demand list price, L4, billed per second with CPU and memory extra
    -- (https://modal.com/pricing), May 2026.
    price_per_hour = 0.7992,
  },
}

-- The machine perfsim runs on, estimated from /proc (core/cost/host_cpu.cpp): the CPU backend's target.
if perfsim.host_cpu then
  local host = perfsim.host_cpu()
  host.name = "host-cpu"
  host.aliases = {"cpu", "host"}
  catalog[#catalog + 1] = host
end

return catalog

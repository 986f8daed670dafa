-- h200-quick: a perfsim hardware profile, fitted by `perfsim calibrate` (quick) on NVIDIA H200
-- (cuda backend, driver 580.159.04 (CUDA 13.0), CUDA runtime 13.0) on 2026-11-29.
-- Load it with `hardware = profile "h200-quick"` (when it sits in a profiles/ directory on the
-- module path) or `perfsim run --profile FILE`. docs/CALIBRATION.md explains each field.
return profile {
  name = "h200-quick",
  base = "H200",
  kind = "gpu",
  source = "perfsim calibrate 2026-11-29",
  calibrated = true,
  measured = {backend = "cuda", device = "NVIDIA H200", driver = "580.159.04 (CUDA 13.0)", runtime = "CUDA runtime 13.0", date = "2026-11-29", mode = "quick", op_timing = "event nodes", kernels = "56feb477dc9a"},
  peak_flops = {fp32 = 6.7e+13, tf32 = 4.947e+14, bf16 = 9.894e+14, fp16 = 9.894e+14, fp8 = 1.9789e+15, int8 = 1.9789e+15},
  memory_bytes = 1.41e+11,
  memory_bandwidth = 4.8e+12,
  l2_bytes = 5.24288e+07,
  sm_count = 132,
  launch_eager = 1.81691e-06,   -- seconds per op launched eagerly
  launch_graph = 1.064e-06,   -- seconds per op replayed from a CUDA graph
  launch_wait = 0,    -- seconds more when the device waits for an eager launch
  host_overhead = 0,
  host_copy_bandwidth = 8.0039e+09,
  engine_host_per_op = 1.88358e-06, -- a serving engine's host seconds per op of an eager step
  engine_host_per_step = 0.000738228, -- and per eager step besides its ops
  dispatch_eager = 5.67825e-06, -- host seconds to issue one op eagerly
  dispatch = {gemm = 1.04365e-05, attn_scores = 7.13041e-06, attn_softmax = 5.434e-06, attn_context = 7.15239e-06, attn_context_bwd = 1.26801e-05, attn_softmax_bwd = 7.2995e-06, attn_scores_bwd = 1.11436e-05, flash_attention = 8.7745e-06, flash_attention_bwd = 7.92033e-06, layernorm = 5.357e-06, layernorm_bwd = 5.8255e-06, rmsnorm = 4.401e-06, rmsnorm_bwd = 4.30525e-06, gelu = 5.531e-06, gelu_bwd = 8.15e-06, silu_mul = 4.886e-06, silu_mul_bwd = 5.8425e-06, rope = 4.727e-06, rope_bwd = 4.561e-06, residual_add = 5.174e-06, embedding = 5.3225e-06, embedding_bwd = 6.38683e-06, cross_entropy = 8.1275e-06, adamw = 1.76301e-06, add_rmsnorm = 5.092e-06, add_layernorm = 4.833e-06, kv_append = 5.189e-06, slice_last_token = 6.5725e-06}, -- host seconds per kernel launched
  dispatch_fixed = {attn_scores = 4.69965e-06, attn_context = 3.77013e-06, adamw = 1.06415e-05}, -- and per op, for kinds of several kernels
  pcie = {bandwidth = 5.92096e+10, latency = 6.31787e-06},
  nvlink = {bandwidth = 4.5e+11, latency = 2e-06},
  infiniband = {bandwidth = 5e+10, latency = 5e-06},
  gpus_per_node = 8,  -- a collective over more GPUs crosses nodes (infiniband)
  compute_efficiency = {gemm = 0.656309, attention = 0.418717, norm = 0.5, pointwise = 0.5, embedding = 0.5, loss = 0.5, optimizer = 0.5, memory = 0.5},
  memory_efficiency = {gemm = 0.380498, attention = 0.314756, norm = 0.0314265, pointwise = 0.578225, embedding = 0.0237312, loss = 0.473921, optimizer = 1.61333, memory = 0.0333678, communication = 0.8},
  -- GEMM efficiency (roofline time / measured time) over m x n x k; m counts every row
  -- of a batched product. efficiency[i][j][l] is at m[i], n[j], k[l].
  gemm = {
    fp32 = {
      m = {1, 8, 64, 512, 4096},
      n = {320, 1280, 5120, 20480, 163840},
      k = {320, 1280, 5120, 20480},
      efficiency = {
        { -- m = 1
          {0.00859546, 0.066437, 0.216007, 0.504771}, -- n = 320
          {0.0753151, 0.270156, 0.472986, 0.767522}, -- n = 1280
          {0.241609, 0.607558, 0.706108, 0.861299}, -- n = 5120
          {0.636036, 0.829992, 0.90496, 0.90496}, -- n = 20480
          {0.85698, 0.85698, 0.90496, 0.90496}, -- n = 163840
        },
        { -- m = 8
          {0.0137809, 0.0467726, 0.12689, 0.193545}, -- n = 320
          {0.0439683, 0.133259, 0.204718, 0.332594}, -- n = 1280
          {0.140754, 0.255884, 0.346527, 0.50948}, -- n = 5120
          {0.331955, 0.379631, 0.556756, 0.90496}, -- n = 20480
          {0.501054, 0.85698, 0.90496, 0.90496}, -- n = 163840
        },
        { -- m = 64
          {0.0266752, 0.0809243, 0.160832, 0.301027}, -- n = 320
          {0.100146, 0.218737, 0.38617, 0.600741}, -- n = 1280
          {0.249413, 0.450148, 0.59959, 0.654679}, -- n = 5120
          {0.449336, 0.572398, 0.671894, 0.90496}, -- n = 20480
          {0.624121, 0.85698, 0.90496, 0.90496}, -- n = 163840
        },
        { -- m = 512
          {0.147232, 0.342501, 0.493336, 0.681907}, -- n = 320
          {0.335453, 0.548682, 0.616066, 0.753456}, -- n = 1280
          {0.526177, 0.590784, 0.693601, 0.718648}, -- n = 5120
          {0.63929, 0.708436, 0.723621, 0.90496}, -- n = 20480
          {0.85698, 0.85698, 0.90496, 0.90496}, -- n = 163840
        },
        { -- m = 4096
          {0.465685, 0.546991, 0.630417, 0.697526}, -- n = 320
          {0.587312, 0.623076, 0.733465, 0.780269}, -- n = 1280
          {0.667951, 0.73411, 0.748268, 0.861299}, -- n = 5120
          {0.676789, 0.73393, 0.90496, 0.90496}, -- n = 20480
          {0.85698, 0.85698, 0.90496, 0.90496}, -- n = 163840
        },
      },
    },
    bf16 = {
      m = {1, 8, 64, 512, 4096},
      n = {320, 1280, 5120, 20480, 163840},
      k = {320, 1280, 5120, 20480},
      efficiency = {
        { -- m = 1
          {0.0131006, 0.0384052, 0.103196, 0.321322}, -- n = 320
          {0.0522804, 0.151095, 0.339747, 0.606335}, -- n = 1280
          {0.231616, 0.507187, 0.640155, 0.872401}, -- n = 5120
          {0.482515, 0.770426, 0.824971, 0.872401}, -- n = 20480
          {0.779593, 0.905682, 0.905682, 0.905682}, -- n = 163840
        },
        { -- m = 8
          {0.0220777, 0.0480717, 0.108195, 0.336005}, -- n = 320
          {0.0629201, 0.157191, 0.365316, 0.595069}, -- n = 1280
          {0.234444, 0.510651, 0.668212, 0.825383}, -- n = 5120
          {0.510465, 0.754481, 0.795158, 0.872401}, -- n = 20480
          {0.737052, 0.883157, 0.905682, 0.905682}, -- n = 163840
        },
        { -- m = 64
          {0.0201993, 0.0446192, 0.112752, 0.293827}, -- n = 320
          {0.0677421, 0.15706, 0.341607, 0.622547}, -- n = 1280
          {0.252573, 0.522838, 0.74692, 0.783245}, -- n = 5120
          {0.536364, 0.725591, 0.788142, 0.872401}, -- n = 20480
          {0.805442, 0.855073, 0.905682, 0.905682}, -- n = 163840
        },
        { -- m = 512
          {0.0605979, 0.100369, 0.189841, 0.338158}, -- n = 320
          {0.12657, 0.272567, 0.414464, 0.559853}, -- n = 1280
          {0.308992, 0.5078, 0.695292, 0.732101}, -- n = 5120
          {0.484416, 0.673744, 0.728015, 0.872401}, -- n = 20480
          {0.598055, 0.905682, 0.905682, 0.905682}, -- n = 163840
        },
        { -- m = 4096
          {0.245593, 0.370029, 0.530959, 0.613624}, -- n = 320
          {0.46399, 0.630452, 0.719915, 0.768639}, -- n = 1280
          {0.549543, 0.72795, 0.745245, 0.872401}, -- n = 5120
          {0.607034, 0.770035, 0.824971, 0.872401}, -- n = 20480
          {0.805442, 0.905682, 0.905682, 0.905682}, -- n = 163840
        },
      },
    },
    fp8 = {
      m = {1, 16, 256},
      n = {1280, 5120, 20480},
      k = {1280, 5120},
      efficiency = {
        { -- m = 1
          {0.0698585, 0.219044}, -- n = 1280
          {0.341545, 0.572834}, -- n = 5120
          {0.498154, 0.77423}, -- n = 20480
        },
        { -- m = 16
          {0.0588957, 0.142318}, -- n = 1280
          {0.208366, 0.413232}, -- n = 5120
          {0.474582, 0.628215}, -- n = 20480
        },
        { -- m = 256
          {0.0690234, 0.175262}, -- n = 1280
          {0.192674, 0.372389}, -- n = 5120
          {0.375792, 0.562516}, -- n = 20480
        },
      },
    },
  },
  -- Kernel efficiency (roofline time / measured time) against the roofline time at the
  -- datasheet peaks, per kind/dtype/bound.
  kernels = {
    ["adamw/fp32/memory"] = {
      seconds    = {2.98667e-08, 5.97333e-08, 3.82293e-05, 0.000152917, 0.000244668, 0.000412877, 0.000955763, 0.00391468},
      efficiency = {0.00850812, 0.0155232, 1.66668, 1.65503, 1.62885, 1.75618, 1.81041, 1.75325},
    },
    ["adamw/fp32/memory/fused"] = {
      seconds    = {0.000414841, 0.00235879},
      efficiency = {0.812732, 0.803528},
    },
    ["add_layernorm/bf16/memory"] = {
      seconds    = {3.2e-09, 3.52e-08, 3.824e-06},
      efficiency = {0.00330591, 0.0245697, 0.67894},
    },
    ["add_rmsnorm/bf16/memory"] = {
      seconds    = {5.33333e-09, 6.93333e-08, 6.55467e-06, 8.7392e-06},
      efficiency = {0.00345612, 0.0398419, 0.839481, 0.796645},
    },
    ["attn_context/bf16/memory"] = {
      seconds    = {2.00977e-06, 4.32538e-06, 9.8304e-06, 2.12992e-05},
      efficiency = {0.409189, 0.549342, 0.609524, 0.72545},
    },
    ["attn_context/bf16/memory/decode"] = {
      seconds    = {2.29563e-08, 3.21309e-07, 1.11041e-06},
      efficiency = {0.00964876, 0.0967534, 0.164638},
    },
    ["attn_context/fp32/compute"] = {
      seconds    = {1.6026e-05, 3.80617e-05, 9.01462e-05},
      efficiency = {0.359738, 0.443797, 0.633676},
    },
    ["attn_context/fp32/memory/decode"] = {
      seconds    = {4.59127e-08, 6.42618e-07, 2.22082e-06},
      efficiency = {0.0259644, 0.166148, 0.455223},
    },
    ["attn_context_bwd/bf16/memory"] = {
      seconds    = {1.90054e-06, 9.55733e-06},
      efficiency = {0.355707, 0.586339},
    },
    ["attn_context_bwd/fp32/compute"] = {
      seconds    = {1.6026e-05, 4.0065e-05},
      efficiency = {0.527391, 0.452077},
    },
    ["attn_scores/bf16/memory"] = {
      seconds    = {2.00977e-06, 4.32538e-06, 9.8304e-06, 2.12992e-05},
      efficiency = {0.385812, 0.497207, 0.650159, 0.697328},
    },
    ["attn_scores/bf16/memory/decode"] = {
      seconds    = {2.29563e-08, 3.21309e-07, 1.11041e-06},
      efficiency = {0.017101, 0.0790727, 0.189667},
    },
    ["attn_scores/fp32/compute"] = {
      seconds    = {1.6026e-05, 3.80617e-05, 9.01462e-05},
      efficiency = {0.56991, 0.463575, 0.468372},
    },
    ["attn_scores/fp32/memory/decode"] = {
      seconds    = {4.59127e-08, 6.42618e-07, 2.22082e-06},
      efficiency = {0.031842, 0.187504, 0.344926},
    },
    ["attn_scores_bwd/bf16/memory"] = {
      seconds    = {1.13596e-06, 5.46133e-06},
      efficiency = {0.241293, 0.366532},
    },
    ["attn_scores_bwd/fp32/compute"] = {
      seconds    = {1.6026e-05, 4.0065e-05},
      efficiency = {0.417186, 0.487549},
    },
    ["attn_softmax/bf16/memory"] = {
      seconds    = {3.71371e-05},
      efficiency = {1.04418},
    },
    ["attn_softmax/bf16/memory/decode"] = {
      seconds    = {8.55e-09, 5.464e-07},
      efficiency = {0.0103079, 0.211543},
    },
    ["attn_softmax/fp32/memory"] = {
      seconds    = {7.42741e-05},
      efficiency = {1.11267},
    },
    ["attn_softmax/fp32/memory/decode"] = {
      seconds    = {1.71e-08, 1.0928e-06},
      efficiency = {0.0188881, 0.374103},
    },
    ["attn_softmax_bwd/bf16/memory"] = {
      seconds    = {5.24288e-05},
      efficiency = {0.938589},
    },
    ["attn_softmax_bwd/fp32/memory"] = {
      seconds    = {0.000104858},
      efficiency = {0.933616},
    },
    ["cross_entropy/bf16/memory"] = {
      seconds    = {5.46185e-05, 0.000111852},
      efficiency = {0.379756, 0.594403},
    },
    ["cross_entropy/bf16/memory/smem_scalar"] = {
      seconds    = {5.46185e-05},
      efficiency = {0.379756},
    },
    ["cross_entropy/bf16/memory/two_sweeps"] = {
      seconds    = {0.000111852},
      efficiency = {0.594403},
    },
    ["cross_entropy/fp32/memory"] = {
      seconds    = {0.000109233, 0.0002237},
      efficiency = {0.370643, 0.56752},
    },
    ["cross_entropy/fp32/memory/two_sweeps"] = {
      seconds    = {0.0002237},
      efficiency = {0.56752},
    },
    ["cross_entropy/fp32/memory/two_sweeps_scalar"] = {
      seconds    = {0.000109233},
      efficiency = {0.370643},
    },
    ["embedding/bf16/memory"] = {
      seconds    = {1.7075e-09, 1.76133e-08, 3.41467e-08, 2.59563e-06, 3.82443e-06},
      efficiency = {0.00127706, 0.010665, 0.0199504, 0.418987, 0.466905},
    },
    ["embedding/fp32/memory"] = {
      seconds    = {3.73417e-09, 3.52133e-08, 6.828e-08, 5.18976e-06, 7.64736e-06},
      efficiency = {0.00353264, 0.015496, 0.0430468, 0.464422, 0.694443},
    },
    ["embedding_bwd/bf16/memory"] = {
      seconds    = {5.46304e-06, 7.64604e-05},
      efficiency = {0.023474, 0.142384},
    },
    ["embedding_bwd/fp32/memory"] = {
      seconds    = {1.09244e-05, 0.000152919},
      efficiency = {0.769263, 0.910132},
    },
    ["flash_attention/bf16/compute"] = {
      seconds    = {1.15307e-05, 2.30615e-05},
      efficiency = {0.268215, 0.267997},
    },
    ["flash_attention/bf16/memory/decode"] = {
      seconds    = {2.20815e-07, 5.48283e-07, 1.40188e-05, 3.49869e-05},
      efficiency = {0.0198877, 0.10256, 0.241775, 0.810258},
    },
    ["flash_attention/bf16/memory/decode_q1"] = {
      seconds    = {5.48283e-07, 3.49869e-05},
      efficiency = {0.10256, 0.810258},
    },
    ["flash_attention/bf16/memory/decode_q4"] = {
      seconds    = {2.206e-07, 1.40154e-05},
      efficiency = {0.0220053, 0.284585},
    },
    ["flash_attention/bf16/memory/decode_qn"] = {
      seconds    = {2.2103e-07, 1.40222e-05},
      efficiency = {0.0177701, 0.198964},
    },
    ["flash_attention/bf16/memory/paged"] = {
      seconds    = {2.21058e-07, 5.48311e-07, 1.4024e-05, 3.49887e-05},
      efficiency = {0.016597, 0.0929026, 0.184721, 0.790347},
    },
    ["flash_attention_bwd/bf16/compute"] = {
      seconds    = {2.71311e-05, 5.42623e-05},
      efficiency = {0.212581, 0.198761},
    },
    ["gelu/bf16/memory"] = {
      seconds    = {4.26667e-09, 6.82667e-08, 6.5536e-06, 8.73813e-06},
      efficiency = {0.00811153, 0.115706, 0.648218, 0.600556},
    },
    ["gelu/fp32/memory"] = {
      seconds    = {8.53333e-09, 1.36533e-07, 1.31072e-05, 1.74763e-05},
      efficiency = {0.029077, 0.304476, 0.889275, 0.811751},
    },
    ["gelu_bwd/bf16/memory"] = {
      seconds    = {1.31072e-05},
      efficiency = {0.685476},
    },
    ["gelu_bwd/fp32/memory"] = {
      seconds    = {2.62144e-05},
      efficiency = {0.84647},
    },
    ["gemm/bf16/compute/unaligned"] = {
      seconds    = {0.000169575, 0.00033915},
      efficiency = {0.137421, 0.134729},
    },
    ["gemm/bf16/compute/unaligned_nn_a"] = {
      seconds    = {0.000169575, 0.00033915},
      efficiency = {0.139578, 0.14264},
    },
    ["gemm/bf16/compute/unaligned_nn_bc"] = {
      seconds    = {0.000169575},
      efficiency = {0.135385},
    },
    ["gemm/bf16/compute/unaligned_nt_ab"] = {
      seconds    = {0.00033915},
      efficiency = {0.126817},
    },
    ["gemm/bf16/compute/unaligned_nt_c"] = {
      seconds    = {0.000169575},
      efficiency = {0.104248},
    },
    ["gemm/bf16/compute/unaligned_tn_a"] = {
      seconds    = {0.000169575},
      efficiency = {0.164859},
    },
    ["gemm/bf16/memory/unaligned"] = {
      seconds    = {1.71851e-05, 3.43648e-05},
      efficiency = {0.365658, 0.267413},
    },
    ["gemm/bf16/memory/unaligned_nn_a"] = {
      seconds    = {3.43648e-05},
      efficiency = {0.296432},
    },
    ["gemm/bf16/memory/unaligned_nn_bc"] = {
      seconds    = {1.72891e-05},
      efficiency = {0.230816},
    },
    ["gemm/bf16/memory/unaligned_nt_ab"] = {
      seconds    = {3.43648e-05},
      efficiency = {0.238393},
    },
    ["gemm/bf16/memory/unaligned_nt_c"] = {
      seconds    = {1.72891e-05},
      efficiency = {0.208871},
    },
    ["gemm/bf16/memory/unaligned_nt_c_skinny"] = {
      seconds    = {1.70811e-05},
      efficiency = {0.56718},
    },
    ["gemm/fp32/compute/unaligned"] = {
      seconds    = {0.00250414},
      efficiency = {0.737291},
    },
    ["gemm/fp32/compute/unaligned_nn_a"] = {
      seconds    = {0.00250414},
      efficiency = {0.783321},
    },
    ["gemm/fp32/compute/unaligned_nn_bc"] = {
      seconds    = {0.00250414},
      efficiency = {0.715401},
    },
    ["gemm/fp32/compute/unaligned_nt_c"] = {
      seconds    = {0.00250414},
      efficiency = {0.736966},
    },
    ["gemm/fp32/compute/unaligned_tn_a"] = {
      seconds    = {0.00250414},
      efficiency = {0.76757},
    },
    ["gemm/fp32/memory/unaligned"] = {
      seconds    = {3.45781e-05, 6.87296e-05},
      efficiency = {0.409304, 0.353881},
    },
    ["gemm/fp32/memory/unaligned_nn_a"] = {
      seconds    = {6.87296e-05},
      efficiency = {0.398966},
    },
    ["gemm/fp32/memory/unaligned_nn_bc"] = {
      seconds    = {3.45781e-05},
      efficiency = {0.405555},
    },
    ["gemm/fp32/memory/unaligned_nt_ab"] = {
      seconds    = {6.87296e-05},
      efficiency = {0.308795},
    },
    ["gemm/fp32/memory/unaligned_nt_c"] = {
      seconds    = {3.45781e-05},
      efficiency = {0.395335},
    },
    ["gemm/fp32/memory/unaligned_nt_c_skinny"] = {
      seconds    = {3.41621e-05},
      efficiency = {0.775919},
    },
    ["kv_append/bf16/memory"] = {
      seconds    = {4.26667e-10, 1.06667e-09, 6.82667e-09, 1.70667e-08, 6.5536e-07, 1.6384e-06},
      efficiency = {0.00528398, 0.00175061, 0.0722017, 0.0861774, 1.83937, 1.18241},
    },
    ["kv_append/bf16/memory/contiguous"] = {
      seconds    = {4.26667e-10, 1.06667e-09, 6.5536e-07, 1.6384e-06},
      efficiency = {0.00528398, 0.00175061, 1.83937, 1.18241},
    },
    ["kv_append/bf16/memory/paged"] = {
      seconds    = {4.275e-10, 1.0675e-09, 6.84e-09, 1.708e-08},
      efficiency = {0.00139431, 0.000802434, 0.0121551, 0.0105282},
    },
    ["kv_append/fp32/memory"] = {
      seconds    = {8.53333e-10, 2.13333e-09, 1.36533e-08, 3.41333e-08, 1.31072e-06, 3.2768e-06},
      efficiency = {0.00822473, 0.0140532, 0.109783, 0.0473779, 1.34321, 1.03322},
    },
    ["kv_append/fp32/memory/contiguous"] = {
      seconds    = {8.53333e-10, 2.13333e-09, 1.31072e-06, 3.2768e-06},
      efficiency = {0.00822473, 0.0140532, 1.34321, 1.03322},
    },
    ["layernorm/bf16/memory"] = {
      seconds    = {2.13333e-09, 1.81333e-08, 1.63947e-06, 2.1856e-06},
      efficiency = {0.00218474, 0.0134878, 0.485556, 0.495465},
    },
    ["layernorm/fp32/memory"] = {
      seconds    = {4.26667e-09, 3.62667e-08, 3.27893e-06, 4.3712e-06},
      efficiency = {0.0024557, 0.0202333, 0.597145, 0.687177},
    },
    ["layernorm_bwd/bf16/memory"] = {
      seconds    = {3.2784e-06},
      efficiency = {0.211327},
    },
    ["layernorm_bwd/fp32/memory"] = {
      seconds    = {6.5568e-06},
      efficiency = {0.449801},
    },
    ["residual_add/bf16/memory"] = {
      seconds    = {1.6e-09, 3.2e-09, 2.56e-08, 4.096e-08, 5.12e-08, 2.4576e-06, 3.2768e-06, 6.5536e-06},
      efficiency = {0.0141369, 0.00871018, 0.229264, 0.0639579, 0.110421, 1.00373, 1.00981, 0.934627},
    },
    ["residual_add/fp32/memory"] = {
      seconds    = {3.2e-09, 6.4e-09, 5.12e-08, 1.024e-07, 4.9152e-06, 6.5536e-06, 1.31072e-05},
      efficiency = {0.0285935, 0.0464453, 0.152535, 0.53287, 1.0066, 1.0679, 0.961893},
    },
    ["rmsnorm/bf16/memory"] = {
      seconds    = {3.2e-09, 3.52e-08, 4.37013e-06},
      efficiency = {0.00137557, 0.0151487, 0.679014},
    },
    ["rmsnorm/fp32/memory"] = {
      seconds    = {6.4e-09, 7.04e-08, 8.74027e-06},
      efficiency = {0.00680293, 0.0452972, 1.00481},
    },
    ["rmsnorm_bwd/bf16/memory"] = {
      seconds    = {6.55573e-06},
      efficiency = {0.407941},
    },
    ["rmsnorm_bwd/fp32/memory"] = {
      seconds    = {1.31115e-05},
      efficiency = {0.847297},
    },
    ["rope/bf16/memory"] = {
      seconds    = {4.26667e-10, 2.13333e-09, 6.82667e-09, 3.41333e-08, 6.5536e-07, 8.73813e-07, 3.2768e-06, 4.36907e-06},
      efficiency = {0.000207226, 0.00144707, 0.00406508, 0.0201915, 0.233564, 0.203254, 0.684499, 0.607467},
    },
    ["rope/fp32/memory"] = {
      seconds    = {8.53333e-10, 4.26667e-09, 1.36533e-08, 6.82667e-08, 1.31072e-06, 1.74763e-06, 6.5536e-06, 8.73813e-06},
      efficiency = {0.000755527, 0.00259932, 0.0110627, 0.035222, 0.402213, 0.399141, 0.692274, 0.686395},
    },
    ["rope_bwd/bf16/memory"] = {
      seconds    = {8.73813e-07, 4.36907e-06},
      efficiency = {0.227615, 0.637745},
    },
    ["rope_bwd/fp32/memory"] = {
      seconds    = {1.74763e-06, 8.73813e-06},
      efficiency = {0.50649, 0.794198},
    },
    ["silu_mul/bf16/memory"] = {
      seconds    = {8.64e-09, 1.1264e-07, 1.3824e-07, 1.54829e-05},
      efficiency = {0.0137809, 0.100534, 0.118741, 0.83423},
    },
    ["silu_mul/fp32/memory"] = {
      seconds    = {1.728e-08, 2.7648e-07, 2.65421e-05, 3.53894e-05},
      efficiency = {0.0312221, 0.366596, 0.915662, 0.917908},
    },
    ["silu_mul_bwd/bf16/memory"] = {
      seconds    = {2.94912e-05},
      efficiency = {0.861484},
    },
    ["silu_mul_bwd/fp32/memory"] = {
      seconds    = {5.89824e-05},
      efficiency = {0.859771},
    },
    ["slice_last_token/bf16/memory"] = {
      seconds    = {1.06667e-09, 2.13333e-09},
      efficiency = {0.00781441, 0.0317224},
    },
    ["slice_last_token/bf16/memory/contiguous"] = {
      seconds    = {1.06667e-09, 2.13333e-09},
      efficiency = {0.00781441, 0.0317224},
    },
    ["slice_last_token/fp32/memory"] = {
      seconds    = {2.13333e-09, 4.26667e-09},
      efficiency = {0.0216099, 0.0883783},
    },
    ["slice_last_token/fp32/memory/contiguous"] = {
      seconds    = {2.13333e-09, 4.26667e-09},
      efficiency = {0.0216099, 0.0883783},
    },
  },
}

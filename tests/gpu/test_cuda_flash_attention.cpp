// CUDA flash attention (forward, backward, ring-attention blocks and their merge) and decode
// attention (contiguous and paged)
// against cpu::flash_attention{,_bwd} on the same random inputs. Outputs are poisoned with
// NaN bytes before each launch so an unwritten element fails. Tolerances (normalized max
// error max|a−b|/max|b|): 16-bit ≤ 1e-2 (the GPU rounds P to 16 bits before P·V, the CPU
// keeps it in fp32); fp32 ≤ 1e-4 (same math, different summation order: tiles, warp
// reductions, split merges and dQ atomics reassociate the sums).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "backends/cpu/cpu_kernels.hpp"
#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/decode_attention.cuh"
#include "backends/cuda/kernels/flash_attention.cuh"

namespace {

using perfsim::ops::AttnShape;
namespace cpu = perfsim::cpu;
namespace host = perfsim::host;
namespace gpu = perfsim::cuda;

// The device type with the same bits as a CPU storage type.
template <class C> struct device_type { using type = float; };
template <> struct device_type<host::bf16> { using type = __nv_bfloat16; };
template <> struct device_type<host::half> { using type = __half; };
template <class C> using dev_t = typename device_type<C>::type;

template <class C> double tolerance() { return std::is_same_v<C, float> ? 1e-4 : 1e-2; }

struct DeviceBuf {
  void* p = nullptr;
  size_t bytes = 0;
  explicit DeviceBuf(size_t n) : bytes(std::max<size_t>(n, 16)) { PERFSIM_CUDA_CHECK(cudaMalloc(&p, bytes)); }
  ~DeviceBuf() { cudaFree(p); }
  DeviceBuf(DeviceBuf&& o) noexcept : p(o.p), bytes(o.bytes) { o.p = nullptr; }
  DeviceBuf(const DeviceBuf&) = delete;
  DeviceBuf& operator=(const DeviceBuf&) = delete;
  void poison() const { PERFSIM_CUDA_CHECK(cudaMemset(p, 0xFF, bytes)); }
};

template <class T> T* dev(const DeviceBuf& b) { return static_cast<T*>(b.p); }

template <class C> std::vector<C> random_vec(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<C> v(n);
  for (auto& x : v) x = host::from_f32<C>(dist(rng));
  return v;
}

template <class C> DeviceBuf upload(const std::vector<C>& h) {
  DeviceBuf d(h.size() * sizeof(C));
  PERFSIM_CUDA_CHECK(cudaMemcpy(d.p, h.data(), h.size() * sizeof(C), cudaMemcpyHostToDevice));
  return d;
}

template <class C> std::vector<C> download(const DeviceBuf& d, size_t n) {
  std::vector<C> h(n);
  PERFSIM_CUDA_CHECK(cudaMemcpy(h.data(), d.p, n * sizeof(C), cudaMemcpyDeviceToHost));
  return h;
}

// max|a−b| / max|b|; NaN anywhere in a (an unwritten or broken element) gives infinity.
template <class C> double norm_err(const std::vector<C>& a, const std::vector<C>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = host::to_f32(a[i]), y = host::to_f32(b[i]);
    if (std::isnan(x)) return INFINITY;
    num = std::max(num, std::abs(x - y));
    den = std::max(den, std::abs(y));
  }
  return den > 0 ? num / den : num;
}

// LSE: -inf must match exactly; finite values within 1e-3 absolute (fp32 either way).
double lse_err(const std::vector<float>& a, const std::vector<float>& b) {
  double e = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isinf(b[i]) || std::isinf(a[i])) {
      if (a[i] != b[i]) return INFINITY;
      continue;
    }
    if (std::isnan(a[i])) return INFINITY;
    e = std::max(e, double(std::abs(a[i] - b[i])));
  }
  return e;
}

AttnShape shape(int64_t b, int64_t sq, int64_t skv, int64_t h, int64_t hkv, int64_t d,
                bool causal, int64_t cap = 0) {
  AttnShape a;
  a.batch = b, a.seq_q = sq, a.seq_kv = skv, a.heads = h, a.kv_heads = hkv, a.head_dim = d;
  a.kv_capacity = cap ? cap : skv;
  a.grad_capacity = a.kv_capacity;
  a.causal = causal;
  return a;
}

size_t q_elems(const AttnShape& a) { return size_t(a.batch * a.seq_q * a.heads * a.head_dim); }
size_t kv_elems(const AttnShape& a) { return size_t(a.batch * a.kv_capacity * a.kv_heads * a.head_dim); }
size_t lse_elems(const AttnShape& a) { return size_t(a.batch * a.heads * a.seq_q); }

enum class Fwd { flash, decode };

template <class C>
void check_forward(const AttnShape& a, Fwd path, int block_m = 0, uint32_t seed = 1,
                   gpu::DecodeKernel kernel = gpu::DecodeKernel::automatic) {
  using G = dev_t<C>;
  const auto q = random_vec<C>(q_elems(a), seed);
  const auto k = random_vec<C>(kv_elems(a), seed + 1);
  const auto v = random_vec<C>(kv_elems(a), seed + 2);
  std::vector<C> o_ref(q_elems(a));
  std::vector<float> lse_ref(lse_elems(a));
  cpu::flash_attention(q.data(), k.data(), v.data(), o_ref.data(), lse_ref.data(), a);

  const auto dq = upload(q), dk = upload(k), dv = upload(v);
  DeviceBuf d_o(q_elems(a) * sizeof(C)), d_lse(lse_elems(a) * sizeof(float));
  d_o.poison();
  d_lse.poison();
  if (path == Fwd::flash) {
    gpu::flash_attention(dev<G>(dq), dev<G>(dk), dev<G>(dv), dev<G>(d_o), dev<float>(d_lse), a,
                         nullptr, block_m);
  } else {
    DeviceBuf ws(size_t(gpu::decode_attention_workspace_bytes(a)));
    ws.poison();
    gpu::decode_attention(dev<G>(dq), dev<G>(dk), dev<G>(dv), dev<G>(d_o), dev<float>(d_lse), a,
                          ws.p, nullptr, kernel);
    PERFSIM_CUDA_CHECK(cudaDeviceSynchronize());  // before ws is freed
  }
  PERFSIM_CUDA_CHECK(cudaDeviceSynchronize());
  CHECK(norm_err(download<C>(d_o, q_elems(a)), o_ref) <= tolerance<C>());
  CHECK(lse_err(download<float>(d_lse, lse_elems(a)), lse_ref) <= 1e-3);
}

template <class C> void check_backward(const AttnShape& a, int block_n = 0, uint32_t seed = 7, bool split_group = true) {
  using G = dev_t<C>;
  const auto q = random_vec<C>(q_elems(a), seed);
  const auto k = random_vec<C>(kv_elems(a), seed + 1);
  const auto v = random_vec<C>(kv_elems(a), seed + 2);
  const auto d_o = random_vec<C>(q_elems(a), seed + 3);
  std::vector<C> o(q_elems(a));
  std::vector<float> lse(lse_elems(a));
  cpu::flash_attention(q.data(), k.data(), v.data(), o.data(), lse.data(), a);
  const size_t g_elems = size_t(a.batch * a.grad_capacity * a.kv_heads * a.head_dim);
  std::vector<C> dq_ref(q_elems(a)), dk_ref(g_elems), dv_ref(g_elems);
  cpu::flash_attention_bwd(q.data(), k.data(), v.data(), o.data(), d_o.data(), lse.data(),
                           dq_ref.data(), dk_ref.data(), dv_ref.data(), a);

  const auto gq = upload(q), gk = upload(k), gv = upload(v), go = upload(o), gdo = upload(d_o);
  const auto glse = upload(lse);
  DeviceBuf gdq(q_elems(a) * sizeof(C)), gdk(g_elems * sizeof(C)), gdv(g_elems * sizeof(C));
  DeviceBuf ws(size_t(gpu::flash_attention_bwd_workspace_bytes(a, int(sizeof(G)))));
  gdq.poison();
  gdk.poison();
  gdv.poison();
  ws.poison();
  gpu::flash_attention_bwd(dev<G>(gq), dev<G>(gk), dev<G>(gv), dev<G>(go), dev<G>(gdo),
                           dev<float>(glse), dev<G>(gdq), dev<G>(gdk), dev<G>(gdv), a, ws.p,
                           nullptr, block_n, split_group);
  PERFSIM_CUDA_CHECK(cudaDeviceSynchronize());
  CHECK(norm_err(download<C>(gdq, q_elems(a)), dq_ref) <= tolerance<C>());
  CHECK(norm_err(download<C>(gdk, g_elems), dk_ref) <= tolerance<C>());
  CHECK(norm_err(download<C>(gdv, g_elems), dv_ref) <= tolerance<C>());
}

}  // namespace

TEST_CASE("cuda flash attention forward bf16 tensor cores, GQA 8:2, both tile heights") {
  for (bool causal : {false, true})
    for (int bm : {64, 128}) {
      CAPTURE(causal);
      CAPTURE(bm);
      check_forward<host::bf16>(shape(2, 256, 256, 8, 2, 128, causal), Fwd::flash, bm);
      check_forward<host::bf16>(shape(1, 77, 300, 8, 2, 64, causal, 320), Fwd::flash, bm);
    }
}

TEST_CASE("cuda flash attention forward fp16 odd lengths and fp32 fallback") {
  for (bool causal : {false, true}) {
    CAPTURE(causal);
    check_forward<host::half>(shape(2, 77, 300, 8, 2, 128, causal, 333), Fwd::flash);
    check_forward<float>(shape(1, 77, 300, 8, 2, 64, causal, 320), Fwd::flash);
    check_forward<host::bf16>(shape(1, 33, 70, 4, 4, 96, causal), Fwd::flash);  // simple path
  }
}

TEST_CASE("cuda flash attention forward: causal rows that see nothing get O = 0, LSE = -inf") {
  check_forward<host::bf16>(shape(1, 100, 40, 4, 2, 64, true), Fwd::flash);
  check_forward<float>(shape(1, 100, 40, 4, 2, 64, true), Fwd::flash);
}

TEST_CASE("cuda decode attention split-KV matches the CPU on a partly filled cache") {
  check_forward<host::bf16>(shape(3, 1, 1000, 8, 2, 128, false, 1024), Fwd::decode);
  check_forward<host::bf16>(shape(3, 1, 1000, 8, 2, 128, true, 1024), Fwd::decode);
  check_forward<host::bf16>(shape(2, 4, 777, 8, 2, 64, true, 800), Fwd::decode);  // 8 rows per pass
  check_forward<float>(shape(2, 3, 300, 12, 2, 64, true, 512), Fwd::decode);     // 18 rows: 3 passes
  check_forward<host::half>(shape(1, 1, 5, 4, 1, 32, false, 8), Fwd::decode);
  // GQA groups of 5, 7 and 8 at one query: a pass of 4 rows, then one of the rest.
  check_forward<host::bf16>(shape(3, 1, 1100, 25, 5, 128, true, 1200), Fwd::decode);
  check_forward<float>(shape(2, 1, 400, 14, 2, 256, true, 512), Fwd::decode);
  check_forward<host::half>(shape(2, 1, 333, 16, 2, 64, false, 333), Fwd::decode);
}

TEST_CASE("cuda decode attention: the CUDA-core and the packed tensor-core kernels agree with the CPU") {
  using K = gpu::DecodeKernel;
  for (const K kernel : {K::cuda_cores, K::tensor_cores})
    for (bool causal : {false, true}) {
      CAPTURE(int(kernel));
      CAPTURE(causal);
      // A verify pass: 16 sequences of 5 queries, GQA 32:8 (20 rows a KV head).
      check_forward<host::bf16>(shape(16, 5, 1157, 32, 8, 128, causal, 1200), Fwd::decode, 0, 3, kernel);
      // One sequence, a long cache: many splits, the last ones past seq_kv once rounded to tiles.
      check_forward<host::bf16>(shape(1, 3, 4001, 8, 2, 64, causal, 4096), Fwd::decode, 0, 4, kernel);
      // 72 rows a KV head (group 8 × 9 queries): two tiles of 64 rows, or one of 128.
      check_forward<host::half>(shape(2, 9, 700, 16, 2, 128, causal, 700), Fwd::decode, 0, 5, kernel);
      // 1 row a KV head, and a cache shorter than one tile.
      check_forward<host::bf16>(shape(3, 1, 37, 4, 4, 64, causal, 40), Fwd::decode, 0, 6, kernel);
    }
  // The automatic choice is the rule the cost model prices (core/cost/kernel_paths.hpp).
  CHECK_FALSE(perfsim::decode_takes_tensor_cores(1, 2, 128));
  CHECK(perfsim::decode_takes_tensor_cores(4, 2, 128));
  CHECK_FALSE(perfsim::decode_takes_tensor_cores(20, 4, 128));
  CHECK_FALSE(perfsim::decode_takes_tensor_cores(20, 2, 256));
}

TEST_CASE("cuda paged decode attention reads K/V through a block table") {
  using C = host::bf16;
  using G = __nv_bfloat16;
  // 16-row pages take the shift-and-mask path, 12-row pages the division; one query a
  // sequence runs the CUDA-core kernel, a causal verify pass of 5 the packed tensor-core one.
  for (const int64_t seq_q : {1, 5})
  for (const int block_size : {16, 12}) {
    CAPTURE(seq_q);
    CAPTURE(block_size);
    const AttnShape a = shape(2, seq_q, 300, 8, 2, 128, seq_q > 1);
    const int max_blocks = (int(a.seq_kv) + block_size - 1) / block_size;  // 19 or 25
    const int num_blocks = int(a.batch) * max_blocks + 5;                  // spare pages
    const int64_t row = a.kv_heads * a.head_dim;
    const auto q = random_vec<C>(q_elems(a), 11);
    const auto k = random_vec<C>(kv_elems(a), 12);
    const auto v = random_vec<C>(kv_elems(a), 13);
    std::vector<C> o_ref(q_elems(a));
    std::vector<float> lse_ref(lse_elems(a));
    cpu::flash_attention(q.data(), k.data(), v.data(), o_ref.data(), lse_ref.data(), a);

    // Scatter the contiguous cache into shuffled pages; unused pages hold random data.
    std::vector<int32_t> pages(static_cast<size_t>(num_blocks));
    std::iota(pages.begin(), pages.end(), 0);
    std::shuffle(pages.begin(), pages.end(), std::mt19937(5));
    std::vector<int32_t> table(size_t(a.batch * max_blocks));
    auto kp = random_vec<C>(size_t(num_blocks * block_size * row), 14);
    auto vp = random_vec<C>(size_t(num_blocks * block_size * row), 15);
    for (int64_t b = 0; b < a.batch; ++b)
      for (int blk = 0; blk < max_blocks; ++blk) {
        const int32_t page = pages[size_t(b * max_blocks + blk)];
        table[size_t(b * max_blocks + blk)] = page;
        for (int r = 0; r < block_size; ++r) {
          const int64_t j = int64_t(blk) * block_size + r;
          if (j >= a.seq_kv) break;
          std::memcpy(&kp[size_t((int64_t(page) * block_size + r) * row)], &k[size_t((b * a.kv_capacity + j) * row)], size_t(row) * sizeof(C));
          std::memcpy(&vp[size_t((int64_t(page) * block_size + r) * row)], &v[size_t((b * a.kv_capacity + j) * row)], size_t(row) * sizeof(C));
        }
      }
    const auto gq = upload(q), gk = upload(kp), gv = upload(vp), gt = upload(table);
    DeviceBuf go(q_elems(a) * sizeof(C)), glse(lse_elems(a) * sizeof(float));
    DeviceBuf ws(size_t(gpu::decode_attention_workspace_bytes(a)));
    go.poison();
    glse.poison();
    gpu::paged_decode_attention(dev<G>(gq), dev<G>(gk), dev<G>(gv), dev<int32_t>(gt), block_size,
                                max_blocks, dev<G>(go), dev<float>(glse), a, ws.p, nullptr);
    PERFSIM_CUDA_CHECK(cudaDeviceSynchronize());
    CHECK(norm_err(download<C>(go, q_elems(a)), o_ref) <= 1e-2);
    CHECK(lse_err(download<float>(glse, lse_elems(a)), lse_ref) <= 1e-3);
  }
}

TEST_CASE("cuda flash attention backward matches cpu::flash_attention_bwd") {
  for (bool causal : {false, true}) {
    CAPTURE(causal);
    AttnShape a = shape(1, 77, 300, 8, 2, 64, causal, 320);
    a.grad_capacity = 330;  // rows 300..329 of dK/dV must come back as zeros
    check_backward<float>(a);
    check_backward<host::bf16>(shape(2, 128, 128, 4, 2, 128, causal));
    check_backward<host::half>(shape(1, 40, 90, 4, 1, 64, causal, 96));
  }
}

TEST_CASE("cuda flash attention backward tensor cores: both kv tiles, GQA, odd lengths") {
  for (bool causal : {false, true})
    for (int bn : {64, 128}) {
      CAPTURE(causal);
      CAPTURE(bn);
      // d 128, GQA 8:2, seq_q < seq_kv (causal diagonal offset), partial tiles both ways.
      AttnShape a = shape(2, 77, 300, 8, 2, 128, causal, 320);
      a.grad_capacity = 333;  // dK/dV rows 300..332 must come back as zeros
      check_backward<host::bf16>(a, bn);
      // d 64, MHA, seq_q > seq_kv: causal rows 0..59 see nothing (LSE -inf).
      check_backward<host::half>(shape(1, 100, 40, 4, 4, 64, causal), bn);
      // several full tiles, GQA 4:1
      check_backward<host::bf16>(shape(1, 256, 256, 4, 1, 64, causal), bn);
    }
}

TEST_CASE("cuda flash attention backward tensor cores: GQA groups split over CTAs or walked whole") {
  // GQA 18:6 (groups of 3) over 3 sequences, a partial last kv tile, dK/dV rows past seq_kv:
  // the split (a CTA per query head, fp32 dK/dV accumulators) and the whole-group walk both
  // match the CPU (the workspace starts poisoned: the split's accumulators must be zeroed).
  for (bool causal : {false, true})
    for (bool split : {true, false})
      for (int bn : {64, 128}) {
        CAPTURE(causal);
        CAPTURE(split);
        CAPTURE(bn);
        AttnShape a = shape(3, 100, 100, 18, 6, 128, causal, 112);
        a.grad_capacity = 120;
        check_backward<host::bf16>(a, bn, 9, split);
        check_backward<host::half>(shape(2, 70, 90, 6, 2, 64, causal), bn, 11, split);
      }
  CHECK(gpu::flash_bwd_splits_group(shape(1, 8, 8, 6, 2, 64, false), 2));
  CHECK_FALSE(gpu::flash_bwd_splits_group(shape(1, 8, 8, 6, 6, 64, false), 2));  // MHA
  CHECK_FALSE(gpu::flash_bwd_splits_group(shape(1, 8, 8, 6, 2, 64, false), 4));  // fp32 fallback
  CHECK_FALSE(gpu::flash_bwd_splits_group(shape(1, 8, 8, 6, 2, 96, false), 2));  // head_dim 96
}

TEST_CASE("cuda flash attention: ring-attention blocks that skip query rows or read half the keys") {
  // q_first rows take no part (O 0, LSE −inf, dQ 0), not aligned to a tile; and a block of
  // all queries against the first half of a K/V block (seq_kv < kv_capacity = grad_capacity).
  for (bool tensor_cores : {true, false}) {
    CAPTURE(tensor_cores);
    AttnShape skip = shape(2, 96, 96, 8, 2, tensor_cores ? 128 : 96, false);
    skip.q_first = 37;
    AttnShape half = shape(2, 96, 48, 8, 2, tensor_cores ? 64 : 96, false, 96);
    for (const AttnShape& a : {skip, half}) {
      check_forward<host::bf16>(a, Fwd::flash);
      check_backward<host::bf16>(a);
      check_forward<float>(a, Fwd::flash);
      check_backward<float>(a);
    }
  }
  // The split-KV kernel leaves skipped rows to the flash kernel.
  AttnShape few = shape(1, 8, 8, 4, 2, 64, false);
  few.q_first = 4;
  check_forward<host::bf16>(few, Fwd::decode);
}

TEST_CASE("cuda attn_merge matches cpu::attn_merge, empty rows included") {
  using C = host::bf16;
  using G = __nv_bfloat16;
  const AttnShape a = shape(2, 33, 33, 4, 2, 64, false);
  const auto oa = random_vec<C>(q_elems(a), 21), ob = random_vec<C>(q_elems(a), 22);
  auto la = random_vec<float>(lse_elems(a), 23), lb = random_vec<float>(lse_elems(a), 24);
  for (size_t i = 0; i < la.size(); i += 5) lb[i] = -INFINITY;                   // b saw nothing
  for (size_t i = 0; i < la.size(); i += 7) la[i] = lb[i] = -INFINITY;         // neither did
  std::vector<C> o_ref(q_elems(a));
  std::vector<float> l_ref(lse_elems(a));
  cpu::attn_merge(oa.data(), la.data(), ob.data(), lb.data(), o_ref.data(), l_ref.data(), a);
  const auto goa = upload(oa), gob = upload(ob), gla = upload(la), glb = upload(lb);
  DeviceBuf go(q_elems(a) * sizeof(C)), gl(lse_elems(a) * sizeof(float));
  go.poison();
  gl.poison();
  gpu::attn_merge(dev<G>(goa), dev<float>(gla), dev<G>(gob), dev<float>(glb), dev<G>(go), dev<float>(gl), a,
                  nullptr);
  PERFSIM_CUDA_CHECK(cudaDeviceSynchronize());
  CHECK(norm_err(download<C>(go, q_elems(a)), o_ref) <= tolerance<C>());
  CHECK(lse_err(download<float>(gl, lse_elems(a)), l_ref) <= 1e-5);
}

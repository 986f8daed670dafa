// CUDA embedding (+bwd), cross-entropy, AdamW (fused and unfused) and memory ops (kv_append, paged,
// slice_last_token, copy_tensor, fp8 quantization) against the CPU reference on the same inputs.
#include <cuda_fp8.h>
#include <doctest/doctest.h>

#include <cstring>
#include <type_traits>

#include "backends/cuda/kernels/adamw.cuh"
#include "backends/cuda/kernels/cross_entropy.cuh"
#include "backends/cuda/kernels/embedding.cuh"
#include "backends/cuda/kernels/memory_ops.cuh"
#include "test_cuda_kernels_util.hpp"

using namespace perfsim;
using namespace perfsim::cuda::test;

TEST_CASE_TEMPLATE("cuda kernels: embedding and its backward match the CPU reference", D, float,
                   __nv_bfloat16, __half) {
  using H = host_t<D>;
  for (const bool learned : {false, true}) {
    for (const int64_t hidden : {int64_t{64}, int64_t{33}}) {
      CAPTURE(learned);
      CAPTURE(hidden);
      ops::EmbeddingShape e{.tokens = 50, .vocab = 17, .hidden = hidden, .seq = 10, .position = 3,
                            .max_positions = 20};
      const auto ids = random_ids(e.tokens, static_cast<int32_t>(e.vocab), 21);  // repeats: scatter collisions
      const auto table = random_values<H>(e.vocab * hidden, 22);
      const auto pos = random_values<H>(e.max_positions * hidden, 23);
      const auto dx = random_values<H>(e.tokens * hidden, 24);
      DeviceBuffer<int32_t> d_ids(ids);
      DeviceBuffer<D> d_table(table), d_pos(pos), d_x(e.tokens * hidden), d_dx(dx);
      std::vector<H> x(static_cast<size_t>(e.tokens * hidden));
      d_x.poison();
      cuda::embedding(d_ids.get(), d_table.get(), learned ? d_pos.get() : nullptr, d_x.get(), e, nullptr);
      cpu::embedding(ids.data(), table.data(), learned ? pos.data() : nullptr, x.data(), e);
      CHECK(normalized_error(d_x.download(), x) <= tolerance<D>());

      for (const bool accumulate : {false, true}) {
        CAPTURE(accumulate);
        e.accumulate = accumulate;
        auto dtable = table, dpos = pos;  // accumulate adds into the current contents
        DeviceBuffer<D> g_table(table), g_pos(pos);
        if (!accumulate) {
          g_table.poison();
          g_pos.poison();
        }
        DeviceBuffer<float> ws(std::max<int64_t>(1, cuda::embedding_bwd_workspace_floats<D>(e, learned)));
        cuda::embedding_bwd(d_ids.get(), d_dx.get(), g_table.get(), learned ? g_pos.get() : nullptr, e,
                            ws.get(), nullptr);
        cpu::embedding_bwd(ids.data(), dx.data(), dtable.data(), learned ? dpos.data() : nullptr, e);
        CHECK(normalized_error(g_table.download(), dtable) <= tolerance<D>());
        if (learned) CHECK(normalized_error(g_pos.download(), dpos) <= tolerance<D>());
      }
    }
  }
}

namespace {

// cross_entropy on the GPU (outputs poisoned first) and on the CPU, same logits and targets.
template <class D>
struct CrossEntropyResults {
  std::vector<float> gpu_loss, cpu_loss;
  std::vector<host_t<D>> gpu_grad, cpu_grad;
};

template <class D>
CrossEntropyResults<D> run_cross_entropy(const std::vector<host_t<D>>& logits,
                                         const std::vector<int32_t>& targets, int64_t rows,
                                         int64_t cols) {
  DeviceBuffer<D> d_logits(logits), d_grad(rows * cols);
  DeviceBuffer<int32_t> d_targets(targets);
  DeviceBuffer<float> d_loss(rows);
  d_grad.poison();
  d_loss.poison();
  cuda::cross_entropy(d_logits.get(), d_targets.get(), d_loss.get(), d_grad.get(), rows, cols, nullptr);
  CrossEntropyResults<D> r;
  r.cpu_loss.resize(static_cast<size_t>(rows));
  r.cpu_grad.resize(logits.size());
  cpu::cross_entropy(logits.data(), targets.data(), r.cpu_loss.data(), r.cpu_grad.data(), rows, cols);
  r.gpu_loss = d_loss.download<float>();
  r.gpu_grad = d_grad.download();
  return r;
}

}  // namespace

TEST_CASE_TEMPLATE("cuda kernels: cross-entropy matches the CPU reference", D, float, __nv_bfloat16,
                   __half) {
  using H = host_t<D>;
  // Rows held in registers (1000, 4096), the shared-memory row cache (50304, 33000 in 16-bit)
  // and the two-sweep kernel without it (140000; 50257 and 33000 in fp32).
  for (const int64_t cols : {int64_t{1000}, int64_t{50257}, int64_t{4096}, int64_t{50304},
                             int64_t{33000}, int64_t{140000}}) {
    CAPTURE(cols);
    const int64_t rows = 7;
    const auto logits = random_values<H>(rows * cols, 31, -8.0f, 8.0f);
    const auto targets = random_ids(rows, static_cast<int32_t>(cols), 32);
    const CrossEntropyResults<D> r = run_cross_entropy<D>(logits, targets, rows, cols);
    // The loss is computed in fp32 from the same stored logits in every storage type; only the
    // order of the exp sums differs.
    CHECK(normalized_error(r.gpu_loss, r.cpu_loss) <= 1e-5);
    CHECK(normalized_error(r.gpu_grad, r.cpu_grad) <= tolerance<D>());
    // The loss alone (no gradient tensor).
    DeviceBuffer<D> d_logits(logits);
    DeviceBuffer<int32_t> d_targets(targets);
    DeviceBuffer<float> d_loss(rows);
    d_loss.poison();
    cuda::cross_entropy(d_logits.get(), d_targets.get(), d_loss.get(), nullptr, rows, cols, nullptr);
    CHECK(normalized_error(d_loss.download<float>(), r.cpu_loss) <= 1e-5);
  }
}

// Targets on the first and last column and on both sides of a 16-byte pack boundary (the
// gradient's −1/rows is applied per pack by the thread holding the target), in rows held in
// registers, rows cached in shared memory and rows streamed twice.
TEST_CASE_TEMPLATE("cuda kernels: cross-entropy targets at row and pack ends", D, float, __nv_bfloat16) {
  using H = host_t<D>;
  for (const int64_t cols : {int64_t{4096}, int64_t{50304}, int64_t{140000}}) {
    CAPTURE(cols);
    const std::vector<int32_t> targets = {0, static_cast<int32_t>(cols - 1), 7, 8, 15, 16,
                                          static_cast<int32_t>(cols / 2)};
    const auto rows = static_cast<int64_t>(targets.size());
    auto logits = random_values<H>(rows * cols, 33, -4.0f, 4.0f);
    // One dominant logit per row (on its target in even rows): the max is not a random one.
    for (int64_t r = 0; r < rows; ++r)
      logits[static_cast<size_t>(r * cols + (r % 2 == 0 ? targets[static_cast<size_t>(r)] : cols / 3))] = host::from_f32<H>(12.0f);
    const CrossEntropyResults<D> r = run_cross_entropy<D>(logits, targets, rows, cols);
    CHECK(normalized_error(r.gpu_loss, r.cpu_loss) <= 1e-5);
    // fp32: with one dominant logit the reference's sequential fp32 Σexp (50304 tiny terms
    // added to ≈1.5) is itself off by ~2.5e-5 relative; the kernel sums in a tree.
    CHECK(normalized_error(r.gpu_grad, r.cpu_grad) <= (std::is_same_v<D, float> ? 1e-4 : tolerance<D>()));
  }
}

namespace {

// One tensor of an AdamW test in a given storage, with host and device copies.
struct Tensor {
  host::Storage type;
  std::vector<uint8_t> host;
  void* dev = nullptr;
  Tensor(host::Storage t, int64_t n, uint32_t seed, float lo, float hi) : type(t) {
    host.resize(static_cast<size_t>(n * host::bytes_of(t)));
    const auto vals = random_values<float>(n, seed, lo, hi);
    cpu::convert(vals.data(), host::Storage::f32, host.data(), t, n);
    PERFSIM_CUDA_CHECK(cudaMalloc(&dev, host.size()));
    PERFSIM_CUDA_CHECK(cudaMemcpy(dev, host.data(), host.size(), cudaMemcpyHostToDevice));
  }
  ~Tensor() { cudaFree(dev); }
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;
  [[nodiscard]] double error() const {
    std::vector<uint8_t> got(host.size());
    PERFSIM_CUDA_CHECK(cudaMemcpy(got.data(), dev, got.size(), cudaMemcpyDeviceToHost));
    const int64_t n = static_cast<int64_t>(host.size()) / host::bytes_of(type);
    std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
    cpu::convert(got.data(), type, a.data(), host::Storage::f32, n);
    cpu::convert(host.data(), type, b.data(), host::Storage::f32, n);
    return normalized_error(a, b);
  }
};

struct Group {
  Tensor param, grad, m, v, weight;
  int64_t n;
  Group(int64_t n_, host::Storage p, host::Storage g, uint32_t seed)
      : param(p, n_, seed, -1, 1), grad(g, n_, seed + 1, -1, 1), m(host::Storage::f32, n_, seed + 2, -0.1f, 0.1f),
        v(host::Storage::f32, n_, seed + 3, 0.0f, 0.01f), weight(host::Storage::bf16, n_, seed + 4, 0, 0), n(n_) {}
  [[nodiscard]] ops::AdamWGroup view(bool device) const {
    auto ptr = [&](const Tensor& t) -> void* { return device ? t.dev : const_cast<uint8_t*>(t.host.data()); };
    return {ptr(param), param.type, ptr(grad), grad.type, ptr(m), m.type, ptr(v), v.type,
            ptr(weight), weight.type, n};
  }
};

}  // namespace

TEST_CASE("cuda kernels: AdamW fused and unfused match the CPU reference") {
  const ops::AdamWParams p{.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f, .step = 3};
  for (const int passes : {1, 2, 4}) {
    CAPTURE(passes);
    // fp32 everything; an fp32 master with bf16 gradients and a bf16 weight copy; a tiny tail.
    Group g0(10007, host::Storage::f32, host::Storage::f32, 40);
    Group g1(5000, host::Storage::f32, host::Storage::bf16, 50);
    Group g2(3, host::Storage::f16, host::Storage::f16, 60);
    std::vector<ops::AdamWGroup> host{g0.view(false), g1.view(false), g2.view(false)};
    std::vector<ops::AdamWGroup> dev{g0.view(true), g1.view(true), g2.view(true)};
    host[0].weight = dev[0].weight = nullptr;  // no low-precision copy for this one
    if (passes == 1) {
      const auto desc = cuda::adamw_descriptors(dev);
      DeviceBuffer<uint8_t> d_desc(cuda::adamw_workspace_bytes(static_cast<int64_t>(desc.size())));
      PERFSIM_CUDA_CHECK(cudaMemcpy(d_desc.get(), desc.data(), desc.size() * sizeof(desc[0]), cudaMemcpyHostToDevice));
      cuda::adamw_fused(reinterpret_cast<const cuda::AdamWDeviceGroup*>(d_desc.get()),
                        static_cast<int64_t>(desc.size()), cuda::adamw_total_chunks(desc), p, nullptr);
      PERFSIM_CUDA_CHECK(cudaDeviceSynchronize());
    } else {
      cuda::adamw_unfused(dev, p, passes, nullptr);
      PERFSIM_CUDA_CHECK(cudaDeviceSynchronize());
    }
    cpu::adamw(host, p, passes);
    for (const Group* g : {&g0, &g1, &g2}) {
      CHECK(g->param.error() <= 1e-5);
      CHECK(g->m.error() <= 1e-5);
      CHECK(g->v.error() <= 1e-5);
    }
    CHECK(g1.weight.error() <= 1e-2);
    CHECK(g2.weight.error() <= 1e-2);
  }
}

TEST_CASE_TEMPLATE("cuda kernels: kv_append and slice_last_token match the CPU reference", D, float,
                   __nv_bfloat16, __half) {
  using H = host_t<D>;
  const ops::KvAppendShape s{.batch = 3, .seq_new = 5, .capacity = 16, .row = 24, .position = 7};
  const auto k_new = random_values<H>(s.batch * s.seq_new * s.row, 70);
  auto cache = random_values<H>(s.batch * s.capacity * s.row, 71);
  DeviceBuffer<D> d_new(k_new), d_cache(cache);
  cuda::kv_append(d_new.get(), d_cache.get(), s, nullptr);
  cpu::kv_append(k_new.data(), cache.data(), s);
  CHECK(normalized_error(d_cache.download(), cache) == 0.0);
  const ops::KvAppendShape too_far{.batch = 1, .seq_new = 5, .capacity = 16, .row = 24, .position = 12};
  CHECK_THROWS_AS(cuda::kv_append(d_new.get(), d_cache.get(), too_far, nullptr), std::out_of_range);

  const int64_t batch = 3, seq = 7, cols = 35;
  const auto x = random_values<H>(batch * seq * cols, 72);
  DeviceBuffer<D> d_x(x), d_y(batch * cols);
  std::vector<H> y(static_cast<size_t>(batch * cols));
  d_y.poison();
  cuda::slice_last_token(d_x.get(), d_y.get(), batch, seq, cols, nullptr);
  cpu::slice_last_token(x.data(), y.data(), batch, seq, cols);
  CHECK(normalized_error(d_y.download(), y) == 0.0);
}

TEST_CASE_TEMPLATE("cuda kernels: paged kv_append matches the CPU reference", D, float, __nv_bfloat16, __half) {
  using H = host_t<D>;
  // 3 sequences of 4 pages of 4 rows in a shuffled pool; 5 rows appended at position 6 cross
  // two page boundaries. Rows of 24 elements take the 16-byte path (fp32 and 16-bit), 20
  // 16-bit elements (40 bytes) the element path.
  const ops::PagedLayout p{.block = 4, .max_blocks = 4, .num_blocks = 12};
  const std::vector<int32_t> table{7, 2, 11, 0, 5, 9, 1, 3, 10, 4, 8, 6};
  for (int64_t row : {24, 20}) {
    CAPTURE(row);
    const ops::KvAppendShape s{.batch = 3, .seq_new = 5, .capacity = 16, .row = row, .position = 6};
    const auto k_new = random_values<H>(s.batch * s.seq_new * s.row, 73);
    auto pages = random_values<H>(p.num_blocks * p.block * s.row, 74);
    DeviceBuffer<D> d_new(k_new), d_pages(pages);
    DeviceBuffer<int32_t> d_table(table);
    cuda::paged_kv_append(d_new.get(), d_pages.get(), d_table.get(), s, p, nullptr);
    cpu::paged_kv_append(k_new.data(), pages.data(), table.data(), s, p);
    CHECK(normalized_error(d_pages.download(), pages) == 0.0);
    ops::KvAppendShape too_far = s;
    too_far.position = 12;
    CHECK_THROWS_AS(cuda::paged_kv_append(d_new.get(), d_pages.get(), d_table.get(), too_far, p, nullptr),
                    std::out_of_range);
  }
}

TEST_CASE("cuda kernels: copy_tensor converts like the CPU reference") {
  const int64_t n = 10001;
  const host::Storage types[] = {host::Storage::f32, host::Storage::bf16, host::Storage::f16};
  for (const host::Storage from : types)
    for (const host::Storage to : types) {
      CAPTURE(cpu::name_of(from));
      CAPTURE(cpu::name_of(to));
      const auto vals = random_values<float>(n, 80, -100.0f, 100.0f);
      std::vector<uint8_t> src(static_cast<size_t>(n * host::bytes_of(from))), want(static_cast<size_t>(n * host::bytes_of(to)));
      cpu::convert(vals.data(), host::Storage::f32, src.data(), from, n);
      cpu::copy_tensor(src.data(), from, want.data(), to, n);
      DeviceBuffer<uint8_t> d_src(src), d_dst(static_cast<int64_t>(want.size()));
      d_dst.poison();
      cuda::copy_tensor(d_src.get(), from, d_dst.get(), to, n, nullptr);
      CHECK(d_dst.download<uint8_t>() == want);  // rounding is exact: bit-identical
    }
}

TEST_CASE_TEMPLATE("cuda kernels: fp8 quantization uses the tensor's absmax", D, float, __nv_bfloat16,
                   __half) {
  using H = host_t<D>;
  const int64_t n = 100003;
  const auto x = random_values<H>(n, 90, -3.0f, 3.0f);
  float amax = 0;
  for (const H& v : x) amax = std::max(amax, std::abs(host::to_f32(v)));
  DeviceBuffer<D> d_x(x);
  DeviceBuffer<__nv_fp8_e4m3> d_y(n);
  DeviceBuffer<float> d_scale(1), ws(1);
  d_y.poison();
  cuda::fp8_quantize(d_x.get(), d_y.get(), d_scale.get(), n, ws.get(), nullptr);
  const auto y = d_y.download<uint8_t>();
  const auto scale = d_scale.download<float>();
  CHECK(scale[0] == amax / cuda::fp8_e4m3_max);
  const float inv = cuda::fp8_e4m3_max / amax;
  int64_t mismatches = 0;
  double max_rel = 0;
  for (int64_t i = 0; i < n; ++i) {
    const __nv_fp8_e4m3 want(host::to_f32(x[static_cast<size_t>(i)]) * inv);  // host conversion
    uint8_t want_bits;
    std::memcpy(&want_bits, &want, 1);
    mismatches += y[static_cast<size_t>(i)] != want_bits;
    __nv_fp8_e4m3 got;
    std::memcpy(&got, &y[static_cast<size_t>(i)], 1);
    max_rel = std::max(max_rel, std::abs(static_cast<double>(float(got)) * scale[0] - host::to_f32(x[static_cast<size_t>(i)])) / amax);
  }
  CHECK(mismatches == 0);
  CHECK(max_rel <= 1.0 / 16);  // e4m3 keeps 3 mantissa bits: half an ulp is ≤ 1/16 relative
}

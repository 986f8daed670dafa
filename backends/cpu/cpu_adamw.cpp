// AdamW (Loshchilov & Hutter 2019, decoupled weight decay) over groups of parameter
// tensors. Values are widened to float a block at a time, so each tensor keeps its own
// storage (fp32 master and states, bf16 gradients and weights). An unfused optimizer makes
// several sweeps over memory (framework "foreach" kernels: decay, m, v, update); a fused
// one does every stage of a block while it is in cache, over all groups in one launch.
#include <cmath>

#include "backends/cpu/cpu_kernels.hpp"
#include "backends/cpu/kernel_util.hpp"
#include "backends/cpu/host_names.hpp"

namespace perfsim::cpu {

namespace {

constexpr int64_t block = 2048;  // elements per work item

enum Stage : unsigned { decay = 1, moment1 = 2, moment2 = 4, update = 8 };

void load(const void* base, Storage t, int64_t off, int64_t n, float* dst) {
  convert(static_cast<const char*>(base) + off * bytes_of(t), t, dst, Storage::f32, n);
}
void store(const float* src, void* base, Storage t, int64_t off, int64_t n) {
  convert(src, Storage::f32, static_cast<char*>(base) + off * bytes_of(t), t, n);
}

// Applies `stages` to elements [off, off + n) of one group.
void run_block(const AdamWGroup& g, const AdamWParams& p, unsigned stages, int64_t off, int64_t n) {
  const bool need_g = stages & (moment1 | moment2);
  const bool need_p = stages & (decay | update);
  const bool need_m = stages & (moment1 | update);
  const bool need_v = stages & (moment2 | update);
  float* pf = detail::thread_scratch(0, block);
  float* gf = detail::thread_scratch(1, block);
  float* mf = detail::thread_scratch(2, block);
  float* vf = detail::thread_scratch(3, block);
  if (need_p) load(g.param, g.param_type, off, n, pf);
  if (need_g) load(g.grad, g.grad_type, off, n, gf);
  if (need_m) load(g.m, g.m_type, off, n, mf);
  if (need_v) load(g.v, g.v_type, off, n, vf);
  if (stages & decay) {
    const float keep = 1.0f - p.lr * p.weight_decay;
    for (int64_t i = 0; i < n; ++i) pf[i] *= keep;
  }
  if (stages & moment1)
    for (int64_t i = 0; i < n; ++i) mf[i] = p.beta1 * mf[i] + (1.0f - p.beta1) * gf[i];
  if (stages & moment2)
    for (int64_t i = 0; i < n; ++i) vf[i] = p.beta2 * vf[i] + (1.0f - p.beta2) * gf[i] * gf[i];
  if (stages & update) {
    const auto t = static_cast<double>(p.step);
    const auto c1 = static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(p.beta1), t)));
    const auto c2 = static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(p.beta2), t)));
    for (int64_t i = 0; i < n; ++i) pf[i] -= p.lr * (mf[i] * c1) / (std::sqrt(vf[i] * c2) + p.eps);
  }
  if (need_p) store(pf, g.param, g.param_type, off, n);
  if (stages & moment1) store(mf, g.m, g.m_type, off, n);
  if (stages & moment2) store(vf, g.v, g.v_type, off, n);
  if ((stages & update) && g.weight != nullptr) store(pf, g.weight, g.weight_type, off, n);
}

int64_t blocks_of(const AdamWGroup& g) { return (g.n + block - 1) / block; }

}  // namespace

void adamw(const std::vector<AdamWGroup>& groups, const AdamWParams& p, int passes) {
  constexpr unsigned stage_list[] = {decay, moment1, moment2, update};
  constexpr unsigned all_stages = decay | moment1 | moment2 | update;
  if (passes <= 1) {
    // Fused: one launch over every block of every group.
    std::vector<std::pair<std::size_t, int64_t>> items;  // (group, first element)
    for (std::size_t gi = 0; gi < groups.size(); ++gi)
      for (int64_t b = 0; b < blocks_of(groups[gi]); ++b) items.emplace_back(gi, b * block);
    parallel_for(static_cast<int64_t>(items.size()), 8, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const auto [gi, off] = items[static_cast<std::size_t>(i)];
        run_block(groups[gi], p, all_stages, off, std::min(block, groups[gi].n - off));
      }
    });
    return;
  }
  // Unfused: stage s goes to sweep ⌊s·n/4⌋, each sweep a separate pass over each tensor.
  const int sweeps = std::min(passes, 4);
  for (const AdamWGroup& g : groups)
    for (int sw = 0; sw < sweeps; ++sw) {
      unsigned stages = 0;
      for (int s = 0; s < 4; ++s)
        if (s * sweeps / 4 == sw) stages |= stage_list[s];
      parallel_for(blocks_of(g), 8, [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b)
          run_block(g, p, stages, b * block, std::min(block, g.n - b * block));
      });
    }
}

}  // namespace perfsim::cpu

// Runs on CPU ranks (mpirun -np N mpi_step_check SCENARIO) and checks that
// every step of the scenario's stack, executed as a parallel layout over the N
// ranks, computes what one rank's unsharded step over the whole batch computes:
// the same per-token loss, the same averaged gradients and the same updated
// parameters, each within an fp32 tolerance (fp32 steps: in 16-bit precision
// the ranks' partial gradients round before they are summed, the reference's
// after, so the two differ by design). Every rank checks
// its own part (its micro-batch, its shards) against the reference it computes
// itself; rank 0 prints one line per step and the exit code is non-zero when
// any rank found a difference.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/mpi/mpi_world.hpp"
#ifdef PERFSIM_HAVE_CUDA
#include "backends/cuda/cuda_backend.hpp"
#endif
#include "core/errors.hpp"
#include "core/parallel/micro_batches.hpp"
#include "core/parallel/plan.hpp"
#include "core/run/rank_execution.hpp"
#include "dsl/dsl.hpp"

namespace {

using namespace perfsim;

// |a − b| ≤ abs + rel·|b|: fp32 sums taken in another order (the ranks' partial
// sums, then the collective's) differ in the last bits, never more.
struct Tolerance {
  double abs, rel;
};
constexpr Tolerance loss_tol{1e-6, 1e-5};
constexpr Tolerance grad_tol{1e-7, 1e-4};
// AdamW's first step moves a weight by about lr·g/(|g| + eps): where g is a
// rounding error away from 0 it can go either way, so updated weights are
// compared where |g| is clear of it.
constexpr Tolerance weight_tol{1e-6, 1e-5};
constexpr double clear_gradient = 1e-6;

// 16-bit tensors: two units in the last place of their storage.
Tolerance widened(Tolerance t, const Tensor& x) {
  if (x.dtype == DType::bf16) return {t.abs, std::max(t.rel, 2.0 / 256)};
  if (x.dtype == DType::fp16) return {t.abs, std::max(t.rel, 2.0 / 2048)};
  return t;
}

struct Check {
  std::string what;
  double worst = 0;  // largest |a − b| / (abs + rel·|b|): ≤ 1 passes
  int64_t compared = 0;
  std::string where;
  void add(double got, double want, Tolerance t, const std::string& name, int64_t index) {
    const double score = std::abs(got - want) / (t.abs + t.rel * std::abs(want));
    ++compared;
    if (!(score <= worst) || std::isnan(score)) {
      worst = std::isnan(score) ? INFINITY : score;
      where = fmt::format("{}[{}]: {} vs {}", name, index, got, want);
    }
  }
};

const Tensor* find(const Graph& g, const std::string& name) {
  for (const Tensor& t : g.tensors)
    if (t.name == name) return &t;
  return nullptr;
}

// The whole tensor a rank tensor stands for, in the reference: its shard's
// whole, or itself (a micro-batch's loss: the loss of every token).
std::string whole_name(const Tensor& t) {
  std::string base;
  if (micro_batch_of(t.name, &base) >= 0) return base;
  return t.shard.empty() ? t.name : t.shard.front().of;
}

bool is_loss(const Tensor& t) { return whole_name(t) == "cross_entropy.loss"; }

struct Values {
  std::map<std::string, std::vector<float>> by_name;
};

// The backend the steps run on: the CPU (every op, MPI collectives) or, with --backend cuda, the
// GPUs (one a rank, NCCL); the reference runs on the same backend alone.
struct StepBackend {
  cpu::CpuBackend cpu;
#ifdef PERFSIM_HAVE_CUDA
  std::unique_ptr<cuda::CudaBackend> gpu;
#endif
  void join(Communicator* ranks) {
#ifdef PERFSIM_HAVE_CUDA
    if (gpu) return gpu->join_ranks(ranks);
#endif
    cpu.join_ranks(ranks);
  }
  std::vector<std::vector<float>> evaluate(const Graph& g, const std::vector<int>& ids) {
#ifdef PERFSIM_HAVE_CUDA
    if (gpu) return gpu->evaluate(g, 42, ids);
#endif
    return cpu.evaluate(g, 42, ids);
  }
};

Values evaluate(StepBackend& backend, const Graph& g, const std::vector<const Tensor*>& tensors) {
  std::vector<int> ids;
  for (const Tensor* t : tensors) ids.push_back(t->id);
  const std::vector<std::vector<float>> got = backend.evaluate(g, ids);
  Values v;
  for (std::size_t i = 0; i < tensors.size(); ++i) v.by_name[tensors[i]->name] = got[i];
  return v;
}

// Compares rank tensor `t` (values `mine`) with its whole in the reference
// (values `ref`).
void compare(Check& c, const Tensor& t, const std::vector<float>& mine, const std::vector<float>& ref, int rank,
             Tolerance tol, const std::vector<float>* ref_grad = nullptr) {
  for_each_whole_run(t, rank, [&](int64_t local, int64_t whole, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      const auto w = static_cast<std::size_t>(whole + i);
      if (ref_grad != nullptr && std::abs((*ref_grad)[w]) < clear_gradient) continue;
      c.add(mine[static_cast<std::size_t>(local + i)], ref[w], tol, t.name, whole + i);
    }
  });
}

}  // namespace

int main(int argc, char** argv) {
  // --break-averaging: gradients summed over the ranks instead of averaged, a fault the check
  // must catch (the mpi_check_detects test); --break-expert-scaling: expert gradients left
  // unscaled by 1/ep (mpi_check_detects_expert_scaling). --backend cuda: the steps on GPU ranks.
  bool break_averaging = false, break_expert_scaling = false, use_gpu = false;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--break-averaging")
      break_averaging = true;
    else if (a == "--break-expert-scaling")
      break_expert_scaling = true;
    else if (a == "--backend" && i + 1 < argc)
      use_gpu = std::string(argv[++i]) == "cuda";
    else
      files.push_back(a);
  }
  if (files.empty()) {
    std::fprintf(stderr,
                 "usage: mpirun -np N mpi_step_check [--break-averaging] [--break-expert-scaling] [--backend cuda] "
                 "SCENARIO.lua...\n");
    return 2;
  }
  if (use_gpu) use_local_gpu();
  MpiWorld world;
  try {
    StepBackend backend;
    if (use_gpu) {
#ifdef PERFSIM_HAVE_CUDA
      backend.gpu = std::make_unique<cuda::CudaBackend>();
#else
      throw NotExecutable("--backend cuda: this build has no CUDA backend");
#endif
    }
    int failed = 0;
    for (const std::string& file : files) {
      const ScriptOutcome out = run_script(file);
      if (!out.scenario) throw ConfigError(file + " declares no scenario");
      const Scenario& s = *out.scenario;
      for (std::size_t i = 0; i < s.stacks.size(); ++i) {
        ParallelSpec layout = step_parallel(s.parallel, s.stacks, i);
        // The ranks as two nodes, so hybrid_shard shards within one and
        // all-reduces across.
        layout.node_gpus = std::max(1, world.size() / 2);
        if (layout.gpus() != world.size())
          throw ConfigError(
              fmt::format("step '{}' has {} GPUs, the run {} ranks", s.stacks[i].name, layout.gpus(), world.size()));
        // The reference: one rank, every data-parallel rank's micro-batches in
        // one batch.
        const int micro = static_cast<int>(s.workload.grad_accum);
        if (micro > 1 && layout.pp == 1)
          throw ConfigError(fmt::format("step '{}': grad_accum > 1 is compared for pipelines only (a rank of "
                                        "another layout runs one micro-batch)",
                                        s.stacks[i].name));
        Workload whole = s.workload;
        whole.batch *= layout.dp * micro;
        whole.grad_accum = 1;
        const Graph ref = build_stack_graph(s.model, whole, s.stacks, i, BuildOptions{});
        std::vector<RankGraph> stages = build_rank_graphs(s.model, s.workload, s.stacks, i, layout, 0);
        const int stage = stage_of_rank(layout, world.rank());
        Graph mine = std::move(stages.at(static_cast<std::size_t>(stage)).graph);
        // A pipeline of several micro-batches runs them in its schedule's order.
        if (micro > 1) mine = unroll_micro_batches(mine, layout, stage).graph;
        if (break_averaging)
          for (Op& op : mine.ops) op.attrs.average = false;
        if (break_expert_scaling)
          for (Op& op : mine.ops) op.attrs.expert_grad_scale = 1;

        // Loss, gradients and weights (or master weights) as the rank holds
        // them.
        std::vector<const Tensor*> my_tensors, ref_tensors;
        std::map<std::string, TensorRole> kind;
        for (const Tensor& t : mine.tensors) {
          const bool loss = is_loss(t);
          // Under ZeRO the full-size gradient holds the rank's own sum; its
          // shard is the average. (A routed expert's gradient is a part of the
          // whole too: averaged unless ZeRO shards it further.)
          const bool averaged_gradient =
              t.role == TensorRole::gradient && is_persistent(t) &&
              (layout.sharding_stage() == 0 || (!t.shard.empty() && find(mine, t.name + ".shard") == nullptr));
          const bool param = t.role == TensorRole::weight || t.role == TensorRole::master_weight || averaged_gradient;
          if (!loss && !param) continue;
          // A full-size copy gathered before use (ZeRO-3) holds the weights before the update.
          if (t.transient) continue;
          const Tensor* r = find(ref, whole_name(t));
          if (r == nullptr) continue;  // a bucket buffer, a gathered copy: no reference twin
          my_tensors.push_back(&t);
          ref_tensors.push_back(r);
        }
        const Values want = evaluate(backend, ref, ref_tensors);
        backend.join(&world);
        const Values got = evaluate(backend, mine, my_tensors);
        backend.join(nullptr);

        Check loss, grads, weights;
        loss.what = "loss", grads.what = "gradients", weights.what = "weights";
        for (const Tensor* t : my_tensors) {
          const std::string of = whole_name(*t);
          const std::vector<float>& ref_values = want.by_name.at(of);
          const std::vector<float>& my_values = got.by_name.at(t->name);
          if (is_loss(*t)) {
            // One loss per token: the rank's are its micro-batch's, its part of
            // the whole batch's.
            Tensor part = *t;
            part.shard = {Shard{of, {t->shape[0] * layout.dp * micro}, 0, layout.dp, layout.dp_stride(),
                                std::max(0, micro_batch_of(t->name)), micro}};
            if (layout.cp > 1) {
              // Context parallelism: the tokens of the rank's two chunks of each sequence.
              const int64_t seq = s.workload.seq, batch = t->shape[0] * layout.cp / seq;
              Shard chunks{of, {batch, seq}, 1, layout.cp, layout.cp_stride()};
              chunks.balanced = true;
              part.shard.front().whole = {batch * layout.dp * micro, seq};
              part.shard.push_back(chunks);
            }
            compare(loss, part, my_values, ref_values, world.rank(), loss_tol);
          } else if (t->role == TensorRole::gradient) {
            compare(grads, *t, my_values, ref_values, world.rank(), widened(grad_tol, *t));
          } else {
            // The weight's gradient in the reference says which elements moved
            // clear of noise.
            const auto g = want.by_name.find(
                of.substr(0, of.rfind(".master") == std::string::npos ? of.size() : of.rfind(".master")) + ".grad");
            compare(weights, *t, my_values, ref_values, world.rank(), widened(weight_tol, *t),
                    g != want.by_name.end() ? &g->second : nullptr);
          }
        }
        std::string line = fmt::format("{:<12}", s.stacks[i].name);
        int bad = 0;
        for (const Check* c : {&loss, &grads, &weights}) {
          line += fmt::format("  {} {} compared, worst {:.2f} of tolerance", c->what, c->compared, c->worst);
          // A pipeline stage before the last has no loss: the last stage's ranks compare it.
        const bool none_expected = c == &loss && layout.pp > 1 && stage_of_rank(layout, world.rank()) < layout.pp - 1;
        if (c->worst > 1 || (c->compared == 0 && !none_expected)) {
            ++bad;
            line += fmt::format(" FAILED ({})", c->where.empty() ? "nothing compared" : c->where);
          }
        }
        const std::vector<std::string> lines = world.gather_to_root(line);
        for (std::size_t r = 0; r < lines.size(); ++r) fmt::print("rank {}: {}\n", r, lines[r]);
        std::fflush(stdout);
        failed += bad;
      }
    }
    std::vector<float> all{static_cast<float>(failed)};
    world.all_reduce_sum(all.data(), 1, RankGroup{world.size(), 1});
    if (world.rank() == 0) fmt::print("{}\n", all[0] == 0 ? "all steps match the single-rank step" : "MISMATCH");
    return all[0] == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpi_step_check: rank %d: %s\n", world.rank(), e.what());
    world.abort(1);
  }
}

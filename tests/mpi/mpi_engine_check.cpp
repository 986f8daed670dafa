// Serving engine steps on CPU ranks, checked against one rank.
//   mpi_engine_check MODEL: a tensor-parallel engine's steps against the same steps on one rank:
//     two prompts (one after a first chunk on scattered pages) and a decode, packed as the engine
//     packs them; the TP steps' gathered logits must be the single rank's (fp32: within 1e-4).
//   mpi_engine_check MODEL kv (2 ranks): a disaggregated engine's KV hand-off. Rank 0 prefills a
//     prompt on pages 3, 0, 5 and sends them (cpu::send_kv_pages); rank 1, whose pool holds
//     another prompt, takes them into pages 6, 2, 4. The prompt's next token decoded on each
//     rank's pages must give the same logits exactly (without the pages, rank 1 reads zeros).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backends/cpu/cpu_graph_runner.hpp"
#include "backends/cpu/kv_transfer.hpp"
#include "backends/cpu/shared_tensors.hpp"
#include "backends/mpi/mpi_world.hpp"
#include "core/builders/builders.hpp"
#include "core/config/model.hpp"
#include "core/run/backend.hpp"
#include "dsl/dsl.hpp"

using namespace perfsim;

namespace {

constexpr uint64_t seed = 11;

struct Part {
  int32_t first = 0;  // its ids: (first + 7j) mod 100
  int64_t from = 0, to = 0;
  std::vector<int32_t> blocks;
};

std::pair<EngineStepShape, StepInputs> step_of(const ModelConfig& m, const std::vector<Part>& parts, int64_t block) {
  EngineStepShape sh;
  sh.kv_block = block;
  sh.pool_blocks = 16;
  sh.table_width = m.max_seq / block;
  std::vector<int32_t> ids, positions, slots, table, query_start{0}, kv_len, rows;
  for (const Part& p : parts) {
    sh.q_len.push_back(p.to - p.from);
    sh.kv_len.push_back(p.to);
    for (int64_t j = p.from; j < p.to; ++j) {
      ids.push_back(static_cast<int32_t>((p.first + 7 * j) % 100));
      positions.push_back(static_cast<int32_t>(j));
      slots.push_back(static_cast<int32_t>(p.blocks[static_cast<std::size_t>(j / block)] * block + j % block));
    }
    for (int64_t c = 0; c < sh.table_width; ++c)
      table.push_back(static_cast<std::size_t>(c) < p.blocks.size() ? p.blocks[static_cast<std::size_t>(c)] : 0);
    query_start.push_back(query_start.back() + static_cast<int32_t>(p.to - p.from));
    kv_len.push_back(static_cast<int32_t>(p.to));
    rows.push_back(query_start.back() - 1);
  }
  sh.sampled = static_cast<int64_t>(rows.size());
  StepInputs in{{engine_input::tokens, ids},           {engine_input::positions, positions},
                {engine_input::slots, slots},          {engine_input::block_table, table},
                {engine_input::query_start, query_start}, {engine_input::kv_len, kv_len},
                {engine_input::sample_rows, rows}};
  return {sh, in};
}

// Runs the engine's steps in order on `shared` pages; returns the last step's logits (gathered
// over the vocabulary slices under tensor parallelism).
std::vector<float> run_steps(const ModelConfig& m, const std::vector<std::vector<Part>>& steps, int tp,
                             Communicator* ranks, cpu::SharedTensors& shared) {
  BuildOptions o;
  o.parallel.tp = tp;
  std::vector<float> out;
  for (const auto& parts : steps) {
    const auto [shape, inputs] = step_of(m, parts, 4);
    const Graph g = build_engine_step(m, shape, o);
    cpu::GraphRunner runner(g, seed, tp > 1 ? ranks : nullptr, &shared);
    for (const auto& [name, values] : inputs) runner.write(g.find_tensor(name), values);
    // The logits the engine samples from: the gathered ones under tensor parallelism.
    int logits = g.find_tensor("lm_head.out");
    for (const Op& op : g.ops)
      if (op.kind == OpKind::collective && op.name.rfind("lm_head", 0) == 0) logits = op.outputs.front();
    std::vector<char> keep(g.tensors.size(), 0);
    keep[static_cast<std::size_t>(logits)] = 1;
    runner.run_once(nullptr, &keep);
    out = runner.read(logits);
  }
  return out;
}

int check_kv_hand_off(const ModelConfig& m, MpiWorld& world) {
  if (world.size() != 2) {
    if (world.rank() == 0) fmt::print(stderr, "the KV hand-off check runs on 2 ranks, not {}\n", world.size());
    return 2;
  }
  cpu::SharedTensors shared;
  const std::vector<int64_t> sent{3, 0, 5}, taken{6, 2, 4};
  std::vector<int32_t> pages;
  if (world.rank() == 0) {
    (void)run_steps(m, {{Part{1, 0, 9, {3, 0, 5}}}}, 1, nullptr, shared);
    cpu::send_kv_pages(shared, sent, world, 1);
    pages = {3, 0, 5};
  } else {
    (void)run_steps(m, {{Part{4, 0, 12, {6, 2, 4}}}}, 1, nullptr, shared);
    cpu::receive_kv_pages(shared, taken, world, 0);
    pages = {6, 2, 4};
  }
  std::vector<float> logits = run_steps(m, {{Part{1, 9, 10, pages}}}, 1, nullptr, shared);
  std::vector<float> other(logits.size());
  if (world.rank() == 1) {
    world.send(logits.data(), static_cast<int64_t>(logits.size() * sizeof(float)), 0, 7);
    return 0;
  }
  world.recv(other.data(), static_cast<int64_t>(other.size() * sizeof(float)), 1, 7);
  const bool ok = logits == other;
  fmt::print("rank 0: a prompt's KV pages sent to rank 1 decode there as here: logits {} ({} values)\n",
             ok ? "identical" : "DIFFER", logits.size());
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  MpiWorld world;
  const std::string model = argc > 1 ? argv[1] : "tiny-llama";
  const ModelConfig m = find_model(model);
  if (argc > 2 && std::string(argv[2]) == "kv") return check_kv_hand_off(m, world);
  const int tp = world.size();
  // Step 1: a prompt of 9 tokens over pages 3, 0, 5 and the first 6 of another over pages 1, 7.
  // Step 2: a decode of the first (its 10th token) beside the rest of the second (tokens 6-12).
  const std::vector<std::vector<Part>> steps = {
      {Part{1, 0, 9, {3, 0, 5}}, Part{4, 0, 6, {1, 7}}},
      {Part{1, 9, 10, {3, 0, 5}}, Part{4, 6, 13, {1, 7, 2, 9}}},
  };
  cpu::SharedTensors one, split_pages;
  const std::vector<float> whole = run_steps(m, steps, 1, nullptr, one);
  const std::vector<float> gathered = run_steps(m, steps, tp, &world, split_pages);
  // The all-gather lays the ranks' slices one after the other ([tp][rows][vocab / tp]); the
  // single rank's logits are [rows][vocab].
  std::vector<float> split(gathered.size());
  const auto rows = static_cast<int64_t>(steps.back().size());
  const int64_t slice = static_cast<int64_t>(gathered.size()) / (rows * tp);
  for (int64_t r = 0; r < tp; ++r)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t c = 0; c < slice; ++c)
        split[static_cast<std::size_t>(i * slice * tp + r * slice + c)] =
            gathered[static_cast<std::size_t>((r * rows + i) * slice + c)];
  double diff = 0, scale = 0;
  const bool same_size = whole.size() == split.size();
  for (std::size_t i = 0; same_size && i < whole.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::abs(whole[i] - split[i])));
    scale = std::max(scale, static_cast<double>(std::abs(whole[i])));
  }
  const double rel = diff / std::max(scale, 1e-30);
  const bool ok = same_size && rel < 1e-4;
  if (world.rank() == 0)
    fmt::print("rank 0: {} engine steps of {} over {} ranks (tp = {}): logits {} ({} values, max relative difference "
               "{:.2e})\n",
               steps.size(), model, tp, tp, ok ? "match the single rank's" : "MISMATCH", split.size(), rel);
  return ok ? 0 : 1;
}

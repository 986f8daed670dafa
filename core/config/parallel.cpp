// ParallelSpec's names, description and checks (see parallel.hpp).
#include "core/config/parallel.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/errors.hpp"

namespace perfsim {

namespace {

// "1, 2, 4 or 8": the degrees from 1 to `limit` for which `fits` holds.
template <class Fits>
std::string degrees_that(int64_t limit, Fits fits) {
  std::vector<int64_t> ok;
  for (int64_t d = 1; d <= limit; ++d)
    if (fits(d)) ok.push_back(d);
  std::string out;
  for (std::size_t i = 0; i < ok.size(); ++i) {
    if (i > 0) out += i + 1 == ok.size() ? " or " : ", ";
    out += std::to_string(ok[i]);
  }
  return out;
}

std::string model_name(const ModelConfig& m) { return m.name.empty() ? "the model" : m.name; }

void check_degree(const char* field, int v) {
  if (v < 1) throw ConfigError(fmt::format("parallel.{} must be a whole number >= 1 (got {})", field, v));
}

void check_tensor_parallel(const ParallelSpec& p, const ModelConfig& m) {
  const int64_t t = p.tp, kv = m.kv_heads_or_heads();
  // Experts split their MLPs over the tensor-parallel ranks as the dense MLP does.
  const int64_t expert = m.moe() ? m.expert_width() : m.ffn_hidden;
  auto fits = [&](int64_t d) {
    return m.heads % d == 0 && kv % d == 0 && m.ffn_hidden % d == 0 && expert % d == 0;
  };
  if (fits(t)) return;
  std::string what;
  if (m.heads % t != 0) what = fmt::format("{}'s {} attention heads", model_name(m), m.heads);
  else if (kv % t != 0) what = fmt::format("{}'s {} KV heads", model_name(m), kv);
  else if (m.ffn_hidden % t != 0) what = fmt::format("{}'s MLP width {}", model_name(m), m.ffn_hidden);
  else what = fmt::format("{}'s expert width {}", model_name(m), expert);
  throw ConfigError(fmt::format("parallel.tp = {} does not divide {}; use tp = {}", t, what,
                                degrees_that(kv, fits)));
}

// Sequence parallelism splits what tensor parallelism leaves whole on every rank (the norms,
// dropout and residuals) over the tensor-parallel ranks: without them there is nothing to split.
void check_sequence_parallel(const ParallelSpec& p) {
  if (p.sp && p.tp == 1)
    throw ConfigError(
        "parallel.sp = true with tp = 1: sequence parallelism splits the norms and dropout of the "
        "tensor-parallel ranks, and there are none; set tp > 1 or drop sp");
}

void check_pipeline(const ParallelSpec& p, const ModelConfig& m, const Workload& w) {
  if (p.pp > m.layers)
    throw ConfigError(fmt::format("parallel.pp = {} is more than {}'s {} layers; use pp <= {}", p.pp,
                                  model_name(m), m.layers, m.layers));
  if (p.interleave > 1 && p.schedule == PipelineSchedule::gpipe)
    throw ConfigError(fmt::format(
        "parallel.interleave = {} needs schedule = \"interleaved\" (interleaved 1F1B; GPipe runs one chunk "
        "per stage)",
        p.interleave));
  if (static_cast<int64_t>(p.pp) * p.interleave > m.layers)
    throw ConfigError(fmt::format(
        "parallel: pp · interleave = {} · {} model chunks is more than {}'s {} layers; lower interleave",
        p.pp, p.interleave, model_name(m), m.layers));
  if (p.pipeline_schedule() == PipelineSchedule::interleaved && p.pp > 1 && w.phase == Phase::train &&
      w.grad_accum % p.pp != 0)
    throw ConfigError(fmt::format(
        "parallel.schedule = \"interleaved\" needs the micro-batches (grad_accum = {}) to be a multiple "
        "of pp = {}",
        w.grad_accum, p.pp));
}

void check_context_parallel(const ParallelSpec& p, const ModelConfig& m, const Workload& w) {
  if (p.cp == 1) return;
  // Ring attention's blocks pair a rank's two chunks with another rank's keys: ALiBi's distances
  // between them are not placed.
  if (m.alibi)
    throw ConfigError(fmt::format("parallel.cp = {} with ALiBi ({}) is not modelled yet: use cp = 1", p.cp,
                                  model_name(m)));
  if (w.phase == Phase::decode)
    throw ConfigError(fmt::format("parallel.cp = {} splits a sequence over GPUs; a decode step has one "
                                  "new token per sequence: use cp = 1",
                                  p.cp));
  const int64_t seq = w.phase == Phase::train ? w.seq : w.prompt;
  const char* field = w.phase == Phase::train ? "seq" : "prompt";
  if (seq % (2 * static_cast<int64_t>(p.cp)) != 0)
    throw ConfigError(fmt::format(
        "parallel.cp = {} cannot split {} = {} into 2·cp = {} equal chunks (causal load balance); use a "
        "cp that divides {}/2",
        p.cp, field, seq, 2 * p.cp, field));
}

void check_expert_parallel(const ParallelSpec& p, const ModelConfig& m) {
  if (p.ep == 1) return;
  if (!m.moe())
    throw ConfigError(fmt::format("parallel.ep = {} needs a mixture-of-experts model; {} has no experts",
                                  p.ep, model_name(m)));
  if (m.experts % p.ep != 0)
    throw ConfigError(fmt::format("parallel.ep = {} does not divide {}'s {} experts; use ep = {}", p.ep,
                                  model_name(m), m.experts,
                                  degrees_that(m.experts, [&](int64_t d) { return m.experts % d == 0; })));
  if (p.dp % p.ep != 0)
    throw ConfigError(fmt::format(
        "parallel.ep = {} must divide dp = {}: expert-parallel ranks are data-parallel ranks that split "
        "the experts; raise dp or use ep = {}",
        p.ep, p.dp, degrees_that(p.dp, [&](int64_t d) { return p.dp % d == 0 && m.experts % d == 0; })));
}

void check_sharding(const ParallelSpec& p, const Workload& w) {
  if (p.zero < 0 || p.zero > 3)
    throw ConfigError(fmt::format("parallel.zero must be a ZeRO stage from 0 to 3 (got {})", p.zero));
  if (p.fsdp != FsdpStrategy::none && p.zero != 0) {
    const int implied = p.sharding_stage();
    if (implied != p.zero)
      throw ConfigError(fmt::format(
          "parallel.zero = {} contradicts fsdp = \"{}\" (which is ZeRO-{}); give one of them", p.zero,
          name_of(p.fsdp), implied));
  }
  if (w.phase != Phase::train && (p.zero != 0 || p.fsdp != FsdpStrategy::none))
    throw ConfigError(fmt::format("parallel.{} shards training state; a {} step has none: leave it out",
                                  p.zero != 0 ? "zero" : "fsdp", name_of(w.phase)));
}

}  // namespace

bool ParallelSpec::parallel() const {
  return gpus() > 1 || ep > 1 || zero != 0 || fsdp != FsdpStrategy::none;
}

int ParallelSpec::sharding_stage() const {
  switch (fsdp) {
    case FsdpStrategy::full_shard: return 3;
    case FsdpStrategy::hybrid_shard: return 3;
    case FsdpStrategy::shard_grad_op: return 2;
    case FsdpStrategy::none: break;
  }
  return zero;
}

int ParallelSpec::shard_ranks() const {
  const int all = gradient_ranks();
  if (fsdp != FsdpStrategy::hybrid_shard || node_gpus <= 0) return all;
  // The data-parallel ranks one node holds, at most: a divisor of all.
  const int per_node = std::max(1, node_gpus / (tp * cp));
  int s = std::min(all, per_node);
  while (all % s != 0) --s;
  return s;
}

int64_t stage_layers(int64_t layers, int pp, int stage) {
  return layers / pp + (stage < layers % pp ? 1 : 0);
}

int64_t stage_first_layer(int64_t layers, int pp, int stage) {
  int64_t first = 0;
  for (int s = 0; s < stage; ++s) first += stage_layers(layers, pp, s);
  return first;
}

std::string describe_stages(int64_t layers, int pp) {
  if (pp <= 1 || layers % pp == 0) return {};
  const int64_t longer = layers % pp;  // stages 0..longer-1 hold one layer more
  auto range = [](int64_t first, int64_t last) {
    return first == last ? fmt::format("stage {}", first) : fmt::format("stages {}-{}", first, last);
  };
  return fmt::format("{} layers on {}, {} on {} (uneven)", layers / pp + 1, range(0, longer - 1), layers / pp,
                     range(longer, pp - 1));
}

const char* name_of(PipelineSchedule s) {
  switch (s) {
    case PipelineSchedule::gpipe: return "gpipe";
    case PipelineSchedule::one_f_one_b: return "1f1b";
    case PipelineSchedule::interleaved: return "interleaved";
  }
  return "?";
}

const char* name_of(FsdpStrategy s) {
  switch (s) {
    case FsdpStrategy::none: return "none";
    case FsdpStrategy::full_shard: return "full_shard";
    case FsdpStrategy::shard_grad_op: return "shard_grad_op";
    case FsdpStrategy::hybrid_shard: return "hybrid_shard";
  }
  return "?";
}

std::vector<std::string> schedule_names() { return {"gpipe", "1f1b", "interleaved"}; }
std::vector<std::string> fsdp_names() { return {"none", "full_shard", "shard_grad_op", "hybrid_shard"}; }

std::string describe(const ParallelSpec& p) {
  if (!p.parallel()) return "single GPU";
  std::string out;
  auto add = [&](const std::string& part) { out += (out.empty() ? "" : " ") + part; };
  const std::pair<const char*, int> degrees[] = {{"tp", p.tp}, {"pp", p.pp}, {"cp", p.cp}, {"ep", p.ep}, {"dp", p.dp}};
  for (const auto& [name, v] : degrees)
    if (v > 1) add(fmt::format("{}={}", name, v));
  if (p.sp) add("sp");
  if (p.fsdp != FsdpStrategy::none) add(fmt::format("fsdp={}", name_of(p.fsdp)));
  else if (p.zero > 0) add(fmt::format("zero={}", p.zero));
  if (p.pp > 1) {
    add(name_of(p.pipeline_schedule()));
    if (p.interleave > 1) out += fmt::format("×{}", p.interleave);
  }
  return out;
}

void set_gpus(ParallelSpec& p, int gpus, const char* field) {
  const int per_replica = p.tp * p.pp * p.cp;
  if (gpus < 1 || per_replica < 1 || gpus % per_replica != 0)
    throw ConfigError(fmt::format(
        "{} = {} is not a multiple of tp · pp · cp = {} · {} · {} = {}; use a multiple of {} GPUs", field,
        gpus, p.tp, p.pp, p.cp, per_replica, per_replica));
  p.dp = gpus / per_replica;
}

void validate(const ParallelSpec& p, const ModelConfig& m, const Workload& w, int gpus) {
  check_degree("dp", p.dp);
  check_degree("tp", p.tp);
  check_degree("pp", p.pp);
  check_degree("cp", p.cp);
  check_degree("ep", p.ep);
  check_degree("interleave", p.interleave);
  if (!(p.bucket_bytes > 0))
    throw ConfigError(fmt::format("parallel.bucket must be a positive size in bytes (got {})", p.bucket_bytes));
  check_sequence_parallel(p);
  check_tensor_parallel(p, m);
  check_pipeline(p, m, w);
  check_context_parallel(p, m, w);
  check_expert_parallel(p, m);
  check_sharding(p, w);
  if (gpus > 0 && p.gpus() != gpus)
    throw ConfigError(fmt::format(
        "parallel: dp · tp · pp · cp = {} · {} · {} · {} = {} GPUs, but gpus = {}; change a degree so the "
        "product is {}",
        p.dp, p.tp, p.pp, p.cp, p.gpus(), gpus, gpus));
}

}  // namespace perfsim

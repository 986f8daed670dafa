// `perfsim list hardware|models|optimizations|profiles`: the catalogs as aligned tables.
// Each catalog is a list of columns, each column its header, alignment and how to print one
// entry, so a header cannot drift from the cell printed under it.
#include <cstdio>
#include <functional>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/subcommands.hpp"
#include "core/passes/passes.hpp"
#include "core/report/report.hpp"
#include "core/report/text_table.hpp"
#include "core/text.hpp"

namespace perfsim {

namespace {

template <class Entry>
struct Column {
  const char* header;
  Align align;
  std::function<std::string(const Entry&)> cell;
};

// `title`, then the entries as an aligned table under it.
template <class Entry>
std::string catalog_table(const std::string& title, const std::vector<Column<Entry>>& columns,
                          const std::vector<Entry>& entries) {
  TextTable t;
  for (const Column<Entry>& c : columns) t.add_column(c.header, c.align);
  for (const Entry& e : entries) {
    std::vector<std::string> row;
    row.reserve(columns.size());
    for (const Column<Entry>& c : columns) row.push_back(c.cell(e));
    t.add_row(std::move(row));
  }
  return title + "\n" + t.to_text(2);
}

constexpr Align left = Align::left;
constexpr Align right = Align::right;

std::string tflops(double flops) { return flops > 0 ? format_sig3(flops / 1e12) : "—"; }

std::string bandwidth(double bytes_per_s) {
  if (bytes_per_s >= 1e12) return format_sig3(bytes_per_s / 1e12) + " TB/s";
  return format_sig3(bytes_per_s / 1e9) + " GB/s";
}

std::string params(double p) {
  if (p >= 1e9) return fmt::format("{:.2f} B", p / 1e9);
  return p >= 1e6 ? format_sig3(p / 1e6) + " M" : format_rate(p);
}

std::string or_dash(const std::string& s) { return s.empty() ? "—" : s; }

std::string list_hardware(const std::string& module_path) {
  const std::vector<Column<Hardware>> columns = {
      {"name", left, [](const Hardware& h) { return h.name; }},
      {"kind", left, [](const Hardware& h) { return h.kind; }},
      {"fp32 TFLOP/s", right, [](const Hardware& h) { return tflops(h.peak(DType::fp32)); }},
      {"bf16 TFLOP/s", right, [](const Hardware& h) { return tflops(h.peak(DType::bf16)); }},
      {"fp8 TFLOP/s", right, [](const Hardware& h) { return tflops(h.peak(DType::fp8)); }},
      {"memory", right, [](const Hardware& h) { return format_sig3(h.memory_bytes / 1e9) + " GB"; }},
      {"bandwidth", right, [](const Hardware& h) { return bandwidth(h.memory_bandwidth); }},
      {"ridge bf16 FLOP/B", right, [](const Hardware& h) {
         return h.memory_bandwidth > 0 && h.ridge_point(DType::bf16) > 0
                    ? format_sig3(h.ridge_point(DType::bf16))
                    : "—";
       }},
  };
  return catalog_table("Hardware catalog (dense datasheet peaks; ridge = bf16 peak / memory bandwidth)",
                       columns, hardware_catalog(module_path));
}

// "8 top-2", "60 top-4 +4 shared" for a mixture of experts; "—" for a dense model.
std::string experts(const ModelConfig& m) {
  if (!m.moe()) return "—";
  std::string out = fmt::format("{} top-{}", m.experts, m.top_k);
  if (m.shared_experts > 0) out += fmt::format(" +{} shared", m.shared_experts);
  return out;
}

std::string list_models(const std::string& module_path) {
  // Image models have no transformer dimensions: a dash, and their residual blocks as layers.
  const auto number = [](int64_t ModelConfig::*field) {
    return [field](const ModelConfig& m) { return m.cnn ? std::string("—") : std::to_string(m.*field); };
  };
  const std::vector<Column<ModelConfig>> columns = {
      {"name", left, [](const ModelConfig& m) { return m.name; }},
      {"style", left,
       [](const ModelConfig& m) { return m.cnn ? "cnn" : m.activation == Activation::swiglu ? "llama" : "gpt"; }},
      {"layers", right,
       [](const ModelConfig& m) { return std::to_string(m.cnn ? m.cnn->blocks() : m.layers); }},
      {"hidden", right, number(&ModelConfig::hidden)},
      {"heads", right, number(&ModelConfig::heads)},
      {"kv heads", right,
       [](const ModelConfig& m) { return m.cnn ? std::string("—") : std::to_string(m.kv_heads_or_heads()); }},
      {"ffn", right, number(&ModelConfig::ffn_hidden)},
      {"vocab", right, number(&ModelConfig::vocab)},
      {"max seq", right, number(&ModelConfig::max_seq)},
      {"experts", left, experts},
      {"params", right, [](const ModelConfig& m) { return params(static_cast<double>(m.params())); }},
      {"active", right, [](const ModelConfig& m) { return params(static_cast<double>(m.active_params())); }},
  };
  return catalog_table("Model zoo (llama: rmsnorm, SwiGLU, rotary; gpt: layernorm, GELU, learned positions; "
                       "cnn: a ResNet-style image classifier, its layers the residual blocks; "
                       "active: parameters one token uses)",
                       columns, model_zoo(module_path));
}

const char* kind_name(OptimizationKind k) {
  switch (k) {
    case OptimizationKind::workload: return "workload";
    case OptimizationKind::parallel: return "parallel layout";
    case OptimizationKind::graph: return "graph pass";
    case OptimizationKind::serve: return "serving knob";
  }
  return "?";
}

std::string list_optimizations() {
  const std::vector<Column<OptimizationInfo>> columns = {
      {"name", left, [](const OptimizationInfo& o) { return o.name; }},
      {"kind", left,
       [](const OptimizationInfo& o) {
         std::string kind = kind_name(o.kind);
         if (o.value == PassValue::required) kind += ", takes a value";
         return kind;
       }},
      {"summary", left, [](const OptimizationInfo& o) { return o.summary; }},
  };
  return catalog_table("Optimizations (use in step(name, ...); value passes as {batch = 32})", columns,
                       optimizations());
}

struct NamedProfile {
  std::string name;
  Hardware hardware;
};

std::string list_profiles(const std::string& module_path) {
  std::vector<NamedProfile> profiles;
  for (const std::string& name : profile_names(module_path))
    profiles.push_back({name, load_profile(name, module_path)});
  if (profiles.empty())
    return "No calibrated profiles on the search path: `perfsim calibrate -o profiles/NAME.lua` "
           "writes one (see docs/CALIBRATION.md)\n";
  const auto measured = [](const NamedProfile& p) -> const Provenance& {
    return p.hardware.calibration.measured_on;
  };
  const std::vector<Column<NamedProfile>> columns = {
      {"name", left, [](const NamedProfile& p) { return p.name; }},
      {"refines", left, [](const NamedProfile& p) { return p.hardware.base; }},
      {"measured on", left,
       [&](const NamedProfile& p) {
         const Provenance& m = measured(p);
         return m.device.empty() ? "—" : m.device + " (" + m.backend + ")";
       }},
      {"date", left, [&](const NamedProfile& p) { return or_dash(measured(p).date); }},
      {"mode", left, [&](const NamedProfile& p) { return or_dash(measured(p).mode); }},
      {"gemm grids", right,
       [](const NamedProfile& p) { return std::to_string(p.hardware.calibration.gemm.size()); }},
      {"kernel curves", right,
       [](const NamedProfile& p) { return std::to_string(p.hardware.calibration.kernels.size()); }},
      {"collectives", right,
       [](const NamedProfile& p) { return std::to_string(p.hardware.calibration.collectives.size()); }},
  };
  return catalog_table("Calibrated profiles (use as hardware = profile \"name\" or --profile NAME; "
                       "`perfsim calibrate` writes new ones)",
                       columns, profiles);
}

struct Category {
  std::vector<std::string> names;  // the first is the one help and errors show
  std::function<std::string(const std::string& module_path)> list;
};

const std::vector<Category>& categories() {
  static const std::vector<Category> all = {
      {{"hardware", "hw"}, list_hardware},
      {{"models", "model"}, list_models},
      {{"optimizations", "optimization"}, [](const std::string&) { return list_optimizations(); }},
      {{"profiles", "profile"}, list_profiles},
  };
  return all;
}

}  // namespace

void add_list_options(CLI::App& cmd, ListArgs& a) {
  cmd.add_option("category", a.category, "hardware, models, optimizations or profiles")
      ->required()
      ->type_name("CATEGORY");
  cmd.add_option("--module-path", a.module_path, "Directory searched first for stdlib modules (custom catalogs)")
      ->type_name("DIR");
}

int cmd_list(const ListArgs& a) {
  const std::string wanted = to_lower(a.category);
  for (const Category& c : categories()) {
    for (const std::string& name : c.names) {
      if (name != wanted) continue;
      const std::string text = c.list(a.module_path);
      std::fwrite(text.data(), 1, text.size(), stdout);
      return 0;
    }
  }
  std::vector<std::string> shown;
  std::string choices;
  for (const Category& c : categories()) {
    if (!shown.empty()) choices += &c == &categories().back() ? " or " : ", ";
    shown.push_back(c.names.front());
    choices += shown.back();
  }
  throw UsageError(fmt::format("unknown category '{}'{}; choose {}", a.category,
                               did_you_mean(a.category, shown), choices));
}

}  // namespace perfsim

// `perfsim list hardware|models|optimizations|profiles`: the catalogs as aligned tables.
#include <cstdio>

#include <fmt/format.h>

#include "cli/subcommands.hpp"
#include "core/passes.hpp"
#include "core/report.hpp"
#include "core/report_sections.hpp"
#include "core/report_text_table.hpp"
#include "core/text.hpp"

namespace perfsim {

namespace {

std::string tflops(double flops) { return flops > 0 ? format_sig3(flops / 1e12) : "—"; }

std::string bandwidth(double bytes_per_s) {
  if (bytes_per_s >= 1e12) return format_sig3(bytes_per_s / 1e12) + " TB/s";
  return format_sig3(bytes_per_s / 1e9) + " GB/s";
}

std::string list_hardware(const std::string& module_path) {
  TextTable t;
  t.add_column("name", Align::left);
  t.add_column("kind", Align::left);
  t.add_column("fp32 TFLOP/s");
  t.add_column("bf16 TFLOP/s");
  t.add_column("fp8 TFLOP/s");
  t.add_column("memory");
  t.add_column("bandwidth");
  t.add_column("ridge bf16 FLOP/B");
  for (const Hardware& h : hardware_catalog(module_path)) {
    const double ridge = h.memory_bandwidth > 0 ? h.ridge_point(DType::bf16) : 0;
    t.add_row({h.name, h.kind, tflops(h.peak(DType::fp32)), tflops(h.peak(DType::bf16)),
               tflops(h.peak(DType::fp8)), format_sig3(h.memory_bytes / 1e9) + " GB",
               bandwidth(h.memory_bandwidth), ridge > 0 ? format_sig3(ridge) : "—"});
  }
  return "Hardware catalog (dense datasheet peaks; ridge = bf16 peak / memory bandwidth)\n" +
         t.to_text(2);
}

std::string list_models(const std::string& module_path) {
  TextTable t;
  t.add_column("name", Align::left);
  t.add_column("style", Align::left);
  t.add_column("layers");
  t.add_column("hidden");
  t.add_column("heads");
  t.add_column("kv heads");
  t.add_column("ffn");
  t.add_column("vocab");
  t.add_column("max seq");
  t.add_column("params");
  for (const ModelConfig& m : model_zoo(module_path)) {
    const double p = static_cast<double>(m.params());
    t.add_row({m.name, m.activation == Activation::swiglu ? "llama" : "gpt",
               std::to_string(m.layers), std::to_string(m.hidden), std::to_string(m.heads),
               std::to_string(m.kv_heads_or_heads()), std::to_string(m.ffn_hidden),
               std::to_string(m.vocab), std::to_string(m.max_seq),
               p >= 1e9 ? fmt::format("{:.2f} B", p / 1e9)
                        : p >= 1e6 ? format_sig3(p / 1e6) + " M" : format_rate(p)});
  }
  return "Model zoo (llama: rmsnorm, SwiGLU, rotary; gpt: layernorm, GELU, learned positions)\n" +
         t.to_text(2);
}

std::string list_optimizations() {
  TextTable t;
  t.add_column("name", Align::left);
  t.add_column("kind", Align::left);
  t.add_column("summary", Align::left);
  for (const OptimizationInfo& o : optimizations()) {
    std::string kind = o.workload_pass ? "workload" : "graph pass";
    if (o.needs_value) kind += ", takes a value";
    t.add_row({o.name, kind, o.summary});
  }
  return "Optimizations (use in step(name, ...); value passes as {batch = 32})\n" + t.to_text(2);
}

std::string list_profiles(const std::string& module_path) {
  TextTable t;
  t.add_column("name", Align::left);
  t.add_column("refines", Align::left);
  t.add_column("measured on", Align::left);
  t.add_column("date", Align::left);
  t.add_column("mode", Align::left);
  t.add_column("gemm grids");
  t.add_column("kernel curves");
  t.add_column("collectives");
  const std::vector<std::string> names = profile_names(module_path);
  if (names.empty())
    return "No calibrated profiles on the search path: `perfsim calibrate -o profiles/NAME.lua` "
           "writes one (see docs/CALIBRATION.md)\n";
  for (const std::string& name : names) {
    const Hardware h = load_profile(name, module_path);
    const Provenance& m = h.calibration.measured_on;
    t.add_row({name, h.base, m.device.empty() ? "—" : m.device + " (" + m.backend + ")",
               m.date.empty() ? "—" : m.date, m.mode.empty() ? "—" : m.mode,
               std::to_string(h.calibration.gemm.size()),
               std::to_string(h.calibration.kernels.size()),
               std::to_string(h.calibration.collectives.size())});
  }
  return "Calibrated profiles (use as hardware = profile \"name\" or --profile NAME; "
         "`perfsim calibrate` writes new ones)\n" +
         t.to_text(2);
}

}  // namespace

int cmd_list(const ListArgs& a) {
  const std::string c = to_lower(a.category);
  std::string text;
  if (c == "hardware" || c == "hw") {
    text = list_hardware(a.module_path);
  } else if (c == "models" || c == "model") {
    text = list_models(a.module_path);
  } else if (c == "optimizations" || c == "optimization") {
    text = list_optimizations();
  } else if (c == "profiles" || c == "profile") {
    text = list_profiles(a.module_path);
  } else {
    throw UsageError(fmt::format(
        "unknown category '{}'{}; choose hardware, models, optimizations or profiles", a.category,
        did_you_mean(a.category, {"hardware", "models", "optimizations", "profiles"})));
  }
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace perfsim

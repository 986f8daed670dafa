// `perfsim explain`: the roofline of one stack step, op by op (FLOPs, bytes, intensity, which
// roof binds, predicted time and its share of the step), then totals per op class.
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/graph/op_metrics.hpp"
#include "core/graph/op_shape.hpp"
#include "core/report/report.hpp"
#include "core/report/text_table.hpp"

namespace perfsim {

namespace {

// Op counts are whole for sampled layers; a fused op over tensors of different counts carries a
// weighted, fractional one.
std::string count_text(double c) {
  return c == std::floor(c) ? fmt::format("{:.0f}", c) : fmt::format("{:.2f}", c);
}

std::string fixed(double v, int decimals) {
  return std::isfinite(v) ? fmt::format("{:.{}f}", v, decimals) : "—";
}

}  // namespace

std::string format_explain(const ExplainInput& in) {
  const Graph& g = *in.graph;
  const Prediction& p = *in.prediction;
  const double step = p.step_time;
  auto share = [&](double t) { return step > 0 ? fixed(100 * t / step, 1) : std::string("—"); };

  std::vector<std::pair<std::string, std::string>> header;
  header.emplace_back("explain", fmt::format("{}, step {}", in.scenario, in.step));
  if (!in.sweep_note.empty()) header.emplace_back("sweep", in.sweep_note);
  if (!in.rank_note.empty()) header.emplace_back("rank", in.rank_note);
  header.emplace_back("profile", fmt::format("{} ({})", p.hardware,
                                             p.profile));
  header.emplace_back("workload", describe(g.workload));
  if (!in.serve_note.empty()) header.emplace_back("serving", in.serve_note);
  if (g.workload.images)
    header.emplace_back("graph", fmt::format("{} distinct blocks of {} built: each stage's first, and one "
                                             "whose ops stand for the rest (count)",
                                             g.layers_built, g.layers_total));
  else if (g.layers_built < g.layers_total)
    header.emplace_back("graph", fmt::format("{} of {} transformer layers built; each layer op "
                                             "stands for {:g} (count)",
                                             g.layers_built, g.layers_total, g.layer_scale()));
  header.emplace_back("step time", fmt::format("{} (timeline {} + host overhead {}); {} {}/s; "
                                               "MFU {:.1f}%",
                                               format_duration(step),
                                               format_duration(step - p.host_time),
                                               format_duration(p.host_time),
                                               format_rate(p.tokens_per_second(g)), g.workload.unit_name(),
                                               p.mfu * 100));
  header.emplace_back("memory", fmt::format("model peak {} ({}), during {}", format_bytes(p.memory.peak),
                                            p.fits ? "fits" : "does not fit", p.memory.peak_at));
  if (p.memory.host_bytes > 0)
    header.emplace_back("host memory", fmt::format("{} ({} pinned), not in the device peak",
                                                   format_bytes(p.memory.host_bytes),
                                                   format_bytes(p.memory.host_pinned_bytes)));

  TextTable ops;
  ops.add_column("op", Align::left);
  ops.add_column("class", Align::left);
  ops.add_column("dtype", Align::left);
  ops.add_column("shape", Align::left);
  ops.add_column("count");
  ops.add_column("GFLOP");
  ops.add_column("MB");
  ops.add_column("FLOP/B");
  ops.add_column("bound", Align::left);
  ops.add_column("µs");
  ops.add_column("µs ×count");
  ops.add_column("% step");
  bool any_unsupported = false, any_transfer = false, any_side_stream = false;
  std::vector<std::string> multi_kernel;  // "name (N)" of ops launching several kernels
  struct ClassTotal { double count = 0, flops = 0, bytes = 0, time = 0; };
  std::map<OpClass, ClassTotal> totals;
  for (std::size_t i = 0; i < g.ops.size() && i < p.ops.size(); ++i) {
    const Op& op = g.ops[i];
    const OpCost& c = p.ops[i];
    const double total = c.time * op.count;
    // A copy across the host link is bound by the link: say which way and from what memory.
    const std::string transfer = transfer_label(op, g);
    any_transfer = any_transfer || !transfer.empty();
    std::string bound = !transfer.empty()                  ? transfer
                        : c.flops > 0 && c.compute_bound ? "compute"
                                                           : "memory";
    if (!c.supported) bound += " *", any_unsupported = true;
    if (op.stream > 0) bound += fmt::format(", stream {}", op.stream), any_side_stream = true;
    if (const int k = kernel_launches(op); k > 1) multi_kernel.push_back(fmt::format("{} ({})", op.name, k));
    ops.add_row({op.name, std::string(name_of(class_of(op.kind))), std::string(name_of(op.dtype)),
                 op_shape_text(op, g), count_text(op.count), fixed(c.flops / 1e9, 3),
                 fixed(c.bytes / 1e6, 2), fixed(c.intensity, 1), bound, fixed(c.time * 1e6, 2),
                 fixed(total * 1e6, 1), share(total)});
    ClassTotal& t = totals[class_of(op.kind)];
    t.count += op.count;
    t.flops += c.flops * op.count;
    t.bytes += c.bytes * op.count;
    t.time += total;
  }

  TextTable classes;
  classes.add_column("class", Align::left);
  classes.add_column("ops");
  classes.add_column("GFLOP");
  classes.add_column("MB");
  classes.add_column("time");
  classes.add_column("% step");
  ClassTotal all;
  for (const auto& [cls, t] : totals) {
    classes.add_row({std::string(name_of(cls)), count_text(t.count), fixed(t.flops / 1e9, 3),
                     fixed(t.bytes / 1e6, 1), format_duration(t.time), share(t.time)});
    all.count += t.count, all.flops += t.flops, all.bytes += t.bytes, all.time += t.time;
  }
  classes.add_row({"total", count_text(all.count), fixed(all.flops / 1e9, 3),
                   fixed(all.bytes / 1e6, 1), format_duration(all.time), share(all.time)});

  std::string out = format_key_values(header);
  out += "\nPer op (GFLOP, MB and µs for one op; ×count for the whole model)\n" + ops.to_text(2);
  if (any_unsupported) out += fmt::format("  * {}\n", unsupported_note(p));
  out += "\nPer op class (whole model)\n" + classes.to_text(2);
  out += "  · bound: the roof that takes longer, compute (FLOPs / peak) or memory (bytes / "
         "bandwidth)\n";
  if (!multi_kernel.empty()) {
    // A few names are enough to say which ops pay several launches.
    constexpr std::size_t shown = 3;
    std::string names;
    for (std::size_t i = 0; i < multi_kernel.size() && i < shown; ++i) names += (i ? ", " : "") + multi_kernel[i];
    if (multi_kernel.size() > shown) names += fmt::format(" and {} more", multi_kernel.size() - shown);
    out += fmt::format("  · µs includes the launch cost of each kernel an op launches; several here: {}\n", names);
  }
  if (any_transfer)
    out += "  · upload / download: a copy over the host link (pcie), from pinned or pageable "
           "memory\n";
  if (any_side_stream)
    out += "  · stream N: on a side stream, overlapping the main stream's work (only a copy can\n"
           "    overlap a kernel: kernels on two streams share the SMs)\n";
  return out;
}

}  // namespace perfsim

// Validation statistics and reports on hand-filled RunResults: median and nearest-rank p90,
// per-op errors by class, step time / memory / speedup errors, --max-error checks, the four
// report formats, --max-error parsing and profile discovery.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "approx.hpp"
#include "cli/cmd_validate.hpp"
#include "cli/device_profile.hpp"
#include "cli/subcommands.hpp"
#include "core/errors.hpp"
#include "core/report/validation.hpp"
#include "core/validate/validation.hpp"

using namespace perfsim;
using perfsim::test::approx;

namespace {

// A decode graph of two ops (gemm, rmsnorm) for `batch` sequences; no tensors are needed by
// the statistics.
Graph two_op_graph(int64_t batch) {
  Graph g;
  g.workload.phase = Phase::decode;
  g.workload.batch = batch;
  Op mm;
  mm.name = "q_proj";
  mm.kind = OpKind::gemm;
  g.ops.push_back(mm);
  Op norm;
  norm.name = "norm";
  norm.kind = OpKind::rmsnorm;
  g.ops.push_back(norm);
  return g;
}

StepResult step(const std::string& name, int64_t batch, double pred_time, double pred_peak,
                std::vector<double> pred_ops) {
  StepResult s;
  s.step = name;
  s.graph = two_op_graph(batch);
  s.predicted.step_time = pred_time;
  s.predicted.memory_executed.peak = pred_peak;
  for (std::size_t i = 0; i < pred_ops.size(); ++i) {
    OpCost c;
    c.op = static_cast<int>(i);
    c.time = pred_ops[i];
    s.predicted.ops.push_back(c);
  }
  return s;
}

void measure(StepResult& s, double time, double peak, std::vector<OpMeasurement> ops) {
  Measurement m;
  m.step_time = time;
  m.peak_bytes = peak;
  m.ops = std::move(ops);
  s.measured = m;
}

// Step A (batch 1): time 1.0 vs 0.8 (+25%), peak 100 vs 80 (+25%); ops gemm 0.3 vs 0.2 (+50%),
// norm 0.1 vs 0.125 (−20%).
// Step B (batch 4): time 2.0 vs 1.0 (+100%), peak 200 vs 190; ops gemm 0.6 vs 0.5 (+20%),
// norm measured 0 (skipped). Speedup over A: predicted (4/2)/(1/1) = 2, measured
// (4/1)/(1/0.8) = 3.2, error (2 − 3.2)/3.2 = −37.5%.
// Step C: not executed.
RunResult sample_run() {
  RunResult r;
  r.scenario = "decode";
  r.backend = "cpu";
  StepResult a = step("baseline", 1, 1.0, 100, {0.3, 0.1});
  measure(a, 0.8, 80, {{0, 0.2, 0.2, true}, {1, 0.125, 0.12, true}});
  StepResult b = step("+batching", 4, 2.0, 200, {0.6, 0.2});
  measure(b, 1.0, 190, {{0, 0.5, 0.5, true}, {1, 0.0, 0.0, true}});
  StepResult c = step("+fp8", 4, 1.5, 150, {0.4, 0.2});
  c.not_executed = "cpu backend has no fp8 GEMM";
  r.steps = {std::move(a), std::move(b), std::move(c)};
  return r;
}

ValidationContext context(bool calibrated) {
  ValidationContext c;
  c.device = "Test CPU (2 threads)";
  c.backend = "cpu";
  c.profile = calibrated ? "h100-local" : "host-cpu";
  c.calibrated = calibrated;
  if (calibrated) {
    c.measured_on.backend = "cuda";
    c.measured_on.device = "NVIDIA H100 80GB HBM3";
    c.measured_on.date = "2026-11-22";
  }
  c.suite = "scenarios/validation";
  c.scenarios = {"scenarios/validation/decode.lua"};
  return c;
}

}  // namespace

TEST_CASE("validation: median and nearest-rank percentile") {
  CHECK(median_of({3, 1, 2}) == 2);
  CHECK(median_of({4, 1, 3, 2}) == 2.5);
  CHECK(std::isnan(median_of({})));
  // 1..10: rank ceil(0.9·10) = 9 -> 9; 1..20: rank 18 -> 18; three values: rank ceil(2.7) = 3.
  std::vector<double> ten, twenty;
  for (int i = 10; i >= 1; --i) ten.push_back(i);
  for (int i = 1; i <= 20; ++i) twenty.push_back(i);
  CHECK(percentile_nearest_rank(ten, 0.9) == 9);
  CHECK(percentile_nearest_rank(twenty, 0.9) == 18);
  CHECK(percentile_nearest_rank({1, 2, 3}, 0.9) == 3);
  CHECK(percentile_nearest_rank({5}, 0.9) == 5);
  CHECK(percentile_nearest_rank(ten, 0.5) == 5);
  CHECK(std::isnan(percentile_nearest_rank({}, 0.9)));

  // Magnitudes {0.05, 0.1, 0.2, 0.3}: median 0.15, p90 rank ceil(3.6) = 4 -> 0.3.
  const ErrorStats s = abs_error_stats({-0.1, 0.2, -0.3, 0.05});
  CHECK(s.count == 4);
  CHECK(s.median == approx(0.15));
  CHECK(s.p90 == approx(0.3));
  CHECK(s.max == approx(0.3));
  CHECK(abs_error_stats({}).count == 0);
}

TEST_CASE("validation: per-op, step, memory and speedup errors of a run") {
  const ValidationSummary s = summarize_validation({sample_run()});

  // Per op: +50%, −20% (step A), +20% (step B); B's norm measured 0 is skipped.
  REQUIRE(s.ops.size() == 3);
  CHECK(s.ops[0].error == approx(0.5));
  CHECK(s.ops[1].error == approx(-0.2));
  CHECK(s.ops[2].error == approx(0.2));
  CHECK(s.ops[2].step == "+batching");
  CHECK(s.ops[0].kind == OpKind::gemm);
  CHECK(s.all_ops.median == approx(0.2));
  CHECK(s.all_ops.p90 == approx(0.5));

  REQUIRE(s.classes.size() == 2);
  CHECK(s.classes[0].op_class == OpClass::gemm);
  CHECK(s.classes[0].stats.count == 2);
  CHECK(s.classes[0].stats.median == approx(0.35));
  CHECK(s.classes[0].stats.p90 == approx(0.5));
  CHECK(s.classes[0].worst.step == "baseline");
  CHECK(s.classes[1].op_class == OpClass::norm);
  CHECK(s.classes[1].stats.median == approx(0.2));

  REQUIRE(s.steps.size() == 3);
  CHECK(*s.steps[0].time_error == approx(0.25));
  CHECK(*s.steps[0].memory_error == approx(0.25));
  CHECK(*s.steps[1].time_error == approx(1.0));
  CHECK(*s.steps[1].memory_error == approx(10.0 / 190));
  CHECK_FALSE(s.steps[2].measured_time);
  CHECK(s.steps[2].note == "cpu backend has no fp8 GEMM");
  CHECK(s.unmeasured_steps == 1);
  // The families over the measured steps: times {0.25, 1.0}, memory {0.25, 0.0526}.
  CHECK(s.step_time.count == 2);
  CHECK(s.step_time.median == approx(0.625));
  CHECK(s.step_time.max == approx(1.0));
  CHECK(s.memory.count == 2);
  CHECK(s.memory.max == approx(0.25));

  // Only +batching has a measured pair; +fp8 was not measured.
  REQUIRE(s.speedups.size() == 1);
  CHECK(s.speedups[0].previous == "baseline");
  CHECK(s.speedups[0].predicted == approx(2.0));
  CHECK(s.speedups[0].measured == approx(3.2));
  CHECK(s.speedups[0].error == approx(-0.375));
  CHECK(s.speedup.count == 1);
  CHECK(s.speedup.median == approx(0.375));

  CHECK(worst_step_time(s)->step == "+batching");
  CHECK(worst_memory(s)->step == "baseline");
  CHECK(worst_speedup(s)->step == "+batching");
  REQUIRE(worst_op(s));
  CHECK(worst_op(s)->error == approx(0.5));
}

TEST_CASE("validation: per-op errors by measured op time") {
  // Ops of 5 µs (+40%), 50 µs (−10%), 500 µs (+2%) and 8 µs (−30%): two under 10 µs, one in
  // each other band; a band's worst is its largest |error|.
  RunResult r;
  r.scenario = "bands";
  StepResult a = step("baseline", 1, 1e-3, 100, {7e-6, 45e-6});
  measure(a, 1e-3, 100, {{0, 5e-6, 5e-6, true}, {1, 50e-6, 50e-6, true}});
  StepResult b = step("+fusion", 1, 1e-3, 100, {510e-6, 5.6e-6});
  measure(b, 1e-3, 100, {{0, 500e-6, 500e-6, true}, {1, 8e-6, 8e-6, true}});
  r.steps = {std::move(a), std::move(b)};
  const ValidationSummary s = summarize_validation({r});
  REQUIRE(s.durations.size() == 3);
  CHECK(s.durations[0].band.label == "under 10 µs");
  CHECK(s.durations[0].stats.count == 2);
  CHECK(s.durations[0].stats.median == approx(0.35));
  CHECK(s.durations[0].worst.error == approx(0.4));
  CHECK(s.durations[1].band.label == "10–100 µs");
  CHECK(s.durations[1].stats.median == approx(0.1));
  CHECK(s.durations[2].band.label == "100 µs and more");
  CHECK(s.durations[2].worst.op == "q_proj");
  CHECK(s.durations[2].stats.max == approx(0.02));

  const std::string text = format_validation(s, context(false), ReportFormat::table);
  CHECK(text.find("Per-op time error by measured op time") != std::string::npos);
  CHECK(text.find("under 10 µs        2   35.0%") != std::string::npos);
  const std::string csv = format_validation(s, context(false), ReportFormat::csv);
  CHECK(csv.find("\nop_time,,,10–100 µs,1,,,,0.1,0.1,0.1\n") != std::string::npos);
  const auto j = nlohmann::json::parse(format_validation(s, context(false), ReportFormat::json));
  CHECK(j["op_times"].size() == 3);
  CHECK(j["op_times"][2]["below_s"].is_null());
  CHECK(j["op_times"][0]["stats"]["count"] == 2);
}

TEST_CASE("validation: --max-error checks step time, memory, class medians and speedups") {
  const ValidationSummary s = summarize_validation({sample_run()});
  // 2 measured steps × (time, memory) + 2 class medians + 1 speedup.
  CHECK(checked_figures(s).size() == 7);
  // Over 30%: B's time (+100%), the speedup (−37.5%), the gemm median (35%), largest first.
  const std::vector<CheckedFigure> over = figures_over(s, 0.30);
  REQUIRE(over.size() == 3);
  CHECK(over[0].where == "decode/+batching");
  CHECK(over[0].what == "step time");
  CHECK(over[1].what == "speedup");
  CHECK(over[2].where == "op class gemm");
  CHECK(over[2].what == "per-op median");
  CHECK(over[2].error == approx(0.35));
  CHECK(figures_over(s, 1.5).empty());
}

TEST_CASE("validation: sweep points are labelled") {
  RunResult r = sample_run();
  r.sweep_point = {{"batch", "8"}};
  CHECK(run_label(r) == "decode[batch=8]");
  const ValidationSummary s = summarize_validation({r});
  CHECK(s.steps[0].scenario == "decode[batch=8]");
}

TEST_CASE("validation: an op timed with its stream held is compared by that device time") {
  RunResult r = sample_run();
  // Step A's gemm: 0.2 in the step (it waited for the host), 0.15 queued behind the norm.
  // Predicted 0.3: +100% against the device time; the in-step time is kept beside it.
  r.steps[0].measured->ops[0].device = 0.15;
  r.steps[0].predicted.ops[1].host_wait = 0.05;  // the norm's wait: out of its device part only when held
  // Step B's norm: no in-step time, but a device time: compared (predicted 0.2, +60%).
  r.steps[1].measured->ops[1].device = 0.125;
  const ValidationSummary s = summarize_validation({r});
  REQUIRE(s.ops.size() == 4);
  CHECK(s.ops[0].measured == approx(0.15));
  CHECK(s.ops[0].measured_in_step == approx(0.2));
  CHECK(s.ops[0].error == approx(1.0));
  CHECK(s.ops[1].measured == approx(0.125));  // no device time: the in-step median
  CHECK(s.ops[1].predicted == approx(0.1));    // and the whole prediction, its wait included
  CHECK(s.ops[1].measured_in_step == approx(0.125));
  CHECK(s.ops[3].op == "norm");
  CHECK(s.ops[3].error == approx(0.6));
  // A held op with a predicted wait compares the prediction less the wait.
  r.steps[0].measured->ops[1].device = 0.025;
  const ValidationSummary w = summarize_validation({r});
  CHECK(w.ops[1].predicted == approx(0.05));
  CHECK(w.ops[1].error == approx(1.0));
  CHECK(s.held_ops == 2);
  const std::string text = format_validation(s, context(true), ReportFormat::table);
  CHECK(text.find("2 of the 4 ops ran eagerly and are compared by their device time") != std::string::npos);
  const std::string plain = format_validation(summarize_validation({sample_run()}), context(true), ReportFormat::table);
  CHECK(plain.find("compared by their device time") == std::string::npos);
  const auto j = nlohmann::json::parse(format_validation(s, context(true), ReportFormat::json));
  CHECK(j["overall"]["held_ops"].get<int>() == 2);
  CHECK(j["ops"][0]["measured_s"].get<double>() == approx(0.15));
  CHECK(j["ops"][0]["measured_in_step_s"].get<double>() == approx(0.2));
}

TEST_CASE("validation: the report says how the ops were timed") {
  RunResult r = sample_run();
  const std::string plain = format_validation(summarize_validation({r}), context(true), ReportFormat::table);
  CHECK(plain.find("op timing") == std::string::npos);  // a backend that does not say: no line
  r.steps[0].measured->op_timing = "events";
  r.steps[1].measured->op_timing = "event nodes";
  const ValidationSummary s = summarize_validation({r});
  CHECK(s.steps[1].op_timing == "event nodes");
  const std::string text = format_validation(s, context(true), ReportFormat::table);
  CHECK(text.find("\nop timing  events, event nodes\n") != std::string::npos);
  const auto j = nlohmann::json::parse(format_validation(s, context(true), ReportFormat::json));
  CHECK(j["steps"][0]["op_timing"] == "events");
  CHECK(j["steps"][1]["op_timing"] == "event nodes");

  // A profile that says how its replayed ops were timed: a warning when these were timed
  // otherwise (eager events do not count: every profile times eager ops with them).
  ValidationContext c = context(true);
  c.measured_on.op_timing = "event nodes";
  CHECK(format_validation(s, c, ReportFormat::table).find("were timed by") == std::string::npos);
  c.measured_on.op_timing = "CUPTI records";
  CHECK(format_validation(s, c, ReportFormat::table)
            .find("warning    the profile's replayed ops were timed by CUPTI records, these by event nodes: "
                  "validate with the PERFSIM_OP_TIMING it was calibrated with") != std::string::npos);
}

TEST_CASE("validation: the host issue of eager steps, predicted against measured") {
  RunResult r = sample_run();
  // Step A: 4 copies of the gemm (host 10 us predicted, 8 us measured) and the norm once
  // (5 against 4): predicted 45 us, measured 36 us, +25%.
  StepResult& a = r.steps[0];
  a.graph.ops[0].count = 4;
  a.predicted.ops[0].dispatch_time = 10e-6;
  a.predicted.ops[1].dispatch_time = 5e-6;
  a.measured->ops[0].host = 8e-6;
  a.measured->ops[1].host = 4e-6;
  // Step B: the measurement has no host times (a CPU run): no figure.
  r.steps[1].predicted.ops[0].dispatch_time = 10e-6;
  const ValidationSummary s = summarize_validation({r});
  REQUIRE(s.steps[0].issue_error);
  CHECK(*s.steps[0].predicted_issue == approx(45e-6));
  CHECK(*s.steps[0].measured_issue == approx(36e-6));
  CHECK(*s.steps[0].issue_error == approx(0.25));
  CHECK_FALSE(s.steps[1].issue_error);
  CHECK_FALSE(s.steps[2].issue_error);

  const std::string text = format_validation(s, context(true), ReportFormat::table);
  CHECK(text.find("Host issue of eager steps") != std::string::npos);
  CHECK(text.find("+25.0%") != std::string::npos);
  const auto j = nlohmann::json::parse(format_validation(s, context(true), ReportFormat::json));
  CHECK(j["steps"][0]["host_issue_error"].get<double>() == approx(0.25));
  CHECK(j["steps"][1]["host_issue_error"].is_null());
  // Per op too: the first op of step A (its gemm).
  CHECK(j["ops"][0]["predicted_dispatch_s"].get<double>() == approx(10e-6));
  CHECK(j["ops"][0]["measured_host_s"].get<double>() == approx(8e-6));
  const std::string csv = format_validation(s, context(true), ReportFormat::csv);
  CHECK(csv.find("\nhost_issue,decode,baseline,,,4.5e-05,3.6e-05,0.25,,,\n") != std::string::npos);
  // Without host times anywhere the section is left out.
  const std::string plain = format_validation(summarize_validation({sample_run()}), context(true), ReportFormat::table);
  CHECK(plain.find("Host issue") == std::string::npos);
}

TEST_CASE("validation report: text, markdown, json and csv") {
  const ValidationSummary s = summarize_validation({sample_run()});
  ValidationContext c = context(false);

  const std::string text = format_validation(s, c, ReportFormat::table);
  CHECK(text.find("host-cpu (datasheet, UNCALIBRATED)") != std::string::npos);
  CHECK(text.find("UNCALIBRATED (datasheet figures)") != std::string::npos);
  CHECK(text.find("none (report only)") != std::string::npos);
  CHECK(text.find("decode/baseline/q_proj +50.0%") != std::string::npos);
  CHECK(text.find("2.00×         3.20×  -37.5%") != std::string::npos);  // speedup row
  CHECK(text.find("Figures over --max-error") == std::string::npos);

  c.max_error = 0.30;
  const std::string md = format_validation(s, c, ReportFormat::markdown);
  CHECK(md.find("### Overall |error|") != std::string::npos);
  CHECK(md.find("### Figures over --max-error 30.0%: 3 of 7") != std::string::npos);

  const auto j = nlohmann::json::parse(format_validation(s, c, ReportFormat::json));
  CHECK(j["validate"]["profile"]["calibrated"] == false);
  CHECK(j["validate"]["profile"]["status"] == "datasheet, UNCALIBRATED");
  CHECK(j["overall"]["per_op_time"]["count"] == 3);
  CHECK(j["overall"]["per_op_time"]["median"].get<double>() == approx(0.2));
  CHECK(j["overall"]["step_time"]["max"].get<double>() == approx(1.0));
  CHECK(j["classes"][0]["class"] == "gemm");
  CHECK(j["steps"][2]["measured_s"].is_null());
  CHECK(j["steps"][2]["timed_runs"].is_null());
  CHECK(j["steps"][2]["not_executed"] == "cpu backend has no fp8 GEMM");
  CHECK(j["speedups"][0]["error"].get<double>() == approx(-0.375));
  CHECK(j["over_max_error"].size() == 3);
  CHECK(j["ops"].size() == 3);
  CHECK(j["ops"][1]["kind"] == "rmsnorm");

  const std::string csv = format_validation(s, c, ReportFormat::csv);
  CHECK(csv.rfind("figure,scenario,step,subject,count,predicted,measured,error,median_abs,"
                  "p90_abs,max_abs\n",
                  0) == 0);
  CHECK(csv.find("\nop_class,,,gemm,2,,,,0.35,0.5,0.5\n") != std::string::npos);
  CHECK(csv.find("\nstep_time,decode,baseline,,,1,0.8,0.25,,,\n") != std::string::npos);
  CHECK(csv.find("\nspeedup,decode,+batching,baseline,,2,3.2,-0.375,,,\n") != std::string::npos);
}

TEST_CASE("validation report: a calibrated profile names where it was measured") {
  const ValidationSummary s = summarize_validation({sample_run()});
  const ValidationContext c = context(true);
  CHECK(profile_status(c) == "calibrated, measured on cuda, NVIDIA H100 80GB HBM3, 2026-11-22");
  const std::string text = format_validation_text(s, c);
  CHECK(text.find("UNCALIBRATED") == std::string::npos);
  // Measured on another device than the one validating: said in the header.
  CHECK(text.find("the profile was measured on NVIDIA H100 80GB HBM3, not on this device") !=
        std::string::npos);
}

TEST_CASE("validate: --max-error parsing") {
  CHECK(parse_max_error("10") == approx(0.10));
  CHECK(parse_max_error("7.5%") == approx(0.075));
  for (const char* bad : {"", "%", "abc", "0", "-5", "nan", "inf", "10 %", "5x"})
    CHECK_THROWS_AS((void)parse_max_error(bad), UsageError);
}

TEST_CASE("device profile: discovery order and the datasheet fallback") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "perfsim_test_device_profile";
  fs::remove_all(dir);
  fs::create_directories(dir / "profiles");
  for (const char* name : {"b.lua", "a.lua", "notes.txt"}) std::ofstream(dir / "profiles" / name) << "\n";
  const std::vector<std::string> found = discoverable_profiles(dir.string());
  REQUIRE(found.size() >= 2);
  CHECK(found[0] == (dir / "profiles" / "a.lua").string());
  CHECK(found[1] == (dir / "profiles" / "b.lua").string());
  for (const std::string& f : found) CHECK(f.find("notes") == std::string::npos);

  // Neither file is a profile of this device (they do not even load): the datasheet entry.
  DeviceInfo device;
  device.backend = "cpu";
  device.name = "Test CPU (2 threads)";
  device.catalog_name = "host-cpu";
  const DeviceProfile p = resolve_device_profile(device, "", dir.string());
  CHECK(p.hardware.name == "host-cpu");
  CHECK_FALSE(p.hardware.calibrated);
  CHECK(p.source.find("datasheet entry host-cpu") == 0);
  fs::remove_all(dir);
}

TEST_CASE("device profile: the newest calibrated profile of this device, or --profile") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "perfsim_test_device_profile_match";
  fs::remove_all(dir);
  fs::create_directories(dir / "profiles");
  auto write = [&](const std::string& file, const std::string& device, const std::string& date) {
    std::ofstream(dir / "profiles" / file)
        << "return profile { name = \"" << fs::path(file).stem().string()
        << "\", base = \"host-cpu\", measured = { backend = \"cpu\", device = \"" << device
        << "\", date = \"" << date << "\" } }\n";
  };
  write("old.lua", "Test CPU", "2026-11-01");
  write("new.lua", "Test CPU", "2026-11-20");
  write("other.lua", "Other CPU", "2026-12-01");  // newer, but another device
  DeviceInfo device;
  device.name = "Test CPU";
  device.catalog_name = "host-cpu";

  const DeviceProfile found = resolve_device_profile(device, "", dir.string());
  CHECK(found.hardware.name == "new");
  CHECK(found.hardware.calibrated);
  CHECK(found.source == (dir / "profiles" / "new.lua").string() + " (calibrated on this device)");

  const std::string other = (dir / "profiles" / "other.lua").string();
  const DeviceProfile named = resolve_device_profile(device, other, dir.string());
  CHECK(named.hardware.name == "other");
  CHECK(named.source == "--profile " + other);
  // "datasheet" skips the calibrated profiles of the device.
  const DeviceProfile sheet = resolve_device_profile(device, "datasheet", dir.string());
  CHECK(sheet.hardware.name == "host-cpu");
  CHECK_FALSE(sheet.hardware.calibrated);
  CHECK(sheet.source == "--profile datasheet: catalog entry host-cpu");
  CHECK_THROWS_AS((void)resolve_device_profile(device, "no-such-profile", dir.string()),
                  ConfigError);
  fs::remove_all(dir);
}

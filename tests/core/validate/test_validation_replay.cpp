// `perfsim validate --measurements`: a report saved on the CPU backend, priced again from the
// file with the same profile, gives back the same figures; with another profile, the same
// measurements against other predictions; bad files fail with the file's name.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "approx.hpp"
#include "cli/cmd_validate.hpp"
#include "cli/subcommands.hpp"
#include "core/errors.hpp"
#include "core/passes/passes.hpp"
#include "core/validate/replay.hpp"
#include "graph_test_models.hpp"

using namespace perfsim;
using perfsim::test::approx;

namespace {

std::filesystem::path scratch(const std::string& name) {
  return std::filesystem::temp_directory_path() /
         ("perfsim_replay_" + std::to_string(::getpid()) + "_" + name);
}

nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

ValidateArgs tiny_suite(const std::string& output) {
  ValidateArgs a;
  a.backend = "cpu";
  a.profile = "datasheet";
  a.quick = true;
  a.quiet = true;
  a.suite = std::string(PERFSIM_SOURCE_DIR) + "/tests/cli/validation";
  a.output = output;
  return a;
}

}  // namespace

TEST_CASE("validate --measurements: the saved report priced again gives back its figures") {
  const std::filesystem::path measured = scratch("measured.json"), again = scratch("again.json");
  REQUIRE(cmd_validate(tiny_suite(measured.string())) == 0);
  ValidateArgs replay = tiny_suite(again.string());
  replay.measurements = {measured.string()};
  replay.quick = false;  // taken from the report
  REQUIRE(cmd_validate(replay) == 0);
  const nlohmann::json a = read_json(measured), b = read_json(again);
  std::filesystem::remove(measured);
  std::filesystem::remove(again);

  CHECK(b["validate"]["measurements"] == measured.string());
  CHECK(b["validate"]["quick"] == true);
  CHECK(b["validate"]["device"] == a["validate"]["device"]);
  for (const char* figure : {"per_op_time", "step_time", "speedup", "peak_memory"}) {
    CAPTURE(figure);
    REQUIRE(b["overall"][figure]["count"].get<int>() == a["overall"][figure]["count"].get<int>());
    CHECK(b["overall"][figure]["count"].get<int>() > 0);
    CHECK(b["overall"][figure]["median"].get<double>() == approx(a["overall"][figure]["median"].get<double>()));
    CHECK(b["overall"][figure]["max"].get<double>() == approx(a["overall"][figure]["max"].get<double>()));
  }
  REQUIRE(b["steps"].size() == a["steps"].size());
  for (std::size_t i = 0; i < a["steps"].size(); ++i) {
    CHECK(b["steps"][i]["measured_s"].get<double>() == approx(a["steps"][i]["measured_s"].get<double>()));
    CHECK(b["steps"][i]["predicted_s"].get<double>() == approx(a["steps"][i]["predicted_s"].get<double>()));
    // The runs behind each step: the quick tiny suite's 2 (tests/cli/validation), kept by the replay.
    CHECK(a["steps"][i]["timed_runs"] == 2);
    CHECK(b["steps"][i]["timed_runs"] == a["steps"][i]["timed_runs"]);
  }
}

TEST_CASE("validate --measurements: bad files and options say what to fix") {
  const std::filesystem::path bad = scratch("bad.json");
  {
    std::ofstream(bad) << "{\"steps\": []}";
  }
  CHECK_THROWS_WITH_AS(ReplayBackend::from_file(bad.string()),
                       doctest::Contains("not a perfsim validate JSON report (no 'validate' header)"),
                       ConfigError);
  {
    std::ofstream(bad) << "not json";
  }
  CHECK_THROWS_WITH_AS(ReplayBackend::from_file(bad.string()), doctest::Contains(": not JSON ("), ConfigError);
  std::filesystem::remove(bad);
  CHECK_THROWS_WITH_AS(ReplayBackend::from_file(bad.string()),
                       doctest::Contains("cannot read the measurements file"), ConfigError);

  // A full-size report cannot be priced at the quick sizes.
  const std::string full = R"({"validate": {"device": "d", "backend": "cpu", "quick": false},
    "steps": [{"scenario": "tiny", "step": "fp32", "measured_s": 0.001}], "ops": []})";
  const std::filesystem::path saved = scratch("full.json");
  {
    std::ofstream(saved) << full;
  }
  ValidateArgs a = tiny_suite("");
  a.measurements = {saved.string()};
  CHECK_THROWS_WITH_AS((void)cmd_validate(a), doctest::Contains("measured at the suite's full sizes; drop --quick"),
                       UsageError);
  // 'datasheet' needs the catalog entry, which this report does not name.
  a.quick = false;
  CHECK_THROWS_WITH_AS((void)cmd_validate(a), doctest::Contains("does not name the device's catalog entry"),
                       UsageError);
  std::filesystem::remove(saved);
}

TEST_CASE("replay backend: steps by scenario and name, ops by name, unmeasured steps refused") {
  const std::string text = R"({"validate": {"device": "Fake", "backend": "cuda", "catalog": "H100-SXM", "quick": true},
    "overall": {"held_ops": 1},
    "steps": [{"scenario": "s", "step": "eager", "measured_s": 0.002, "measured_peak_bytes": 4096, "timed_runs": 137,
               "op_timing": "event nodes"},
              {"scenario": "s", "step": "never", "measured_s": null}],
    "ops": [{"scenario": "s", "step": "eager", "op": "a", "measured_s": 1e-6, "measured_in_step_s": 3e-6,
             "measured_host_s": 5e-6}]})";
  ReplayBackend b = ReplayBackend::from_json_text(text, "mem.json");
  CHECK(b.name() == "cuda");
  CHECK(b.device().catalog_name == "H100-SXM");
  CHECK(b.quick());
  CHECK(b.step_count() == 1);
  Graph g;
  const int t = g.add_tensor({-1, "x", {4}, DType::fp32, TensorRole::input, 1});
  const int y = g.add_tensor({-1, "y", {4}, DType::fp32, TensorRole::activation, 1});
  for (const char* name : {"a", "b"}) {
    Op op;
    op.name = name;
    op.kind = OpKind::residual_add;
    op.inputs = {t};
    op.outputs = {y};
    g.add_op(op);
  }
  g.applied = {"eager"};
  b.select("s");
  const Measurement m = b.run(g, RunOptions{});
  CHECK(m.step_time == approx(0.002));
  CHECK(m.peak_bytes == approx(4096));
  CHECK(m.repeats == 137);  // the runs the report's medians were over, not the options'
  CHECK(m.op_timing == "event nodes");
  REQUIRE(m.ops.size() == 2);
  CHECK(m.ops[0].executed);
  CHECK(m.ops[0].median == approx(3e-6));
  CHECK(m.ops[0].device == approx(1e-6));  // held device time: the report had held ops
  CHECK(m.ops[0].host == approx(5e-6));
  CHECK_FALSE(m.ops[1].executed);
  g.applied = {"never"};
  CHECK_THROWS_WITH_AS(b.run(g, RunOptions{}), doctest::Contains("mem.json holds no measurement of s step 'never'"),
                       NotExecutable);
  b.select("other");
  g.applied = {"eager"};
  CHECK_THROWS_AS(b.run(g, RunOptions{}), NotExecutable);
}

TEST_CASE("replay backend: a report that names paged ops by their dense kind replays onto the paged kinds") {
  // Reports written before the paged kinds existed recorded a paged decode's attention and
  // appends as flash_attention and kv_append: ops match by name, so they measure the same ops.
  Workload w;
  w.phase = Phase::decode;
  w.batch = 2, w.prompt = 64, w.new_tokens = 8;
  const std::vector<StackStep> stack{
      {"+paged", {{"bf16", std::nullopt}, {"flash_attention", std::nullopt}, {"paged_kv", std::nullopt}}}};
  const Graph g = build_stack_graph(test_models::tiny_llama(), w, stack, 0);
  const std::string text = R"({"validate": {"device": "Fake", "backend": "cuda", "catalog": "H100-SXM"},
    "steps": [{"scenario": "s", "step": "+paged", "measured_s": 0.002}],
    "ops": [{"scenario": "s", "step": "+paged", "op": "layer0.attn.flash_attention", "kind": "flash_attention",
             "measured_s": 4e-6},
            {"scenario": "s", "step": "+paged", "op": "layer0.attn.k_append", "kind": "kv_append",
             "measured_s": 2e-6}]})";
  ReplayBackend b = ReplayBackend::from_json_text(text, "old.json");
  b.select("s");
  const Measurement m = b.run(g, RunOptions{});
  int measured = 0;
  for (const Op& op : g.ops) {
    if (!m.ops[static_cast<std::size_t>(op.id)].executed) continue;
    ++measured;
    if (op.name == "layer0.attn.flash_attention") {
      CHECK(op.kind == OpKind::paged_flash_attention);
      CHECK(m.ops[static_cast<std::size_t>(op.id)].median == approx(4e-6));
    } else {
      CHECK(op.name == "layer0.attn.k_append");
      CHECK(op.kind == OpKind::paged_kv_append);
      CHECK(m.ops[static_cast<std::size_t>(op.id)].median == approx(2e-6));
    }
  }
  CHECK(measured == 2);
}

TEST_CASE("replay backend: a report that does not record its timed runs says none") {
  const std::string text = R"({"validate": {"device": "Fake", "backend": "cuda", "catalog": "H100-SXM"},
    "steps": [{"scenario": "s", "step": "baseline", "measured_s": 0.002, "measured_peak_bytes": 4096}],
    "ops": []})";
  ReplayBackend b = ReplayBackend::from_json_text(text, "old.json");
  Graph g;
  b.select("s");
  RunOptions o;
  o.repeats = 10;
  // Not the options' 10: the runs behind the saved medians are unknown, and how they were timed.
  const Measurement m = b.run(g, o);
  CHECK(m.repeats == 0);
  CHECK(m.op_timing.empty());
}

TEST_CASE("validate with several --measurements compares the runs") {
  const std::filesystem::path first = scratch("run1.json"), second = scratch("run2.json"),
                              compared = scratch("compared.json");
  REQUIRE(cmd_validate(tiny_suite(first.string())) == 0);
  REQUIRE(cmd_validate(tiny_suite(second.string())) == 0);
  ValidateArgs a = tiny_suite(compared.string());
  a.measurements = {first.string(), second.string()};
  a.op_error = "50";
  REQUIRE(cmd_validate(a) == 0);
  const nlohmann::json j = read_json(compared), one = read_json(first);
  CHECK(j["validate"]["measurements"].size() == 2);
  CHECK(j["validate"]["op_error"].get<double>() == approx(0.5));
  REQUIRE(j["runs"].size() == 2);
  // Each run priced as a single replay prices it: the first run's figures come back.
  CHECK(j["runs"][0]["per_op_time"]["median"].get<double>() ==
        approx(one["overall"]["per_op_time"]["median"].get<double>()));
  CHECK(j["comparison"]["compared_ops"].get<int>() == one["overall"]["per_op_time"]["count"].get<int>());
  const std::size_t every = j["comparison"]["over_in_every_run"].size(), some = j["comparison"]["over_in_some_runs"];
  CHECK(every + some <= j["comparison"]["compared_ops"].get<std::size_t>());
  for (const auto& op : j["comparison"]["over_in_every_run"]) {  // over 50% in both runs, each
    REQUIRE(op["errors"].size() == 2);
    for (const auto& e : op["errors"]) CHECK(std::fabs(e.get<double>()) > 0.5);
  }

  // What a comparison cannot do says so.
  ValidateArgs bad = a;
  bad.max_error = "10";
  CHECK_THROWS_WITH_AS((void)cmd_validate(bad), doctest::Contains("--max-error checks one run"), UsageError);
  bad = a;
  bad.format = "csv";
  bad.output.clear();
  CHECK_THROWS_WITH_AS((void)cmd_validate(bad), doctest::Contains("--format csv reports one run"), UsageError);
  bad = a;
  bad.measurements = {first.string()};
  CHECK_THROWS_WITH_AS((void)cmd_validate(bad), doctest::Contains("--op-error counts ops across runs"), UsageError);
  // Runs of the full sizes and of --quick do not compare.
  const std::filesystem::path full = scratch("full_run.json");
  {
    std::ofstream(full) << R"({"validate": {"device": "d", "backend": "cpu", "catalog": "host-cpu", "quick": false},
      "steps": [{"scenario": "tiny", "step": "fp32", "measured_s": 0.001}], "ops": []})";
  }
  bad = a;
  bad.quick = false;
  bad.measurements = {first.string(), full.string()};
  CHECK_THROWS_WITH_AS((void)cmd_validate(bad), doctest::Contains("were measured at different sizes"), UsageError);
  for (const auto& p : {first, second, compared, full}) std::filesystem::remove(p);
}

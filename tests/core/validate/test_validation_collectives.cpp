// Collectives in `perfsim validate`: the sizes validated are none of the calibration plans',
// a fake 4-GPU backend is timed over groups of 2 and 4, errors against a hand-checkable
// alpha-beta, --max-error on each collective's median, the report sections, and the JSON
// round trip through `--measurements`.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <stdexcept>

#include "approx.hpp"
#include "core/calibrate/plan.hpp"
#include "core/cost/roofline.hpp"
#include "core/report/validation.hpp"
#include "core/run/backend.hpp"
#include "core/validate/collectives.hpp"
#include "core/validate/replay.hpp"
#include "core/validate/validation.hpp"

using namespace perfsim;
using perfsim::test::approx;

namespace {

// Takes 10 µs + wire bytes / 100 GB/s per collective, all-gather 25% longer; `gpus` GPUs.
class FakeCollectiveBackend final : public Backend {
 public:
  explicit FakeCollectiveBackend(int gpus, bool fail = false) : m_gpus(gpus), m_fail(fail) {}
  [[nodiscard]] std::string name() const override { return "fake"; }
  [[nodiscard]] DeviceInfo device() const override { return DeviceInfo{"fake", "Fake GPU", "H100-SXM"}; }
  [[nodiscard]] std::string unsupported_reason(const Op&, const Graph&) const override { return {}; }
  [[nodiscard]] Measurement run(const Graph&, const RunOptions&) override { return {}; }
  [[nodiscard]] int gpu_count() const override { return m_gpus; }
  [[nodiscard]] std::vector<double> time_collective(Collective c, int group,
                                                    const std::vector<double>& payload) override {
    if (m_fail && c == Collective::all_to_all) throw std::runtime_error("NCCL error: unhandled system error");
    ++calls;
    std::vector<double> t;
    for (double b : payload)
      t.push_back((10e-6 + wire_bytes(c, group, b) / 100e9) * (c == Collective::all_gather ? 1.25 : 1.0));
    return t;
  }
  int calls = 0;

 private:
  int m_gpus;
  bool m_fail;
};

// Priced by one alpha-beta line per collective and group: exactly the fake's times.
Hardware fitted_like_fake() {
  Hardware hw;
  hw.name = "fake-local";
  hw.nvlink = {450e9, 2e-6};
  for (Collective c : all_collectives)
    for (int group : {2, 4}) hw.calibration.collectives[{c, group}] = CollectiveFit{10e-6, 100e9, {}, {}};
  return hw;
}

}  // namespace

TEST_CASE("validate collectives: sizes between the calibration's, none of them a calibration point") {
  const std::vector<double> sizes = collective_validation_payloads();
  REQUIRE(sizes.size() == 6);
  CHECK(sizes.front() == 24 * 1024.0);
  CHECK(sizes.back() == 768.0 * (1 << 20));
  for (const char* backend : {"cuda", "cpu"})
    for (bool quick : {false, true}) {
      const CalibrationPlan p = make_calibration_plan(backend, quick);
      for (double b : sizes)
        CHECK(std::find(p.collective_bytes.begin(), p.collective_bytes.end(), b) == p.collective_bytes.end());
    }
}

TEST_CASE("validate collectives: every collective over groups of 2 and 4, errors per collective") {
  FakeCollectiveBackend four(4);
  std::vector<std::string> lines;
  const CollectiveMeasurements m = measure_collectives(four, [&](const std::string& l) { lines.push_back(l); });
  CHECK(m.skipped.empty());
  CHECK(four.calls == 10);  // 5 collectives x groups {2, 4}
  REQUIRE(m.points.size() == 60);
  CHECK(lines.front() == "collectives: all_reduce over 2 GPUs");

  ValidationSummary s;
  add_collective_errors(s, m, fitted_like_fake());
  REQUIRE(s.collective_errors.size() == 60);
  // All-reduce over 4 GPUs of 24 KiB: 10 µs + 1.5 x 24576 B / 100 GB/s, predicted exactly.
  const CollectiveError& e = s.collective_errors[30];
  CHECK(e.collective == Collective::all_reduce);
  CHECK(e.group == 4);
  CHECK(e.measured == approx(10e-6 + 1.5 * 24576 / 100e9));
  CHECK(e.error == approx(0.0));
  // All-gather ran 25% longer than the profile says: -20% at every size.
  REQUIRE(s.collectives.size() == 5);
  CHECK(s.collectives[1].collective == Collective::all_gather);
  CHECK(s.collectives[1].stats.count == 12);
  CHECK(s.collectives[1].stats.median == approx(0.2));
  CHECK(s.all_collectives.max == approx(0.2));
  CHECK(worst_collective(s)->collective == Collective::all_gather);

  // --max-error checks each collective's median: all-gather's 20% only.
  const std::vector<CheckedFigure> over = figures_over(s, 0.1);
  REQUIRE(over.size() == 1);
  CHECK(over[0].where == "all_gather");
  CHECK(over[0].what == "collective median");
  CHECK(over[0].is_median());
}

TEST_CASE("validate collectives: one GPU, or a failing collective, says why") {
  FakeCollectiveBackend one(1);
  const CollectiveMeasurements none = measure_collectives(one, nullptr);
  CHECK(none.points.empty());
  CHECK(none.skipped == "the fake backend spans 1 device; collectives need 2 or more GPUs");
  ValidationSummary s;
  add_collective_errors(s, none, fitted_like_fake());
  CHECK(s.collectives.empty());
  CHECK(s.all_collectives.count == 0);
  CHECK(checked_figures(s).empty());

  // One collective failing keeps the others and names the failure.
  FakeCollectiveBackend failing(2, /*fail=*/true);
  const CollectiveMeasurements partly = measure_collectives(failing, nullptr);
  CHECK(partly.points.size() == 24);
  CHECK(partly.skipped == "all_to_all over 2 GPUs: NCCL error: unhandled system error");
}

TEST_CASE("validate collectives: the report's table and the JSON round trip through --measurements") {
  FakeCollectiveBackend two(2);
  ValidationSummary s;
  add_collective_errors(s, measure_collectives(two, nullptr), fitted_like_fake());
  // One measured step, so the saved report is a valid measurements file.
  StepValidation v;
  v.scenario = "decode";
  v.step = "baseline";
  v.predicted_time = 1e-3;
  v.measured_time = 1e-3;
  v.time_error = 0.0;
  s.steps.push_back(v);
  ValidationContext c;
  c.device = "Fake GPU";
  c.backend = "fake";
  c.profile = "fake-local";
  c.calibrated = true;

  const std::string text = format_validation(s, c, ReportFormat::table);
  CHECK(text.find("Collective time (NCCL, between the calibration's buffer sizes)") != std::string::npos);
  CHECK(text.find("collective time") != std::string::npos);
  CHECK(text.find("collective time              30    0.0%  20.0%  20.0%  all_gather over 2 GPUs, ") !=
        std::string::npos);
  CHECK(text.find("all_gather         2  24.0 KiB    10.1 µs    12.7 µs    -20.0%") != std::string::npos);
  CHECK(text.find("median |error|: all_reduce 0.0%, all_gather 20.0%") != std::string::npos);
  const std::string csv = format_validation(s, c, ReportFormat::csv);
  CHECK(csv.find("\ncollective,,,all_gather,6,,,,0.2,0.2,0.2\n") != std::string::npos);
  CHECK(csv.find("\ncollective_time,all_reduce,2 GPUs,24576 bytes,,") != std::string::npos);

  const std::string json = format_validation(s, c, ReportFormat::json);
  const auto j = nlohmann::json::parse(json);
  CHECK(j["collectives"]["skipped"].is_null());
  CHECK(j["collectives"]["points"].size() == 30);
  CHECK(j["overall"]["collective_time"]["count"] == 30);

  const ReplayBackend replay = ReplayBackend::from_json_text(json, "saved.json");
  const CollectiveMeasurements back = replay.collectives();
  REQUIRE(back.points.size() == 30);
  CHECK(back.points[6].collective == Collective::all_gather);
  CHECK(back.points[6].group == 2);
  CHECK(back.points[6].payload == 24576);
  CHECK(back.points[6].seconds == approx(1.25 * (10e-6 + 0.5 * 24576 / 100e9)));
  CHECK(back.skipped.empty());
}

TEST_CASE("validate collectives: reports without collectives, or with a bad one") {
  const std::string old = R"({"validate": {"backend": "cuda", "device": "GPU"},
    "steps": [{"scenario": "d", "step": "baseline", "measured_s": 0.001}], "ops": []})";
  const ReplayBackend r = ReplayBackend::from_json_text(old, "old.json");
  CHECK(r.collectives().points.empty());
  CHECK(r.collectives().skipped == "the measurements file holds no collective timings");

  const std::string bad = R"({"validate": {"backend": "cuda", "device": "GPU"},
    "steps": [{"scenario": "d", "step": "baseline", "measured_s": 0.001}], "ops": [],
    "collectives": {"skipped": null, "points": [{"collective": "all_sum", "gpus": 2, "bytes": 8, "measured_s": 1}]}})";
  CHECK_THROWS_WITH_AS((void)ReplayBackend::from_json_text(bad, "bad.json"),
                       doctest::Contains("bad.json: 'all_sum' is not a collective"), ConfigError);
}

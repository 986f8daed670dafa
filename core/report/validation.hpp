// `perfsim validate` reports: the validation summary (core/validate/validation.hpp) rendered as an
// aligned table, markdown, JSON or CSV. Pure functions that build strings.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "core/cost/calibration.hpp"
#include "core/report/report.hpp"
#include "core/report/sections.hpp"
#include "core/validate/runs.hpp"
#include "core/validate/validation.hpp"

namespace perfsim {

// What the header says: where the suite ran and which profile priced it.
struct ValidationContext {
  std::string device;          // as the backend reports it
  std::string backend;         // "cpu", "cuda"
  std::string catalog;         // the device's catalog entry ("H100-SXM"): what 'datasheet' means
  std::string profile;         // profile (hardware) name
  bool calibrated = false;     // the profile holds fitted tables (else: datasheet figures)
  Provenance measured_on;      // where and when a calibrated profile was measured
  std::string profile_source;  // the --profile argument, or how the profile was chosen
  std::string suite;           // suite directory
  std::vector<std::string> scenarios;  // files run, in order
  bool quick = false;
  std::optional<double> max_error;     // fraction (0.1 = 10%); empty: report only
  std::string measurements;    // --measurements FILE: the saved report re-priced ("" = measured now)
};

// "calibrated (cuda, NVIDIA H100 80GB HBM3, 2026-11-22)" or "datasheet, UNCALIBRATED".
[[nodiscard]] std::string profile_status(const ValidationContext& c);
// The header's warning when a run's replayed ops were timed otherwise than the profile's points
// (Provenance::op_timing); "" when they match or either does not say.
[[nodiscard]] std::string op_timing_mismatch(const ValidationContext& c, const ValidationSummary& s);

// The report as a document of titled tables (the text and markdown printers render it).
[[nodiscard]] ReportDocument build_validation_document(const ValidationSummary& s,
                                                       const ValidationContext& c);

[[nodiscard]] std::string format_validation(const ValidationSummary& s, const ValidationContext& c,
                                            ReportFormat f);
[[nodiscard]] std::string format_validation_text(const ValidationSummary& s,
                                                 const ValidationContext& c);
[[nodiscard]] std::string format_validation_markdown(const ValidationSummary& s,
                                                     const ValidationContext& c);
[[nodiscard]] std::string format_validation_json(const ValidationSummary& s,
                                                 const ValidationContext& c);
[[nodiscard]] std::string format_validation_csv(const ValidationSummary& s,
                                                const ValidationContext& c);

// A validation document (header and sections) as aligned text or markdown.
[[nodiscard]] std::string format_validation_document_text(const ReportDocument& d);
[[nodiscard]] std::string format_validation_document_markdown(const ReportDocument& d);

// Several saved runs priced again and compared (`validate` with --measurements given more than
// once): the suite and profile, and each run's file and device, in run order.
struct RunsContext {
  ValidationContext base;            // suite, scenarios, quick and the profile
  std::vector<std::string> files;    // the --measurements files
  std::vector<std::string> devices;  // the device each was measured on
};
[[nodiscard]] std::string format_runs_comparison_json(const std::vector<ValidationSummary>& runs,
                                                      const RunsComparison& c, const RunsContext& ctx);
// Table, markdown or JSON (CSV throws std::invalid_argument: the caller refuses it first).
[[nodiscard]] std::string format_runs_comparison(const std::vector<ValidationSummary>& runs,
                                                 const RunsComparison& c, const RunsContext& ctx,
                                                 ReportFormat f);

// "unsigned percent" of a magnitude: 0.052 -> "5.2%" ("—" when not finite).
[[nodiscard]] std::string format_percent(double ratio);

}  // namespace perfsim

// ReplayBackend (replay.hpp).
#include "core/validate/replay.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>


#include "core/errors.hpp"
#include "core/files.hpp"
#include "core/text.hpp"

namespace perfsim {

namespace {

using json = nlohmann::json;

double number_or_zero(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

std::string string_at(const json& j, const char* key, const std::string& path) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_string())
    throw ConfigError(fmt::format("{}: not a perfsim validate JSON report (no string '{}' where one is "
                                  "expected); write one with perfsim validate --format json",
                                  path, key));
  return it->get<std::string>();
}

const json& array_at(const json& j, const char* key, const std::string& path) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_array())
    throw ConfigError(fmt::format("{}: not a perfsim validate JSON report (no '{}' list); write one with "
                                  "perfsim validate --format json",
                                  path, key));
  return *it;
}

// The report's timed collectives; reports written before collectives were validated have none.
CollectiveMeasurements saved_collectives(const json& root, const std::string& path) {
  CollectiveMeasurements out;
  const auto c = root.find("collectives");
  if (c == root.end() || !c->is_object()) {
    out.skipped = "the measurements file holds no collective timings";
    return out;
  }
  if (const auto why = c->find("skipped"); why != c->end() && why->is_string()) out.skipped = why->get<std::string>();
  for (const json& p : array_at(*c, "points", path)) {
    const std::string name = string_at(p, "collective", path);
    const std::optional<Collective> kind = parse_collective(name);
    if (!kind) throw ConfigError(fmt::format("{}: '{}' is not a collective", path, name));
    const double gpus = number_or_zero(p, "gpus"), bytes = number_or_zero(p, "bytes"),
                 seconds = number_or_zero(p, "measured_s");
    if (gpus < 2 || !(bytes > 0) || !(seconds > 0))
      throw ConfigError(fmt::format("{}: a {} timing lacks gpus >= 2, bytes or measured_s", path, name));
    out.points.push_back({*kind, static_cast<int>(gpus), bytes, seconds});
  }
  return out;
}

}  // namespace

ReplayBackend ReplayBackend::from_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw ConfigError(fmt::format("{}: cannot read the measurements file", path));
  // A FIFO or device is refused, not read.
  return from_json_text(read_regular_file(path, "measurements file"), path);
}

ReplayBackend ReplayBackend::from_json_text(const std::string& text, const std::string& path) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {
    // A syntax error, or a number beyond what a double holds (1e999).
    throw ConfigError(fmt::format("{}: not JSON ({}); write it with perfsim validate --format json", path,
                                  e.what()));
  }
  if (!root.is_object() || !root.contains("validate") || !root["validate"].is_object())
    throw ConfigError(fmt::format("{}: not a perfsim validate JSON report (no 'validate' header); write one "
                                  "with perfsim validate --format json",
                                  path));
  ReplayBackend b;
  b.m_path = path;
  const json& head = root["validate"];
  b.m_device.backend = string_at(head, "backend", path);
  b.m_device.name = string_at(head, "device", path);
  b.m_device.catalog_name = head.value("catalog", std::string());  // absent in older reports
  b.m_quick = head.value("quick", false);
  if (const auto o = root.find("overall"); o != root.end() && o->is_object())
    b.m_held = number_or_zero(*o, "held_ops") > 0;
  for (const json& s : array_at(root, "steps", path)) {
    const auto t = s.find("measured_s");
    if (t == s.end() || !t->is_number()) continue;  // not measured then: not now either
    SavedStep& step = b.m_steps[{string_at(s, "scenario", path), string_at(s, "step", path)}];
    step.step_time = t->get<double>();
    step.peak_bytes = number_or_zero(s, "measured_peak_bytes");
    step.timed_runs = static_cast<int>(number_or_zero(s, "timed_runs"));
    if (const auto ot = s.find("op_timing"); ot != s.end() && ot->is_string()) step.op_timing = ot->get<std::string>();
  }
  for (const json& o : array_at(root, "ops", path)) {
    const auto it = b.m_steps.find({string_at(o, "scenario", path), string_at(o, "step", path)});
    if (it == b.m_steps.end()) continue;
    it->second.ops[string_at(o, "op", path)] =
        SavedOp{number_or_zero(o, "measured_in_step_s"), number_or_zero(o, "measured_s"),
                number_or_zero(o, "measured_host_s")};
  }
  if (b.m_steps.empty())
    throw ConfigError(fmt::format("{}: the report holds no measured step", path));
  b.m_collectives = saved_collectives(root, path);
  return b;
}

Measurement ReplayBackend::run(const Graph& g, const RunOptions& o) {
  const std::string step = g.applied.empty() ? std::string("baseline") : g.applied.back();
  const auto it = m_steps.find({m_scenario, step});
  if (it == m_steps.end())
    throw NotExecutable(fmt::format("{} holds no measurement of {} step '{}'", m_path, m_scenario, step));
  const SavedStep& saved = it->second;
  Measurement m;
  m.backend = m_device.backend;
  m.device = m_device.name;
  m.warmup = o.warmup;
  m.repeats = saved.timed_runs;  // 0: the report predates the field and does not say
  m.op_timing = saved.op_timing;
  m.step_time = saved.step_time;
  m.peak_bytes = saved.peak_bytes;
  m.graph_replayed = g.graphed;
  for (const Op& op : g.ops) {
    OpMeasurement om;
    om.op = op.id;
    const auto s = saved.ops.find(op.name);
    if (s != saved.ops.end()) {
      om.executed = true;
      om.median = s->second.in_step > 0 ? s->second.in_step : s->second.device;
      om.min = om.median;
      // The report compared eager ops by their held device time where the backend had one
      // (CUDA), replayed ops and the rest by their median.
      if (m_held && !g.graphed) om.device = s->second.device;
      om.host = s->second.host;
      m.time_by_class[class_of(op.kind)] += om.median * op.count;
    }
    m.ops.push_back(om);
  }
  return m;
}

}  // namespace perfsim

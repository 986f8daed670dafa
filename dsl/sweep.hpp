// Sweep expansion: the cartesian product of a scenario's sweep axes, one ScenarioPoint per
// combination. Plain C++: names were resolved by the caller (the catalogs live in Lua).
#pragma once
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "dsl/dsl.hpp"

namespace perfsim::dsl {

// Keys a sweep may vary, in expansion order: the first is the outermost loop.
[[nodiscard]] const std::vector<std::string>& sweep_keys();
// Keys that take whole numbers (rate takes any positive number).
[[nodiscard]] bool is_integer_sweep_key(const std::string& key);
// "" when `key` applies to a workload of phase `p` (a serve{} workload when `serve`), else why not.
[[nodiscard]] std::string sweep_key_problem(const std::string& key, Phase p, bool serve = false);

// Models and hardware the axes name, by the names stored in SweepAxis::values.
struct SweepCatalog {
  std::map<std::string, ModelConfig> models;
  std::map<std::string, Hardware> hardware;
};

// The most points one sweep may expand to (each is a scenario held and predicted in turn).
inline constexpr std::size_t max_sweep_points = 100000;

// One point per combination (the last axis varies fastest); a single point with empty values
// when there is no sweep. Points carry no sweep of their own.
[[nodiscard]] std::vector<ScenarioPoint> expand_sweep(const Scenario& base, const SweepCatalog& named);
// "gpus=12 tp=8": a point's values, in key order, for its errors.
[[nodiscard]] std::string sweep_point_label(const std::map<std::string, std::string>& values);

}  // namespace perfsim::dsl

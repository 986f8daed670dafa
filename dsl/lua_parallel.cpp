// parallel = {...} <-> ParallelSpec (see lua_parallel.hpp).
#include "dsl/lua_parallel.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/errors.hpp"
#include "core/text.hpp"
#include "dsl/lua_fields.hpp"

namespace perfsim::dsl {

namespace {

constexpr double mib = 1024.0 * 1024.0;

const ScalarFields<ParallelSpec>& parallel_scalars() {
  static const ScalarFields<ParallelSpec> f = {
      {"dp", &ParallelSpec::dp},     {"tp", &ParallelSpec::tp},     {"pp", &ParallelSpec::pp},
      {"cp", &ParallelSpec::cp},     {"ep", &ParallelSpec::ep},     {"sp", &ParallelSpec::sp},
      {"zero", &ParallelSpec::zero}, {"interleave", &ParallelSpec::interleave},
  };
  return f;
}

std::vector<std::string> parallel_fields() {
  std::vector<std::string> keys = parallel_scalars().keys();
  for (const char* k : {"gpus", "fsdp", "schedule", "bucket_mb"}) keys.emplace_back(k);
  return keys;
}

// A name from `names` (as name_of spells them), or one line naming the field and the choices.
template <class E>
E choose(const std::string& field, const std::string& value, const std::vector<std::string>& names) {
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == value) return static_cast<E>(i);
  throw ConfigError(fmt::format("parallel.{} = \"{}\" is not one of {}{}", field, value,
                                fmt::join(names, ", "), did_you_mean(value, names)));
}

}  // namespace

ParallelSpec read_parallel(lua_State* L, int index) {
  ParallelSpec p;
  if (lua_isnil(L, index)) return p;
  if (!lua_istable(L, index))
    throw ConfigError(fmt::format("parallel must be a table such as {{tp = 8, dp = 4}} (got {})",
                                  describe_value(L, index)));
  const FieldReader r(L, index, "parallel", parallel_fields());
  parallel_scalars().read(r, p);
  if (const auto f = r.string("fsdp")) p.fsdp = choose<FsdpStrategy>("fsdp", *f, fsdp_names());
  if (const auto s = r.string("schedule")) p.schedule = choose<PipelineSchedule>("schedule", *s, schedule_names());
  if (const auto b = r.number("bucket_mb")) {
    if (!(*b > 0)) throw ConfigError(fmt::format("parallel.bucket_mb must be > 0 MiB (got {})", format_number(*b)));
    p.bucket_bytes = *b * mib;
  }
  // Several chunks per stage make 1F1B the interleaved 1F1B (Megatron's name for it).
  if (p.interleave > 1 && p.schedule == PipelineSchedule::one_f_one_b) p.schedule = PipelineSchedule::interleaved;
  if (const auto g = r.integer("gpus")) {
    constexpr int64_t most = int64_t{1} << 20;
    if (*g < 1 || *g > most)
      throw ConfigError(fmt::format("parallel.gpus = {} is out of range; give 1 to {} GPUs", *g, most));
    if (r.has("dp")) {
      if (p.gpus() != *g)
        throw ConfigError(fmt::format(
            "parallel: dp · tp · pp · cp = {} · {} · {} · {} = {} GPUs, but gpus = {}; leave dp out to "
            "derive it, or change a degree",
            p.dp, p.tp, p.pp, p.cp, p.gpus(), *g));
    } else {
      set_gpus(p, static_cast<int>(*g));
    }
  }
  return p;
}

void push_parallel(lua_State* L, const ParallelSpec& p) {
  lua_createtable(L, 0, 12);
  parallel_scalars().push(L, p);
  set_number(L, "gpus", p.gpus());
  set_string(L, "fsdp", name_of(p.fsdp));
  set_string(L, "schedule", name_of(p.schedule));
  set_number(L, "bucket_mb", p.bucket_bytes / mib);
}

}  // namespace perfsim::dsl

// parallel = {...}: a scenario's layout over GPUs, read into a ParallelSpec.
#pragma once
#include <lua.hpp>

#include "core/config/parallel.hpp"

namespace perfsim::dsl {

// Reads the table at `index` (nil: a single GPU). Fields: gpus, dp, tp, pp, cp, ep (whole
// numbers), sp (boolean), zero (0-3), fsdp ("full_shard", "shard_grad_op", "hybrid_shard"),
// schedule ("gpipe", "1f1b", "interleaved"), interleave (chunks per stage), bucket_mb (DDP
// bucket size in MiB). With gpus and without dp, dp = gpus / (tp · pp · cp).
[[nodiscard]] ParallelSpec read_parallel(lua_State* L, int index);
// Pushes the layout as the table read_parallel reads.
void push_parallel(lua_State* L, const ParallelSpec& p);

}  // namespace perfsim::dsl

// Disaggregated prefill and decode (xPyD, as vLLM's, SGLang's, Dynamo's and llm-d's): prefill
// engines compute each prompt and hand its KV blocks to a decode engine, which generates the
// output. The two pools run as two sets of engines (router.hpp): the prefill engines take every
// request (output 1) behind the step's router; each request's KV then crosses from a prefill GPU
// to a decode GPU, priced as a send between two GPUs over the hardware's links (NVLink when the
// P + D engines fit one node, else the network); and the decode engines (least outstanding
// first) take the request when its KV has arrived, holding its prompt's K/V and computing only
// its last prompt token before decoding, as vLLM's decode instance does. The client's TTFT is
// the decode engine's first token, so it holds the prefill, the transfer and the decode queue.
//
// Open-loop arrivals only: the prefill engines run first, the decode engines after them on the
// arrivals the transfers give.
#pragma once
#include <vector>

#include "core/serve/simulate.hpp"

namespace perfsim {

// Seconds to send `bytes` from one GPU of a prefill engine to one of a decode engine, every GPU
// of the engine sending its own share at once: a send/recv between two GPUs on one node when
// `gpus` (all the engines' GPUs) fit one, else across nodes; a CPU without link figures (ranks
// of one host) copies them through its memory (host_copy_bandwidth, else memory_bandwidth).
// Throws ConfigError when the hardware describes no way for it.
[[nodiscard]] double kv_transfer_seconds(double bytes, const Hardware& hw, int gpus);

// Of a transfer of `seconds`, what the decode engine waits for after the prompt's last prefill
// step: all of it when sent after the prefill; sent layer by layer during a prefill computed for
// `prefill` seconds over `layers` layers, the last layer's share, or more where the link is
// slower than the layers: max(seconds / layers, seconds − prefill · (layers − 1) / layers).
[[nodiscard]] double kv_transfer_exposed(double seconds, bool layerwise, double prefill, int64_t layers);

// A disaggregated run's two sides joined, as the client sees each request: its record from the
// prefill side (`prefill`, by request id: arrival, admission, prefix hits), its tokens from the
// decode side (`decode`'s record d stands for request original[d]); the steps of the prefill side
// then the decode side's, the gaps between tokens of the decode side.
[[nodiscard]] EngineRun join_disaggregated(const std::vector<Request>& requests, const EngineRun& prefill,
                                           const EngineRun& decode, const std::vector<std::size_t>& original,
                                           const KvPool& pool);

// predict_serving's run for a configuration with prefill_engines and decode_engines: `pricer`
// prices both kinds of engine, `pool` is one engine's.
[[nodiscard]] ServePrediction predict_disaggregated(const ModelConfig& m, const Hardware& hw, const ServeSpec& spec,
                                                    const std::vector<Request>& requests, ServePrediction out,
                                                    StepPricer& pricer);

}  // namespace perfsim

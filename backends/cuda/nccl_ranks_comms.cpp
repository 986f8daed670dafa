// NcclRanks' communicators (see nccl_ranks.hpp): made per group over MPI, polled for
// asynchronous errors, all aborted on the first failure, with messages that name the group.
#include <fmt/format.h>

#include <cstdlib>
#include <exception>
#include <set>
#include <tuple>

#include "backends/cuda/nccl_ranks.hpp"
#include "core/builders/streams.hpp"
#include "core/errors.hpp"
#include "core/graph/pipeline_edge.hpp"

#ifdef PERFSIM_HAVE_NCCL
#include <nccl.h>
#endif

namespace perfsim::cuda {

std::string NcclRanks::describe(RankGroup g) const {
  if (g.size == m_ranks.size()) return fmt::format("all {} ranks", g.size);
  std::string members;
  for (int i = 0; i < g.size; ++i) {
    if (i > 0) members += i + 1 == g.size ? " and " : ", ";
    members += std::to_string(g.member(m_ranks.rank(), i));
  }
  return "ranks " + members;
}

void NcclRanks::fail(const std::string& message) {
  if (m_abort_reason.empty()) m_abort_reason = message;
  abort();
  throw NcclError(message + "; every NCCL communicator of this rank is aborted");
}

NcclRanks::CommKey NcclRanks::comm_key(const Op& op) const {
  const RankGroup group{op.attrs.group, op.attrs.group_stride};
  if (op.attrs.collective != Collective::send_recv) return {group, 0};
  if (op.stream == context_stream) return {group, ring_lane};
  const PipelineEdge e = pipeline_edge(op, m_ranks.rank(), m_ranks.size());
  return {pipeline_group(op), pipeline_lane_of(e.backward, e.colour)};
}

RankGroup NcclRanks::pipeline_group(const Op& op) const {
  return RankGroup{m_ranks.size() / op.attrs.group_stride, op.attrs.group_stride};
}

void NcclRanks::prepare(const Graph& g) {
  std::set<std::tuple<int, int, int>> keys;
  const Op* edge = nullptr;
  bool ring = false;  // interleaved chunks: the stages form a ring
  for (const Op& op : g.ops) {
    ring = ring || op.chunk > 0;
    if (op.kind != OpKind::collective || op.attrs.group <= 1) continue;
    if (op.attrs.collective == Collective::send_recv && is_pipeline_stream(op.stream)) {
      edge = &op;
      continue;
    }
    const CommKey k = comm_key(op);
    keys.emplace(k.group.size, k.group.stride, k.lane);
  }
  // Every stage of the pipeline joins each of its communicators, also those of edges it does
  // not touch (a middle stage's neighbours' colours).
  if (edge != nullptr) {
    const RankGroup pipe = pipeline_group(*edge);
    for (const bool backward : {false, true})
      for (int colour = 0; colour < pipeline_colours(pipe.size, ring); ++colour)
        keys.emplace(pipe.size, pipe.stride, pipeline_lane_of(backward, colour));
  }
  for (const auto& [size, stride, lane] : keys) (void)comm(RankGroup{size, stride}, "", lane);
}

#ifndef PERFSIM_HAVE_NCCL

NcclRanks::NcclRanks(Communicator& ranks) : m_ranks(ranks) {}
NcclRanks::~NcclRanks() = default;
void NcclRanks::all_reduce(float*, std::size_t, RankGroup, Reduction, cudaStream_t, const std::string& what) {
  throw NotExecutable(fmt::format("'{}': perfsim was built without NCCL", what));
}
void NcclRanks::point_to_point(void*, std::size_t, int, bool, cudaStream_t, const std::string& what) {
  throw NotExecutable(fmt::format("'{}': perfsim was built without NCCL", what));
}
void NcclRanks::check() {}
void NcclRanks::abort() noexcept {
  if (m_abort_reason.empty()) m_abort_reason = "aborted";
}
NcclRanks::Comm& NcclRanks::comm(RankGroup, const std::string& what, int) {
  throw NotExecutable(fmt::format("'{}': perfsim was built without NCCL", what));
}
void NcclRanks::check_result(int, const char* call, const Comm*, RankGroup, const std::string&) {
  fail(fmt::format("{}: perfsim was built without NCCL", call != nullptr ? call : "NCCL"));
}

#else

NcclRanks::NcclRanks(Communicator& ranks) : m_ranks(ranks) {}

NcclRanks::~NcclRanks() {
  // Unwinding: a collective may still wait for a peer that failed, and ncclCommDestroy would
  // wait with it; the rank is ending anyway.
  const bool unwinding = std::uncaught_exceptions() > 0;
  for (auto& [key, c] : m_comms) {
    auto* nc = static_cast<ncclComm_t>(c.comm);
    (void)(unwinding ? ncclCommAbort(nc) : ncclCommDestroy(nc));
  }
}

NcclRanks::Comm& NcclRanks::comm(RankGroup g, const std::string& what, int lane) {
  if (aborted())
    throw NcclError(fmt::format("'{}': the NCCL communicators were aborted after an earlier error ({})", what,
                                m_abort_reason));
  const auto key = std::make_tuple(g.size, g.stride, lane);
  if (auto it = m_comms.find(key); it != m_comms.end()) {
    it->second.last = what;
    return it->second;
  }
  ncclUniqueId mine{};
  const int place = g.place(m_ranks.rank());
  if (place == 0) check_result(ncclGetUniqueId(&mine), "ncclGetUniqueId", nullptr, g, what);
  std::vector<ncclUniqueId> all(static_cast<std::size_t>(g.size));
  m_ranks.all_gather(&mine, all.data(), sizeof(ncclUniqueId), g);
  // NVLink SHARP (multicast) off unless the environment asks for it, as calibrate has it.
  setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
  ncclComm_t c = nullptr;
  const ncclResult_t r = ncclCommInitRank(&c, g.size, all[0], place);
  // Kept even when the init failed part-way, so that the abort on failure ends it too.
  if (c != nullptr) m_comms[key] = Comm{c, g, what};
  check_result(r, "ncclCommInitRank", c != nullptr ? &m_comms.at(key) : nullptr, g, what);
  return m_comms.at(key);
}

void NcclRanks::check_result(int result, const char* call, const Comm* c, RankGroup group, const std::string& what) {
  const auto r = static_cast<ncclResult_t>(result);
  if (r == ncclSuccess || r == ncclInProgress) return;
  // The last-error text belongs to the communicator: read it before the abort frees it.
  const char* last = ncclGetLastError(c != nullptr ? static_cast<ncclComm_t>(c->comm) : nullptr);
  // "NCCL ncclAllReduce failed in 'x'" or "NCCL reported an asynchronous error after 'x'".
  const std::string event =
      call != nullptr ? fmt::format("{} failed{}", call, what.empty() ? "" : fmt::format(" in '{}'", what))
                      : fmt::format("reported an asynchronous error{}",
                                    what.empty() ? "" : fmt::format(" after '{}' (or a later collective)", what));
  fail(fmt::format("NCCL {} on the communicator of {} ({} ranks {} apart): {} (ncclResult_t {}){}", event,
                   describe(group), group.size, group.stride, ncclGetErrorString(r), result,
                   last != nullptr && *last != 0 ? fmt::format(": {}", last) : ""));
}

void NcclRanks::all_reduce(float* data, std::size_t count, RankGroup group, Reduction r, cudaStream_t stream,
                           const std::string& what) {
  if (group.size <= 1 || count == 0) return;
  Comm& c = comm(group, what);
  check_result(ncclAllReduce(data, data, count, ncclFloat32, r == Reduction::max ? ncclMax : ncclSum,
                             static_cast<ncclComm_t>(c.comm), stream),
               "ncclAllReduce", &c, group, what);
}

void NcclRanks::point_to_point(void* data, std::size_t bytes, int peer, bool send, cudaStream_t stream,
                               const std::string& what) {
  const RankGroup world{m_ranks.size(), 1};
  Comm& c = comm(world, what, point_to_point_lane);
  auto* nc = static_cast<ncclComm_t>(c.comm);
  if (send) check_result(ncclSend(data, bytes, ncclInt8, peer, nc, stream), "ncclSend", &c, world, what);
  else check_result(ncclRecv(data, bytes, ncclInt8, peer, nc, stream), "ncclRecv", &c, world, what);
}

void NcclRanks::check() {
  if (aborted())
    throw NcclError(fmt::format("the NCCL communicators were aborted after an earlier error ({})", m_abort_reason));
  for (auto& [key, c] : m_comms) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(static_cast<ncclComm_t>(c.comm), &state);
    if (r == ncclSuccess && (state == ncclSuccess || state == ncclInProgress)) continue;
    // A copy of the communicator's fields: check_result aborts (and so clears) them.
    const Comm seen = c;
    if (r != ncclSuccess) check_result(r, "ncclCommGetAsyncError", &seen, seen.group, seen.last);
    check_result(state, nullptr, &seen, seen.group, seen.last);
  }
}

void NcclRanks::abort() noexcept {
  if (m_abort_reason.empty()) m_abort_reason = "aborted";
  // ncclCommAbort also makes the collectives still running on the device return, so the
  // streams can drain.
  for (auto& [key, c] : m_comms) (void)ncclCommAbort(static_cast<ncclComm_t>(c.comm));
  m_comms.clear();
}

#endif

}  // namespace perfsim::cuda

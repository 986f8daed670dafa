// NcclRanks (see nccl_ranks.hpp).
#include "backends/cuda/nccl_ranks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_convert.hpp"
#include "core/build/streams.hpp"
#include "core/errors.hpp"

#ifdef PERFSIM_HAVE_NCCL
#include <nccl.h>
#endif

namespace perfsim::cuda {

namespace {

std::size_t at(int id) { return static_cast<std::size_t>(id); }

std::string collective_shape_reason(const Op& op, const Graph& g) {
  const int n = std::max(1, op.attrs.group);
  switch (op.attrs.collective) {
    case Collective::all_reduce: return {};
    case Collective::reduce_scatter:
    case Collective::all_gather: {
      if (op.inputs.size() != op.outputs.size())
        return fmt::format("collective '{}' reads {} tensors and writes {}", op.name, op.inputs.size(),
                           op.outputs.size());
      const bool scatter = op.attrs.collective == Collective::reduce_scatter;
      for (std::size_t i = 0; i < op.inputs.size(); ++i) {
        const Tensor& whole = g.tensor(scatter ? op.inputs[i] : op.outputs[i]);
        const Tensor& part = g.tensor(scatter ? op.outputs[i] : op.inputs[i]);
        if (whole.elements() % n != 0 || part.elements() * n != whole.elements())
          return fmt::format("GPU ranks split '{}' ({} elements) into {} equal parts only when {} divides it",
                             whole.name, whole.elements(), n, n);
        if (!scatter && part.dtype != whole.dtype)
          return fmt::format("all_gather '{}': '{}' and '{}' are stored differently", op.name, part.name,
                             whole.name);
      }
      return {};
    }
    case Collective::send_recv:
      if (op.stream == pipeline_stream) return {};  // ring attention's passes are priced only
      break;
    case Collective::all_to_all: break;
  }
  return fmt::format("GPU ranks do not run {} yet ('{}')", name_of(op.attrs.collective), op.name);
}

}  // namespace

#ifndef PERFSIM_HAVE_NCCL

NcclRanks::NcclRanks(Communicator& ranks) : m_ranks(ranks) {}
NcclRanks::~NcclRanks() = default;
std::string NcclRanks::unsupported_reason(const Op&, const Graph&) {
  return "perfsim was built without NCCL: GPU ranks cannot run collectives";
}
void NcclRanks::run(const Op& op, const Graph&, const std::vector<void*>&, cudaStream_t, CachingAllocator&) {
  throw NotExecutable(fmt::format("collective '{}': perfsim was built without NCCL", op.name));
}
void* NcclRanks::comm(RankGroup) { return nullptr; }

#else

namespace {

void nccl_check(ncclResult_t r, const char* call) {
  if (r == ncclSuccess || r == ncclInProgress) return;
  throw NotExecutable(fmt::format("{} failed: {} ({})", call, ncclGetErrorString(r), ncclGetLastError(nullptr)));
}

ncclDataType_t nccl_type(const Tensor& t) {
  switch (t.dtype) {
    case DType::fp32: return ncclFloat32;
    case DType::bf16: return ncclBfloat16;
    case DType::fp16: return ncclFloat16;
    default: throw NotExecutable(fmt::format("NCCL cannot reduce {} tensor '{}'", name_of(t.dtype), t.name));
  }
}

Elem elem(const Graph& g, int id) { return elem_of(g.tensor(id).dtype); }

std::size_t bytes_of_tensor(const Graph& g, int id) {
  return static_cast<std::size_t>(g.tensor(id).elements()) * static_cast<std::size_t>(bytes_of(elem(g, id)));
}

}  // namespace

NcclRanks::NcclRanks(Communicator& ranks) : m_ranks(ranks) {
  if (ranks.size() > 1) (void)comm(RankGroup{ranks.size(), 1});
}

NcclRanks::~NcclRanks() {
  for (auto& [key, c] : m_comms) (void)ncclCommDestroy(static_cast<ncclComm_t>(c));
}

std::string NcclRanks::unsupported_reason(const Op& op, const Graph& g) { return collective_shape_reason(op, g); }

void* NcclRanks::comm(RankGroup g) {
  const auto key = std::make_pair(g.size, g.stride);
  if (auto it = m_comms.find(key); it != m_comms.end()) return it->second;
  ncclUniqueId mine{};
  const int place = g.place(m_ranks.rank());
  if (place == 0) nccl_check(ncclGetUniqueId(&mine), "ncclGetUniqueId");
  std::vector<ncclUniqueId> all(static_cast<std::size_t>(g.size));
  m_ranks.all_gather(&mine, all.data(), sizeof(ncclUniqueId), g);
  // NVLink SHARP (multicast) off unless the environment asks for it, as calibrate has it.
  setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
  ncclComm_t c = nullptr;
  nccl_check(ncclCommInitRank(&c, g.size, all[0], place), "ncclCommInitRank");
  m_comms[key] = c;
  return c;
}

void NcclRanks::run(const Op& op, const Graph& g, const std::vector<void*>& buf, cudaStream_t stream,
                    CachingAllocator& alloc) {
  if (const std::string why = collective_shape_reason(op, g); !why.empty()) throw NotExecutable(why);
  const RankGroup group{op.attrs.group, op.attrs.group_stride};
  if (group.size <= 1) return;
  auto* c = op.attrs.collective == Collective::send_recv ? nullptr : static_cast<ncclComm_t>(comm(group));
  const ncclRedOp_t red = op.attrs.average ? ncclAvg : ncclSum;
  switch (op.attrs.collective) {
    case Collective::all_reduce: {
      if (op.inputs.size() == 1) {
        const Tensor& t = g.tensor(op.inputs[0]);
        nccl_check(ncclAllReduce(buf[at(op.inputs[0])], buf[at(op.outputs[0])], static_cast<std::size_t>(t.elements()),
                                 nccl_type(t), red, c, stream),
                   "ncclAllReduce");
        return;
      }
      // A DDP bucket: the gradients, then the bucket buffer that holds them end to end.
      const int bucket = op.inputs.back();
      std::size_t off = 0;
      auto* b = static_cast<char*>(buf[at(bucket)]);
      for (std::size_t i = 0; i + 1 < op.inputs.size(); ++i) {
        const std::size_t n = bytes_of_tensor(g, op.inputs[i]);
        PERFSIM_CUDA_CHECK(cudaMemcpyAsync(b + off, buf[at(op.inputs[i])], n, cudaMemcpyDeviceToDevice, stream));
        off += n;
      }
      if (off != bytes_of_tensor(g, bucket))
        throw NotExecutable(fmt::format("all_reduce '{}': its bucket buffer holds {} bytes, its tensors {}", op.name,
                                        bytes_of_tensor(g, bucket), off));
      const Tensor& bt = g.tensor(bucket);
      nccl_check(ncclAllReduce(b, b, static_cast<std::size_t>(bt.elements()), nccl_type(bt), red, c, stream),
                 "ncclAllReduce");
      off = 0;
      for (std::size_t i = 0; i + 1 < op.inputs.size(); ++i) {
        const std::size_t n = bytes_of_tensor(g, op.inputs[i]);
        PERFSIM_CUDA_CHECK(cudaMemcpyAsync(buf[at(op.inputs[i])], b + off, n, cudaMemcpyDeviceToDevice, stream));
        off += n;
      }
      return;
    }
    case Collective::reduce_scatter: {
      std::vector<std::pair<void*, std::size_t>> scratch;  // (part in the whole's type, index)
      nccl_check(ncclGroupStart(), "ncclGroupStart");
      for (std::size_t i = 0; i < op.inputs.size(); ++i) {
        const Tensor& whole = g.tensor(op.inputs[i]);
        const Tensor& part = g.tensor(op.outputs[i]);
        void* out = buf[at(op.outputs[i])];
        if (whole.dtype != part.dtype) {
          out = alloc.allocate(static_cast<std::size_t>(part.elements()) *
                                   static_cast<std::size_t>(bytes_of(elem(g, whole.id))),
                               TensorRole::gradient);
          scratch.emplace_back(out, i);
        }
        nccl_check(ncclReduceScatter(buf[at(op.inputs[i])], out, static_cast<std::size_t>(part.elements()),
                                     nccl_type(whole), red, c, stream),
                   "ncclReduceScatter");
      }
      nccl_check(ncclGroupEnd(), "ncclGroupEnd");
      for (auto [p, i] : scratch) {
        const int w = op.inputs[i], s = op.outputs[i];
        convert(p, elem(g, w), buf[at(s)], elem(g, s), g.tensor(s).elements(), stream);
        alloc.release(p);
      }
      return;
    }
    case Collective::all_gather: {
      nccl_check(ncclGroupStart(), "ncclGroupStart");
      for (std::size_t i = 0; i < op.inputs.size(); ++i) {
        const Tensor& part = g.tensor(op.inputs[i]);
        nccl_check(ncclAllGather(buf[at(op.inputs[i])], buf[at(op.outputs[i])],
                                 static_cast<std::size_t>(part.elements()), nccl_type(part), c, stream),
                   "ncclAllGather");
      }
      nccl_check(ncclGroupEnd(), "ncclGroupEnd");
      return;
    }
    case Collective::send_recv: {
      // A pipeline edge over the world communicator: forward to the next stage, gradients back.
      auto* world = static_cast<ncclComm_t>(comm(RankGroup{m_ranks.size(), 1}));
      const bool backward = op.stage == Stage::backward;
      const int stride = op.attrs.group_stride;
      if (!op.inputs.empty()) {
        const int to = m_ranks.rank() + (backward ? -stride : stride);
        nccl_check(ncclSend(buf[at(op.inputs[0])], bytes_of_tensor(g, op.inputs[0]), ncclInt8, to, world, stream),
                   "ncclSend");
      } else if (!op.outputs.empty()) {
        const int from = m_ranks.rank() + (backward ? stride : -stride);
        nccl_check(ncclRecv(buf[at(op.outputs[0])], bytes_of_tensor(g, op.outputs[0]), ncclInt8, from, world, stream),
                   "ncclRecv");
      }
      return;
    }
    default: throw NotExecutable(collective_shape_reason(op, g));
  }
}

#endif

}  // namespace perfsim::cuda

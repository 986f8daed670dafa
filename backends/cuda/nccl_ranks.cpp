// NcclRanks' collective ops (see nccl_ranks.hpp); its communicators and their errors are in
// nccl_ranks_comms.cpp.
#include "backends/cuda/nccl_ranks.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_convert.hpp"
#include "core/builders/streams.hpp"
#include "core/errors.hpp"
#include "core/graph/all_to_all.hpp"
#include "core/graph/pipeline_edge.hpp"

#ifdef PERFSIM_HAVE_NCCL
#include <nccl.h>
#endif

namespace perfsim::cuda {

namespace {

[[maybe_unused]] std::size_t at(int id) { return static_cast<std::size_t>(id); }

bool movable(DType t) {
  const Elem e = elem_of(t);
  return e == Elem::f32 || e == Elem::bf16 || e == Elem::f16 || e == Elem::i32;
}

// The checks that need no scan of the graph (is_bucket's result comes in).
[[maybe_unused]] std::string collective_shape_reason(const Op& op, const Graph& g, bool bucket) {
  const int n = std::max(1, op.attrs.group);
  const bool typed = op.attrs.collective == Collective::all_reduce ||
                     op.attrs.collective == Collective::reduce_scatter ||
                     op.attrs.collective == Collective::all_gather;  // send_recv moves bytes
  for (const std::vector<int>* ids : {&op.inputs, &op.outputs})
    for (int id : *ids)
      if (typed && !movable(g.tensor(id).dtype))
        return fmt::format("GPU ranks do not move {} tensors through NCCL ('{}' of '{}')",
                           name_of(g.tensor(id).dtype), g.tensor(id).name, op.name);
  switch (op.attrs.collective) {
    case Collective::all_reduce: {
      if (bucket) return {};
      // Tensor i it reads into tensor i it writes (the same one in place).
      bool pairs = op.inputs.size() == op.outputs.size() && !op.inputs.empty();
      for (std::size_t i = 0; pairs && i < op.inputs.size(); ++i) {
        const Tensor& x = g.tensor(op.inputs[i]);
        const Tensor& y = g.tensor(op.outputs[i]);
        pairs = x.elements() == y.elements() && elem_of(x.dtype) == elem_of(y.dtype);
      }
      if (pairs) return {};
      return fmt::format("GPU ranks all-reduce a DDP bucket or each tensor into its own output; '{}' reads {} "
                         "tensors and writes {} of other sizes or types",
                         op.name, op.inputs.size(), op.outputs.size());
    }
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
        if (!scatter && elem_of(part.dtype) != elem_of(whole.dtype))
          return fmt::format("all_gather '{}': '{}' and '{}' are stored differently", op.name, part.name,
                             whole.name);
      }
      return {};
    }
    case Collective::send_recv:
      if (is_pipeline_stream(op.stream)) return {};
      if (op.stream == context_stream) {  // a step of ring attention: block i out, block i in
        bool pairs = op.inputs.size() == op.outputs.size() && !op.inputs.empty();
        for (std::size_t i = 0; pairs && i < op.inputs.size(); ++i)
          pairs = g.tensor(op.inputs[i]).elements() == g.tensor(op.outputs[i]).elements() &&
                  elem_of(g.tensor(op.inputs[i]).dtype) == elem_of(g.tensor(op.outputs[i]).dtype);
        if (pairs) return {};
        return fmt::format("ring step '{}': the blocks it receives are not those it sends", op.name);
      }
      break;
    case Collective::all_to_all: return all_to_all_unfit_reason(op, g);
  }
  return fmt::format("GPU ranks do not run {} yet ('{}')", name_of(op.attrs.collective), op.name);
}

}  // namespace

bool NcclRanks::is_bucket(const Op& op, const Graph& g) {
  if (op.kind != OpKind::collective || op.attrs.collective != Collective::all_reduce || op.inputs.size() < 2 ||
      op.inputs != op.outputs)
    return false;
  const int buffer = op.inputs.back();
  const Tensor& b = g.tensor(buffer);
  int64_t held = 0;
  for (std::size_t i = 0; i + 1 < op.inputs.size(); ++i) {
    const Tensor& t = g.tensor(op.inputs[i]);
    if (elem_of(t.dtype) != elem_of(b.dtype) || t.id == buffer) return false;
    held += t.elements();
  }
  if (held != b.elements()) return false;
  // Norm gradients or shards can add up to the last one's size too; a bucket buffer is the one
  // tensor nothing else touches.
  for (const Op& o : g.ops) {
    if (o.id == op.id) continue;
    if (std::find(o.inputs.begin(), o.inputs.end(), buffer) != o.inputs.end() ||
        std::find(o.outputs.begin(), o.outputs.end(), buffer) != o.outputs.end())
      return false;
  }
  return true;
}

std::string NcclRanks::unsupported_reason(const Op& op, const Graph& g) {
#ifndef PERFSIM_HAVE_NCCL
  (void)op, (void)g;
  return "perfsim was built without NCCL: GPU ranks cannot run collectives";
#else
  return collective_shape_reason(op, g, is_bucket(op, g));
#endif
}

#ifndef PERFSIM_HAVE_NCCL

void NcclRanks::run(const Op& op, const Graph&, const std::vector<void*>&, cudaStream_t, CachingAllocator&, bool) {
  throw NotExecutable(fmt::format("collective '{}': perfsim was built without NCCL", op.name));
}

#else

namespace {

ncclDataType_t nccl_type(const Tensor& t) {
  switch (elem_of(t.dtype)) {
    case Elem::f32: return ncclFloat32;
    case Elem::bf16: return ncclBfloat16;
    case Elem::f16: return ncclFloat16;
    case Elem::i32: return ncclInt32;
    default: throw NotExecutable(fmt::format("NCCL cannot move {} tensor '{}'", name_of(t.dtype), t.name));
  }
}

Elem elem(const Graph& g, int id) { return elem_of(g.tensor(id).dtype); }

std::size_t bytes_of_tensor(const Graph& g, int id) {
  return static_cast<std::size_t>(g.tensor(id).elements()) * static_cast<std::size_t>(bytes_of(elem(g, id)));
}

}  // namespace

void NcclRanks::run(const Op& op, const Graph& g, const std::vector<void*>& buf, cudaStream_t stream,
                    CachingAllocator& alloc, bool bucket) {
  if (const std::string why = collective_shape_reason(op, g, bucket); !why.empty()) throw NotExecutable(why);
  const RankGroup group{op.attrs.group, op.attrs.group_stride};
  if (group.size <= 1) return;
  const bool ring = op.attrs.collective == Collective::send_recv && op.stream == context_stream;
  const CommKey key = comm_key(op);
  Comm& c = comm(key.group, op.name, key.lane);
  auto* nc = static_cast<ncclComm_t>(c.comm);
  auto ok = [&](ncclResult_t r, const char* call) { check_result(r, call, &c, c.group, op.name); };
  const ncclRedOp_t red = op.attrs.average ? ncclAvg : ncclSum;
  switch (op.attrs.collective) {
    case Collective::all_reduce: {
      if (!bucket) {
        // Each tensor into its own output (in place when they are one), in one NCCL group.
        const bool grouped = op.inputs.size() > 1;
        if (grouped) ok(ncclGroupStart(), "ncclGroupStart");
        for (std::size_t i = 0; i < op.inputs.size(); ++i) {
          const Tensor& t = g.tensor(op.inputs[i]);
          ok(ncclAllReduce(buf[at(op.inputs[i])], buf[at(op.outputs[i])], static_cast<std::size_t>(t.elements()),
                           nccl_type(t), red, nc, stream),
             "ncclAllReduce");
        }
        if (grouped) ok(ncclGroupEnd(), "ncclGroupEnd");
        return;
      }
      // A DDP bucket: the gradients, then the bucket buffer that holds them end to end.
      const int bucket_id = op.inputs.back();
      std::size_t off = 0;
      auto* b = static_cast<char*>(buf[at(bucket_id)]);
      for (std::size_t i = 0; i + 1 < op.inputs.size(); ++i) {
        const std::size_t n = bytes_of_tensor(g, op.inputs[i]);
        PERFSIM_CUDA_CHECK(cudaMemcpyAsync(b + off, buf[at(op.inputs[i])], n, cudaMemcpyDeviceToDevice, stream));
        off += n;
      }
      const Tensor& bt = g.tensor(bucket_id);
      ok(ncclAllReduce(b, b, static_cast<std::size_t>(bt.elements()), nccl_type(bt), red, nc, stream),
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
      // Scratch parts in the whole's type first: nothing may throw between the group's ends.
      std::vector<void*> out(op.inputs.size(), nullptr);
      std::vector<std::size_t> converted;  // indices written through a scratch part
      try {
        for (std::size_t i = 0; i < op.inputs.size(); ++i) {
          const Tensor& whole = g.tensor(op.inputs[i]);
          const Tensor& part = g.tensor(op.outputs[i]);
          out[i] = buf[at(op.outputs[i])];
          if (elem_of(whole.dtype) == elem_of(part.dtype)) continue;
          out[i] = alloc.allocate(static_cast<std::size_t>(part.elements()) *
                                      static_cast<std::size_t>(bytes_of(elem(g, whole.id))),
                                  TensorRole::gradient);
          converted.push_back(i);
        }
      } catch (...) {
        for (std::size_t i : converted) alloc.release(out[i]);
        throw;
      }
      ok(ncclGroupStart(), "ncclGroupStart");
      for (std::size_t i = 0; i < op.inputs.size(); ++i) {
        const Tensor& whole = g.tensor(op.inputs[i]);
        ok(ncclReduceScatter(buf[at(op.inputs[i])], out[i], static_cast<std::size_t>(g.tensor(op.outputs[i]).elements()),
                             nccl_type(whole), red, nc, stream),
           "ncclReduceScatter");
      }
      ok(ncclGroupEnd(), "ncclGroupEnd");
      for (std::size_t i : converted) {
        const int w = op.inputs[i], s = op.outputs[i];
        convert(out[i], elem(g, w), buf[at(s)], elem(g, s), g.tensor(s).elements(), stream);
        alloc.release(out[i]);
      }
      return;
    }
    case Collective::all_gather: {
      ok(ncclGroupStart(), "ncclGroupStart");
      for (std::size_t i = 0; i < op.inputs.size(); ++i) {
        const Tensor& part = g.tensor(op.inputs[i]);
        ok(ncclAllGather(buf[at(op.inputs[i])], buf[at(op.outputs[i])], static_cast<std::size_t>(part.elements()),
                         nccl_type(part), nc, stream),
           "ncclAllGather");
      }
      ok(ncclGroupEnd(), "ncclGroupEnd");
      return;
    }
    case Collective::all_to_all: {
      // The blocks of core/graph/all_to_all.hpp: those lying in runs of the tensor (not one
      // contiguous span) packed into scratch with one 2-D copy a member, one ncclSend and one
      // ncclRecv a member (its place is its rank in the group's communicator) in one NCCL group,
      // and the blocks received unpacked the same way into the tensor written.
      const AllToAllBlocks b = all_to_all_blocks(op, g);
      const auto size = static_cast<std::size_t>(bytes_of(elem(g, op.inputs[0])));
      const std::size_t block = static_cast<std::size_t>(b.elements) * size;
      const std::size_t all = block * static_cast<std::size_t>(b.parts);
      const auto* x = static_cast<const char*>(buf[at(op.inputs[0])]);
      auto* y = static_cast<char*>(buf[at(op.outputs[0])]);
      const bool pack = b.send.runs > 1, unpack = b.recv.runs > 1;
      // Scratch first: nothing may throw between the group's ends.
      char* sent = nullptr;
      char* received = nullptr;
      try {
        if (pack) sent = static_cast<char*>(alloc.allocate(all, TensorRole::activation));
        if (unpack) received = static_cast<char*>(alloc.allocate(all, TensorRole::activation));
      } catch (...) {
        alloc.release(sent);
        throw;
      }
      // Block p's run r at p·run + r·pitch elements of its tensor; packed, the runs end to end.
      auto copy_2d = [&](char* dst, std::size_t dpitch, const char* src, std::size_t spitch, const BlockRuns& r) {
        PERFSIM_CUDA_CHECK(cudaMemcpy2DAsync(dst, dpitch, src, spitch, static_cast<std::size_t>(r.run) * size,
                                             static_cast<std::size_t>(r.runs), cudaMemcpyDeviceToDevice, stream));
      };
      const std::size_t send_run = static_cast<std::size_t>(b.send.run) * size;
      const std::size_t recv_run = static_cast<std::size_t>(b.recv.run) * size;
      if (pack)
        for (int p = 0; p < b.parts; ++p)
          copy_2d(sent + p * block, send_run, x + p * send_run, static_cast<std::size_t>(b.send.pitch) * size, b.send);
      ok(ncclGroupStart(), "ncclGroupStart");
      for (int p = 0; p < b.parts; ++p) {
        // A block in one run lies at p·run of its tensor: sent or received in place.
        const char* from = pack ? sent + p * block : x + p * send_run;
        char* to = unpack ? received + p * block : y + p * recv_run;
        ok(ncclSend(from, block, ncclInt8, p, nc, stream), "ncclSend");
        ok(ncclRecv(to, block, ncclInt8, p, nc, stream), "ncclRecv");
      }
      ok(ncclGroupEnd(), "ncclGroupEnd");
      if (unpack)
        for (int p = 0; p < b.parts; ++p)
          copy_2d(y + p * recv_run, static_cast<std::size_t>(b.recv.pitch) * size, received + p * block, recv_run,
                  b.recv);
      alloc.release(sent);
      alloc.release(received);
      return;
    }
    case Collective::send_recv: {
      if (ring) {
        // Each block to the next member of the context-parallel group, each from the previous
        // one (places are ranks in the group's communicator), in one NCCL group.
        const int place = group.place(m_ranks.rank());
        const int next = (place + 1) % group.size, prev = (place + group.size - 1) % group.size;
        ok(ncclGroupStart(), "ncclGroupStart");
        for (std::size_t i = 0; i < op.inputs.size(); ++i) {
          ok(ncclSend(buf[at(op.inputs[i])], bytes_of_tensor(g, op.inputs[i]), ncclInt8, next, nc, stream), "ncclSend");
          ok(ncclRecv(buf[at(op.outputs[i])], bytes_of_tensor(g, op.outputs[i]), ncclInt8, prev, nc, stream),
             "ncclRecv");
        }
        ok(ncclGroupEnd(), "ncclGroupEnd");
        return;
      }
      // A pipeline edge, over its direction's and colour's communicator of the pipeline, whose
      // places are the stages.
      const PipelineEdge e = pipeline_edge(op, m_ranks.rank(), m_ranks.size());
      const int peer = c.group.place(e.peer);
      if (!op.inputs.empty()) {
        ok(ncclSend(buf[at(op.inputs[0])], bytes_of_tensor(g, op.inputs[0]), ncclInt8, peer, nc, stream), "ncclSend");
      } else if (!op.outputs.empty()) {
        ok(ncclRecv(buf[at(op.outputs[0])], bytes_of_tensor(g, op.outputs[0]), ncclInt8, peer, nc, stream),
           "ncclRecv");
      }
      return;
    }
    default: throw NotExecutable(collective_shape_reason(op, g, bucket));
  }
}

#endif

}  // namespace perfsim::cuda

// The collectives tensor parallelism adds to a rank's graph (Shoeybi et al. 2019, Megatron-LM;
// with sequence parallelism, Korthikanti et al. 2022): the all-reduce after each row-parallel
// GEMM, or the all-gather before the column-parallel GEMMs and the reduce-scatter after the
// row-parallel ones, and their mirrors in backward. On one rank they add nothing.
#include <fmt/format.h>

#include <utility>

#include "core/builders/common.hpp"

namespace perfsim::build {

int GraphBuilder::tp_collective(const std::string& name, Collective c, int x,
                                std::vector<int64_t> out_shape, int layer, Stage stage) {
  const std::string op_name = fmt::format("{}.{}", name, name_of(c));
  const int y = tensor(op_name + ".out", std::move(out_shape), TensorRole::activation, -1,
                       m_graph.tensor(x).dtype);
  OpAttrs a;
  a.collective = c;
  a.group = m_rank.tp;
  a.group_stride = m_rank.tp_stride;
  // payload_bytes 0: the [T, h] buffer it reads or writes, in whatever precision the passes
  // leave it. Out of place, so a recomputed layer reruns it into fresh tensors.
  op(OpKind::collective, op_name, {x}, {y}, a, layer, stage);
  return y;
}

int GraphBuilder::enter_tp(const std::string& name, int x, int64_t tokens, int layer, Stage stage) {
  if (!m_rank.sp) return x;  // without sp every rank already holds all the rows
  return tp_collective(name, Collective::all_gather, x, {tokens, m_model.hidden}, layer, stage);
}

int GraphBuilder::leave_tp(const std::string& name, int partial, int64_t tokens, int layer,
                           Stage stage) {
  if (!m_rank.tensor_parallel()) return partial;
  if (m_rank.sp)
    return tp_collective(name, Collective::reduce_scatter, partial,
                         {m_rank.rows(tokens), m_model.hidden}, layer, stage);
  return tp_collective(name, Collective::all_reduce, partial, {tokens, m_model.hidden}, layer,
                       stage);
}

int GraphBuilder::regather(const std::string& name, int x, int64_t tokens, int layer) {
  if (!m_rank.sp) return x;
  return tp_collective(name + ".regather", Collective::all_gather, x, {tokens, m_model.hidden},
                       layer, Stage::backward);
}

}  // namespace perfsim::build

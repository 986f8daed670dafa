// paged_kv pass: the KV cache moves from one reserved [batch, capacity, kv_heads, d] slab per
// layer into pages of `block` rows, [num_blocks, block, kv_heads, d], handed to sequences as
// they grow (Kwon et al. 2023, vLLM). One block table [batch, max_blocks] int32, shared by
// every layer, maps kv position j of sequence b to page table[b][j / block], row j % block.
// The step holds the pages its sequences fill (max_blocks = ceil(rows / block) per sequence)
// instead of prompt + new_tokens rows each. KV appends and the fused (flash) attention become
// their paged kinds (paged_kv_append, paged_flash_attention), which read the table;
// materialized attention cannot read pages, so flash_attention must come first.
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "core/errors.hpp"
#include "core/passes/pass_impl.hpp"

namespace perfsim::passes {

namespace {

bool is_cache(const Graph& g, int id) { return g.tensor(id).role == TensorRole::kv_cache; }

// The kv rows per sequence an op touches in a cache: appends end at position + seq_q,
// attention reads seq_kv.
int64_t rows_touched(const Op& op) {
  return op.kind == OpKind::kv_append ? op.attrs.position + op.attrs.seq_q : op.attrs.seq_kv;
}

}  // namespace

void apply_paged_kv(Graph& g, int64_t block) {
  if (block <= 0) throw std::invalid_argument("apply_paged_kv: block must be positive");
  std::vector<std::size_t> users;  // ops that read a cache
  int64_t rows = 0, batch = 0;
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    const bool reads_cache = std::any_of(op.inputs.begin(), op.inputs.end(), [&](int id) { return is_cache(g, id); });
    if (!reads_cache) continue;
    if (reads_kv_pages(op.kind))
      throw ConfigError("optimization 'paged_kv' is already applied by this or an earlier step (steps are cumulative): list it once");
    if (!paged_kind_of(op.kind))
      throw ConfigError(fmt::format(
          "optimization 'paged_kv' needs 'flash_attention' earlier in the stack: op '{}' ({}) reads "
          "the KV cache as contiguous rows, and only the fused attention reads pages",
          op.name, name_of(op.kind)));
    rows = std::max(rows, rows_touched(op));
    batch = std::max(batch, std::max<int64_t>(1, op.attrs.batch));
    users.push_back(i);
  }
  if (users.empty())
    throw ConfigError("optimization 'paged_kv' pages the KV cache, but this step has none (decode "
                      "with kv_cache, or a prefill that fills a cache)");

  const int64_t max_blocks = (rows + block - 1) / block;
  Tensor table;
  table.name = "kv_block_table";
  table.shape = {batch, max_blocks};
  table.dtype = DType::int32;
  table.role = TensorRole::input;
  const int table_id = g.add_tensor(std::move(table));

  for (Tensor& t : g.tensors) {
    if (t.role != TensorRole::kv_cache) continue;
    if (t.shape.size() != 4 || t.shape[0] != batch)
      throw std::logic_error(fmt::format("paged_kv: cache '{}' is not [batch, capacity, kv_heads, head_dim]", t.name));
    t.shape = {batch * max_blocks, block, t.shape[2], t.shape[3]};
  }
  for (std::size_t i : users) {
    Op& op = g.ops[i];
    op.kind = *paged_kind_of(op.kind);
    op.inputs.push_back(table_id);
    op.attrs.kv_block = block;
    op.attrs.kv_capacity = max_blocks * block;
  }
}

}  // namespace perfsim::passes

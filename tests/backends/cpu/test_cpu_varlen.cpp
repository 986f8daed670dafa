// A serving engine's packed step on the CPU (the varlen kinds): varlen attention against the paged
// kernel run one sequence at a time (decodes, a prefill chunk after cached tokens, a whole
// prompt; GQA groups; shuffled pages), rope at explicit positions against rope, appends through
// page slots, the row gather, every metadata rule, the ops' shape checks and execution in a
// graph, and their FLOPs, bytes and launches.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <stdexcept>

#include "backends/cpu/buffer.hpp"
#include "backends/cpu/cpu_kernels.hpp"
#include "backends/cpu/cpu_op_exec.hpp"
#include "backends/ops/op_shapes.hpp"
#include "core/errors.hpp"
#include "core/graph/op_metrics.hpp"
#include "cpu_test_util.hpp"

using namespace perfsim;
using namespace perfsim::cpu;
using namespace perfsim::cpu::test;

namespace {

std::size_t at(int64_t i) { return static_cast<std::size_t>(i); }

// Sequences of one step: each one's query run and KV length (cached tokens + its queries).
struct Step {
  std::vector<int32_t> q_len, kv_len;
  int64_t heads = 0, kv_heads = 0, head_dim = 0, block = 0;
  int64_t alibi_heads = 0;  // ALiBi over this many heads; 0: none
};

// The step's metadata and pages: a table naming distinct pages of a shuffled pool with a few
// pages no sequence owns.
struct Packed {
  VarlenAttnShape a;
  std::vector<int32_t> query_start, kv_len, table;
};

Packed pack(const Step& st, uint64_t seed) {
  Packed p;
  VarlenAttnShape& a = p.a;
  a.seqs = static_cast<int64_t>(st.q_len.size());
  a.heads = st.heads, a.kv_heads = st.kv_heads, a.head_dim = st.head_dim;
  a.alibi_heads = st.alibi_heads;
  p.query_start.assign(1, 0);
  for (int32_t q : st.q_len) p.query_start.push_back(p.query_start.back() + q);
  p.kv_len = st.kv_len;
  a.tokens = p.query_start.back();
  a.max_q = *std::max_element(st.q_len.begin(), st.q_len.end());
  a.max_kv = *std::max_element(st.kv_len.begin(), st.kv_len.end());
  while (a.decode_seqs < a.seqs && st.q_len[at(a.decode_seqs)] == 1) ++a.decode_seqs;
  a.paged.block = st.block;
  a.paged.max_blocks = (a.max_kv + st.block - 1) / st.block;
  a.paged.num_blocks = a.seqs * a.paged.max_blocks + 3;
  std::vector<int32_t> pool(at(a.paged.num_blocks));
  std::iota(pool.begin(), pool.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(pool.begin(), pool.end(), rng);
  p.table.assign(pool.begin(), pool.begin() + a.seqs * a.paged.max_blocks);
  return p;
}

template <class T>
void check_against_paged(const Step& st, uint64_t seed) {
  const Packed p = pack(st, seed);
  const VarlenAttnShape& a = p.a;
  const int64_t hd = a.heads * a.head_dim;
  const auto pool_elements = at(a.paged.num_blocks * a.paged.block * a.kv_heads * a.head_dim);
  const auto q = to_storage<T>(random_vec(at(a.tokens * hd), seed + 1));
  const auto k = to_storage<T>(random_vec(pool_elements, seed + 2));
  const auto v = to_storage<T>(random_vec(pool_elements, seed + 3));
  std::vector<T> o(at(a.tokens * hd), from_f32<T>(99.0f));
  std::vector<float> lse(at(a.heads * a.tokens), 99.0f);
  varlen_flash_attention(q.data(), k.data(), v.data(), p.table.data(), p.query_start.data(), p.kv_len.data(),
                         o.data(), lse.data(), a);
  for (int64_t s = 0; s < a.seqs; ++s) {
    const int64_t first = p.query_start[at(s)], q_len = st.q_len[at(s)];
    if (q_len == 0) continue;
    CAPTURE(s);
    // The sequence alone: causal attention of its q_len queries over kv_len keys, bottom-right
    // aligned, exactly the varlen rule.
    AttnShape one;
    one.batch = 1, one.seq_q = q_len, one.seq_kv = st.kv_len[at(s)];
    one.heads = a.heads, one.kv_heads = a.kv_heads, one.head_dim = a.head_dim;
    one.kv_capacity = a.paged.block * a.paged.max_blocks;
    one.grad_capacity = one.seq_kv;
    one.causal = true;
    one.alibi_heads = a.alibi_heads;  // the same positions: kv_len − q_len + i
    std::vector<T> o_ref(at(q_len * hd));
    std::vector<float> lse_ref(at(a.heads * q_len));
    paged_flash_attention(q.data() + first * hd, k.data(), v.data(), p.table.data() + s * a.paged.max_blocks,
                          a.paged, o_ref.data(), lse_ref.data(), one);
    const std::vector<T> o_seq(o.begin() + first * hd, o.begin() + (first + q_len) * hd);
    CHECK(rel_err(to_floats(o_seq), to_floats(o_ref)) < tolerance<T>());
    std::vector<float> lse_seq;
    for (int64_t h = 0; h < a.heads; ++h)
      for (int64_t i = 0; i < q_len; ++i) lse_seq.push_back(lse[at(h * a.tokens + first + i)]);
    CHECK(rel_err(lse_seq, lse_ref) < 1e-5);
  }
}

// Decodes (one with a single cached key), a prefill chunk of 5 after 8 cached tokens, a whole
// prompt of 9, and a sequence with no query this step.
Step mixed_step(int64_t heads, int64_t kv_heads, int64_t head_dim, int64_t block) {
  return {{1, 1, 1, 5, 9, 0}, {7, 20, 1, 13, 9, 4}, heads, kv_heads, head_dim, block};
}

}  // namespace

TEST_CASE("cpu varlen attention: each sequence equals the paged kernel run alone (fp32, GQA groups, pages)") {
  uint64_t seed = 1000;
  struct Heads {
    int64_t heads, kv_heads, head_dim;
  };
  for (const Heads h : {Heads{4, 4, 8}, Heads{8, 2, 8}, Heads{6, 1, 5}, Heads{8, 4, 16}})
    for (int64_t block : {1, 4, 16}) {
      CAPTURE(h.heads);
      CAPTURE(h.kv_heads);
      CAPTURE(block);
      check_against_paged<float>(mixed_step(h.heads, h.kv_heads, h.head_dim, block), seed++);
    }
  // Keys past one online-softmax block: a decode over 100 keys and a prompt of 70.
  check_against_paged<float>({{1, 70}, {100, 70}, 8, 2, 16, 16}, seed++);
}

TEST_CASE("cpu varlen attention: bf16 and fp16 storages") {
  uint64_t seed = 2000;
  check_against_paged<bf16>(mixed_step(8, 2, 8, 4), seed++);
  check_against_paged<bf16>({{1, 70}, {100, 70}, 8, 2, 16, 16}, seed++);
  check_against_paged<half>(mixed_step(6, 3, 8, 4), seed++);
}

TEST_CASE("cpu varlen attention: ALiBi places each query where its sequence has it") {
  // The paged kernel (checked against a naive ALiBi attention in test_cpu_attention.cpp) run on
  // each sequence alone is the reference; 6 heads take Press et al.'s slopes for a non-power of two.
  uint64_t seed = 3000;
  for (const int64_t heads : {8, 6}) {
    Step st = mixed_step(heads, 2, 8, 4);
    st.alibi_heads = heads;
    check_against_paged<float>(st, seed++);
  }
  check_against_paged<float>({{1, 70}, {100, 70}, 8, 2, 16, 16, 8}, seed++);
}

TEST_CASE("cpu varlen attention: metadata breaking a rule throws before anything is read") {
  const Packed valid = pack(mixed_step(4, 2, 4, 4), 3000);
  const VarlenAttnShape& a = valid.a;
  const auto pool_elements = at(a.paged.num_blocks * a.paged.block * a.kv_heads * a.head_dim);
  const std::vector<float> q(at(a.tokens * a.heads * a.head_dim), 0.5f), kv(pool_elements, 0.25f);
  std::vector<float> o(q.size()), lse(at(a.heads * a.tokens));
  auto run = [&](const Packed& p) {
    varlen_flash_attention(q.data(), kv.data(), kv.data(), p.table.data(), p.query_start.data(), p.kv_len.data(),
                           o.data(), lse.data(), p.a);
  };
  CHECK_NOTHROW(run(valid));
  auto broken = [&](auto edit) {
    Packed p = valid;
    edit(p);
    return p;
  };
  // query_start: 0 first, nondecreasing, the tokens last.
  CHECK_THROWS_AS(run(broken([](Packed& p) { p.query_start[0] = 1; })), std::out_of_range);
  CHECK_THROWS_AS(run(broken([](Packed& p) { p.query_start[4] = p.query_start[3] - 1; })), std::out_of_range);
  CHECK_THROWS_AS(run(broken([](Packed& p) { p.query_start.back() -= 1; })), std::out_of_range);
  CHECK_THROWS_AS(run(broken([](Packed& p) { p.a.tokens += 1; })), std::out_of_range);
  // q_len ≤ kv_len ≤ max_kv, q_len ≤ max_q, and the KV inside the sequence's pages.
  CHECK_THROWS_AS(run(broken([](Packed& p) { p.kv_len[3] = 4; })), std::out_of_range);  // 5 queries
  CHECK_THROWS_AS(run(broken([](Packed& p) { p.kv_len[0] = static_cast<int32_t>(p.a.max_kv + 1); })),
                  std::out_of_range);
  CHECK_THROWS_AS(run(broken([](Packed& p) { p.kv_len[0] = -1; })), std::out_of_range);
  CHECK_THROWS_AS(run(broken([](Packed& p) { p.a.max_q = 8; })), std::out_of_range);  // a run of 9
  CHECK_THROWS_AS(run(broken([](Packed& p) {
                    p.a.max_kv = 100;
                    p.kv_len[1] = 21;  // 5 pages of 4 rows hold 20
                  })),
                  std::out_of_range);
  // Pages in the pool.
  CHECK_THROWS_AS(run(broken([](Packed& p) { p.table[1] = static_cast<int32_t>(p.a.paged.num_blocks); })),
                  std::out_of_range);
  CHECK_THROWS_AS(run(broken([](Packed& p) { p.table[0] = -1; })), std::out_of_range);
  // The leading decodes have one query each.
  CHECK_THROWS_AS(run(broken([](Packed& p) { p.a.decode_seqs = 4; })), std::out_of_range);
  CHECK_THROWS_WITH_AS(run(broken([](Packed& p) { p.query_start[0] = 1; })),
                       "varlen attention: query_start[0] = 1, not 0", std::out_of_range);
}

TEST_CASE("cpu varlen rope: rope_at equals rope at the same positions") {
  // Three sequences packed: positions 5..8, 0..2 and 17.
  const std::vector<int32_t> starts{5, 0, 17}, lengths{4, 3, 1};
  std::vector<int32_t> positions;
  for (std::size_t s = 0; s < starts.size(); ++s)
    for (int32_t i = 0; i < lengths[s]; ++i) positions.push_back(starts[s] + i);
  const auto tokens = static_cast<int64_t>(positions.size());
  for (int64_t head_dim : {8, 7}) {
    CAPTURE(head_dim);
    RopeShape r;
    r.tokens = tokens, r.heads = 3, r.head_dim = head_dim;
    const int64_t row = r.heads * head_dim;
    const auto x = random_vec(at(tokens * row), 4000 + static_cast<uint64_t>(head_dim));
    auto check = [&](auto storage) {
      using T = decltype(storage);
      const auto xs = to_storage<T>(x);
      std::vector<T> y(xs.size()), want(xs.size());
      rope_at(xs.data(), positions.data(), y.data(), r);
      int64_t first = 0;
      for (std::size_t s = 0; s < starts.size(); ++s) {
        RopeShape one = r;
        one.tokens = one.seq = lengths[s];
        one.position = starts[s];
        rope(xs.data() + first * row, want.data() + first * row, one);
        first += lengths[s];
      }
      CHECK(to_floats(y) == to_floats(want));
    };
    check(float{});
    check(bf16{});
  }
  RopeShape r;
  r.tokens = 2, r.heads = 1, r.head_dim = 4;
  const std::vector<float> x(8, 1.0f);
  std::vector<float> y(8);
  const std::vector<int32_t> bad{3, -1};
  CHECK_THROWS_AS(rope_at(x.data(), bad.data(), y.data(), r), std::out_of_range);
}

TEST_CASE("cpu varlen kv_append: each token's row lands in its slot; −1 is skipped; a bad slot writes nothing") {
  constexpr int64_t row = 3, pool_rows = 12;
  const auto k_new = random_vec(at(4 * row), 5000);
  std::vector<float> pages(at(pool_rows * row), -1.0f);
  const std::vector<int32_t> slots{5, -1, 0, 11};
  kv_append_slots(k_new.data(), pages.data(), slots.data(), 4, row, pool_rows);
  for (int64_t r = 0; r < pool_rows; ++r) {
    const auto token = std::find(slots.begin(), slots.end(), static_cast<int32_t>(r)) - slots.begin();
    for (int64_t x = 0; x < row; ++x) {
      CAPTURE(r);
      const float want = token < 4 ? k_new[at(token * row + x)] : -1.0f;
      CHECK(pages[at(r * row + x)] == want);
    }
  }
  const std::vector<float> before = pages;
  const std::vector<int32_t> past{1, 12}, below{-2, 0};
  CHECK_THROWS_AS(kv_append_slots(k_new.data(), pages.data(), past.data(), 2, row, pool_rows), std::out_of_range);
  CHECK_THROWS_AS(kv_append_slots(k_new.data(), pages.data(), below.data(), 2, row, pool_rows), std::out_of_range);
  CHECK(pages == before);
}

TEST_CASE("cpu varlen slice: gather_rows takes the rows asked for; one outside x throws") {
  const auto x = random_vec(6 * 3, 6000);
  const std::vector<int32_t> rows{5, 0, 2};
  std::vector<float> y(9);
  gather_rows(x.data(), rows.data(), y.data(), 3, 6, 3);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t c = 0; c < 3; ++c) CHECK(y[at(i * 3 + c)] == x[at(rows[at(i)] * 3 + c)]);
  const std::vector<int32_t> past{6}, negative{-1};
  CHECK_THROWS_AS(gather_rows(x.data(), past.data(), y.data(), 1, 6, 3), std::out_of_range);
  CHECK_THROWS_AS(gather_rows(x.data(), negative.data(), y.data(), 1, 6, 3), std::out_of_range);
}

namespace {

int add(Graph& g, const char* name, std::vector<int64_t> shape, DType t = DType::fp32,
        TensorRole role = TensorRole::activation) {
  Tensor x;
  x.name = name;
  x.shape = std::move(shape);
  x.dtype = t;
  x.role = role;
  return g.add_tensor(std::move(x));
}

Op make(OpKind k, const char* name, std::vector<int> in, std::vector<int> out, const OpAttrs& a) {
  Op op;
  op.kind = k;
  op.name = name;
  op.inputs = std::move(in);
  op.outputs = std::move(out);
  op.attrs = a;
  return op;
}

// A step of two sequences: a decode at position 4 (5 keys) and a prefill chunk of 3 tokens at
// positions 3..5 (6 keys); 4 query heads on 2 KV heads of 8; pages of 4 rows, 2 per sequence,
// in a pool of 5. Its rope, kv_append, attention and last-token slice, in that order.
struct StepGraph {
  static constexpr int64_t tokens = 4, heads = 4, kv_heads = 2, head_dim = 8, block = 4;
  Graph g;
  int x, positions, xr, k_new, pages_in, slots, pages, v_pages, table, query_start, kv_len, o, lse, rows, y;
  Op rope_op, append_op, attention_op, slice_op;
  StepGraph() {
    x = add(g, "q", {tokens, heads, head_dim});
    positions = add(g, "positions", {tokens}, DType::int32, TensorRole::input);
    xr = add(g, "q.rope", {tokens, heads, head_dim});
    k_new = add(g, "k", {tokens, kv_heads, head_dim});
    pages_in = add(g, "k.pages", {5, block, kv_heads, head_dim}, DType::fp32, TensorRole::kv_cache);
    slots = add(g, "slots", {tokens}, DType::int32, TensorRole::input);
    pages = add(g, "k.pages.out", {5, block, kv_heads, head_dim}, DType::fp32, TensorRole::kv_cache);
    v_pages = add(g, "v.pages", {5, block, kv_heads, head_dim}, DType::fp32, TensorRole::kv_cache);
    table = add(g, "table", {2, 2}, DType::int32, TensorRole::input);
    query_start = add(g, "query_start", {3}, DType::int32, TensorRole::input);
    kv_len = add(g, "kv_len", {2}, DType::int32, TensorRole::input);
    o = add(g, "attn.out", {tokens, heads, head_dim});
    lse = add(g, "attn.lse", {heads, tokens});
    rows = add(g, "last_rows", {2}, DType::int32, TensorRole::input);
    y = add(g, "last", {2, heads * head_dim});
    OpAttrs a;
    a.batch = 2, a.rows = tokens;
    a.heads = heads, a.kv_heads = kv_heads, a.head_dim = head_dim;
    a.seq_q = 3, a.seq_kv = 6, a.kv_block = block, a.decode_seqs = 1, a.causal = true;
    a.elements = tokens * heads * head_dim;
    append_op = make(OpKind::varlen_kv_append, "k_append", {k_new, pages_in, slots}, {pages}, a);
    attention_op = make(OpKind::varlen_flash_attention, "attn", {xr, pages, v_pages, table, query_start, kv_len},
                        {o, lse}, a);
    a.kv_block = 0;  // rope and the slice read no pages
    rope_op = make(OpKind::varlen_rope, "rope", {x, positions}, {xr}, a);
    OpAttrs s = a;
    s.cols = heads * head_dim;
    slice_op = make(OpKind::varlen_slice_last_token, "slice", {o, rows}, {y}, s);
  }
};

}  // namespace

TEST_CASE("cpu varlen shapes: check_op accepts the step's ops and names what is wrong") {
  StepGraph s;
  for (const Op* op : {&s.rope_op, &s.append_op, &s.attention_op, &s.slice_op}) {
    CAPTURE(op->name);
    CHECK_NOTHROW(ops::check_op(*op, s.g));
  }
  const VarlenAttnShape a = ops::varlen_attn_shape(s.attention_op, s.g);
  CHECK(a.seqs == 2);
  CHECK(a.tokens == 4);
  CHECK(a.group() == 2);
  CHECK(a.max_q == 3);
  CHECK(a.max_kv == 6);
  CHECK(a.paged.max_blocks == 2);
  CHECK(a.paged.num_blocks == 5);
  const ops::KvSlotsShape k = ops::kv_slots_shape(s.append_op, s.g);
  CHECK(k.tokens == 4);
  CHECK(k.row == 16);
  CHECK(k.pool_rows == 20);
  const ops::GatherShape gs = ops::gather_shape(s.slice_op, s.g);
  CHECK(gs.n == 2);
  CHECK(gs.x_rows == 4);
  CHECK(gs.cols == 32);

  auto rejects = [&](const Op& op, const char* what) {
    CHECK_THROWS_WITH_AS(ops::check_op(op, s.g), doctest::Contains(what), NotExecutable);
  };
  s.g.tensor(s.lse).shape = {s.heads, 3};
  rejects(s.attention_op, "LSE: [heads, tokens]");
  s.g.tensor(s.lse).shape = {s.heads, s.tokens};
  s.g.tensor(s.query_start).dtype = DType::fp32;
  rejects(s.attention_op, "query starts 'query_start' must be int32");
  s.g.tensor(s.query_start).dtype = DType::int32;
  s.g.tensor(s.kv_len).shape = {3};
  rejects(s.attention_op, "kv_len: [sequences]");
  s.g.tensor(s.kv_len).shape = {2};
  Op op = s.attention_op;
  op.inputs.resize(4);  // paged_flash_attention's inputs
  rejects(op, "the kind takes 6..6 inputs");
  op = s.attention_op;
  op.kind = OpKind::paged_flash_attention;
  rejects(op, "the kind takes 4..4 inputs");
  op.kind = OpKind::flash_attention;
  rejects(op, "the kind takes 3..3 inputs");
  op.inputs.resize(3);
  rejects(op, "op 'attn' (flash_attention) has kv_block = 4, but flash_attention reads no KV pages: a paged cache is "
              "read by paged_flash_attention");
  op = s.attention_op;
  op.attrs.seq_kv = 9;  // more than 2 pages of 4 rows
  rejects(op, "seq_kv = 9");
  op = s.attention_op;
  op.attrs.decode_seqs = 3;
  rejects(op, "decode_seqs = 3");

  s.g.tensor(s.slots).shape = {3};
  rejects(s.append_op, "slots: [tokens]");
  s.g.tensor(s.slots).shape = {s.tokens};
  s.g.tensor(s.positions).shape = {5};
  rejects(s.rope_op, "positions: [tokens]");
  s.g.tensor(s.positions).shape = {s.tokens};
  s.g.tensor(s.y).shape = {3, s.heads * s.head_dim};
  rejects(s.slice_op, "y: [rows kept, cols]");
  s.g.tensor(s.y).shape = {2, s.heads * s.head_dim};
  // A shape function of the fixed-length kind refuses a varlen op rather than misread it.
  CHECK_THROWS_AS((void)ops::kv_append_shape(s.append_op, s.g), NotExecutable);
  CHECK_THROWS_AS((void)ops::slice_shape(s.slice_op, s.g), NotExecutable);
  CHECK_THROWS_AS((void)ops::attn_shape(s.attention_op, s.g), NotExecutable);
}

TEST_CASE("cpu varlen graph: execute_op runs the step's ops as the kernels compute them") {
  StepGraph s;
  std::vector<std::vector<std::byte>> data;
  std::vector<void*> buf;
  for (const Tensor& t : s.g.tensors) {
    data.emplace_back(at(t.elements() * 4));
    buf.push_back(data.back().data());
  }
  auto floats = [&](int id) { return static_cast<float*>(buf[at(id)]); };
  auto ints = [&](int id) { return static_cast<int32_t*>(buf[at(id)]); };
  auto fill = [&](int id, uint64_t seed) {
    const auto v = random_vec(at(s.g.tensor(id).elements()), seed);
    std::copy(v.begin(), v.end(), floats(id));
  };
  fill(s.x, 7000), fill(s.k_new, 7001), fill(s.pages_in, 7002), fill(s.v_pages, 7003);
  const std::vector<int32_t> table{3, 0, 4, 1}, query_start{0, 1, 4}, kv_len{5, 6}, positions{4, 3, 4, 5};
  std::vector<int32_t> slots;
  for (int64_t t = 0; t < s.tokens; ++t) {
    const int64_t seq = t == 0 ? 0 : 1, pos = positions[at(t)];
    slots.push_back(table[at(seq * 2 + pos / s.block)] * static_cast<int32_t>(s.block) + static_cast<int32_t>(pos % s.block));
  }
  const std::vector<int32_t> rows{0, 3};  // each sequence's last token
  std::copy(table.begin(), table.end(), ints(s.table));
  std::copy(query_start.begin(), query_start.end(), ints(s.query_start));
  std::copy(kv_len.begin(), kv_len.end(), ints(s.kv_len));
  std::copy(positions.begin(), positions.end(), ints(s.positions));
  std::copy(slots.begin(), slots.end(), ints(s.slots));
  std::copy(rows.begin(), rows.end(), ints(s.rows));

  TrackingAllocator alloc;
  for (const Op* op : {&s.rope_op, &s.append_op, &s.attention_op, &s.slice_op}) execute_op(*op, s.g, buf, alloc);

  auto copy_of = [&](int id) {
    return std::vector<float>(floats(id), floats(id) + s.g.tensor(id).elements());
  };
  RopeShape r;
  r.tokens = s.tokens, r.heads = s.heads, r.head_dim = s.head_dim;
  std::vector<float> xr(at(s.tokens * s.heads * s.head_dim));
  rope_at(floats(s.x), positions.data(), xr.data(), r);
  CHECK(copy_of(s.xr) == xr);
  // The pages out are the pages in with the new rows written at their slots.
  std::vector<float> pages = copy_of(s.pages_in);
  kv_append_slots(floats(s.k_new), pages.data(), slots.data(), s.tokens, s.kv_heads * s.head_dim, 5 * s.block);
  CHECK(copy_of(s.pages) == pages);
  CHECK(copy_of(s.pages) != copy_of(s.pages_in));
  const VarlenAttnShape a = ops::varlen_attn_shape(s.attention_op, s.g);
  std::vector<float> o(xr.size()), lse(at(s.heads * s.tokens));
  varlen_flash_attention(xr.data(), pages.data(), floats(s.v_pages), table.data(), query_start.data(),
                         kv_len.data(), o.data(), lse.data(), a);
  CHECK(copy_of(s.o) == o);
  CHECK(copy_of(s.lse) == lse);
  const int64_t cols = s.heads * s.head_dim;
  std::vector<float> y(at(2 * cols));
  gather_rows(o.data(), rows.data(), y.data(), 2, s.tokens, cols);
  CHECK(copy_of(s.y) == y);
}

TEST_CASE("op metrics: varlen attention counts the pairs scored and the key rows read") {
  Graph g;
  // Two sequences: a decode over 5 keys (5 pairs) and 2 queries over 3 keys (2 + 3 pairs).
  const int q = add(g, "q", {3, 2, 4}), k = add(g, "k", {2, 4, 1, 4}, DType::fp32, TensorRole::kv_cache);
  const int v = add(g, "v", {2, 4, 1, 4}, DType::fp32, TensorRole::kv_cache);
  const int table = add(g, "table", {2, 2}, DType::int32), qs = add(g, "qs", {3}, DType::int32);
  const int kvl = add(g, "kvl", {2}, DType::int32), o = add(g, "o", {3, 2, 4}), lse = add(g, "lse", {2, 3});
  Op op = make(OpKind::varlen_flash_attention, "attn", {q, k, v, table, qs, kvl}, {o, lse}, {});
  OpAttrs& a = op.attrs;
  a.batch = 2, a.rows = 3, a.heads = 2, a.kv_heads = 1, a.head_dim = 4;
  a.seq_q = 2, a.seq_kv = 5, a.kv_block = 4, a.kv_pairs = 10, a.cols = 8, a.decode_seqs = 1;
  CHECK(op_flops(op, g) == 320);  // 4 · 2 heads · 4 · 10 pairs
  // Q 96 + O 96 + LSE 24 + table 16 + query starts 12 + KV lengths 8, and K, V: 2 · 8 rows · 1 · 4 · 4 B.
  CHECK(op_bytes(op, g) == 96 + 96 + 24 + 16 + 12 + 8 + 256);
  CHECK(kernel_launches(op) == 2);  // a decode and a prefill kernel
  a.decode_seqs = 0;
  CHECK(kernel_launches(op) == 1);
  a.decode_seqs = 2;
  CHECK(kernel_launches(op) == 1);

  const int k_new = add(g, "k_new", {3, 1, 4}), slots = add(g, "slots", {3}, DType::int32);
  const int k_out = add(g, "k_out", {2, 4, 1, 4}, DType::fp32, TensorRole::kv_cache);
  const Op append = make(OpKind::varlen_kv_append, "append", {k_new, k, slots}, {k_out}, a);
  a.kv_block = 0;
  CHECK(op_bytes(append, g) == 48 + 48 + 12);  // rows read, rows written, slots
  const int x = add(g, "x", {3, 5}), rows = add(g, "rows", {2}, DType::int32), y = add(g, "y", {2, 5});
  const Op slice = make(OpKind::varlen_slice_last_token, "slice", {x, rows}, {y}, a);
  CHECK(op_bytes(slice, g) == 40 + 40 + 8);  // the kept rows read and written, their indices
  const int pos = add(g, "positions", {3}, DType::int32), xr = add(g, "q.rope", {3, 2, 4});
  Op rope = make(OpKind::varlen_rope, "rope", {q, pos}, {xr}, a);
  rope.attrs.elements = 24;
  CHECK(op_bytes(rope, g) == 96 + 12 + 96);
  CHECK(op_flops(rope, g) == 72);
}

// Op kinds with one operand layout each: the paged and varlen kinds beside their dense ones,
// their names, classes, families and fixed operand dtypes, the kv_block each may carry, and the
// profile figures (curves, host dispatch) they share with their dense kind.
#include <doctest/doctest.h>

#include <set>
#include <stdexcept>
#include <string>

#include "core/cost/calibration.hpp"
#include "core/cost/hardware.hpp"
#include "core/graph/graph.hpp"
#include "core/graph/op_kind.hpp"

using namespace perfsim;

namespace {

struct Layout {
  OpKind kind;
  const char* name;
  OpKind family;
  OpClass cls;
  bool pages;
};

constexpr Layout layouts[] = {
    {OpKind::flash_attention, "flash_attention", OpKind::flash_attention, OpClass::attention, false},
    {OpKind::paged_flash_attention, "paged_flash_attention", OpKind::flash_attention, OpClass::attention, true},
    {OpKind::varlen_flash_attention, "varlen_flash_attention", OpKind::flash_attention, OpClass::attention, true},
    {OpKind::kv_append, "kv_append", OpKind::kv_append, OpClass::memory, false},
    {OpKind::paged_kv_append, "paged_kv_append", OpKind::kv_append, OpClass::memory, true},
    {OpKind::varlen_kv_append, "varlen_kv_append", OpKind::kv_append, OpClass::memory, true},
    {OpKind::rope, "rope", OpKind::rope, OpClass::pointwise, false},
    {OpKind::varlen_rope, "varlen_rope", OpKind::rope, OpClass::pointwise, false},
    {OpKind::slice_last_token, "slice_last_token", OpKind::slice_last_token, OpClass::memory, false},
    {OpKind::varlen_slice_last_token, "varlen_slice_last_token", OpKind::slice_last_token, OpClass::memory, false},
};

Op op_of(OpKind k, int64_t kv_block) {
  Op op;
  op.name = "layer0.attn.op";
  op.kind = k;
  op.attrs.kv_block = kv_block;
  return op;
}

}  // namespace

TEST_CASE("op kinds: each layout is a kind with its name, class and family") {
  for (const Layout& l : layouts) {
    CAPTURE(l.name);
    CHECK(name_of(l.kind) == l.name);
    CHECK(parse_op_kind(l.name) == l.kind);
    CHECK(class_of(l.kind) == l.cls);
    CHECK(calibration_family(l.kind) == l.family);
    CHECK(reads_kv_pages(l.kind) == l.pages);
  }
  CHECK(paged_kind_of(OpKind::flash_attention) == OpKind::paged_flash_attention);
  CHECK(paged_kind_of(OpKind::kv_append) == OpKind::paged_kv_append);
  CHECK_FALSE(paged_kind_of(OpKind::rope));
  CHECK_FALSE(paged_kind_of(OpKind::paged_kv_append));
  CHECK(calibration_family(OpKind::gemm) == OpKind::gemm);
  CHECK(calibration_family(OpKind::flash_attention_bwd) == OpKind::flash_attention_bwd);
  // Every kind has a name that reads back (the enum's order is the parser's).
  for (int k = 0; k <= static_cast<int>(OpKind::host); ++k) {
    const auto kind = static_cast<OpKind>(k);
    CHECK(parse_op_kind(name_of(kind)) == kind);
  }
}

TEST_CASE("op kinds: only the kinds that read KV pages carry kv_block") {
  for (const Layout& l : layouts) {
    CAPTURE(l.name);
    CHECK(kv_block_error(op_of(l.kind, l.pages ? 16 : 0)).empty());
  }
  CHECK(kv_block_error(op_of(OpKind::flash_attention, 16)) ==
        "op 'layer0.attn.op' (flash_attention) has kv_block = 16, but flash_attention reads no KV pages: a paged "
        "cache is read by paged_flash_attention (the paged_kv pass)");
  CHECK(kv_block_error(op_of(OpKind::kv_append, 8)).find("a paged cache is read by paged_kv_append") !=
        std::string::npos);
  CHECK(kv_block_error(op_of(OpKind::varlen_rope, 4)) ==
        "op 'layer0.attn.op' (varlen_rope) has kv_block = 4, but varlen_rope reads no KV pages");
  CHECK(kv_block_error(op_of(OpKind::paged_flash_attention, 0)) ==
        "op 'layer0.attn.op' (paged_flash_attention) reads KV pages, but its attribute kv_block (rows per page) is 0");

  // A graph holding such an op fails its check, naming the op.
  Graph g;
  Tensor x;
  x.name = "x", x.shape = {4}, x.role = TensorRole::input;
  const int id = g.add_tensor(x);
  Op op = op_of(OpKind::flash_attention, 16);
  op.inputs = {id};
  op.outputs = {id};
  g.add_op(op);
  CHECK_THROWS_WITH_AS(g.check(),
                       doctest::Contains("graph: op 'layer0.attn.op' (flash_attention) has kv_block = 16"),
                       std::logic_error);
  g.ops[0].kind = OpKind::paged_flash_attention;
  CHECK_NOTHROW(g.check());
}

TEST_CASE("op kinds: the int32 metadata of the paged and varlen kinds") {
  // The dense kinds have no such operand.
  CHECK_FALSE(fixed_operand_dtype(OpKind::flash_attention, false, 2));
  CHECK_FALSE(fixed_operand_dtype(OpKind::kv_append, false, 1));
  CHECK_FALSE(fixed_operand_dtype(OpKind::rope, false, 0));
  CHECK_FALSE(fixed_operand_dtype(OpKind::slice_last_token, false, 0));
  CHECK(fixed_operand_dtype(OpKind::paged_flash_attention, false, 3) == DType::int32);
  CHECK(fixed_operand_dtype(OpKind::varlen_flash_attention, false, 5) == DType::int32);
  CHECK(fixed_operand_dtype(OpKind::varlen_flash_attention, true, 1) == DType::fp32);
  CHECK_FALSE(fixed_operand_dtype(OpKind::varlen_flash_attention, true, 0));
  CHECK(fixed_operand_dtype(OpKind::paged_kv_append, false, 2) == DType::int32);
  CHECK(fixed_operand_dtype(OpKind::varlen_kv_append, false, 2) == DType::int32);
  CHECK(fixed_operand_dtype(OpKind::varlen_rope, false, 1) == DType::int32);
  CHECK(fixed_operand_dtype(OpKind::varlen_slice_last_token, false, 1) == DType::int32);
}

TEST_CASE("op kinds: paged and varlen kinds share their dense kind's curves and host dispatch") {
  CHECK(calibration_key(OpKind::paged_flash_attention, DType::bf16, false, "paged") ==
        calibration_key(OpKind::flash_attention, DType::bf16, false, "paged"));
  CHECK(calibration_key(OpKind::varlen_rope, DType::fp32, false) == "rope/fp32/memory");
  Op varlen = op_of(OpKind::varlen_flash_attention, 16);
  varlen.attrs.seq_q = 1;
  // Decodes only: the engine's varlen kernel has a curve of its own, then the paged kernel's,
  // then the contiguous decode kernel's.
  CHECK(calibration_variant(varlen) == "varlen_decode");
  CHECK(unpaged_calibration_variant(varlen) == "decode");
  CHECK(curve_variants(varlen) == std::vector<std::string>{"varlen_decode", "paged", "decode"});
  varlen.attrs.kv_fp8 = true;
  CHECK(curve_variants(varlen) == std::vector<std::string>{"varlen_decode_fp8kv", "paged_fp8kv", "decode_fp8kv",
                                                            "varlen_decode", "paged", "decode"});
  varlen.attrs.kv_fp8 = false;
  varlen.attrs.seq_q = 3;  // a step with a longer query run: not a decode
  CHECK(calibration_variant(varlen) == "paged");
  CHECK(unpaged_calibration_variant(varlen).empty());
  CHECK(curve_variants(varlen) == std::vector<std::string>{"paged", ""});
  CHECK(calibration_variant(op_of(OpKind::varlen_rope, 0)).empty());
  CHECK(calibration_variant(op_of(OpKind::paged_kv_append, 16)) == "paged");

  Hardware hw;
  hw.dispatch_eager = 4e-6;
  hw.dispatch_by_kind[OpKind::flash_attention] = 9e-6;
  hw.dispatch_by_kind[OpKind::kv_append] = 5e-6;
  hw.dispatch_fixed_by_kind[OpKind::flash_attention] = 1e-6;
  CHECK(hw.dispatch(OpKind::paged_flash_attention) == 9e-6);
  CHECK(hw.dispatch(OpKind::varlen_flash_attention) == 9e-6);
  CHECK(hw.dispatch(OpKind::varlen_kv_append) == 5e-6);
  CHECK(hw.dispatch(OpKind::varlen_rope) == 4e-6);  // neither it nor rope: the default
  CHECK(hw.dispatch_fixed(OpKind::varlen_flash_attention) == 1e-6);
  CHECK(hw.dispatch_fixed(OpKind::paged_kv_append) == 0);
  // A profile naming the kind itself overrides its family's figure.
  hw.dispatch_by_kind[OpKind::paged_flash_attention] = 7e-6;
  CHECK(hw.dispatch(OpKind::paged_flash_attention) == 7e-6);
  CHECK(hw.dispatch(OpKind::varlen_flash_attention) == 9e-6);
}

TEST_CASE("op kinds: the op table gives every kind a unique name and a signature") {
  std::set<std::string_view> names;
  for (std::size_t i = 0; i < op_kind_count; ++i) {
    const OpKind k = op_kind_at(i);
    CAPTURE(name_of(k));
    CHECK(names.insert(name_of(k)).second);
    CHECK(parse_op_kind(name_of(k)) == k);
    const OpSignature& sig = signature_of(k);
    if (k == OpKind::collective || k == OpKind::host) {
      CHECK(sig.variadic);
      continue;
    }
    CHECK(!sig.outputs.empty());
    CHECK(sig.min_outputs() >= 1);
    // Optional operands only at the end of a side.
    for (const auto* side : {&sig.inputs, &sig.outputs})
      for (std::size_t j = 1; j < side->size(); ++j) CHECK((!(*side)[j - 1].optional || (*side)[j].optional));
  }
  // Read back as the table states them.
  const OpSignature& flash = signature_of(OpKind::varlen_flash_attention);
  REQUIRE(flash.inputs.size() == 6);
  CHECK(flash.inputs[4].name == "query_start");
  CHECK(flash.inputs[4].fixed == DType::int32);
  CHECK(fixed_operand_dtype(OpKind::varlen_flash_attention, true, 1) == DType::fp32);
  CHECK(!fixed_operand_dtype(OpKind::varlen_flash_attention, true, 0));
  const OpSignature& embed = signature_of(OpKind::embedding_bwd);
  CHECK(embed.min_inputs() == 2);
  CHECK(embed.inputs.size() == 4);
  CHECK(embed.min_outputs() == 1);
  CHECK(signature_of(OpKind::adamw).variadic);
  CHECK(signature_of(OpKind::adamw).min_inputs() == 4);
  CHECK(signature_text(OpKind::flash_attention) == "Q K V -> O LSE:f32");
}

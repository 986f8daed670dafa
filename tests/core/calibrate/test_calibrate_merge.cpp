// Saved calibration points read back (read_points_csv) and merged into a profile
// (merge_calibrations): the fit `perfsim calibrate --merge` runs without a device.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "approx.hpp"
#include "core/calibrate/fit.hpp"
#include "core/calibrate/merge.hpp"
#include "core/calibrate/points.hpp"
#include "core/errors.hpp"

using namespace perfsim;
using perfsim::test::approx;

namespace {

MeasuredPoint point(std::string source, OpKind kind, DType t, std::string key, double x, double eff) {
  MeasuredPoint p;
  p.source = std::move(source);
  p.op.name = "op";
  p.op.kind = kind;
  p.op.dtype = t;
  p.curve.key = std::move(key);
  p.curve.roofline_seconds = x;
  p.curve.curve_seconds = x;
  p.efficiency = eff;
  p.kernel_seconds = x / eff;
  p.measured_seconds = x / eff + 1e-6;
  return p;
}

MeasuredPoint cell(DType t, int64_t m, int64_t n, int64_t k, double eff) {
  MeasuredPoint p = point(std::string("gemm ") + std::string(name_of(t)) + " grid", OpKind::gemm, t,
                          std::string("gemm/") + std::string(name_of(t)) + "/compute", 1e-5, eff);
  p.op.attrs.m = m;
  p.op.attrs.n = n;
  p.op.attrs.k = k;
  return p;
}

std::vector<SavedPoint> saved(const std::vector<MeasuredPoint>& points) {
  return read_points_csv(points_to_csv(points), "test.csv");
}

// A calibrated profile with a 2 × 2 × 1 bf16 GEMM table and two kernel curves.
Hardware base_profile() {
  Hardware hw;
  hw.name = "test-local";
  hw.calibrated = true;
  hw.source = "perfsim calibrate 2026-11-22";
  hw.calibration.gemm[DType::bf16] = GemmTable{{1, 64}, {1024, 4096}, {512}, {0.9, 0.9, 0.9, 0.9}};
  hw.calibration.kernels["rmsnorm/bf16/memory"] = EfficiencyCurve{{1e-6, 1e-5}, {0.1, 0.2}};
  hw.calibration.kernels["rope/bf16/memory"] = EfficiencyCurve{{1e-6, 1e-5}, {0.3, 0.4}};
  return hw;
}

}  // namespace

TEST_CASE("calibrate merge: points written by --points read back, quoted fields included") {
  MeasuredPoint a = cell(DType::bf16, 64, 4096, 512, 0.75);
  MeasuredPoint b = point("cal-llama, \"odd\" decode 1x256", OpKind::flash_attention, DType::bf16,
                          "flash_attention/bf16/memory/decode", 2.5e-6, 0.125);
  b.curve.finer_key = "flash_attention/bf16/memory/decode_q4";
  const std::vector<SavedPoint> r = saved({a, b});
  REQUIRE(r.size() == 2);
  CHECK(r[0].grid_cell());
  CHECK(r[0].source == "gemm bf16 grid");
  CHECK(r[0].dtype == "bf16");
  CHECK(r[0].m == 64);
  CHECK(r[0].n == 4096);
  CHECK(r[0].k == 512);
  CHECK(r[0].efficiency == approx(0.75));
  CHECK_FALSE(r[1].grid_cell());
  CHECK(r[1].source == "cal-llama, \"odd\" decode 1x256");
  CHECK(r[1].key == "flash_attention/bf16/memory/decode");
  CHECK(r[1].finer_key == "flash_attention/bf16/memory/decode_q4");
  CHECK(r[1].curve_seconds == approx(2.5e-6));
  CHECK(r[1].efficiency == approx(0.125));
}

TEST_CASE("calibrate merge: a malformed points file names its line") {
  CHECK_THROWS_WITH_AS((void)read_points_csv("", "p.csv"), "p.csv:1: empty file: no header row", ConfigError);
  CHECK_THROWS_WITH_AS((void)read_points_csv("source,key,finer_key,dtype,m,n,k,efficiency\n", "p.csv"),
                       doctest::Contains("p.csv:1: the header has no 'curve_s' column"), ConfigError);
  std::string text = points_to_csv({cell(DType::bf16, 1, 1024, 512, 0.5)});
  text += "gemm bf16 grid,x,gemm,bf16\n";
  CHECK_THROWS_WITH_AS((void)read_points_csv(text, "p.csv"), doctest::Contains("p.csv:3: 4 fields where the header names"),
                       ConfigError);
  std::string bad = points_to_csv({cell(DType::bf16, 1, 1024, 512, 0.5)});
  bad.replace(bad.rfind("0.5"), 3, "fast");
  CHECK_THROWS_WITH_AS((void)read_points_csv(bad, "p.csv"),
                       doctest::Contains("p.csv:2: column 'efficiency' is not a number: 'fast'"), ConfigError);
  CHECK_THROWS_WITH_AS((void)read_points_csv(points_to_csv({}) + "\"open,x\n", "p.csv"),
                       doctest::Contains("p.csv:2: a quoted field does not end on its line"), ConfigError);
}

TEST_CASE("calibrate merge: cells take the median of the files, curves the pooled points") {
  // File A measured (1,1024) at 0.2 and (64,1024) at 0.5; file B (1,1024) at 0.4 and (1,4096)
  // at 0.6. (64,4096) was measured by neither: the best cell below it, 0.6.
  const std::vector<MeasuredPoint> a = {
      cell(DType::bf16, 1, 1024, 512, 0.2), cell(DType::bf16, 64, 1024, 512, 0.5),
      point("cal a", OpKind::rmsnorm, DType::bf16, "rmsnorm/bf16/memory", 1e-6, 0.2),
      point("cal a", OpKind::rmsnorm, DType::bf16, "rmsnorm/bf16/memory", 1e-5, 0.6),
      // A GEMM of a model graph: the table prices bf16, so no curve of it is kept.
      point("cal a", OpKind::gemm, DType::bf16, "gemm/bf16/compute", 1e-5, 0.7)};
  const std::vector<MeasuredPoint> b = {
      cell(DType::bf16, 1, 1024, 512, 0.4), cell(DType::bf16, 1, 4096, 512, 0.6),
      point("cal b", OpKind::rmsnorm, DType::bf16, "rmsnorm/bf16/memory", 1e-6, 0.4),
      point("cal b", OpKind::rmsnorm, DType::bf16, "rmsnorm/bf16/memory", 1e-5, 0.8)};
  MergeSummary s;
  const Hardware hw = merge_calibrations(base_profile(), {saved(a), saved(b)}, s);
  const GemmTable& t = hw.calibration.gemm.at(DType::bf16);
  CHECK(t.cell(0, 0, 0) == approx(0.3));  // median of 0.2 and 0.4
  CHECK(t.cell(0, 1, 0) == approx(0.6));
  CHECK(t.cell(1, 0, 0) == approx(0.5));
  CHECK(t.cell(1, 1, 0) == approx(0.6));
  // The pooled rmsnorm points in one bin per decade end: medians 0.3 at 1 µs, 0.7 at 10 µs.
  const EfficiencyCurve& rms = hw.calibration.kernels.at("rmsnorm/bf16/memory");
  REQUIRE(rms.seconds.size() == 2);
  CHECK(rms.efficiency[0] == approx(0.3));
  CHECK(rms.efficiency[1] == approx(0.7));
  // No point fed RoPE: the base's curve stays. No GEMM curve shadows the table.
  CHECK(hw.calibration.kernels.at("rope/bf16/memory").efficiency[1] == approx(0.4));
  CHECK(hw.calibration.kernels.count("gemm/bf16/compute") == 0);
  CHECK(s.files == 2);
  CHECK(s.points == 9);
  CHECK(s.curves == 1);
  CHECK(s.kept_curves == 1);
  CHECK(s.cells == 3);
  CHECK(s.filled == 1);
  CHECK(hw.source == "perfsim calibrate --merge of 2 points files (9 points) over perfsim calibrate 2026-11-22");
  CHECK(hw.name == "test-local");
  CHECK(hw.calibration.measured_on.mode == "full, 2 calibrations merged");
}

TEST_CASE("calibrate merge: points naming paged ops by their dense kind merge as those naming the paged kinds") {
  // Files written before the paged and varlen kinds existed name a paged append "kv_append" and
  // a paged attention "flash_attention" in their kind column; the curve keys are the same.
  auto points = [](OpKind append, OpKind attention) {
    MeasuredPoint a = point("cal decode 1x256 +paged", append, DType::bf16, "kv_append/bf16/memory/paged", 1e-6, 0.3);
    a.op.attrs.batch = 1, a.op.attrs.kv_block = 16;
    MeasuredPoint f = point("cal decode 1x256 +paged", attention, DType::bf16, "flash_attention/bf16/memory/paged",
                            2e-6, 0.6);
    f.op.attrs.batch = 1, f.op.attrs.kv_block = 16;
    return std::vector<MeasuredPoint>{a, f};
  };
  const std::vector<MeasuredPoint> old_points = points(OpKind::kv_append, OpKind::flash_attention);
  const std::vector<MeasuredPoint> new_points = points(OpKind::paged_kv_append, OpKind::paged_flash_attention);
  CHECK(points_to_csv(old_points).find(",kv_append,") != std::string::npos);
  CHECK(points_to_csv(new_points).find(",paged_kv_append,") != std::string::npos);
  MergeSummary from_old, from_new;
  const Hardware a = merge_calibrations(base_profile(), {saved(old_points)}, from_old);
  const Hardware b = merge_calibrations(base_profile(), {saved(new_points)}, from_new);
  // A one-sequence paged append is no contiguous copy, whichever kind the file names.
  CHECK(from_old.updated.rekeyed == 0);
  CHECK(from_new.updated.rekeyed == 0);
  CHECK(a.calibration.kernels.count("kv_append/bf16/memory/contiguous") == 0);
  for (const char* key : {"kv_append/bf16/memory/paged", "flash_attention/bf16/memory/paged"}) {
    CAPTURE(key);
    REQUIRE(a.calibration.kernels.count(key) == 1);
    REQUIRE(b.calibration.kernels.count(key) == 1);
    CHECK(a.calibration.kernels.at(key).seconds == b.calibration.kernels.at(key).seconds);
    CHECK(a.calibration.kernels.at(key).efficiency == b.calibration.kernels.at(key).efficiency);
  }
  CHECK(a.calibration.kernels.size() == b.calibration.kernels.size());
}

TEST_CASE("calibrate merge: files without a point are refused") {
  MergeSummary s;
  CHECK_THROWS_WITH_AS((void)merge_calibrations(base_profile(), {saved({}), saved({})}, s),
                       doctest::Contains("the points files hold no point"), ConfigError);
}

TEST_CASE("calibrate merge: points of an earlier cost model are brought up to date") {
  // A one-sequence KV append without a finer key gets the contiguous-copy curve; two
  // sequences, a paged append and an up-to-date point stay as they are.
  SavedPoint append;
  append.key = "kv_append/bf16/memory", append.dtype = "bf16", append.batch = 1;
  SavedPoint two = append;
  two.batch = 2;
  SavedPoint paged = append;
  paged.key = "kv_append/bf16/memory/paged";
  SavedPoint slice = append;
  slice.key = "slice_last_token/fp32/memory", slice.dtype = "fp32";
  SavedPoint current = append;
  current.finer_key = "kv_append/bf16/memory/contiguous";
  // GPT-like embedding, 2 sequences of 3 tokens, 8 fp32 columns: ids 6·4 + table rows,
  // position rows and output 3 · 48 · 4 = 600 bytes; counting the 3 position rows once, 504.
  SavedPoint emb;
  emb.key = "embedding/fp32/memory", emb.dtype = "fp32";
  emb.batch = 2, emb.rows = 6, emb.cols = 8, emb.seq_q = 3;
  emb.bytes = 600, emb.curve_seconds = 1e-6, emb.efficiency = 0.5;
  SavedPoint emb_now = emb;  // written by this version: 504 bytes already
  emb_now.bytes = 504;
  SavedPoint emb_llama = emb;  // no position table: 6·4 + 2·192 = 408 bytes
  emb_llama.bytes = 408;
  // Cross-entropy over rows of 32001 bf16 logits (odd: element by element, 64002 B in shared
  // memory) gets its path's curve; one already keyed stays as it is.
  SavedPoint ce;
  ce.key = "cross_entropy/bf16/memory", ce.dtype = "bf16", ce.rows = 1536, ce.cols = 32001;
  SavedPoint ce_now = ce;
  ce_now.finer_key = "cross_entropy/bf16/memory/smem_scalar";
  // An unaligned GEMM of one row keyed to its layout curve gets the skinny one; 16 rows do not.
  SavedPoint gemv;
  gemv.key = "gemm/bf16/memory/unaligned", gemv.finer_key = "gemm/bf16/memory/unaligned_nt_c";
  gemv.dtype = "bf16", gemv.m = 1, gemv.n = 32001, gemv.k = 2560, gemv.batch = 1;
  SavedPoint wide = gemv;
  wide.m = 16;
  std::vector<SavedPoint> points{append, two, paged, slice, current, emb, emb_now, emb_llama, ce, ce_now, gemv, wide};
  PointUpdates u;
  update_saved_points(points, u);
  CHECK(u.rekeyed == 2);
  CHECK(u.cross_entropy == 1);
  CHECK(u.skinny_gemms == 1);
  CHECK(u.repriced == 1);
  CHECK(points[10].finer_key == "gemm/bf16/memory/unaligned_nt_c_skinny");
  CHECK(points[11].finer_key == "gemm/bf16/memory/unaligned_nt_c");
  CHECK(points[8].finer_key == "cross_entropy/bf16/memory/smem_scalar");
  CHECK(points[9].finer_key == "cross_entropy/bf16/memory/smem_scalar");
  CHECK(points[0].finer_key == "kv_append/bf16/memory/contiguous");
  CHECK(points[1].finer_key.empty());
  CHECK(points[2].finer_key.empty());
  CHECK(points[3].finer_key == "slice_last_token/fp32/memory/contiguous");
  CHECK(points[4].finer_key == "kv_append/bf16/memory/contiguous");
  CHECK(points[5].bytes == approx(504));
  CHECK(points[5].curve_seconds == approx(1e-6 * 504 / 600));
  CHECK(points[5].efficiency == approx(0.5 * 504 / 600));
  CHECK(points[6].efficiency == approx(0.5));
  CHECK(points[7].efficiency == approx(0.5));
  // Updating twice changes nothing more.
  PointUpdates again;
  update_saved_points(points, again);
  CHECK(again.rekeyed == 0);
  CHECK(again.cross_entropy == 0);
  CHECK(again.skinny_gemms == 0);
  CHECK(again.repriced == 0);
}

TEST_CASE("calibrate merge: the shape and bytes columns are read back, and optional") {
  MeasuredPoint p = point("cal decode 2x8", OpKind::embedding, DType::bf16, "embedding/bf16/memory", 1e-7, 0.01);
  p.op.attrs.batch = 2, p.op.attrs.rows = 2, p.op.attrs.cols = 64, p.op.attrs.seq_q = 1;
  p.bytes = 520;
  const std::vector<SavedPoint> r = saved({p});
  REQUIRE(r.size() == 1);
  CHECK(r[0].batch == 2);
  CHECK(r[0].rows == 2);
  CHECK(r[0].cols == 64);
  CHECK(r[0].seq_q == 1);
  CHECK(r[0].bytes == approx(520));
  const std::vector<SavedPoint> bare =
      read_points_csv("source,key,finer_key,dtype,m,n,k,curve_s,efficiency\ns,rope/bf16/memory,,bf16,0,0,0,1e-6,0.5\n",
                      "p.csv");
  REQUIRE(bare.size() == 1);
  CHECK(bare[0].batch == 0);
  CHECK(bare[0].bytes == 0);
}

TEST_CASE("calibrate merge: fused quantized GEMMs get the curve of their rows") {
  // The fused kernel is instantiated for 1, 2, 4 or 8 rows: 3 rows read the 4-row curve; 16
  // rows dequantize first (their "_dq" key has no finer curve); a point keyed already stays.
  SavedPoint one;
  one.key = "gemm/bf16/memory/int4w", one.dtype = "bf16", one.m = 1, one.n = 4096, one.k = 4096, one.batch = 1;
  SavedPoint three = one;
  three.m = 3;
  SavedPoint int8 = one;
  int8.key = "gemm/bf16/memory/int8w", int8.m = 8;
  SavedPoint dq = one;
  dq.key = "gemm/bf16/memory/int4w_dq", dq.m = 16;
  SavedPoint keyed = one;
  keyed.finer_key = "gemm/bf16/memory/int4w_r1";
  std::vector<SavedPoint> points{one, three, int8, dq, keyed};
  PointUpdates u;
  update_saved_points(points, u);
  CHECK(u.quantized_rows == 3);
  CHECK(points[0].finer_key == "gemm/bf16/memory/int4w_r1");
  CHECK(points[1].finer_key == "gemm/bf16/memory/int4w_r4");
  CHECK(points[2].finer_key == "gemm/bf16/memory/int8w_r8");
  CHECK(points[3].finer_key.empty());
  CHECK(points[4].finer_key == "gemm/bf16/memory/int4w_r1");
  PointUpdates again;
  update_saved_points(points, again);
  CHECK(again.quantized_rows == 0);
}

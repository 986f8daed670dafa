// points_to_csv (points.hpp).
#include "core/calibrate/points.hpp"

#include <fmt/format.h>

#include <cmath>

#include "core/graph/op_kind.hpp"
#include "core/config/dtype.hpp"
#include "core/text.hpp"

namespace perfsim {

namespace {

std::string num(double v) { return std::isfinite(v) ? fmt::format("{:.6g}", v) : std::string{}; }

}  // namespace

std::string points_to_csv(const std::vector<MeasuredPoint>& points) {
  std::string out =
      "source,op,kind,dtype,key,finer_key,fallback_key,bound,m,n,k,batch,heads,kv_heads,head_dim,seq_q,seq_kv,"
      "kv_block,rows,cols,elements,flops,bytes,roofline_s,curve_s,measured_s,kernel_s,efficiency,eager_s,host_s\n";
  for (const MeasuredPoint& p : points) {
    const OpAttrs& a = p.op.attrs;
    out += fmt::format("{},{},{},{},{},{},{},{},", csv_quote(p.source), csv_quote(p.op.name), name_of(p.op.kind),
                       name_of(p.op.dtype), csv_quote(p.curve.key), csv_quote(p.curve.finer_key),
                       csv_quote(p.curve.fallback_key), p.curve.compute_bound ? "compute" : "memory");
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},", a.m, a.n, a.k, a.batch, a.heads, a.kv_heads,
                       a.head_dim, a.seq_q, a.seq_kv, a.kv_block, a.rows, a.cols, a.elements);
    out += fmt::format("{},{},{},{},{},{},{},{},{}\n", num(p.flops), num(p.bytes), num(p.curve.roofline_seconds),
                       num(p.curve.curve_seconds), num(p.measured_seconds), num(p.kernel_seconds), num(p.efficiency),
                       p.eager_seconds > 0 ? num(p.eager_seconds) : "", p.host_seconds > 0 ? num(p.host_seconds) : "");
  }
  return out;
}

}  // namespace perfsim

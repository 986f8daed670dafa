#include "core/config/dtype.hpp"

#include "core/text.hpp"

namespace perfsim {

double bytes_of(DType t) {
  switch (t) {
    case DType::fp32:
    case DType::tf32:
    case DType::int32: return 4;
    case DType::bf16:
    case DType::fp16: return 2;
    case DType::fp8:
    case DType::int8: return 1;
    case DType::int4: return 0.5;
  }
  return 4;
}

std::string_view name_of(DType t) {
  switch (t) {
    case DType::fp32: return "fp32";
    case DType::tf32: return "tf32";
    case DType::bf16: return "bf16";
    case DType::fp16: return "fp16";
    case DType::fp8: return "fp8";
    case DType::int8: return "int8";
    case DType::int32: return "int32";
    case DType::int4: return "int4";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view s) {
  const std::string k = to_lower(s);
  for (DType t : all_dtypes)
    if (k == name_of(t)) return t;
  if (k == "float32" || k == "float") return DType::fp32;
  if (k == "bfloat16") return DType::bf16;
  if (k == "float16" || k == "half") return DType::fp16;
  if (k == "e4m3" || k == "fp8_e4m3") return DType::fp8;
  if (k == "int32") return DType::int32;
  if (k == "int4") return DType::int4;
  return std::nullopt;
}

}  // namespace perfsim

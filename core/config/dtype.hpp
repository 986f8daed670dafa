// Numeric formats an op can run in, and their storage sizes.
#pragma once
#include <optional>
#include <string_view>

namespace perfsim {

// int32 holds token ids; int4 holds quantized weights (two a byte): neither is a compute
// precision.
enum class DType { fp32, tf32, bf16, fp16, fp8, int8, int32, int4 };

// The compute precisions (hardware peaks are given for these).
inline constexpr DType all_dtypes[] = {DType::fp32, DType::tf32, DType::bf16,
                                       DType::fp16, DType::fp8,  DType::int8};
inline constexpr int dtype_count = 8;

// Bytes per element in memory. tf32 is a compute mode: values are stored as fp32.
[[nodiscard]] double bytes_of(DType t);
[[nodiscard]] std::string_view name_of(DType t);
// Accepts the names above, case-insensitive, plus "float32", "bfloat16", "half", "e4m3".
[[nodiscard]] std::optional<DType> parse_dtype(std::string_view s);

}  // namespace perfsim

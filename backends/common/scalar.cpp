// Conversions between the storage dtypes the CPU backend holds tensors in.
#include <cstring>
#include <stdexcept>

#include "backends/common/scalar.hpp"

namespace perfsim::host {

Storage storage_of(DType t) {
  switch (t) {
    case DType::fp32:
    case DType::tf32: return Storage::f32;
    case DType::bf16: return Storage::bf16;
    case DType::fp16: return Storage::f16;
    case DType::int32: return Storage::i32;
    case DType::fp8: return Storage::f8e4m3;
    case DType::int8:
    case DType::int4: return Storage::unsupported;
  }
  return Storage::unsupported;
}

const char* name_of(Storage s) {
  switch (s) {
    case Storage::f32: return "fp32";
    case Storage::bf16: return "bf16";
    case Storage::f16: return "fp16";
    case Storage::i32: return "int32";
    case Storage::f8e4m3: return "fp8";
    case Storage::unsupported: return "unsupported";
  }
  return "?";
}

int bytes_of(Storage s) {
  switch (s) {
    case Storage::f32:
    case Storage::i32: return 4;
    case Storage::bf16:
    case Storage::f16: return 2;
    case Storage::f8e4m3:
    case Storage::unsupported: return 1;
  }
  return 1;
}

namespace {

template <class S, class D>
void convert_typed(const S* src, D* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = from_f32<D>(to_f32(src[i]));
}

template <class S>
void convert_from(const S* src, void* dst, Storage dst_type, int64_t n) {
  switch (dst_type) {
    case Storage::f32: convert_typed(src, static_cast<float*>(dst), n); return;
    case Storage::bf16: convert_typed(src, static_cast<bf16*>(dst), n); return;
    case Storage::f16: convert_typed(src, static_cast<half*>(dst), n); return;
    case Storage::f8e4m3: convert_typed(src, static_cast<fp8_e4m3*>(dst), n); return;
    default: throw std::logic_error("convert: destination is not a float storage");
  }
}

}  // namespace

void convert(const void* src, Storage src_type, void* dst, Storage dst_type, int64_t n) {
  if (src_type == dst_type) {
    std::memcpy(dst, src, static_cast<std::size_t>(n) * static_cast<std::size_t>(bytes_of(src_type)));
    return;
  }
  switch (src_type) {
    case Storage::f32: convert_from(static_cast<const float*>(src), dst, dst_type, n); return;
    case Storage::bf16: convert_from(static_cast<const bf16*>(src), dst, dst_type, n); return;
    case Storage::f16: convert_from(static_cast<const half*>(src), dst, dst_type, n); return;
    case Storage::f8e4m3: convert_from(static_cast<const fp8_e4m3*>(src), dst, dst_type, n); return;
    default: throw std::logic_error("convert: source is not a float storage");
  }
}

}  // namespace perfsim::host

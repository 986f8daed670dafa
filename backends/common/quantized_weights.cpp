#include "backends/common/quantized_weights.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/common/bf16.hpp"
#include "backends/common/parallel.hpp"

namespace perfsim::host {

namespace {

uint64_t mix(uint64_t x) {  // SplitMix64's finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint16_t* scales_of(void* data, const QuantLayout& q) {
  return reinterpret_cast<uint16_t*>(static_cast<char*>(data) + q.scale_offset());
}
const uint16_t* scales_of(const void* data, const QuantLayout& q) {
  return reinterpret_cast<const uint16_t*>(static_cast<const char*>(data) + q.scale_offset());
}

}  // namespace

void fill_quantized(void* data, const QuantLayout& q, uint64_t seed) {
  // In chunks of whole bytes on every thread: a 7B model's weights are billions of values.
  auto* values = static_cast<uint8_t*>(data);
  const auto bytes = static_cast<int64_t>(q.value_bytes());
  const int64_t n = q.k * q.n;
  parallel_for(bytes, 1 << 16, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      if (!q.int4) {
        values[b] = static_cast<uint8_t>(
            static_cast<int8_t>(static_cast<int>(mix(seed ^ static_cast<uint64_t>(b)) % 255) - 127));
        continue;
      }
      uint8_t v = 0;
      for (int64_t i = 2 * b; i < std::min(2 * b + 2, n); ++i) {
        const auto nib = static_cast<uint8_t>(mix(seed ^ static_cast<uint64_t>(i)) % 16);
        v = static_cast<uint8_t>(v | (i % 2 == 0 ? nib : nib << 4));
      }
      values[b] = v;
    }
  });
  const int64_t groups = q.n * q.groups_per_channel();
  uint16_t* scales = scales_of(data, q);
  const float base = q.int4 ? 0.02f / 8 : 0.02f / 127;
  parallel_for(groups, 1 << 14, [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) {
      const double u = static_cast<double>(mix(~seed ^ static_cast<uint64_t>(g)) >> 11) * 0x1.0p-53;
      scales[g] = bf16(base * static_cast<float>(0.5 + u)).bits;
    }
  });
  if (q.zeros) {
    uint16_t* zeros = scales + groups;
    for (int64_t g = 0; g < groups; ++g) zeros[g] = bf16(8.0f).bits;
  }
}

void dequantize(const void* data, const QuantLayout& q, float* out) {
  const auto* values = static_cast<const uint8_t*>(data);
  const uint16_t* scales = scales_of(data, q);
  const uint16_t* zeros = q.zeros ? scales + q.n * q.groups_per_channel() : nullptr;
  parallel_for(q.k, 16, [&](int64_t kb, int64_t ke) {
    for (int64_t k = kb; k < ke; ++k)
      for (int64_t c = 0; c < q.n; ++c) {
        const int64_t i = k * q.n + c;
        const float v = q.int4 ? static_cast<float>(i % 2 == 0 ? values[i / 2] & 0xF : values[i / 2] >> 4)
                               : static_cast<float>(static_cast<int8_t>(values[i]));
        const int64_t g = q.group_of(k, c);
        const float zero = zeros != nullptr ? bf16::to_float(zeros[g]) : 0.0f;
        out[i] = (v - zero) * bf16::to_float(scales[g]);
      }
  });
}

void quantized_gemv(const float* a, int64_t m, const void* data, const QuantLayout& q, float* out) {
  // Blocks of 512 columns: each row's part of a block is one contiguous run (256 bytes in int4).
  constexpr int64_t block = 512;
  const auto* values = static_cast<const uint8_t*>(data);
  const uint16_t* scales = scales_of(data, q);
  const uint16_t* zeros = q.zeros ? scales + q.n * q.groups_per_channel() : nullptr;
  parallel_for((q.n + block - 1) / block, 1, [&](int64_t b0, int64_t b1) {
    float w[block], scale[block], zero[block];
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t j0 = b * block, nb = std::min(block, q.n - j0);
      for (int64_t i = 0; i < m; ++i) std::fill(out + i * q.n + j0, out + i * q.n + j0 + nb, 0.0f);
      for (int64_t k = 0; k < q.k; ++k) {
        if (k % q.group == 0)
          for (int64_t j = 0; j < nb; ++j) {
            const int64_t g = q.group_of(k, j0 + j);
            scale[j] = bf16::to_float(scales[g]);
            zero[j] = zeros != nullptr ? bf16::to_float(zeros[g]) : 0.0f;
          }
        const int64_t first = k * q.n + j0;
        if (!q.int4) {
          const auto* row = reinterpret_cast<const int8_t*>(values + first);
          for (int64_t j = 0; j < nb; ++j) w[j] = (static_cast<float>(row[j]) - zero[j]) * scale[j];
        } else if (first % 2 == 0 && nb % 2 == 0) {
          const uint8_t* row = values + first / 2;  // two a byte, the low nibble first
          for (int64_t j = 0; j < nb; j += 2) {
            w[j] = (static_cast<float>(row[j / 2] & 0xF) - zero[j]) * scale[j];
            w[j + 1] = (static_cast<float>(row[j / 2] >> 4) - zero[j + 1]) * scale[j + 1];
          }
        } else {
          for (int64_t j = 0; j < nb; ++j) {
            const int64_t e = first + j;
            w[j] = (static_cast<float>(e % 2 == 0 ? values[e / 2] & 0xF : values[e / 2] >> 4) - zero[j]) * scale[j];
          }
        }
        for (int64_t i = 0; i < m; ++i) {
          const float x = a[i * q.k + k];
          float* o = out + i * q.n + j0;
          for (int64_t j = 0; j < nb; ++j) o[j] += x * w[j];
        }
      }
    }
  });
}

void fake_quantize_rows(float* x, int64_t rows, int64_t cols) {
  parallel_for(rows, 1, [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      float* row = x + r * cols;
      float amax = 0;
      for (int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(row[c]));
      if (amax == 0) continue;
      const float scale = amax / 127.0f;
      for (int64_t c = 0; c < cols; ++c) row[c] = std::nearbyint(row[c] / scale) * scale;
    }
  });
}

}  // namespace perfsim::host

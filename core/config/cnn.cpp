// CnnConfig's counts and the ResNet family (cnn.hpp).
#include "core/config/cnn.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"

namespace perfsim {

namespace {

// Each block's input channels, output size and whether it projects its shortcut, in order;
// f(stage, block, in_channels, out_side, projects).
template <class F>
void for_blocks(const CnnConfig& m, F f) {
  int64_t channels = m.stem_width;
  int64_t side = (m.image + 1) / 2;  // the stem's 7×7/2 convolution (padding 3)
  side = (side + 1) / 2;             // and its 3×3/2 max pool (padding 1)
  for (std::size_t s = 0; s < m.stages.size(); ++s) {
    const CnnStage& st = m.stages[s];
    for (int64_t b = 0; b < st.blocks; ++b) {
      const int64_t stride = b == 0 ? st.stride : 1;
      const int64_t out_side = (side - 1) / stride + 1;  // a 3×3 (padding 1) or 1×1 at the stride
      const bool projects = b == 0 && (stride != 1 || channels != m.stage_channels(s));
      f(s, b, channels, side, out_side, projects);
      channels = m.stage_channels(s);
      side = out_side;
    }
  }
}

}  // namespace

int64_t CnnConfig::features() const { return stages.empty() ? stem_width : stage_channels(stages.size() - 1); }

int64_t CnnConfig::blocks() const {
  int64_t n = 0;
  for (const CnnStage& s : stages) n += s.blocks;
  return n;
}

int64_t CnnConfig::params() const {
  int64_t p = 7 * 7 * in_channels * stem_width + 2 * stem_width;
  for_blocks(*this, [&](std::size_t s, int64_t, int64_t in, int64_t, int64_t, bool projects) {
    const int64_t w = stages[s].width, out = stage_channels(s);
    if (bottleneck) p += in * w + 2 * w + 9 * w * w + 2 * w + w * out + 2 * out;
    else p += 9 * in * w + 2 * w + 9 * w * w + 2 * w;
    if (projects) p += in * out + 2 * out;
  });
  return p + features() * classes + classes;
}

int64_t CnnConfig::forward_macs() const {
  const int64_t stem_side = (image + 1) / 2;
  int64_t macs = stem_side * stem_side * 7 * 7 * in_channels * stem_width;
  for_blocks(*this, [&](std::size_t s, int64_t, int64_t in, int64_t side, int64_t out_side, bool projects) {
    const int64_t w = stages[s].width, out = stage_channels(s), px = out_side * out_side;
    if (bottleneck) macs += side * side * in * w + px * 9 * w * w + px * w * out;
    else macs += px * 9 * in * w + px * 9 * w * w;
    if (projects) macs += px * in * out;
  });
  return macs + features() * classes;
}

CnnConfig resnet(int depth) {
  CnnConfig m;
  m.name = fmt::format("resnet-{}", depth);
  auto stages = [&](int64_t a, int64_t b, int64_t c, int64_t d) {
    m.stages = {{a, 64, 1}, {b, 128, 2}, {c, 256, 2}, {d, 512, 2}};
  };
  switch (depth) {
    case 18: stages(2, 2, 2, 2), m.bottleneck = false; break;
    case 34: stages(3, 4, 6, 3), m.bottleneck = false; break;
    case 50: stages(3, 4, 6, 3); break;
    case 101: stages(3, 4, 23, 3); break;
    case 152: stages(3, 8, 36, 3); break;
    default: throw ConfigError(fmt::format("resnet: depth {} is not one of 18, 34, 50, 101, 152", depth));
  }
  return m;
}

void validate(const CnnConfig& m) {
  auto bounded = [&](const char* field, int64_t v, int64_t max) {
    if (v <= 0 || v > max)
      throw ConfigError(fmt::format("model '{}': {} must be in 1..{} (got {})", m.name, field, max, v));
  };
  bounded("image", m.image, max_cnn_image);
  bounded("in_channels", m.in_channels, max_cnn_width);
  bounded("stem_width", m.stem_width, max_cnn_width);
  bounded("classes", m.classes, int64_t{1} << 24);
  if (m.stages.empty()) throw ConfigError(fmt::format("model '{}': stages must hold at least one stage", m.name));
  int64_t side = (m.image + 1) / 2;
  side = (side + 1) / 2;
  for (std::size_t s = 0; s < m.stages.size(); ++s) {
    const CnnStage& st = m.stages[s];
    const std::string at = fmt::format("stages[{}]", s + 1);
    bounded((at + ".blocks").c_str(), st.blocks, max_cnn_blocks);
    bounded((at + ".width").c_str(), st.width, max_cnn_width);
    bounded((at + ".stride").c_str(), st.stride, 8);
    side = (side - 1) / st.stride + 1;
  }
  if (m.image < 8)
    throw ConfigError(fmt::format("model '{}': image must be at least 8 pixels a side (got {})", m.name, m.image));
}

}  // namespace perfsim

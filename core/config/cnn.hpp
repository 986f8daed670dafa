// Convolutional network configuration: a ResNet-style image classifier (He et al. 2016,
// "Deep Residual Learning for Image Recognition", Table 1): a stem (a 7×7/2 convolution, batch
// norm, ReLU and a 3×3/2 max pool), stages of residual blocks, global average pooling and a
// linear classifier. Images are NHWC.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace perfsim {

// A stage: `blocks` residual blocks of inner width `width`; its first block strides by
// `stride` (on its 3×3 convolution, as torchvision's ResNet v1.5) and projects its shortcut
// with a 1×1 convolution and batch norm when the stride or the channel count changes.
struct CnnStage {
  int64_t blocks = 0;
  int64_t width = 0;
  int64_t stride = 1;
};

struct CnnConfig {
  std::string name;
  int64_t image = 224;       // square input images, pixels a side
  int64_t in_channels = 3;
  int64_t stem_width = 64;
  std::vector<CnnStage> stages;
  // Bottleneck blocks (1×1 → 3×3 → 1×1 to 4·width channels: ResNet-50 and deeper); false:
  // basic blocks (two 3×3 at width: ResNet-18 and -34).
  bool bottleneck = true;
  int64_t classes = 1000;

  [[nodiscard]] int64_t expansion() const { return bottleneck ? 4 : 1; }
  // Channels a stage's blocks put out.
  [[nodiscard]] int64_t stage_channels(std::size_t s) const { return stages.at(s).width * expansion(); }
  // Channels the classifier reads (the last stage's).
  [[nodiscard]] int64_t features() const;
  [[nodiscard]] int64_t blocks() const;
  // Trainable parameters: convolution filters, batch-norm scales and shifts, the classifier's
  // weight and bias (running statistics are buffers, not parameters).
  [[nodiscard]] int64_t params() const;
  // Multiply-adds of one image's forward pass: convolutions and the classifier.
  [[nodiscard]] int64_t forward_macs() const;
};

// ResNet-18, -34, -50, -101 or -152 at 224×224 (He et al. 2016, Table 1): ResNet-50 holds
// 25,557,032 parameters and 4.09 G multiply-adds an image. Throws ConfigError on another depth.
[[nodiscard]] CnnConfig resnet(int depth);

inline constexpr int64_t max_cnn_image = int64_t{1} << 14;
inline constexpr int64_t max_cnn_width = int64_t{1} << 16;
inline constexpr int64_t max_cnn_blocks = int64_t{1} << 10;

// Throws ConfigError naming the field: sizes not positive or beyond the bounds above, no stage,
// an image too small for the stem and the stages' strides.
void validate(const CnnConfig& m);

}  // namespace perfsim

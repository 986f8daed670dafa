// A tensor shape whose element count does not fit int64 is a ConfigError naming the tensor,
// not a wrapped (negative or small) count.
#include <doctest/doctest.h>

#include "core/errors.hpp"
#include "core/graph/graph.hpp"

#include <limits>

using namespace perfsim;

TEST_CASE("graph: a tensor shape that overflows int64 throws naming the tensor") {
  Tensor t;
  t.name = "layer0.attn.scores";
  t.shape = {int64_t{1} << 24, int64_t{1} << 20, int64_t{1} << 24};  // 2^68 elements
  CHECK_THROWS_WITH_AS((void)t.elements(),
                       doctest::Contains("tensor 'layer0.attn.scores' of shape [16777216, 1048576, 16777216] "
                                         "has more elements than int64 holds"),
                       ConfigError);
  Graph g;
  CHECK_THROWS_AS(g.add_tensor(t), ConfigError);
  CHECK(g.tensors.empty());
  // Overflow past the sign bit only: 2^32 · 2^31.
  t.shape = {int64_t{1} << 32, int64_t{1} << 31};
  CHECK_THROWS_AS((void)t.elements(), ConfigError);
}

TEST_CASE("graph: the largest shapes that fit count exactly") {
  Tensor t;
  t.name = "big";
  t.shape = {int64_t{1} << 31, (int64_t{1} << 31) - 1, 2};
  CHECK(t.elements() == std::numeric_limits<int64_t>::max() - (int64_t{1} << 32) + 1);  // 2^63 - 2^32
  t.shape = {std::numeric_limits<int64_t>::max()};
  CHECK(t.elements() == std::numeric_limits<int64_t>::max());
  Graph g;
  CHECK(g.add_tensor(t) == 0);
  // A pass that grows a shape past int64 afterwards is caught by check().
  g.tensors[0].shape = {std::numeric_limits<int64_t>::max(), 2};
  g.tensors[0].role = TensorRole::weight;
  CHECK_THROWS_AS(g.check(), ConfigError);
}

#include <doctest/doctest.h>

#include <cstring>
#include <stdexcept>

#include "core/run/engine_step_message.hpp"

using namespace perfsim;

TEST_CASE("engine step message: a step's shape, inputs and graph key come back as sent") {
  EngineStepMessage m;
  m.graph_key = 16;
  m.shape.q_len = {1, 1, 7};
  m.shape.kv_len = {300, 41, 7};
  m.shape.sampled = 3;
  m.shape.pool_blocks = 512;
  m.shape.kv_block = 16;
  m.shape.table_width = 4;
  m.inputs = {{"tokens", {5, 9, -1}}, {"block_table", {}}, {"slots", {0, 17, 4095}}};
  const std::string bytes = pack_step_message(m);
  const EngineStepMessage back = unpack_step_message(bytes);
  CHECK(back.graph_key == 16);
  CHECK(back.shape.q_len == m.shape.q_len);
  CHECK(back.shape.kv_len == m.shape.kv_len);
  CHECK(back.shape.sampled == 3);
  CHECK(back.shape.pool_blocks == 512);
  CHECK(back.shape.kv_block == 16);
  CHECK(back.shape.table_width == 4);
  CHECK(back.inputs == m.inputs);
  // 8 + (8 + 24) · 2 + 8 · 4 + 8 + (8 + 6 + 8 + 12) + (8 + 11 + 8) + (8 + 5 + 8 + 12) bytes.
  CHECK(bytes.size() == 8 + 64 + 32 + 8 + 34 + 27 + 33);
}

TEST_CASE("engine step message: a message cut short or padded is refused, not read past its end") {
  EngineStepMessage m;
  m.shape.q_len = {1, 2};
  m.shape.kv_len = {3, 4};
  m.inputs = {{"positions", {1, 2, 3}}};
  const std::string bytes = pack_step_message(m);
  for (std::size_t cut = 0; cut < bytes.size(); ++cut)
    CHECK_THROWS_AS((void)unpack_step_message(bytes.substr(0, cut)), std::runtime_error);
  CHECK_THROWS_AS((void)unpack_step_message(bytes + "x"), std::runtime_error);
  // A length field claiming more than the bytes left.
  std::string bad = bytes;
  const int64_t huge = int64_t{1} << 60;
  std::memcpy(bad.data() + 8, &huge, sizeof huge);
  CHECK_THROWS_AS((void)unpack_step_message(bad), std::runtime_error);
}

// The CPU ranks' all-to-all moves expert parallelism's blocks where the rank graph expects them:
// the dispatch [E, C, h] → [El, ep·C, h] puts row r of member i's buffer for local expert l at
// [l, i·C + r], and the return brings every rank its own buffers back. The ranks are simulated
// in one process: a first pass records what each sends, a second delivers it.
#include <doctest/doctest.h>

#include <cstring>
#include <stdexcept>

#include "backends/cpu/cpu_collectives.hpp"

using namespace perfsim;

namespace {

// Every rank's all-to-all send buffers, as recorded; each call returns the blocks the other
// ranks recorded for this one (zeros before they have).
struct Exchange {
  int ranks = 1;
  std::vector<std::vector<char>> sent;  // by rank
};

class SimulatedRank final : public Communicator {
 public:
  SimulatedRank(Exchange& x, int rank) : m_x(x), m_rank(rank) {}
  int rank() const override { return m_rank; }
  int size() const override { return m_x.ranks; }
  std::string host() const override { return "test"; }
  void all_to_all(const void* in, void* out, int64_t bytes, RankGroup g) override {
    CHECK(g.size == m_x.ranks);
    const auto* p = static_cast<const char*>(in);
    m_x.sent[static_cast<std::size_t>(m_rank)].assign(p, p + bytes * g.size);
    auto* o = static_cast<char*>(out);
    for (int i = 0; i < g.size; ++i) {
      const std::vector<char>& from = m_x.sent[static_cast<std::size_t>(i)];
      if (from.empty()) std::memset(o + i * bytes, 0, static_cast<std::size_t>(bytes));
      else std::memcpy(o + i * bytes, from.data() + g.place(m_rank) * bytes, static_cast<std::size_t>(bytes));
    }
  }
  void all_reduce_sum(float*, int64_t, RankGroup) override { unexpected(); }
  void reduce_scatter_sum(const float*, float*, int64_t, RankGroup) override { unexpected(); }
  void all_gather(const void*, void*, int64_t, RankGroup) override { unexpected(); }
  void send(const void*, int64_t, int, int) override { unexpected(); }
  void recv(void*, int64_t, int, int) override { unexpected(); }
  void barrier() override {}
  std::vector<std::string> gather_to_root(const std::string&) override { return {}; }
  void broadcast(void*, int64_t) override {}
  [[noreturn]] void abort(int) override { throw std::logic_error("abort"); }

 private:
  [[noreturn]] static void unexpected() { throw std::logic_error("not an all-to-all"); }
  Exchange& m_x;
  int m_rank;
};

struct A2A {
  Graph g;
  Op op;
  A2A(std::vector<int64_t> in, std::vector<int64_t> out, int ep) {
    Tensor x, y;
    x.name = "x", x.shape = std::move(in);
    y.name = "y", y.shape = std::move(out);
    op.name = "a2a";
    op.kind = OpKind::collective;
    op.inputs = {g.add_tensor(x)};
    op.outputs = {g.add_tensor(y)};
    op.attrs.collective = Collective::all_to_all;
    op.attrs.group = ep;
  }
};

// Runs `op` on every rank, twice (record, then deliver); inputs[r] is rank r's tensor read.
std::vector<std::vector<float>> exchange(const A2A& a, int ranks, std::vector<std::vector<float>> inputs) {
  Exchange x{ranks, std::vector<std::vector<char>>(static_cast<std::size_t>(ranks))};
  std::vector<std::vector<float>> outputs(static_cast<std::size_t>(ranks),
                                          std::vector<float>(static_cast<std::size_t>(a.g.tensor(1).elements())));
  for (int pass = 0; pass < 2; ++pass)
    for (int r = 0; r < ranks; ++r) {
      SimulatedRank rank(x, r);
      std::vector<void*> buffers{inputs[static_cast<std::size_t>(r)].data(), outputs[static_cast<std::size_t>(r)].data()};
      cpu::execute_collective(a.op, a.g, buffers, rank);
    }
  return outputs;
}

}  // namespace

TEST_CASE("cpu ranks: the expert-parallel all-to-all lays out the blocks as the experts read them") {
  constexpr int ep = 2;
  constexpr int64_t experts = 4, local = experts / ep, capacity = 3, h = 2;
  // Rank r's buffers: x_r[e, c, k] = 1000·r + 100·e + 10·c + k.
  auto value = [](int r, int64_t e, int64_t c, int64_t k) { return float(1000 * r + 100 * e + 10 * c + k); };
  std::vector<std::vector<float>> buffers(ep);
  for (int r = 0; r < ep; ++r)
    for (int64_t e = 0; e < experts; ++e)
      for (int64_t c = 0; c < capacity; ++c)
        for (int64_t k = 0; k < h; ++k) buffers[static_cast<std::size_t>(r)].push_back(value(r, e, c, k));

  const A2A dispatch({experts, capacity, h}, {local, ep * capacity, h}, ep);
  const auto received = exchange(dispatch, ep, buffers);
  for (int j = 0; j < ep; ++j)
    for (int64_t l = 0; l < local; ++l)
      for (int i = 0; i < ep; ++i)
        for (int64_t c = 0; c < capacity; ++c)
          for (int64_t k = 0; k < h; ++k) {
            const float got = received[static_cast<std::size_t>(j)][static_cast<std::size_t>(
                (l * ep * capacity + i * capacity + c) * h + k)];
            CHECK(got == value(i, j * local + l, c, k));
          }

  // The return sends each rank its rows of every local expert: its own buffers come back.
  const A2A back({local, ep * capacity, h}, {experts, capacity, h}, ep);
  CHECK(exchange(back, ep, received) == buffers);
}

#include "core/graph/graph.hpp"

#include <fmt/format.h>

#include <stdexcept>
#include <string>

#include "core/errors.hpp"

namespace perfsim {

const char* name_of(TensorRole r) {
  switch (r) {
    case TensorRole::weight: return "weights";
    case TensorRole::master_weight: return "master_weights";
    case TensorRole::gradient: return "gradients";
    case TensorRole::optimizer_state: return "optimizer_states";
    case TensorRole::kv_cache: return "kv_cache";
    case TensorRole::input: return "inputs";
    case TensorRole::activation: return "activations";
    case TensorRole::workspace: return "workspace";
  }
  return "?";
}

const char* name_of(Residence r) {
  switch (r) {
    case Residence::device: return "device";
    case Residence::host_pageable: return "host (pageable)";
    case Residence::host_pinned: return "host (pinned)";
  }
  return "?";
}

bool is_persistent(TensorRole r) { return r != TensorRole::activation; }
bool is_persistent(const Tensor& t) { return !t.transient && is_persistent(t.role); }

const char* name_of(Stage s) {
  switch (s) {
    case Stage::forward: return "forward";
    case Stage::backward: return "backward";
    case Stage::optimizer: return "optimizer";
    case Stage::other: return "other";
  }
  return "?";
}

int64_t Tensor::elements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(n, d, &n)) {
      std::string dims;
      for (int64_t e : shape) dims += (dims.empty() ? "" : ", ") + std::to_string(e);
      throw ConfigError(fmt::format("tensor '{}' of shape [{}] has more elements than int64 holds; "
                                    "lower the sizes behind it (batch, sequence lengths, model sizes)",
                                    name, dims));
    }
  return n;
}

int Graph::add_tensor(Tensor t) {
  (void)t.elements();  // a shape whose element count overflows is refused where it is made
  t.id = static_cast<int>(tensors.size());
  tensors.push_back(std::move(t));
  return tensors.back().id;
}

int Graph::add_op(Op op) {
  op.id = static_cast<int>(ops.size());
  ops.push_back(std::move(op));
  return ops.back().id;
}

double Graph::layer_scale() const {
  return layers_built > 0 ? static_cast<double>(layers_total) / static_cast<double>(layers_built)
                          : 1.0;
}

void Graph::check() const {
  std::vector<bool> written(tensors.size(), false);
  for (const auto& t : tensors) {
    if (t.id < 0 || static_cast<std::size_t>(t.id) >= tensors.size())
      throw std::logic_error(fmt::format("graph: tensor '{}' has a bad id", t.name));
    if (is_persistent(t)) written[static_cast<std::size_t>(t.id)] = true;
    for (int64_t d : t.shape)
      if (d <= 0) throw std::logic_error(fmt::format("graph: tensor '{}' has a dimension <= 0", t.name));
    (void)t.elements();  // ConfigError when a pass made the shape overflow
  }
  for (const auto& op : ops) {
    for (int id : op.inputs) {
      if (id < 0 || static_cast<std::size_t>(id) >= tensors.size())
        throw std::logic_error(fmt::format("graph: op '{}' reads unknown tensor {}", op.name, id));
      if (!written[static_cast<std::size_t>(id)])
        throw std::logic_error(fmt::format("graph: op '{}' reads '{}' before it is written",
                                           op.name, tensor(id).name));
    }
    for (int id : op.outputs) {
      if (id < 0 || static_cast<std::size_t>(id) >= tensors.size())
        throw std::logic_error(fmt::format("graph: op '{}' writes unknown tensor {}", op.name, id));
      written[static_cast<std::size_t>(id)] = true;
    }
  }
}

}  // namespace perfsim

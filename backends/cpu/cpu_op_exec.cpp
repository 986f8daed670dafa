// Op execution on the CPU kernels (see cpu_op_exec.hpp): the kernel table says what runs, this
// file stages the operands it runs on.
#include "backends/cpu/cpu_op_exec.hpp"

#include <fmt/format.h>

#include <map>
#include <optional>

#include "backends/cpu/cpu_kernel_table.hpp"
#include "backends/cpu/cpu_kernels.hpp"
#include "backends/ops/op_shapes.hpp"
#include "core/errors.hpp"

namespace perfsim::cpu {

namespace {

[[noreturn]] void fail(const Op& op, const std::string& what) {
  throw NotExecutable(fmt::format("cpu backend: op '{}' ({}): {}", op.name, name_of(op.kind), what));
}

Storage storage(const Graph& g, int id) { return storage_of(g.tensor(id).dtype); }

// Operands whose storage is fixed by the op's definition rather than by its precision.
std::optional<Storage> fixed_storage(OpKind k, bool is_output, std::size_t i) {
  if (const std::optional<DType> t = fixed_operand_dtype(k, is_output, i)) return storage_of(*t);
  return std::nullopt;
}

bool is_float(Storage s) { return s == Storage::f32 || s == Storage::bf16 || s == Storage::f16; }

// Outputs that start from an input's values get them (the kernel then works in place).
void prepare_in_place(const Op& op, const Graph& g, const std::vector<void*>& buf) {
  for (const ops::InPlace& p : ops::in_place_operands(op)) {
    const int from = op.inputs.at(p.input), to = op.outputs.at(p.output);
    if (from == to) continue;
    copy_tensor(buf[static_cast<std::size_t>(from)], storage(g, from), buf[static_cast<std::size_t>(to)],
                storage(g, to), g.tensor(to).elements());
  }
}

template <class T>
void run_typed(const Op& op, const Graph& g, const std::vector<void*>& in, const std::vector<void*>& out, int rank) {
  const TypedKernel<T> kernel = typed_kernels<T>().find(op.kind);
  if (kernel == nullptr) fail(op, "has no CPU kernel");
  kernel(TypedCall<T>{op, g, in, out, rank});
}

}  // namespace

void execute_op(const Op& op, const Graph& g, const std::vector<void*>& buf, TrackingAllocator& alloc, int rank) {
  ops::check_arity(op);
  Scratch scratch(alloc);
  if (const MixedKernel mixed = mixed_kernels().find(op.kind)) {
    mixed(MixedCall{op, g, buf, scratch});
    return;
  }
  if (!has_kernel(op.kind)) fail(op, "the cpu backend does not execute this kind");
  prepare_in_place(op, g, buf);

  // The kernel's storage: that of the first input whose type the op's precision decides.
  std::optional<Storage> kernel;
  for (std::size_t i = 0; i < op.inputs.size() && !kernel; ++i)
    if (!fixed_storage(op.kind, false, i)) kernel = storage(g, op.inputs[i]);
  if (!kernel || !is_float(*kernel))
    fail(op, fmt::format("needs floating-point operands, got {}", kernel ? name_of(*kernel) : "none"));

  // Operands stored differently from what the kernel takes are converted into scratch.
  std::map<int, void*> staged;  // tensor id -> converted copy
  struct WriteBack {
    int id;
    void* data;
    Storage from;
  };
  std::vector<WriteBack> write_back;
  auto operand = [&](int id, Storage need, bool is_output) -> void* {
    void* real = buf[static_cast<std::size_t>(id)];
    // An fp8 KV cache goes to its kernel as it is: the kernel reads or writes its rows as fp8
    // (a copy in the kernel's type would be workspace the memory model does not plan).
    if (is_fp8_kv_cache(g.tensor(id))) {
      if (!has_fp8_kv_kernel(op.kind))
        fail(op, fmt::format("reads the fp8 KV cache '{}': only the appends and flash attentions take one",
                             g.tensor(id).name));
      return real;
    }
    const Storage have = storage(g, id);
    if (have == need) return real;
    if (!is_float(have) || !is_float(need))
      fail(op, fmt::format("tensor '{}' is {} where the op needs {}", g.tensor(id).name, name_of(have),
                           name_of(need)));
    const int64_t n = g.tensor(id).elements();
    auto it = staged.find(id);
    if (it == staged.end()) {
      void* p = scratch.get(static_cast<std::size_t>(n * bytes_of(need)));
      if (!is_output) convert(real, have, p, need, n);
      it = staged.emplace(id, p).first;
    }
    if (is_output) write_back.push_back({id, it->second, need});
    return it->second;
  };
  std::vector<void*> in, out;
  for (std::size_t i = 0; i < op.inputs.size(); ++i)
    in.push_back(operand(op.inputs[i], fixed_storage(op.kind, false, i).value_or(*kernel), false));
  for (std::size_t i = 0; i < op.outputs.size(); ++i)
    out.push_back(operand(op.outputs[i], fixed_storage(op.kind, true, i).value_or(*kernel), true));

  switch (*kernel) {
    case Storage::f32: run_typed<float>(op, g, in, out, rank); break;
    case Storage::bf16: run_typed<bf16>(op, g, in, out, rank); break;
    case Storage::f16: run_typed<half>(op, g, in, out, rank); break;
    default: break;
  }
  for (const WriteBack& w : write_back)
    convert(w.data, w.from, buf[static_cast<std::size_t>(w.id)], storage(g, w.id), g.tensor(w.id).elements());
}

}  // namespace perfsim::cpu

#include "core/formulas.hpp"
#include <stdexcept>
namespace perfsim::formulas {
double kv_cache_bytes(const ModelConfig&, int64_t, int64_t, DType) { throw std::logic_error("not implemented yet"); }
double train_static_bytes_per_param(DType, bool) { throw std::logic_error("not implemented yet"); }
double megatron_train_flops(const ModelConfig&, int64_t, int64_t, bool) { throw std::logic_error("not implemented yet"); }
double decode_flops_per_token(const ModelConfig&, int64_t) { throw std::logic_error("not implemented yet"); }
double ring_allreduce_bytes(double, int) { throw std::logic_error("not implemented yet"); }
double ridge_point(double, double) { throw std::logic_error("not implemented yet"); }
}  // namespace perfsim::formulas

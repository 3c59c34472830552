// Kubernetes resource quantities ("500m", "4", "4Gi", "1.5G", "1e3") as exact
// integers: cpu in millicores, memory in bytes, gpus as a count.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace shoal::model {

// How a value finer than the unit asked for is read. kExact refuses it:
// what a person wrote (a manifest, a quota) is what is stored, or an error
// says why not. kUp rounds it up, as Kubernetes reads a quantity (cpu
// 0.0001 is 1m, memory "100m" is 1 byte): for what an API server answers.
enum class Rounding { kExact, kUp };

// The quantity in thousandths of its unit. Negative quantities and values
// beyond int64 are refused; the error names `field`.
Result<int64_t> parse_quantity_milli(std::string_view text, std::string_view field,
                                     Rounding rounding = Rounding::kExact);

Result<int64_t> parse_cpu_milli(std::string_view text, std::string_view field, Rounding rounding = Rounding::kExact);
Result<int64_t> parse_memory_bytes(std::string_view text, std::string_view field,
                                   Rounding rounding = Rounding::kExact);
Result<int64_t> parse_count(std::string_view text, std::string_view field, Rounding rounding = Rounding::kExact);

// Canonical Kubernetes spelling: cpu "3" or "1500m"; memory "4Gi", "1536Mi"
// or plain bytes.
std::string format_cpu(int64_t milli);
std::string format_memory(int64_t bytes);

}  // namespace shoal::model

// A federation-wide quota: the most a namespace's workloads, submitted to
// one source agent, may hold at once across every cluster, its own
// included (`kind: Quota`, `shoalctl quota set`; docs/scheduling.md,
// "Federation-wide quotas"). The source enforces it before it asks any
// cluster: work beyond it waits at the source.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/status.h"
#include "model/resources.h"

namespace shoal::model {

struct QuotaSpec {
  std::string namespace_name;
  std::optional<int64_t> cpu_milli, memory_bytes, gpu, workloads;  // nullopt: no limit
  friend bool operator==(const QuotaSpec&, const QuotaSpec&) = default;
};

// What a namespace holds now: resources, and how many workloads.
struct QuotaUsage {
  Resources resources;
  int64_t workloads = 0;
  friend bool operator==(const QuotaUsage&, const QuotaUsage&) = default;
};

// "" when `more` fits `quota` on top of `used` (one more workload); else
// the first limit it would pass, as "QuotaExceeded:<resource>: ..." for people.
std::string quota_refusal(const QuotaSpec& quota, const QuotaUsage& used, const Resources& more);

// Limits given as text (the control API, `shoalctl quota set`), each
// parsed under its own field name; "" leaves a limit unset. At least one.
Result<QuotaSpec> quota_from_text(std::string_view namespace_name, std::string_view cpu,
                                  std::string_view memory, std::string_view gpu,
                                  std::string_view workloads);

// The `kind: Quota` documents of a manifest, one per namespace.
Result<std::vector<QuotaSpec>> parse_quotas(std::string_view yaml);

// "cpu=16,memory=64Gi,gpu=2,workloads=10" (the limits set), for people.
std::string limits_text(const QuotaSpec& quota);

// Lossless JSON form, used by the store and the control API.
nlohmann::json to_json(const QuotaSpec& quota);
Result<QuotaSpec> quota_spec_from_json(const nlohmann::json& json);

}  // namespace shoal::model

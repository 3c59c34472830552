// What the agent's HTTP endpoint serves (metricsListen in agent.yaml): the
// Prometheus text exposition of its counters, and the counts weighted
// routing uses as JSON (seed 000's /<version>/metrics/<domain>/<metric>).
// Both are rendered in the agent's loop, as control commands ("metrics",
// "routing-metrics"), so nothing reads the agent's state from another thread.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "agent/runtime/control_views.h"

namespace shoal::runtime {

// Prometheus text format 0.0.4: every family with # HELP and # TYPE, names
// shoal_*, counters *_total, base units (seconds, bytes, cores).
std::string render_metrics(const ControlContext& context);

// `domain` namespace|cluster, `metric` workloads|cpu|memory|queue:
// {"cluster", "domain", "metric", "values": {namespace: n}} for the
// namespace domain, {"cluster", "domain", "metric", "value": n} for the
// cluster. InvalidArgument names the part that is neither.
Result<nlohmann::json> routing_metric(const ControlContext& context, const std::string& domain,
                                      const std::string& metric);

}  // namespace shoal::runtime

#include "agent/runtime/metrics.h"

#include <cmath>
#include <map>
#include <sstream>

#include "common/histogram.h"
#include "protocol/envelope.h"
#include "protocol/messages.h"

namespace shoal::runtime {
namespace {

using Labels = std::vector<std::pair<std::string, std::string>>;

// Writes one exposition: each family declared once, before its samples.
class Exposition {
 public:
  void family(const std::string& name, const char* type, const char* help) {
    out_ << "# HELP " << name << ' ' << help << '\n' << "# TYPE " << name << ' ' << type << '\n';
  }
  void sample(const std::string& name, const Labels& labels, double value) {
    out_ << name;
    if (!labels.empty()) {
      out_ << '{';
      for (size_t i = 0; i < labels.size(); ++i) {
        out_ << (i ? "," : "") << labels[i].first << "=\"" << escaped(labels[i].second) << '"';
      }
      out_ << '}';
    }
    out_ << ' ' << number(value) << '\n';
  }
  void counter(const std::string& name, const char* help, double value) {
    family(name, "counter", help);
    sample(name, {}, value);
  }
  void gauge(const std::string& name, const char* help, double value) {
    family(name, "gauge", help);
    sample(name, {}, value);
  }
  void histogram(const std::string& name, const char* help, const Histogram& histogram) {
    family(name, "histogram", help);
    histogram_samples(name, {}, histogram);
  }
  // One histogram's series under `labels` (its family declared before).
  void histogram_samples(const std::string& name, const Labels& labels, const Histogram& histogram) {
    auto with = [&](std::pair<std::string, std::string> extra) {
      Labels all = labels;
      all.push_back(std::move(extra));
      return all;
    };
    uint64_t cumulative = 0;
    for (size_t i = 0; i < histogram.upper_bounds().size(); ++i) {
      cumulative += histogram.counts()[i];
      sample(name + "_bucket", with({"le", number(histogram.upper_bounds()[i])}), static_cast<double>(cumulative));
    }
    sample(name + "_bucket", with({"le", "+Inf"}), static_cast<double>(histogram.count()));
    sample(name + "_sum", labels, histogram.sum());
    sample(name + "_count", labels, static_cast<double>(histogram.count()));
  }
  std::string text() const { return out_.str(); }

 private:
  static std::string escaped(const std::string& value) {
    std::string out;
    for (char c : value) {
      if (c == '\\') out += "\\\\";
      else if (c == '"') out += "\\\"";
      else if (c == '\n') out += "\\n";
      else out += c;
    }
    return out;
  }
  static std::string number(double value) {
    if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
    if (value == std::floor(value) && std::fabs(value) < 1e15) {
      return std::to_string(static_cast<int64_t>(value));
    }
    std::ostringstream text;
    text.precision(17);
    text << value;
    return text.str();
  }
  std::ostringstream out_;
};

}  // namespace

std::string render_metrics(const ControlContext& context) {
  const core::Operations& agent = context.agent;
  const core::AgentStats& stats = agent.stats();
  Exposition out;

  out.family("shoal_messages_received_total", "counter",
             "Peer messages accepted and handled, by type (a BATCH counts as what it carries).");
  for (uint8_t type = 1; type <= protocol::kMaxMessageType; ++type) {
    if (type == static_cast<uint8_t>(protocol::MessageType::kBatch)) continue;
    std::string name(protocol::kMessageTypeNames[type]);
    out.sample("shoal_messages_received_total", {{"type", name}},
               static_cast<double>(stats.received_by_type[type]));
  }
  out.family("shoal_messages_sent_total", "counter", "Peer messages sent, by type.");
  for (uint8_t type = 1; type <= protocol::kMaxMessageType; ++type) {
    if (type == static_cast<uint8_t>(protocol::MessageType::kBatch)) continue;
    std::string name(protocol::kMessageTypeNames[type]);
    out.sample("shoal_messages_sent_total", {{"type", name}}, static_cast<double>(stats.sent_by_type[type]));
  }
  out.family("shoal_messages_dropped_total", "counter",
             "Peer envelopes or messages dropped, by reason (docs: protocol/README.md).");
  for (size_t reason = 0; reason < protocol::kDropReasonCount; ++reason) {
    out.sample("shoal_messages_dropped_total", {{"reason", std::string(protocol::kDropReasonNames[reason])}},
               static_cast<double>(stats.dropped[reason]));
  }
  out.sample("shoal_messages_dropped_total", {{"reason", "RateLimited"}},
             static_cast<double>(context.rate_limited));
  out.counter("shoal_messages_undeliverable_total",
              "Outgoing messages dropped because their peer could not be reached.",
              static_cast<double>(context.transport_drops));
  out.counter("shoal_envelopes_sent_total", "Signed envelopes sent (one signature each).",
              static_cast<double>(stats.envelopes_sent));
  out.counter("shoal_envelopes_received_total", "Envelopes whose signature held.",
              static_cast<double>(stats.envelopes_received));
  out.counter("shoal_handshakes_refused_total", "CURVE handshakes refused (no invitation either way).",
              static_cast<double>(context.handshakes_refused));

  out.family("shoal_placements_total", "counter",
             "As a source: outcomes of placement rounds (bound: a target bound the workload or copy).");
  out.sample("shoal_placements_total", {{"outcome", "bound"}}, static_cast<double>(stats.placements_bound));
  out.counter("shoal_placements_approved_in_advance_total",
              "As a source: of the placements bound, those its one target bound on a CANDIDATE approved "
              "in advance (no READY, no APPROVE).",
              static_cast<double>(stats.placements_approved_in_advance));
  out.family("shoal_rejections_received_total", "counter", "As a source: REJECTs heard, by code.");
  for (const auto& name : protocol::kRejectCodeNames) {
    auto it = stats.rejections_heard.find(std::string(name));
    out.sample("shoal_rejections_received_total", {{"code", std::string(name)}},
               it == stats.rejections_heard.end() ? 0.0 : static_cast<double>(it->second));
  }
  out.family("shoal_candidates_rejected_total", "counter", "As a target: CANDIDATEs refused, by reason.");
  for (const auto& [reason, count] : stats.rejected) {
    out.sample("shoal_candidates_rejected_total", {{"reason", reason}}, static_cast<double>(count));
  }
  out.histogram("shoal_placement_duration_seconds",
                "As a source: from submission to BOUND, for each workload's first placement.",
                stats.placement_latency);

  core::WorkloadCounts counts = agent.workload_counts();
  out.family("shoal_workloads", "gauge", "As a source: workloads submitted here, by phase.");
  for (size_t phase = 0; phase < counts.by_phase.size(); ++phase) {
    out.sample("shoal_workloads", {{"phase", std::string(model::kPhaseNames[phase])}},
               static_cast<double>(counts.by_phase[phase]));
  }

  std::array<size_t, std::size(store::kReservationPhaseNames)> reservations{};
  for (const auto& record : agent.reservations()) ++reservations[static_cast<size_t>(record.phase)];
  out.family("shoal_reservations", "gauge", "As a target: reservations held here, by phase.");
  for (size_t phase = 0; phase < reservations.size(); ++phase) {
    out.sample("shoal_reservations", {{"phase", std::string(store::kReservationPhaseNames[phase])}},
               static_cast<double>(reservations[phase]));
  }
  out.counter("shoal_reservations_expired_total",
              "As a target: reservations released because no APPROVE came within reservationTTL.",
              static_cast<double>(stats.reservations_expired));
  out.counter("shoal_preemptions_total",
              "As a target: approved offers that stopped running work of lower priority to make room.",
              static_cast<double>(stats.preemptions));
  out.counter("shoal_preempted_workloads_total",
              "As a target: workloads stopped by those preemptions, reported Preempted to their sources.",
              static_cast<double>(stats.preempted_victims));
  out.family("shoal_queue_depth", "gauge",
             "As a target: candidates waiting in the local scheduler's queue, by namespace and queue.");
  for (const auto& [key, depth] : agent.queue_depths()) {
    out.sample("shoal_queue_depth", {{"namespace", key.first}, {"queue", key.second}}, static_cast<double>(depth));
  }

  std::array<size_t, std::size(core::kPeerStateNames)> peers{};
  for (const auto& peer : agent.peers()) ++peers[static_cast<size_t>(peer.state)];
  out.family("shoal_peers", "gauge", "Known peers, by state.");
  for (size_t state = 0; state < peers.size(); ++state) {
    out.sample("shoal_peers", {{"state", std::string(core::kPeerStateNames[state])}},
               static_cast<double>(peers[state]));
  }

  out.family("shoal_store_commits_total", "counter",
             "State database batches committed (written: changed rows; empty: none).");
  out.sample("shoal_store_commits_total", {{"result", "written"}}, static_cast<double>(context.commits.written));
  out.sample("shoal_store_commits_total", {{"result", "empty"}}, static_cast<double>(context.commits.empty));
  out.histogram("shoal_store_commit_duration_seconds", "Time inside COMMIT of each written batch.",
                context.commits.written_latency);
  out.gauge("shoal_store_writable", "1 while the state database can be written; 0 while read-only.",
            context.storage_fault.empty() ? 1 : 0);

  if (std::optional<cluster::ApiStats> api = context.cluster.api_stats()) {
    out.family("shoal_backend_api_request_duration_seconds", "histogram",
               "Calls to the backend's API server, by verb (LIST: one page; WATCH: how long it stayed open) "
               "and HTTP status (none: no answer).");
    for (const auto& [key, latency] : api->calls) {
      out.histogram_samples("shoal_backend_api_request_duration_seconds", {{"verb", key.first}, {"code", key.second}},
                            latency);
    }
    out.counter("shoal_backend_api_lists_total", "Whole lists of a collection (at start, and after a 410 Gone).",
                static_cast<double>(api->lists));
    out.counter("shoal_backend_api_watches_resumed_total",
                "Watches that broke on the way and went on from their last resourceVersion.",
                static_cast<double>(api->watches_resumed));
    out.gauge("shoal_backend_api_calls_queued", "Creates, deletes and log reads waiting or backing off.",
              static_cast<double>(api->queued));
    out.counter("shoal_backend_api_creates_refused_total", "Creates the API server refused (4xx).",
                static_cast<double>(api->refused));
    out.counter("shoal_backend_api_creates_given_up_total",
                "Creates given up after their last try without an answer that settles them.",
                static_cast<double>(api->given_up));
  }
  return out.text();
}

Result<nlohmann::json> routing_metric(const ControlContext& context, const std::string& domain,
                                      const std::string& metric) {
  auto value_of = [&](const model::UsageCounts& counts) -> Result<double> {
    if (metric == "workloads") return static_cast<double>(counts.workloads);
    if (metric == "cpu") return static_cast<double>(counts.cpu_milli) / 1000.0;  // cores
    if (metric == "memory") return static_cast<double>(counts.memory_bytes);
    if (metric == "queue") return static_cast<double>(counts.queued);
    return invalid_argument("metric \"" + metric + "\": expected workloads, cpu, memory or queue");
  };
  nlohmann::json out = {{"cluster", context.cluster.spec().name}, {"domain", domain}, {"metric", metric}};
  if (domain == "namespace") {
    nlohmann::json values = nlohmann::json::object();
    for (const auto& [name, counts] : context.agent.namespace_counts()) {
      SHOAL_ASSIGN_OR_RETURN(double value, value_of(counts));
      values[name] = value;
    }
    SHOAL_RETURN_IF_ERROR(value_of({}).status());  // an unknown metric is named even with no namespaces
    out["values"] = values;
  } else if (domain == "cluster") {
    SHOAL_ASSIGN_OR_RETURN(double value, value_of(context.agent.cluster_counts()));
    out["value"] = value;
  } else {
    return invalid_argument("domain \"" + domain + "\": expected namespace or cluster");
  }
  return out;
}

}  // namespace shoal::runtime

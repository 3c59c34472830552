// The control API between shoalctl (or the HTTP endpoint) and shoald: one
// table of commands, and for each a typed request that both sides encode
// and decode through the same field list. shoald dispatches on the table
// (agent/runtime/control_handlers.cc); shoalctl calls through client.h.
//
// On the wire a request is one JSON object, {"command": <name>, <fields>};
// a reply is {"ok": true, ...} or {"ok": false, "code": <ErrorCode name>,
// "error": <one line>}. A request's fields are decoded by name: a missing
// required field or a wrong type is refused naming the field; fields a
// command does not know are ignored, so a newer client still talks to an
// older agent. protocol/README.md ("Control API") lists the replies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace shoal::control {

// The most one "submit" request may carry. The agent reads a request on its
// loop, between peers' messages and timers, so what one request can cost
// is bounded: about 0.2 s of parsing and submitting on a 2-core host.
// shoalctl sends a larger file in parts of this size (each its own request).
inline constexpr size_t kMaxSubmitBytes = 512 << 10;
inline constexpr size_t kMaxWorkloadsPerSubmit = 100;

enum class Command : uint8_t {
  kIdentity,
  kInviteCreate,
  kInviteAccept,
  kInviteList,
  kInviteRevoke,
  kDescribePeer,
  kPeers,
  kSubmit,
  kGetWorkloads,
  kGetReservations,
  kGetClusters,
  kNominate,
  kPatchWorkload,
  kDeleteWorkload,
  kLogs,
  kDescribeWorkload,
  kStatus,
  kWatchWorkloads,
  kBackup,
  kMetrics,
  kRoutingMetrics,
  kQuotaSet,
  kQuotaDelete,
  kGetQuotas,
  kPeerForget,
};

// kRead: answered while the agent cannot write its state database.
enum class Access : uint8_t { kRead, kWrite };
// kStream: the first reply starts a stream of replies on the same
// connection (the client uses a DEALER socket).
enum class Replies : uint8_t { kOne, kStream };

struct CommandInfo {
  Command command;
  std::string_view name;
  Access access;
  Replies replies;
};

// Every command, in the order of the enum.
std::span<const CommandInfo> commands();
const CommandInfo& info(Command command);
std::optional<Command> command_named(std::string_view name);

// A request's fields, visited in one order by the encoder (shoalctl) and
// the decoder (shoald). `text`, `texts` and `object` are required; the
// rest are optional and keep the member's value when absent.
class FieldVisitor {
 public:
  virtual ~FieldVisitor() = default;
  virtual void text(const char* key, std::string& value) = 0;
  virtual void optional_text(const char* key, std::string& value) = 0;
  virtual void texts(const char* key, std::vector<std::string>& value) = 0;
  virtual void count(const char* key, int64_t& value, int64_t low, int64_t high) = 0;
  virtual void flag(const char* key, bool& value) = 0;
  virtual void object(const char* key, nlohmann::json& value) = 0;
  virtual void optional_list(const char* key, nlohmann::json& value) = 0;  // null when absent
};

// The typed requests: each names its command and lists its fields.
struct NoFields {
  void fields(FieldVisitor&) {}
};
struct IdentityRequest : NoFields {
  static constexpr Command kCommand = Command::kIdentity;
};
// Limits are the texts an operator typed ("4", "16Gi", "720h", "never"),
// parsed by the agent, which names the field of a bad one.
struct InviteCreateRequest {
  static constexpr Command kCommand = Command::kInviteCreate;
  std::string to{};  // the invitee's id card
  std::vector<std::string> namespaces{};
  std::string cpu{}, memory{}, gpu{}, workloads{}, expires{}, not_before{};
  bool preemptible = false;   // the invitee's work may be stopped for ours
  std::string max_priority{};  // the invitee's priority ceiling; "": none
  void fields(FieldVisitor& f) {
    f.text("to", to);
    f.texts("namespaces", namespaces);
    f.optional_text("cpu", cpu);
    f.optional_text("memory", memory);
    f.optional_text("gpu", gpu);
    f.optional_text("workloads", workloads);
    f.optional_text("expires", expires);
    f.optional_text("notBefore", not_before);
    f.flag("preemptible", preemptible);
    f.optional_text("maxPriority", max_priority);
  }
};
struct InviteAcceptRequest {
  static constexpr Command kCommand = Command::kInviteAccept;
  std::string token{};
  void fields(FieldVisitor& f) { f.text("token", token); }
};
struct InviteListRequest : NoFields {
  static constexpr Command kCommand = Command::kInviteList;
};
struct InviteRevokeRequest {
  static constexpr Command kCommand = Command::kInviteRevoke;
  std::string id{};
  bool evict = false;
  void fields(FieldVisitor& f) {
    f.text("id", id);
    f.flag("evict", evict);
  }
};
struct DescribePeerRequest {
  static constexpr Command kCommand = Command::kDescribePeer;
  std::string name{};  // a cluster name or a peer id
  void fields(FieldVisitor& f) { f.text("name", name); }
};
struct PeersRequest : NoFields {
  static constexpr Command kCommand = Command::kPeers;
};
// One of the two: the manifest's YAML text, or its documents in JSON form
// (model::parse_workload_list), which shoalctl sends: the agent reads them
// in half the time, on the loop every peer waits on. Either holds at most
// kMaxWorkloadsPerSubmit workloads; the YAML at most kMaxSubmitBytes.
struct SubmitRequest {
  static constexpr Command kCommand = Command::kSubmit;
  std::string manifest{};
  nlohmann::json workloads{};  // a list of Workload documents, or null
  void fields(FieldVisitor& f) {
    f.optional_text("manifest", manifest);
    f.optional_list("workloads", workloads);
  }
};
struct GetWorkloadsRequest {
  static constexpr Command kCommand = Command::kGetWorkloads;
  // The default page matches kubectl's --chunk-size; the largest keeps one
  // answer (and the loop iteration that builds it) short.
  static constexpr int64_t kDefaultPage = 500;
  static constexpr int64_t kLargestPage = 5000;
  std::string namespace_name{};  // "": all
  std::string after{};           // the previous page's "continue"
  int64_t limit = kDefaultPage;
  void fields(FieldVisitor& f) {
    f.optional_text("namespace", namespace_name);
    f.optional_text("continue", after);
    f.count("limit", limit, 1, kLargestPage);
  }
};
struct GetReservationsRequest : NoFields {
  static constexpr Command kCommand = Command::kGetReservations;
};
struct GetClustersRequest {
  static constexpr Command kCommand = Command::kGetClusters;
  std::string namespace_name = "default";
  std::string queue = "default";
  void fields(FieldVisitor& f) {
    f.optional_text("namespace", namespace_name);
    f.optional_text("queue", queue);
  }
};
struct NominateRequest {
  static constexpr Command kCommand = Command::kNominate;
  std::string namespace_name{}, name{};
  std::vector<std::string> clusters{};
  void fields(FieldVisitor& f) {
    f.text("namespace", namespace_name);
    f.text("name", name);
    f.texts("clusters", clusters);
  }
};
struct PatchWorkloadRequest {
  static constexpr Command kCommand = Command::kPatchWorkload;
  std::string namespace_name{}, name{};
  nlohmann::json patch{};  // a merge patch of the manifest: {"spec": {"priority": N}}
  void fields(FieldVisitor& f) {
    f.text("namespace", namespace_name);
    f.text("name", name);
    f.object("patch", patch);
  }
};
struct DeleteWorkloadRequest {
  static constexpr Command kCommand = Command::kDeleteWorkload;
  std::string namespace_name{}, name{};
  std::string from{};  // a source's cluster: stop the copy run here for it
  // Forget it at once, without waiting for its clusters to confirm
  // (Operations::force_delete_workload); not with `from`.
  bool force = false;
  void fields(FieldVisitor& f) {
    f.text("namespace", namespace_name);
    f.text("name", name);
    f.optional_text("from", from);
    f.flag("force", force);
  }
};
struct LogsRequest {
  static constexpr Command kCommand = Command::kLogs;
  static constexpr int64_t kFromEnd = -(int64_t{1} << 40);  // offset: the last `limit` bytes
  std::string namespace_name{}, name{};
  int64_t copy = 0;     // a group's copy; 0: the first
  int64_t replica = 0;
  int64_t offset = kFromEnd;  // < 0: that many bytes before the end
  int64_t limit = 256 << 10;
  void fields(FieldVisitor& f) {
    f.text("namespace", namespace_name);
    f.text("name", name);
    f.count("copy", copy, 0, 1000);
    f.count("replica", replica, 0, 10000);
    f.count("offset", offset, kFromEnd, int64_t{1} << 50);
    f.count("limit", limit, 1, 1 << 20);
  }
};
struct DescribeWorkloadRequest {
  static constexpr Command kCommand = Command::kDescribeWorkload;
  std::string namespace_name{}, name{};
  void fields(FieldVisitor& f) {
    f.text("namespace", namespace_name);
    f.text("name", name);
  }
};
struct StatusRequest : NoFields {
  static constexpr Command kCommand = Command::kStatus;
};
struct WatchWorkloadsRequest {
  static constexpr Command kCommand = Command::kWatchWorkloads;
  std::string namespace_name{};  // "": all
  void fields(FieldVisitor& f) { f.optional_text("namespace", namespace_name); }
};
struct BackupRequest {
  static constexpr Command kCommand = Command::kBackup;
  std::string path{};  // absolute, on the agent's host
  void fields(FieldVisitor& f) { f.text("path", path); }
};
struct MetricsRequest : NoFields {
  static constexpr Command kCommand = Command::kMetrics;
};
struct RoutingMetricsRequest {
  static constexpr Command kCommand = Command::kRoutingMetrics;
  std::string domain{}, metric{};
  void fields(FieldVisitor& f) {
    f.text("domain", domain);
    f.text("metric", metric);
  }
};

// A federation-wide quota (model/quota.h): set replaces the namespace's.
struct QuotaSetRequest {
  static constexpr Command kCommand = Command::kQuotaSet;
  std::string namespace_name{};
  std::string cpu{}, memory{}, gpu{}, workloads{};  // "": no limit on it; at least one
  void fields(FieldVisitor& f) {
    f.text("namespace", namespace_name);
    f.optional_text("cpu", cpu);
    f.optional_text("memory", memory);
    f.optional_text("gpu", gpu);
    f.optional_text("workloads", workloads);
  }
};
struct QuotaDeleteRequest {
  static constexpr Command kCommand = Command::kQuotaDelete;
  std::string namespace_name{};
  void fields(FieldVisitor& f) { f.text("namespace", namespace_name); }
};
struct GetQuotasRequest : NoFields {
  static constexpr Command kCommand = Command::kGetQuotas;
};
// Operations::forget_peer; the reply says what it did.
struct PeerForgetRequest {
  static constexpr Command kCommand = Command::kPeerForget;
  std::string name{};  // a cluster name or a peer id
  void fields(FieldVisitor& f) { f.text("name", name); }
};

// {"command": <name>, <fields>}.
nlohmann::json encode_fields(Command command, const std::function<void(FieldVisitor&)>& visit);
template <class Request>
nlohmann::json encode(const Request& request) {
  Request copy = request;  // fields() visits members by reference
  return encode_fields(Request::kCommand, [&](FieldVisitor& f) { copy.fields(f); });
}

// The fields of `body` read into a request; the first bad one is refused
// naming it.
Status decode_fields(const nlohmann::json& body, const std::function<void(FieldVisitor&)>& visit);
template <class Request>
Result<Request> decode(const nlohmann::json& body) {
  Request request;
  SHOAL_RETURN_IF_ERROR(decode_fields(body, [&](FieldVisitor& f) { request.fields(f); }));
  return request;
}

// Every request type, in the order of the Command enum.
using AllRequests =
    std::tuple<IdentityRequest, InviteCreateRequest, InviteAcceptRequest, InviteListRequest,
               InviteRevokeRequest, DescribePeerRequest, PeersRequest, SubmitRequest,
               GetWorkloadsRequest, GetReservationsRequest, GetClustersRequest, NominateRequest,
               PatchWorkloadRequest, DeleteWorkloadRequest, LogsRequest, DescribeWorkloadRequest,
               StatusRequest, WatchWorkloadsRequest, BackupRequest, MetricsRequest,
               RoutingMetricsRequest, QuotaSetRequest, QuotaDeleteRequest, GetQuotasRequest,
               PeerForgetRequest>;

// `body` decoded as the request its "command" names: ok, or the first
// field (or the command) that is wrong, named.
Status check_request(const nlohmann::json& body);

// A request's text as JSON. Refused when it is not JSON, or when it nests
// deeper than kMaxRequestDepth: decoding copies fields, and a copy of a
// tree recurses as deep as the tree (a request of nothing but brackets
// would overflow the agent's stack).
inline constexpr int kMaxRequestDepth = 64;
Result<nlohmann::json> parse_request(std::string_view text);

// Whether `request` only reads: what a read-only agent (its state database
// cannot be written) still answers.
bool is_read_only_command(const nlohmann::json& request);

}  // namespace shoal::control

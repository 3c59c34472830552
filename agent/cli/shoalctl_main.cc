// shoalctl: the operator's tool. Every command but `identity` talks to the
// agent through its control socket in the data dir.
//
// Exit codes: 0 ok, 1 runtime error (agent down, internal), 2 bad usage or
// bad input (with a one-line message naming the field).
#include <filesystem>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <thread>
#include <sstream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "agent/control/client.h"
#include "agent/control/commands.h"
#include "agent/control/data_dir.h"
#include "agent/cli/place_command.h"
#include "agent/cli/read_file.h"
#include "agent/cli/schedule_command.h"
#include "agent/cli/output.h"
#include "agent/cli/table.h"
#include "crypto/id_card.h"
#include "crypto/identity.h"
#include "model/manifest.h"

namespace shoal::cli {
namespace {

using control::call;

using nlohmann::json;

int fail(const Status& status) {
  std::cerr << "shoalctl: " << status.message() << "\n";
  switch (status.code()) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kAlreadyExists:
    case ErrorCode::kNotFound:
      return 2;
    default:
      return 1;
  }
}


std::string age_since(const std::string& rfc3339) {
  std::tm tm{};
  if (rfc3339.size() < 19 || !strptime(rfc3339.c_str(), "%Y-%m-%dT%H:%M:%S", &tm)) return "?";
  return human_duration(static_cast<long long>(std::time(nullptr) - timegm(&tm)));
}

std::string join(const json& list, const char* separator = ",") {
  std::string out;
  for (const auto& item : list) out += (out.empty() ? "" : separator) + item.get<std::string>();
  return out.empty() ? "-" : out;
}

struct Options {
  std::string data_dir;
  std::string output;
};

int cmd_identity(const Options& o) {
  // Offline: the card is built from the data dir, so it works before `shoald run`.
  auto file = control::read_agent_name(o.data_dir);
  if (!file.is_ok()) return fail(file.status());
  if (Status s = crypto::initialize(); !s.is_ok()) return fail(s);
  auto identity = crypto::Identity::load(control::identity_path(o.data_dir));
  if (!identity.is_ok()) return fail(identity.status());
  std::cout << crypto::IdCard{file->cluster, file->org, identity->public_key(), file->listen}
                   .to_string()
            << "\n";
  return 0;
}

struct InviteCreateArguments {
  std::string to, out_file, cpu, memory, gpu, workloads, expires, not_before;
  std::vector<std::string> namespaces;
};

int cmd_invite_create(const Options& o, const InviteCreateArguments& a) {
  auto reply = call(o.data_dir, control::InviteCreateRequest{.to = a.to,
                                                              .namespaces = a.namespaces,
                                                              .cpu = a.cpu,
                                                              .memory = a.memory,
                                                              .gpu = a.gpu,
                                                              .workloads = a.workloads,
                                                              .expires = a.expires,
                                                              .not_before = a.not_before});
  const std::string& out_file = a.out_file;
  if (!reply.is_ok()) return fail(reply.status());
  std::string token = (*reply)["token"];
  if (out_file.empty()) {
    std::cout << token << "\n";
  } else {
    std::ofstream out(out_file);
    out << token << "\n";
    if (!out) return fail(internal_error("-o " + out_file + ": cannot write"));
  }
  return 0;
}

int cmd_invite_accept(const Options& o, const std::string& token_or_file) {
  std::string token = token_or_file;
  if (token_or_file.rfind("shoal-invite:", 0) != 0) {
    auto text = read_input_file(token_or_file, "TOKEN_OR_FILE");
    if (!text.is_ok()) return fail(text.status());
    token = *text;
  }
  auto reply = call(o.data_dir, control::InviteAcceptRequest{.token = token});
  if (!reply.is_ok()) return fail(reply.status());
  std::cout << "accepted invitation from " << (*reply)["cluster"].get<std::string>() << "\n";
  return 0;
}

int cmd_invite_list(const Options& o) {
  auto reply = call(o.data_dir, control::InviteListRequest{});
  if (!reply.is_ok()) return fail(reply.status());
  if (print_structured(o.output, json{{"items", (*reply)["items"]}},
                       [](const json& item) { return "invitation/" + item["id"].get<std::string>(); })) {
    return 0;
  }
  bool wide = o.output == "wide";
  std::vector<std::string> header = {"ID", "DIRECTION", "PEER", "NAMESPACES", "STATE", "LIMITS", "USAGE", "EXPIRES"};
  if (wide) header.insert(header.end(), {"NOT BEFORE", "PEER ID"});
  Table table(header);
  for (const auto& item : (*reply)["items"]) {
    std::string limits;
    for (const auto& [key, value] : item["limits"].items()) {
      limits += (limits.empty() ? "" : ",") + key + "=" +
                (value.is_string() ? value.get<std::string>() : value.dump());
    }
    const json& usage = item["usage"];
    std::string used = "cpu=" + usage["cpu"].get<std::string>() + ",memory=" +
                       usage["memory"].get<std::string>() + ",workloads=" + usage["workloads"].dump();
    std::vector<std::string> row = {item["id"], item["direction"], item["peer"], join(item["namespaces"]),
                                    item["state"], limits.empty() ? "-" : limits, used, item["expires"]};
    if (wide) {
      std::string not_before = item.value("notBefore", "");
      row.push_back(not_before.empty() ? "-" : not_before);
      row.push_back(item.value("peerId", "-"));
    }
    table.add(row);
  }
  table.print(std::cout);
  return 0;
}

int cmd_invite_revoke(const Options& o, const std::string& id, bool evict) {
  auto reply = call(o.data_dir, control::InviteRevokeRequest{.id = id, .evict = evict});
  if (!reply.is_ok()) return fail(reply.status());
  std::cout << "invitation " << id << " revoked" << (evict ? "; its workloads here are being stopped" : "")
            << "\n";
  return 0;
}

int cmd_describe_peer(const Options& o, const std::string& name) {
  auto reply = call(o.data_dir, control::DescribePeerRequest{.name = name});
  if (!reply.is_ok()) return fail(reply.status());
  json peer = *reply;
  peer.erase("ok");
  if (print_structured(o.output, peer, {})) return 0;
  std::cout << "Cluster:    " << peer["cluster"].get<std::string>() << "\n"
            << "Org:        " << peer["org"].get<std::string>() << "\n"
            << "Id:         " << peer["id"].get<std::string>() << "\n"
            << "Endpoint:   " << peer["endpoint"].get<std::string>() << "\n"
            << "State:      " << peer["state"].get<std::string>()
            << (peer["reason"] == "" ? "" : " (" + peer["reason"].get<std::string>() + ")") << "\n"
            << "Last seen:  " << (peer["lastSeen"] == "" ? "never" : peer["lastSeen"].get<std::string>()) << "\n"
            << "Lease:      "
            << (peer.value("leaseUntil", "") == ""
                    ? std::string("none (its work here is not fenced)")
                    : "its work here may run until " + peer["leaseUntil"].get<std::string>() +
                          " unless renewed")
            << "\n"
            << "We offer:   " << join(peer["namespacesOffered"]) << "\n"
            << "They offer: " << join(peer["namespacesAccepted"]) << "\n"
            << "Invitations:\n";
  for (const auto& item : peer["invitations"]) {
    std::cout << "  " << item["id"].get<std::string>() << "  " << item["direction"].get<std::string>()
              << "  " << item["state"].get<std::string>() << "  " << join(item["namespaces"])
              << "  expires " << item["expires"].get<std::string>() << "\n";
  }
  std::cout << "Events:\n";
  for (const auto& event : peer["events"]) {
    std::cout << "  " << event["at"].get<std::string>() << "  " << event["text"].get<std::string>() << "\n";
  }
  return 0;
}

int cmd_peers(const Options& o) {
  auto reply = call(o.data_dir, control::PeersRequest{});
  if (!reply.is_ok()) return fail(reply.status());
  if (print_structured(o.output, json{{"items", (*reply)["items"]}},
                       [](const json& peer) { return "peer/" + peer["cluster"].get<std::string>(); })) {
    return 0;
  }
  bool wide = o.output == "wide";
  std::vector<std::string> header = {"CLUSTER", "ORG", "STATE", "LAST SEEN", "WE OFFER", "THEY OFFER",
                                     "WORKLOADS", "ENDPOINT"};
  if (wide) header.insert(header.end(), {"FREE CPU", "FREE MEMORY", "LEASE UNTIL", "REASON"});
  Table table(header);
  for (const auto& peer : (*reply)["items"]) {
    std::string seen = peer["lastSeen"];
    std::vector<std::string> row = {peer["cluster"], peer["org"], peer["state"],
                                    seen.empty() ? "never" : age_since(seen) + " ago",
                                    join(peer["namespacesOffered"]), join(peer["namespacesAccepted"]),
                                    std::to_string(peer["workloads"].get<int>()), peer["endpoint"]};
    if (wide) {
      // What it advertises to us, per namespace it invited us into.
      std::string cpu, memory;
      json capacity = peer.value("capacity", json::object());
      for (const auto& [name, ns] : capacity.items()) {
        cpu += (cpu.empty() ? "" : ",") + name + "=" + ns["free"].value("cpu", "?");
        memory += (memory.empty() ? "" : ",") + name + "=" + ns["free"].value("memory", "?");
      }
      std::string lease = peer.value("leaseUntil", "");
      std::string reason = peer.value("reason", "");
      row.insert(row.end(), {cpu.empty() ? "-" : cpu, memory.empty() ? "-" : memory,
                             lease.empty() ? "-" : lease, reason.empty() ? "-" : reason});
    }
    table.add(row);
  }
  table.print(std::cout);
  return 0;
}

// The file is checked whole first, then sent in parts the agent takes in
// one request each (control::kMaxSubmitBytes, kMaxWorkloadsPerSubmit): each
// part is submitted or refused as a whole, like kubectl's objects.
int cmd_submit(const Options& o, const std::string& file) {
  auto text = read_input_file(file, "-f");
  if (!text.is_ok()) return fail(text.status());
  // Refused here, before the agent spends anything on it; the agent checks
  // again on its own (the control socket is an API, not only shoalctl's).
  if (auto parsed = model::parse_workloads(*text); !parsed.is_ok()) {
    return fail(invalid_argument("-f " + file + ": " + parsed.status().message()));
  }
  auto parts = model::split_manifest(*text, control::kMaxWorkloadsPerSubmit, control::kMaxSubmitBytes);
  if (!parts.is_ok()) return fail(invalid_argument("-f " + file + ": " + parts.status().message()));
  for (const std::string& part : *parts) {
    auto reply = call(o.data_dir, control::SubmitRequest{.manifest = part});
    if (!reply.is_ok()) return fail(reply.status());
    for (const auto& item : (*reply)["items"]) {
      std::cout << "workload " << item["namespace"].get<std::string>() << "/"
                << item["name"].get<std::string>() << " submitted (uid "
                << item["uid"].get<std::string>() << ")\n";
    }
  }
  return 0;
}

struct ListPaging {
  int64_t limit = 0;        // at most this many (0: all)
  int64_t chunk_size = 500;  // per request to the agent
  std::string continue_after;
};

int cmd_get_workloads(const Options& o, const std::string& namespace_name, bool all,
                      const ListPaging& paging) {
  // Fetched in chunks: each is one short request, so the agent serves its
  // peers and other requests between them however long the list.
  json items = json::array();
  std::string next = paging.continue_after;
  do {
    int64_t want = paging.chunk_size;
    if (paging.limit > 0) want = std::min<int64_t>(want, paging.limit - std::ssize(items));
    auto reply = call(o.data_dir, control::GetWorkloadsRequest{
                                      .namespace_name = all ? "" : namespace_name, .after = next, .limit = want});
    if (!reply.is_ok()) return fail(reply.status());
    for (auto& item : (*reply)["items"]) items.push_back(std::move(item));
    next = reply->value("continue", "");
  } while (!next.empty() && (paging.limit == 0 || std::ssize(items) < paging.limit));
  json document{{"items", items}};
  if (!next.empty()) document["continue"] = next;
  if (print_structured(o.output, document, [](const json& item) {
        return "workload/" + item["metadata"]["namespace"].get<std::string>() + "/" +
               item["metadata"]["name"].get<std::string>();
      })) {
    return 0;
  }
  bool wide = o.output == "wide";
  std::vector<std::string> header = {"NAMESPACE", "NAME", "PHASE", "CLUSTER", "AGE"};
  if (wide) header.insert(header.end(), {"NODES", "EPOCH", "RESTARTS", "DISRUPTIONS", "UID", "REASON"});
  Table table(header);
  for (const auto& item : items) {
    const auto& status = item["status"];
    std::string cluster = status["cluster"];
    std::vector<std::string> row = {item["metadata"]["namespace"], item["metadata"]["name"],
                                    status["phase"], cluster.empty() ? "-" : cluster,
                                    age_since(item["metadata"]["creationTimestamp"])};
    if (wide) {
      std::string reason = status["reason"];
      row.insert(row.end(), {join(status["nodes"]), std::to_string(status["epoch"].get<int>()),
                             std::to_string(status.value("restarts", 0)),
                             std::to_string(status.value("disruptions", 0)), item["metadata"]["uid"],
                             reason.empty() ? "-" : reason});
    }
    table.add(row);
  }
  table.print(std::cout);
  if (!next.empty()) {
    std::cerr << "more workloads follow: add --continue " << next << "\n";
  }
  return 0;
}

// get workloads -w: the current list, then every change as the agent
// pushes it (control::WorkloadWatch), until
// the agent stops or goes silent. -o json prints one workload per line.
int cmd_watch_workloads(const Options& o, const std::string& namespace_name, bool all) {
  auto watch = control::WorkloadWatch::open(
      o.data_dir, control::WatchWorkloadsRequest{.namespace_name = all ? "" : namespace_name});
  if (!watch.is_ok()) return fail(watch.status());
  bool as_json = o.output == "json";
  auto print = [&](const json& item) {
    if (as_json) {
      std::cout << item.dump() << std::endl;
      return;
    }
    const json& status = item["status"];
    std::string cluster = status["cluster"];
    char line[256];
    std::snprintf(line, sizeof line, "%-16s %-32s %-10s %-14s %s", item["metadata"]["namespace"].get<std::string>().c_str(),
                  item["metadata"]["name"].get<std::string>().c_str(), status["phase"].get<std::string>().c_str(),
                  cluster.empty() ? "-" : cluster.c_str(), age_since(item["metadata"]["creationTimestamp"]).c_str());
    std::cout << line << std::endl;
  };
  // Subscribed first, then listed: nothing that changes in between is missed
  // (it may show twice).
  if (!as_json) print({{"metadata", {{"namespace", "NAMESPACE"}, {"name", "NAME"}, {"creationTimestamp", ""}}},
                       {"status", {{"phase", "PHASE"}, {"cluster", "CLUSTER"}}}});
  std::string next;
  do {
    auto reply = call(o.data_dir, control::GetWorkloadsRequest{
                                      .namespace_name = all ? "" : namespace_name, .after = next});
    if (!reply.is_ok()) return fail(reply.status());
    for (const auto& item : (*reply)["items"]) print(item);
    next = reply->value("continue", "");
  } while (!next.empty());
  // The agent sends at least a keepalive every 10 s: three missed, it is gone.
  for (;;) {
    auto changes = watch->next(3 * std::chrono::seconds(10));
    if (!changes.is_ok()) return fail(changes.status());
    if (!*changes) return fail(Status(ErrorCode::kUnavailable, "the agent stopped answering the watch"));
    for (const auto& item : **changes) print(item);
  }
}

int cmd_get_reservations(const Options& o) {
  auto reply = call(o.data_dir, control::GetReservationsRequest{});
  if (!reply.is_ok()) return fail(reply.status());
  if (print_structured(o.output, json{{"items", (*reply)["items"]}}, [](const json& r) {
        return "reservation/" + r["namespace"].get<std::string>() + "/" + r["name"].get<std::string>();
      })) {
    return 0;
  }
  bool wide = o.output == "wide";
  std::vector<std::string> header = {"NAMESPACE", "NAME", "FROM", "PHASE", "EPOCH", "NODES", "UID", "MESSAGE"};
  if (wide) header.insert(header.end(), {"STARTED", "FINISHED", "EXIT", "EXPIRES"});
  Table table(header);
  auto or_dash = [](const std::string& text) { return text.empty() ? std::string("-") : text; };
  for (const auto& r : (*reply)["items"]) {
    std::vector<std::string> row = {r["namespace"], r["name"], r.value("sourceCluster", "?"), r["phase"],
                                    std::to_string(r["epoch"].get<int>()), join(r["nodes"]), r["uid"],
                                    or_dash(r.value("message", ""))};
    if (wide) {
      row.insert(row.end(), {or_dash(r.value("startedAt", "")), or_dash(r.value("finishedAt", "")),
                             std::to_string(r.value("exitCode", 0)), or_dash(r.value("expiresAt", ""))});
    }
    table.add(row);
  }
  table.print(std::cout);
  return 0;
}

std::string labels_text(const json& labels) {
  std::string out;
  for (const auto& [key, value] : labels.items()) out += (out.empty() ? "" : ",") + key + "=" + value.get<std::string>();
  return out.empty() ? "-" : out;
}

int cmd_get_clusters(const Options& o, const std::string& namespace_name, const std::string& queue) {
  auto reply = call(o.data_dir, control::GetClustersRequest{.namespace_name = namespace_name, .queue = queue});
  if (!reply.is_ok()) return fail(reply.status());
  if (print_structured(o.output,
                       json{{"namespace", (*reply)["namespace"]}, {"queue", (*reply)["queue"]},
                            {"items", (*reply)["items"]}},
                       [](const json& c) { return "cluster/" + c["cluster"].get<std::string>(); })) {
    return 0;
  }
  bool wide = o.output == "wide";
  std::vector<std::string> columns = {"CLUSTER", "ORG", "STATE", "FREE CPU", "ALLOCATABLE CPU",
                                      "WORKLOADS", "QUEUED", "LABELS"};
  if (wide) {
    for (const char* extra : {"CLAIMS", "LARGEST NODE CPU", "CLUSTER WORKLOADS", "OURS", "NOT A CANDIDATE"}) {
      columns.push_back(extra);
    }
  }
  Table table(columns);
  for (const auto& c : (*reply)["items"]) {
    const json& in_namespace = c["counts"]["namespace"];
    std::string state = c["state"].get<std::string>();
    std::vector<std::string> row = {c["cluster"], c["org"], state, c["free"]["cpu"], c["allocatable"]["cpu"],
                                    std::to_string(in_namespace["workloads"].get<int64_t>()),
                                    std::to_string(in_namespace["queued"].get<int64_t>()),
                                    labels_text(c["labels"])};
    if (wide) {
      std::string unavailable = c.value("unavailable", "");
      row.push_back(labels_text(c["claims"]));
      row.push_back(c["largestFreeNode"]["cpu"]);
      row.push_back(std::to_string(c["counts"]["cluster"]["workloads"].get<int64_t>()));
      row.push_back(std::to_string(c["sourceWorkloads"].get<int64_t>()));
      row.push_back(unavailable.empty() ? "-" : unavailable);
    }
    table.add(row);
  }
  table.print(std::cout);
  return 0;
}

struct WorkloadName {
  std::string namespace_name, name;
};

// NS/NAME split, or the one-line usage error.
Result<WorkloadName> workload_name(const std::string& target) {
  size_t slash = target.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == target.size()) {
    return invalid_argument("NS/NAME: expected namespace/name, got \"" + target + "\"");
  }
  return WorkloadName{target.substr(0, slash), target.substr(slash + 1)};
}

int cmd_nominate(const Options& o, const std::string& target, const std::vector<std::string>& clusters) {
  auto workload = workload_name(target);
  if (!workload.is_ok()) return fail(workload.status());
  auto reply = call(o.data_dir, control::NominateRequest{.namespace_name = workload->namespace_name,
                                                         .name = workload->name,
                                                         .clusters = clusters});
  if (!reply.is_ok()) return fail(reply.status());
  std::cout << "workload " << target << " nominated to " << clusters.size() << " cluster(s)\n";
  return 0;
}

struct PatchArguments {
  std::string target;
  std::optional<int64_t> priority;
  std::string patch;  // a JSON merge patch of the manifest
};

// The one field that may change after submit is spec.priority; the agent
// refuses any other, naming it.
int cmd_patch_workload(const Options& o, const PatchArguments& a) {
  auto workload = workload_name(a.target);
  if (!workload.is_ok()) return fail(workload.status());
  json patch = json::object();
  if (!a.patch.empty()) {
    patch = json::parse(a.patch, nullptr, /*allow_exceptions=*/false);
    if (patch.is_discarded() || !patch.is_object()) {
      return fail(shoal::invalid_argument("-p/--patch: expected a JSON object like '{\"spec\": {\"priority\": 10}}'"));
    }
  }
  if (a.priority) patch["spec"]["priority"] = *a.priority;
  if (patch.empty()) return fail(shoal::invalid_argument("patch: give --priority N or -p JSON"));
  auto reply = call(o.data_dir, control::PatchWorkloadRequest{.namespace_name = workload->namespace_name,
                                                              .name = workload->name,
                                                              .patch = patch});
  if (!reply.is_ok()) return fail(reply.status());
  std::cout << "workload " << a.target << " patched: priority " << (*reply).value("priority", 0)
            << " (its targets reorder what they queue)\n";
  return 0;
}

int cmd_delete_workload(const Options& o, const std::string& target, const std::string& from) {
  auto workload = workload_name(target);
  if (!workload.is_ok()) return fail(workload.status());
  auto reply = call(o.data_dir, control::DeleteWorkloadRequest{
                                    .namespace_name = workload->namespace_name, .name = workload->name, .from = from});
  if (!reply.is_ok()) return fail(reply.status());
  if ((*reply).value("hosted", false)) {
    std::cout << "workload " << target << " stopped here; its source sees it Failed (DeletedAtTarget)\n";
  } else {
    std::cout << "workload " << target << " deleting (its copies are stopped, then it is forgotten)\n";
  }
  return 0;
}

struct LogsArguments {
  std::string target;
  int copy = 0;
  int replica = 0;
  bool follow = false;
  int64_t tail_lines = -1;  // -1: everything kept
};

// Prints a replica's output in chunks the agent bounds; with -f, goes on
// reading as the replica writes until it ends (the agent says when).
int cmd_logs(const Options& o, const LogsArguments& a) {
  auto workload = workload_name(a.target);
  if (!workload.is_ok()) return fail(workload.status());
  control::LogsRequest request{.namespace_name = workload->namespace_name,
                               .name = workload->name,
                               .copy = a.copy,
                               .replica = a.replica};
  // Everything kept, or the last --tail lines out of the last 64 KiB: one
  // chunk, whether read here or over the peer link.
  constexpr int64_t kTailWindow = 64 << 10;
  int64_t offset = a.tail_lines >= 0 ? -kTailWindow : 0;
  // A cluster that reads output from a remote API (a pod's, through its
  // API server) answers "pending" while it reads; it is asked again.
  constexpr auto kPendingLimit = std::chrono::seconds(10);
  auto pending_since = std::chrono::steady_clock::time_point::max();
  bool first = true;
  for (;;) {
    request.offset = offset;
    request.limit = kTailWindow;
    auto reply = call(o.data_dir, request);
    if (!reply.is_ok()) return fail(reply.status());
    if (reply->value("pending", false)) {
      auto now = std::chrono::steady_clock::now();
      pending_since = std::min(pending_since, now);
      if (now - pending_since > kPendingLimit) {
        return fail(Status(ErrorCode::kUnavailable,
                           "logs: the workload's cluster did not read its output within 10 s"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    pending_since = std::chrono::steady_clock::time_point::max();
    std::string data = (*reply)["data"].get<std::string>();
    if (first && a.tail_lines >= 0) {
      // The last N lines: back from the end (past the final newline) to the
      // N-th newline before it.
      size_t start = 0;
      int64_t seen = 0;
      for (size_t i = data.size() > 0 ? data.size() - 1 : 0; i-- > 0;) {
        if (data[i] == '\n' && ++seen == a.tail_lines) {
          start = i + 1;
          break;
        }
      }
      data = a.tail_lines == 0 ? "" : data.substr(start);
    }
    first = false;
    std::cout << data << std::flush;
    offset = (*reply)["nextOffset"].get<int64_t>();
    if (!data.empty()) continue;  // more may be there already
    if (!a.follow || (*reply)["finished"].get<bool>()) return 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));  // polled: the agent pushes no output
  }
}

int cmd_describe_workload(const Options& o, const std::string& target) {
  auto workload = workload_name(target);
  if (!workload.is_ok()) return fail(workload.status());
  auto reply = call(o.data_dir, control::DescribeWorkloadRequest{.namespace_name = workload->namespace_name,
                                                                 .name = workload->name});
  if (!reply.is_ok()) return fail(reply.status());
  const json& w = *reply;
  if (o.output == "json" || o.output == "yaml") {
    json copy = w;
    copy.erase("ok");
    print_structured(o.output, copy, {});
    return 0;
  }
  const auto& spec = w["spec"];
  const auto& status = w["status"];
  std::cout << "Name:       " << w["metadata"]["name"].get<std::string>() << "\n"
            << "Namespace:  " << w["metadata"]["namespace"].get<std::string>() << "\n"
            << "UID:        " << w["metadata"]["uid"].get<std::string>() << "\n"
            << "Created:    " << w["metadata"]["creationTimestamp"].get<std::string>() << "\n"
            << "Spec:\n"
            << "  Queue:      " << spec["queue"].get<std::string>() << "\n"
            << "  Priority:   " << spec["priority"].get<int>() << "\n"
            << "  Replicas:   " << spec["replicas"].get<int>() << "\n"
            << "  Resources:  cpu=" << spec["resources"]["cpu"].get<std::string>()
            << " memory=" << spec["resources"]["memory"].get<std::string>()
            << " gpu=" << spec["resources"]["gpu"].get<int64_t>() << " (per replica)\n"
            << "Status:\n"
            << "  Phase:      " << status["phase"].get<std::string>() << "\n"
            << "  Cluster:    " << status["cluster"].get<std::string>() << "\n"
            << "  Nodes:      " << join(status["nodes"]) << "\n"
            << "  Epoch:      " << status["epoch"].get<int>() << "\n"
            << "  Started:    " << status["startedAt"].get<std::string>() << "\n"
            << "  Finished:   " << status["finishedAt"].get<std::string>() << "\n"
            << "  Exit code:  " << status["exitCode"].get<int>() << "\n"
            << "  Restarts:   " << status.value("restarts", 0) << "\n"
            << "  Disruptions: " << status.value("disruptions", 0) << "\n"
            << "  Reason:     " << status["reason"].get<std::string>() << "\n";
  if (status.contains("copies")) {
    std::cout << "Copies:\n";
    Table copies({"  COPY", "PHASE", "CLUSTER", "NODES", "EPOCH", "RESTARTS", "DISRUPTIONS", "EXIT", "REASON"});
    for (const auto& copy : status["copies"]) {
      std::string cluster = copy["cluster"], reason = copy["reason"];
      copies.add({"  " + std::to_string(copy["copy"].get<int>()), copy["phase"],
                  cluster.empty() ? "-" : cluster, join(copy["nodes"]),
                  std::to_string(copy["epoch"].get<int>()), std::to_string(copy["restarts"].get<int>()),
                  std::to_string(copy.value("disruptions", 0)), std::to_string(copy["exitCode"].get<int>()),
                  reason.empty() ? "-" : reason});
    }
    copies.print(std::cout);
  }
  std::cout << "Events:\n";
  for (const auto& event : w["events"]) {
    std::cout << "  " << event["at"].get<std::string>() << "  " << event["text"].get<std::string>()
              << "\n";
  }
  return 0;
}

// An online copy of the agent's state database (SQLite's backup API, made
// by the agent between batches); restore by stopping the agent and putting
// the copy in place of <data>/state.db (docs/operating.md).
int cmd_backup(const Options& o, const std::string& file) {
  std::error_code error;
  std::filesystem::path path = std::filesystem::absolute(file, error);
  if (error) return fail(invalid_argument("FILE: " + error.message()));
  auto reply = call(o.data_dir, control::BackupRequest{.path = path.lexically_normal().string()},
                    std::chrono::minutes(5));
  if (!reply.is_ok()) return fail(reply.status());
  std::cout << "state database copied to " << (*reply)["path"].get<std::string>() << "\n";
  return 0;
}

int cmd_status(const Options& o) {
  auto reply = call(o.data_dir, control::StatusRequest{});
  if (!reply.is_ok()) return fail(reply.status());
  json copy = *reply;
  copy.erase("ok");
  if (print_structured(o.output, copy, {})) return 0;
  std::cout << "cluster " << copy["cluster"].get<std::string>() << "  messages received "
            << copy["messages"]["received"] << ", sent " << copy["messages"]["sent"] << "\n";
  if (copy.contains("storage") && !copy["storage"].value("writable", true)) {
    std::cout << "  state database NOT WRITABLE: " << copy["storage"].value("error", "")
              << " (taking no new work; reads answer)\n";
  }
  if (copy.contains("backend") && !copy["backend"].value("healthy", true)) {
    std::cout << "  backend " << copy["backend"].value("name", "") << " UNAVAILABLE: "
              << copy["backend"].value("error", "") << " (refusing new candidates)\n";
  }
  if (int64_t backlog = copy.contains("backend") ? copy["backend"].value("backlog", int64_t{0}) : 0;
      backlog > 0) {
    std::cout << "  backend " << copy["backend"].value("name", "") << " backlog: " << backlog
              << " pending job(s) of others (counted in every queue's length)\n";
  }
  for (const auto& [reason, count] : copy["messages"]["dropped"].items()) {
    if (count.get<uint64_t>() > 0) std::cout << "  dropped " << reason << ": " << count << "\n";
  }
  Table table({"NODE", "CPU", "MEMORY", "GPU", "ALLOCATED CPU", "PEAK CPU", "OTHERS' CPU"});
  for (const auto& node : copy["nodes"]) {
    table.add({node["name"], node["capacity"]["cpu"], node["capacity"]["memory"],
               std::to_string(node["capacity"]["gpu"].get<int64_t>()), node["allocated"]["cpu"],
               node["peakAllocated"]["cpu"], node["takenByOthers"]["cpu"]});
  }
  table.print(std::cout);
  return 0;
}

}  // namespace
}  // namespace shoal::cli

int main(int argc, char** argv) {
  using namespace shoal::cli;
  CLI::App app{"shoalctl: operate a shoal agent"};
  app.require_subcommand(1);
  // Every listing prints as a table (wide: more columns) or as a document.
  const auto kListFormats = CLI::IsMember({"json", "yaml", "name", "wide"});
  Options options;
  if (const char* env = std::getenv("SHOAL_DATA")) options.data_dir = env;
  app.add_option("--data", options.data_dir, "The agent's data directory (or SHOAL_DATA)");

  auto* identity = app.add_subcommand("identity", "Print this agent's id card (one line)");

  auto* invite = app.add_subcommand("invite", "Invitations between clusters");
  invite->require_subcommand(1);
  InviteCreateArguments create_arguments;
  auto* invite_create = invite->add_subcommand(
      "create", "Invite a source cluster; prints the token. A new invitation to the same source "
                "replaces (renews) the previous one; running work is not disturbed");
  invite_create->add_option("--to", create_arguments.to, "The source agent's id card")->required();
  invite_create->add_option("--namespace", create_arguments.namespaces,
                            "A namespace to invite into (repeatable)")
      ->required();
  invite_create->add_option("--cpu", create_arguments.cpu,
                            "Most cpu the source may hold here at once (e.g. 16, 500m)");
  invite_create->add_option("--memory", create_arguments.memory, "Most memory (e.g. 64Gi)");
  invite_create->add_option("--gpu", create_arguments.gpu, "Most GPUs");
  invite_create->add_option("--workloads", create_arguments.workloads, "Most concurrent workloads");
  invite_create->add_option("--expires", create_arguments.expires,
                            "Lifetime from --not-before (e.g. 720h, 30d; default 30d), or \"never\"");
  invite_create->add_option("--not-before", create_arguments.not_before,
                            "Valid from this UTC time (e.g. 2026-12-01T00:00:00Z; default now)");
  invite_create->add_option("-o,--output-file", create_arguments.out_file, "Write the token to this file");
  auto* invite_list = invite->add_subcommand(
      "list", "Issued and accepted invitations: state, limits and current usage");
  invite_list->add_option("-o,--output", options.output, "json, yaml, name or wide")->check(kListFormats);
  std::string revoke_id;
  bool revoke_evict = false;
  auto* invite_revoke = invite->add_subcommand(
      "revoke", "Revoke an issued invitation at once (new work is refused; the source is told)");
  invite_revoke->add_option("ID", revoke_id, "The invitation id (see `invite list`)")->required();
  invite_revoke->add_flag("--evict", revoke_evict,
                          "Also stop the source's running workloads here (reported Failed: Revoked)");
  std::string token_or_file;
  auto* invite_accept = invite->add_subcommand("accept", "Accept an invitation token (text or file)");
  invite_accept->add_option("TOKEN_OR_FILE", token_or_file, "The token, or a file holding it")->required();

  auto* peers = app.add_subcommand("peers", "Peer status: state, last seen, namespaces, workloads");
  peers->add_option("-o,--output", options.output, "json, yaml, name or wide")->check(kListFormats);

  std::string submit_file;
  auto* submit = app.add_subcommand("submit", "Submit workloads (multi-document YAML, kind Workload)");
  submit->add_option("-f,--filename", submit_file, "Manifest file")->required();

  auto* get = app.add_subcommand("get", "List resources");
  get->require_subcommand(1);
  std::string get_namespace = "default";
  bool all_namespaces = false;
  auto* get_workloads = get->add_subcommand("workloads", "Workloads submitted to this agent");
  get_workloads->alias("workload");
  get_workloads->add_option("-n,--namespace", get_namespace, "Namespace (default \"default\")");
  get_workloads->add_flag("-A,--all-namespaces", all_namespaces, "Every namespace");
  get_workloads->add_option("-o,--output", options.output, "json, yaml, name or wide")->check(kListFormats);
  ListPaging paging;
  get_workloads
      ->add_option("--limit", paging.limit,
                   "List at most N, in namespace/name order; if more follow, the token to "
                   "go on with is printed (0: all)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  get_workloads->add_option("--continue", paging.continue_after,
                            "Go on after the token a previous --limit printed");
  bool watch = false;
  get_workloads->add_flag("-w,--watch", watch,
                          "After the list, print each workload again whenever it changes (the agent "
                          "pushes them) until the agent stops; with -o json, one per line");
  get_workloads
      ->add_option("--chunk-size", paging.chunk_size,
                   "Workloads fetched per request to the agent (each request is short, so "
                   "the agent stays responsive while a long list is read)")
      ->check(CLI::Range(1, 5000));
  std::string clusters_namespace = "default", clusters_queue = "default";
  auto* get_clusters = get->add_subcommand(
      "clusters", "The clusters this agent may place on, as its placement engine sees them now");
  get_clusters->alias("cluster");
  get_clusters->add_option("-n,--namespace", clusters_namespace,
                           "The namespace whose room and counts to show (default \"default\")");
  get_clusters->add_option("--queue", clusters_queue, "The queue whose room to show (default \"default\")");
  get_clusters->add_option("-o,--output", options.output, "json, yaml, name or wide")->check(kListFormats);
  auto* get_reservations =
      get->add_subcommand("reservations", "What this cluster holds or runs for sources");
  get_reservations->add_option("-o,--output", options.output, "json, yaml, name or wide")->check(kListFormats);

  auto* describe = app.add_subcommand("describe", "Show one resource in detail");
  describe->require_subcommand(1);
  std::string describe_target;
  auto* describe_workload = describe->add_subcommand("workload", "Spec, status and event history");
  describe_workload->add_option("NS/NAME", describe_target, "namespace/name")->required();
  describe_workload->add_option("-o,--output", options.output, "json or yaml")
      ->check(CLI::IsMember({"json", "yaml"}));

  LogsArguments logs_arguments;
  auto* logs = app.add_subcommand(
      "logs", "A workload's output (stdout and stderr) as its cluster keeps it: at the source, "
              "wherever it runs (a peer's is read over the peer link); at a target, a copy it "
              "runs for another cluster");
  logs->add_option("NS/NAME", logs_arguments.target, "namespace/name")->required();
  logs->add_option("--copy", logs_arguments.copy, "Which copy of a multi-cluster workload (1..N)")
      ->check(CLI::Range(0, 1000));
  logs->add_option("--replica", logs_arguments.replica, "Which replica (default 0)")
      ->check(CLI::Range(0, 10000));
  logs->add_flag("-f,--follow", logs_arguments.follow, "Keep printing until the replica ends");
  logs->add_option("--tail", logs_arguments.tail_lines, "Only the last N lines (of the last 64 KiB)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));

  auto* del = app.add_subcommand("delete", "Delete a resource");
  del->require_subcommand(1);
  std::string delete_target;
  std::string delete_from;
  auto* delete_workload = del->add_subcommand(
      "workload",
      "Stop a workload submitted here wherever it runs, then forget it; or, for a workload "
      "this cluster runs for another one, stop that copy (its source sees Failed)");
  delete_workload->add_option("NS/NAME", delete_target, "namespace/name")->required();
  delete_workload->add_option("--from", delete_from,
                              "the source cluster of a copy run here (when several use the name)");

  std::string nominate_target;
  std::vector<std::string> nominate_clusters;
  auto* nominate = app.add_subcommand(
      "nominate", "External dispatcher: the clusters a workload may be placed on (until it is bound)");
  nominate->add_option("NS/NAME", nominate_target, "namespace/name")->required();
  nominate->add_option("--clusters", nominate_clusters, "Cluster names, comma-separated")
      ->required()
      ->delimiter(',');

  PatchArguments patch_arguments;
  auto* patch = app.add_subcommand("patch", "Change a resource after it was created");
  patch->require_subcommand(1);
  auto* patch_workload = patch->add_subcommand(
      "workload",
      "Change a pending or running workload's priority, here and at the clusters that queue or "
      "run it (every other field is fixed at submit)");
  patch_workload->add_option("NS/NAME", patch_arguments.target, "namespace/name")->required();
  patch_workload->add_option("--priority", patch_arguments.priority, "The new spec.priority")
      ->check(CLI::Range(-int64_t{shoal::model::kMaxPriority}, int64_t{shoal::model::kMaxPriority}));
  patch_workload->add_option("-p,--patch", patch_arguments.patch,
                             "A JSON merge patch of the manifest, e.g. '{\"spec\": {\"priority\": 10}}'");

  std::string describe_peer_name;
  auto* describe_peer = describe->add_subcommand("peer", "A peer's state, invitations and audit events");
  describe_peer->add_option("NAME", describe_peer_name, "The peer's cluster name or id")->required();
  describe_peer->add_option("-o,--output", options.output, "json or yaml")->check(CLI::IsMember({"json", "yaml"}));

  std::string backup_file;
  auto* backup = app.add_subcommand(
      "backup", "Copy the agent's state database while it runs (restore: stop the agent, put the "
                "copy in place of <data>/state.db)");
  backup->add_option("FILE", backup_file, "A new file to write (never overwritten)")->required();

  auto* status = app.add_subcommand("status", "Agent counters (messages, drops) and node usage");
  status->add_option("-o,--output", options.output, "json or yaml")->check(CLI::IsMember({"json", "yaml"}));

  PlaceArguments place_arguments;
  auto* place = app.add_subcommand(
      "place", "What-if placement of one workload: over an Inventory file (offline), or over the "
               "clusters a running agent sees (--live)");
  auto* place_inventory =
      place->add_option("--inventory", place_arguments.inventory_path, "Inventory file (kind: Inventory)");
  auto* place_live = place->add_flag("--live", place_arguments.live,
                                     "Over the agent's live inventory (shoalctl get clusters), as it "
                                     "would decide now; needs --data");
  place_inventory->excludes(place_live);
  place->add_option("-f,--filename", place_arguments.workload_path, "Workload manifest (one document)")
      ->required();
  place->add_option("--draw", place_arguments.draw,
                    "Fix the random draw in [0, sum of weights) for routing metric \"\"");
  place->add_option("-o,--output", place_arguments.output, "json")->check(CLI::IsMember({"json"}));
  place->add_flag("--explain", place_arguments.explain,
                  "Show filtered clusters, routing ratios and every selectOne step");

  ScheduleArguments schedule_arguments;
  auto* schedule = app.add_subcommand(
      "schedule", "Offline dry-run of the local scheduler: allocate pending workloads on an empty cluster");
  schedule->add_option("--cluster", schedule_arguments.cluster_path, "Cluster manifest (kind: Cluster)")
      ->required();
  schedule->add_option("-f,--filename", schedule_arguments.workloads_path, "Workloads (multi-document YAML)")
      ->required();
  schedule->add_option("-o,--output", schedule_arguments.output, "json")->check(CLI::IsMember({"json"}));

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  if (*place) {
    place_arguments.data_dir = options.data_dir;
    return run_place(place_arguments);
  }
  if (*schedule) return run_schedule(schedule_arguments);
  if (options.data_dir.empty()) {
    std::cerr << "shoalctl: --data: expected the agent's data directory (or set SHOAL_DATA)\n";
    return 2;
  }
  if (*identity) return cmd_identity(options);
  if (*invite_create) return cmd_invite_create(options, create_arguments);
  if (*invite_list) return cmd_invite_list(options);
  if (*invite_revoke) return cmd_invite_revoke(options, revoke_id, revoke_evict);
  if (*describe_peer) return cmd_describe_peer(options, describe_peer_name);
  if (*delete_workload) return cmd_delete_workload(options, delete_target, delete_from);
  if (*patch_workload) return cmd_patch_workload(options, patch_arguments);
  if (*nominate) return cmd_nominate(options, nominate_target, nominate_clusters);
  if (*invite_accept) return cmd_invite_accept(options, token_or_file);
  if (*peers) return cmd_peers(options);
  if (*submit) return cmd_submit(options, submit_file);
  if (*get_workloads && watch) {
    if (options.output != "" && options.output != "json" && options.output != "wide") {
      return fail(shoal::invalid_argument("-o " + options.output + ": -w prints a table or, with -o json, one JSON per line"));
    }
    return cmd_watch_workloads(options, get_namespace, all_namespaces);
  }
  if (*get_workloads) return cmd_get_workloads(options, get_namespace, all_namespaces, paging);
  if (*get_reservations) return cmd_get_reservations(options);
  if (*get_clusters) return cmd_get_clusters(options, clusters_namespace, clusters_queue);
  if (*describe_workload) return cmd_describe_workload(options, describe_target);
  if (*logs) return cmd_logs(options, logs_arguments);
  if (*status) return cmd_status(options);
  if (*backup) return cmd_backup(options, backup_file);
  return 2;
}

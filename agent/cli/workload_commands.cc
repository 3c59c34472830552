// shoalctl describe workload, logs, delete workload, nominate and patch
// workload: one workload, named NS/NAME.
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <thread>

#include "agent/cli/commands.h"
#include "agent/cli/output.h"
#include "agent/cli/read_file.h"
#include "agent/cli/table.h"
#include "agent/control/client.h"
#include "agent/control/data_dir.h"
#include "model/manifest.h"

namespace shoal::cli {
namespace {

using control::call;
using nlohmann::json;

struct WorkloadName {
  std::string namespace_name, name;
};

// NS/NAME split, or the one-line usage error.
Result<WorkloadName> workload_name(const std::string& target) {
  size_t slash = target.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == target.size()) {
    return invalid_argument("NS/NAME: expected namespace/name, got \"" + target + "\"");
  }
  WorkloadName parts{target.substr(0, slash), target.substr(slash + 1)};
  SHOAL_RETURN_IF_ERROR(validate_name(parts.namespace_name, "NS/NAME: the namespace"));
  SHOAL_RETURN_IF_ERROR(validate_name(parts.name, "NS/NAME: the name"));
  return parts;
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

struct DeleteArguments {
  std::string target, from;
  bool force = false;
  bool yes = false;
};

int cmd_delete_workload(const Options& o, const DeleteArguments& a) {
  auto workload = workload_name(a.target);
  if (!workload.is_ok()) return fail(workload.status());
  if (a.force && !a.from.empty()) return fail(invalid_argument("--force: not with --from"));
  if (a.force && !a.yes &&
      !confirmed("delete " + a.target +
                 " by force? It is forgotten without waiting for its clusters to confirm its "
                 "copies stopped; a copy at a cluster that is only unreachable stops when the "
                 "lease there lapses")) {
    std::cerr << "shoalctl: not deleted (confirm with y, or pass --yes)\n";
    return 1;
  }
  auto reply =
      call(o.data_dir, control::DeleteWorkloadRequest{.namespace_name = workload->namespace_name,
                                                      .name = workload->name,
                                                      .from = a.from,
                                                      .force = a.force});
  if (!reply.is_ok()) return fail(reply.status());
  const std::string& target = a.target;
  if ((*reply).value("forced", false)) {
    std::cout << "workload " << target
              << " deleted by force (its events say which clusters never confirmed)\n";
  } else if ((*reply).value("hosted", false)) {
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

}  // namespace

void add_workload_commands(CommandTree& tree, Options& options, Runners& runners) {
  auto describe_target = std::make_shared<std::string>();
  auto* describe_workload = tree.describe->add_subcommand("workload", "Spec, status and event history");
  describe_workload->add_option("NS/NAME", *describe_target, "namespace/name")->required();
  describe_workload->add_option("-o,--output", options.output, "json or yaml")->check(kDocumentFormats);
  runners.push_back({describe_workload, [&options, describe_target] {
                       return cmd_describe_workload(options, *describe_target);
                     }});

  auto logs_arguments = std::make_shared<LogsArguments>();
  auto* logs = tree.app.add_subcommand(
      "logs", "A workload's output (stdout and stderr) as its cluster keeps it: at the source, "
              "wherever it runs (a peer's is read over the peer link); at a target, a copy it "
              "runs for another cluster");
  logs->add_option("NS/NAME", logs_arguments->target, "namespace/name")->required();
  logs->add_option("--copy", logs_arguments->copy, "Which copy of a multi-cluster workload (1..N)")
      ->check(CLI::Range(0, 1000));
  logs->add_option("--replica", logs_arguments->replica, "Which replica (default 0)")
      ->check(CLI::Range(0, 10000));
  logs->add_flag("-f,--follow", logs_arguments->follow, "Keep printing until the replica ends");
  logs->add_option("--tail", logs_arguments->tail_lines, "Only the last N lines (of the last 64 KiB)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  runners.push_back({logs, [&options, logs_arguments] { return cmd_logs(options, *logs_arguments); }});

  auto remove = std::make_shared<DeleteArguments>();
  auto* delete_workload = tree.remove->add_subcommand(
      "workload",
      "Stop a workload submitted here wherever it runs, then forget it; or, for a workload "
      "this cluster runs for another one, stop that copy (its source sees Failed)");
  delete_workload->add_option("NS/NAME", remove->target, "namespace/name")->required();
  delete_workload->add_option("--from", remove->from,
                              "the source cluster of a copy run here (when several use the name)");
  delete_workload->add_flag("--force", remove->force,
                            "Forget it at once, without waiting for its clusters to confirm its "
                            "copies stopped (for a cluster gone for good; asks first)");
  delete_workload->add_flag("--yes", remove->yes, "With --force: do not ask");
  runners.push_back(
      {delete_workload, [&options, remove] { return cmd_delete_workload(options, *remove); }});

  struct Nominate {
    std::string target;
    std::vector<std::string> clusters;
  };
  auto nominate_arguments = std::make_shared<Nominate>();
  auto* nominate = tree.app.add_subcommand(
      "nominate", "External dispatcher: the clusters a workload may be placed on (until it is bound)");
  nominate->add_option("NS/NAME", nominate_arguments->target, "namespace/name")->required();
  nominate->add_option("--clusters", nominate_arguments->clusters, "Cluster names, comma-separated")
      ->required()
      ->delimiter(',');
  runners.push_back({nominate, [&options, nominate_arguments] {
                       return cmd_nominate(options, nominate_arguments->target, nominate_arguments->clusters);
                     }});

  auto patch_arguments = std::make_shared<PatchArguments>();
  auto* patch_workload = tree.patch->add_subcommand(
      "workload",
      "Change a pending or running workload's priority, here and at the clusters that queue or "
      "run it (every other field is fixed at submit)");
  patch_workload->add_option("NS/NAME", patch_arguments->target, "namespace/name")->required();
  patch_workload->add_option("--priority", patch_arguments->priority, "The new spec.priority")
      ->check(CLI::Range(-int64_t{model::kMaxPriority}, int64_t{model::kMaxPriority}));
  patch_workload->add_option("-p,--patch", patch_arguments->patch,
                             "A JSON merge patch of the manifest, e.g. '{\"spec\": {\"priority\": 10}}'");
  runners.push_back({patch_workload, [&options, patch_arguments] {
                       return cmd_patch_workload(options, *patch_arguments);
                     }});
}

}  // namespace shoal::cli

// shoalctl submit, get workloads (and its watch), get reservations and
// get clusters.
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

// The file is checked whole first, then sent in parts the agent takes in
// one request each (at most control::kMaxWorkloadsPerSubmit workloads and,
// unless one document alone is larger, kMaxSubmitBytes): each part is
// submitted or refused as a whole, like kubectl's objects. The parts go as
// JSON, which the agent reads in half the time of YAML, and up to
// kPartsInFlight at a time, so the agent never waits for the next one.
// After a refused part no other is sent; those already sent are answered
// and reported.
int cmd_submit(const Options& o, const std::string& file) {
  constexpr size_t kPartsInFlight = 4;
  auto text = read_input_file(file, "-f");
  if (!text.is_ok()) return fail(text.status());
  // Refused here, before the agent spends anything on it; the agent checks
  // again on its own (the control socket is an API, not only shoalctl's).
  auto documents = model::workload_documents_as_json(*text);
  if (!documents.is_ok()) return fail(invalid_argument("-f " + file + ": " + documents.status().message()));
  struct Part {
    control::SubmitRequest request{.workloads = json::array()};
    size_t first = 0;  // its first document's index in the file
  };
  std::vector<Part> parts;
  size_t bytes = 0;
  for (size_t i = 0; i < documents->size(); ++i) {
    size_t size = (*documents)[i].dump().size();
    if (parts.empty() || parts.back().request.workloads.size() == control::kMaxWorkloadsPerSubmit ||
        bytes + size > control::kMaxSubmitBytes) {
      parts.push_back({.first = i});
      bytes = 0;
    }
    bytes += size;
    parts.back().request.workloads.push_back(std::move((*documents)[i]));
  }
  auto pipeline = control::Pipeline::open(o.data_dir);
  if (!pipeline.is_ok()) return fail(pipeline.status());
  std::optional<Status> refused;
  size_t sent = 0;
  for (size_t answered = 0; answered < sent || (!refused && sent < parts.size()); ++answered) {
    while (!refused && sent < parts.size() && sent - answered < kPartsInFlight) {
      if (Status status = pipeline->send(parts[sent].request); !status.is_ok()) return fail(status);
      ++sent;
    }
    auto reply = pipeline->next();
    if (!reply.is_ok() && reply.status().code() == ErrorCode::kUnavailable) return fail(reply.status());
    if (!reply.is_ok()) {
      const Part& part = parts[answered];
      size_t last = part.first + part.request.workloads.size();
      if (!refused) {
        refused = reply.status().with_context("documents " + std::to_string(part.first + 1) + "-" +
                                              std::to_string(last) + " of " + std::to_string(documents->size()) +
                                              " were not submitted");
      }
      continue;
    }
    for (const auto& item : (*reply)["items"]) {
      std::cout << "workload " << item["namespace"].get<std::string>() << "/"
                << item["name"].get<std::string>() << " submitted (uid "
                << item["uid"].get<std::string>() << ")\n";
    }
  }
  if (!refused) return 0;
  if (sent < parts.size()) {
    return fail(Status(refused->code(), refused->message() + "; documents " +
                                            std::to_string(parts[sent].first + 1) + "-" +
                                            std::to_string(documents->size()) + " were not sent"));
  }
  return fail(*refused);
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

}  // namespace

void add_listing_commands(CommandTree& tree, Options& options, Runners& runners) {
  auto submit_file = std::make_shared<std::string>();
  auto* submit = tree.app.add_subcommand(
      "submit",
      "Submit workloads (multi-document YAML, kind Workload): the file is checked whole, then sent "
      "in parts of 100, each submitted or refused whole; after a refused part no more are sent");
  submit->add_option("-f,--filename", *submit_file, "Manifest file")->required();
  runners.push_back({submit, [&options, submit_file] { return cmd_submit(options, *submit_file); }});

  struct GetWorkloads {
    std::string namespace_name = "default";
    bool all_namespaces = false;
    bool watch = false;
    ListPaging paging;
  };
  auto get = std::make_shared<GetWorkloads>();
  auto* get_workloads = tree.get->add_subcommand("workloads", "Workloads submitted to this agent");
  get_workloads->alias("workload");
  get_workloads->add_option("-n,--namespace", get->namespace_name, "Namespace (default \"default\")")
      ->check(kNameRule);
  get_workloads->add_flag("-A,--all-namespaces", get->all_namespaces, "Every namespace");
  get_workloads->add_option("-o,--output", options.output, "json, yaml, name or wide")->check(kListFormats);
  get_workloads
      ->add_option("--limit", get->paging.limit,
                   "List at most N, in namespace/name order; if more follow, the token to "
                   "go on with is printed (0: all)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  get_workloads->add_option("--continue", get->paging.continue_after,
                            "Go on after the token a previous --limit printed");
  get_workloads->add_flag("-w,--watch", get->watch,
                          "After the list, print each workload again whenever it changes (the agent "
                          "pushes them) until the agent stops; with -o json, one per line");
  get_workloads
      ->add_option("--chunk-size", get->paging.chunk_size,
                   "Workloads fetched per request to the agent (each request is short, so "
                   "the agent stays responsive while a long list is read)")
      ->check(CLI::Range(1, 5000));
  runners.push_back({get_workloads, [&options, get] {
                       if (!get->watch) {
                         return cmd_get_workloads(options, get->namespace_name, get->all_namespaces,
                                                  get->paging);
                       }
                       if (options.output != "" && options.output != "json" && options.output != "wide") {
                         return fail(invalid_argument("-o " + options.output +
                                                      ": -w prints a table or, with -o json, one JSON per line"));
                       }
                       return cmd_watch_workloads(options, get->namespace_name, get->all_namespaces);
                     }});

  struct GetClusters {
    std::string namespace_name = "default", queue = "default";
  };
  auto clusters = std::make_shared<GetClusters>();
  auto* get_clusters = tree.get->add_subcommand(
      "clusters", "The clusters this agent may place on, as its placement engine sees them now");
  get_clusters->alias("cluster");
  get_clusters->add_option("-n,--namespace", clusters->namespace_name,
                           "The namespace whose room and counts to show (default \"default\")")
      ->check(kNameRule);
  get_clusters->add_option("--queue", clusters->queue, "The queue whose room to show (default \"default\")")
      ->check(kNameRule);
  get_clusters->add_option("-o,--output", options.output, "json, yaml, name or wide")->check(kListFormats);
  runners.push_back({get_clusters, [&options, clusters] {
                       return cmd_get_clusters(options, clusters->namespace_name, clusters->queue);
                     }});

  auto* get_reservations =
      tree.get->add_subcommand("reservations", "What this cluster holds or runs for sources");
  get_reservations->add_option("-o,--output", options.output, "json, yaml, name or wide")->check(kListFormats);
  runners.push_back({get_reservations, [&options] { return cmd_get_reservations(options); }});
}

}  // namespace shoal::cli

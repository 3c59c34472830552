// The kubernetes backend on the agent's loop (kube_runner.h): nodes found at
// start, pods launched and stopped as queued commands, their phases read
// from the threads' snapshot.
#include "agent/cluster/kubernetes/kube_runner.h"

#include <fcntl.h>
#include <sodium.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "model/quantity.h"

namespace shoal::cluster::kubernetes {

using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

// A pod's output read for one ask answers the same ask again for this long
// (a follower asks every 250 ms), and is dropped when nobody asked for it
// for kLogKeptFor. A tail (a negative offset) reads at most the output's
// first kLogTailReadBytes, since pods/log counts bytes from the start.
constexpr auto kLogFreshFor = 1s;
constexpr auto kLogKeptFor = 60s;
constexpr int64_t kLogTailReadBytes = int64_t{4} << 20;

// How much of a kubelet's message a reason carries.
constexpr size_t kReasonBytes = 400;

// The reason of a waiting_reason ("pod NAME: REASON: MESSAGE"), with a
// pull's error and its backoff (the kubelet alternates them) as one.
std::string_view reason_word(std::string_view waiting) {
  size_t start = waiting.find(": ");
  if (start == std::string_view::npos) return waiting;
  waiting.remove_prefix(start + 2);
  std::string_view word = waiting.substr(0, waiting.find(':'));
  return word == "ErrImagePull" ? std::string_view("ImagePullBackOff") : word;
}

// A pod's grace in whole seconds, at least 1: a delete with 0 removes the
// pod from the API at once while its containers may still run (on a node
// whose kubelet cannot be reached), and its room could be taken twice.
int64_t grace_seconds(Duration grace) {
  return std::max<int64_t>(1, std::chrono::duration_cast<std::chrono::seconds>(grace + 999ms).count());
}

// The first 16 hex digits of sha256(key): names a copy in a pod name, a
// label value and a marker file, whatever bytes the key holds.
std::string key_hash(const std::string& key) {
  unsigned char digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(digest, reinterpret_cast<const unsigned char*>(key.data()), key.size());
  char hex[17];
  for (int i = 0; i < 8; ++i) std::snprintf(hex + 2 * i, 3, "%02x", digest[i]);
  return hex;
}

// Creates the marker, not yet durable: sync_marker makes it so before the
// first create of its pods goes out.
Status write_marker(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Status(ErrorCode::kStorage, "kubernetes backend: cannot create " + path);
  ::close(fd);
  return Status::ok();
}

// Who ended a failed pod of the agent's (one the agent did not delete):
// the job itself, or the cluster around it (docs/backends.md, "How a pod
// ends"). The cluster's word comes first: a pod being deleted, or marked
// DisruptionTarget, was ended by someone else even when its container's
// exit code (137, 143: the signal that stopped it) looks like its own.
EndCause cause_of(const KubePod& pod) {
  if (pod.disruption == "PreemptionByScheduler") return EndCause::kPreempted;
  if (pod.disruption == "DeletionByPodGC") return EndCause::kNodeFailed;
  if (!pod.disruption.empty() || pod.deleting) return EndCause::kEvicted;
  if (pod.reason == "Evicted" || pod.reason == "DeletedAtCluster") return EndCause::kEvicted;
  if (pod.reason == "Preempting" || pod.reason == "Preempted") return EndCause::kPreempted;
  if (pod.reason == "NodeLost" || pod.reason == "NodeShutdown" || pod.reason == "Terminated") {
    return EndCause::kNodeFailed;
  }
  // The kubelet refused it at admission (OutOfcpu, OutOfmemory, OutOfpods,
  // NodeAffinity, UnexpectedAdmissionError, ...): it never ran.
  if (pod.reason.rfind("OutOf", 0) == 0 || pod.reason == "NodeAffinity" || pod.reason == "NodeName" ||
      pod.reason == "UnexpectedAdmissionError" || pod.reason == "PodOSNotSupported" ||
      pod.reason == "InvalidNodeInfo") {
    return EndCause::kEvicted;
  }
  return EndCause::kOwn;  // its exit code, or OOMKilled: its own process
}

// How often finished pods of ours that no copy holds are looked for.
constexpr std::chrono::seconds kSweepInterval{10};

}  // namespace

bool KubeRunner::ours(const KubePod& pod) const {
  auto cluster = pod.labels.find(kClusterLabel);
  return cluster != pod.labels.end() && cluster->second == options_.cluster_name;
}

std::string url_escaped(std::string_view text) {
  std::string escaped;
  for (char c : text) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') {
      escaped += c;
    } else {
      char buffer[4];
      std::snprintf(buffer, sizeof buffer, "%%%02X", static_cast<unsigned char>(c));
      escaped += buffer;
    }
  }
  return escaped;
}

std::string label_selector(const model::Labels& labels) {
  std::string selector;
  for (const auto& [key, value] : labels) {
    selector += (selector.empty() ? "" : ",") + key + "=" + value;
  }
  return url_escaped(selector);
}

Result<KubeConfig> config_for(const model::KubernetesSpec& spec) {
  if (spec.in_cluster) return in_cluster_config();
  return load_kubeconfig(spec.kubeconfig, spec.context);
}

Result<std::vector<model::NodeSpec>> discover_nodes(const model::KubernetesSpec& spec) {
  SHOAL_ASSIGN_OR_RETURN(KubeConfig config, config_for(spec));
  KubeClient api({config, spec.timeout});
  std::string path = "/api/v1/nodes";
  if (!spec.node_selector.empty()) path += "?labelSelector=" + label_selector(spec.node_selector);
  SHOAL_ASSIGN_OR_RETURN(KubeClient::Answer answer, api.call("GET", path));
  if (answer.status != 200) {
    return Status(ErrorCode::kUnavailable, "kubernetes backend: listing nodes: HTTP " +
                                               std::to_string(answer.status) + ": " +
                                               kube_status_message(answer.body));
  }
  SHOAL_ASSIGN_OR_RETURN(KubeList<KubeNode> list, parse_node_list(answer.body));
  std::vector<model::NodeSpec> nodes;
  for (const KubeNode& node : list.items) {
    if (node.allocatable.is_zero()) continue;
    nodes.push_back({node.name, node.allocatable, node.labels});
  }
  if (nodes.empty()) {
    return invalid_argument("kubernetes backend: no node with allocatable resources" +
                            std::string(spec.node_selector.empty() ? "" : " matches spec.kubernetes.nodeSelector"));
  }
  return nodes;
}

std::string pod_name(const std::string& key, uint64_t epoch, int replica) {
  return "shoal-" + key_hash(key) + "-" + std::to_string(epoch) + "-" + std::to_string(replica);
}

Result<std::unique_ptr<KubeRunner>> KubeRunner::create(KubeRunnerOptions options) {
  std::error_code error;
  std::filesystem::create_directories(options.state_dir, error);
  if (error) {
    return Status(ErrorCode::kStorage, "kubernetes backend: cannot create " + options.state_dir + ": " +
                                           error.message());
  }
  auto runner = std::unique_ptr<KubeRunner>(new KubeRunner(std::move(options)));
  runner->threads_.emplace_back([raw = runner.get()] { raw->watch_own_pods(); });
  runner->threads_.emplace_back([raw = runner.get()] { raw->watch_other_pods(); });
  runner->threads_.emplace_back([raw = runner.get()] { raw->watch_nodes(); });
  for (int i = 0; i < std::max(1, runner->options_.spec.parallel_calls); ++i) {
    runner->threads_.emplace_back([raw = runner.get(), i] { raw->make_calls(/*probes=*/i == 0); });
  }
  return runner;
}

KubeRunner::KubeRunner(KubeRunnerOptions options)
    : options_(std::move(options)), jitter_(std::random_device{}()) {
  for (const model::NodeSpec& node : options_.nodes) nodes_told_[node.name] = node;
}

KubeRunner::~KubeRunner() {
  quit_ = true;
  wake_.notify_all();
  for (std::thread& thread : threads_) thread.join();
}

std::string KubeRunner::marker_path(const std::string& key, uint64_t epoch) const {
  return options_.state_dir + "/" + key_hash(key) + "." + std::to_string(epoch);
}

void KubeRunner::enqueue(KubeCall call) {
  {
    std::lock_guard lock(mutex_);
    calls_.push(std::move(call));
  }
  wake_.notify_one();
}

void KubeRunner::forget_calls_of(const Pods& pods) {
  for (const std::string& pod : pods.pods) {
    std::string full = pods.namespace_name + "/" + pod;
    snapshot_.created.erase(full);
    snapshot_.refused.erase(full);
    snapshot_.giving_up.erase(full);
    snapshot_.given_up.erase(full);
  }
}

std::string KubeRunner::pod_body(const LaunchRequest& request, int replica) const {
  const model::WorkloadSpec& spec = request.spec;
  json labels = json::object();
  for (const auto& [key, value] : spec.labels) labels[key] = value;
  labels[kClusterLabel] = options_.cluster_name;
  labels["shoal.dev/copy"] = key_hash(request.key);
  labels["shoal.dev/uid"] = request.uid;
  labels["shoal.dev/epoch"] = std::to_string(request.epoch);
  labels["shoal.dev/replica"] = std::to_string(replica);
  json resources = json::object();
  resources["cpu"] = model::format_cpu(spec.resources.cpu_milli);
  if (spec.resources.memory_bytes > 0) resources["memory"] = model::format_memory(spec.resources.memory_bytes);
  if (spec.resources.gpu > 0) resources["nvidia.com/gpu"] = std::to_string(spec.resources.gpu);
  json env = json::array();
  for (const auto& [name, value] : spec.env) env.push_back({{"name", name}, {"value", value}});
  for (const auto& [name, value] :
       std::initializer_list<std::pair<const char*, std::string>>{
           {"SHOAL_CLUSTER", options_.cluster_name},
           {"SHOAL_SOURCE_CLUSTER", request.source_cluster},
           {"SHOAL_UID", request.uid},
           {"SHOAL_EPOCH", std::to_string(request.epoch)},
           {"SHOAL_REPLICA", std::to_string(replica)}}) {
    env.push_back({{"name", name}, {"value", value}});
  }
  json container = {{"name", "main"},
                    {"image", spec.image.empty() ? options_.spec.image : spec.image},
                    {"env", env},
                    {"resources", {{"requests", resources}, {"limits", resources}}}};
  if (!spec.command.empty()) container["command"] = spec.command;
  if (!spec.args.empty()) container["args"] = spec.args;
  if (!spec.working_dir.empty() && spec.working_dir[0] == '/') container["workingDir"] = spec.working_dir;
  const model::KubernetesSpec& cluster = options_.spec;
  json security = {{"runAsNonRoot", cluster.run_as_user != 0},
                   {"runAsUser", cluster.run_as_user},
                   {"runAsGroup", cluster.run_as_group},
                   {"seccompProfile", {{"type", "RuntimeDefault"}}}};
  if (cluster.run_as_user != 0) {
    container["securityContext"] = {{"allowPrivilegeEscalation", false}, {"capabilities", {{"drop", {"ALL"}}}}};
  }
  json annotations = json::object();
  for (const auto& [key, value] : cluster.annotations) annotations[key] = value;
  annotations["shoal.dev/key"] = request.key;
  annotations["shoal.dev/source-cluster"] = request.source_cluster;
  int64_t grace = grace_seconds(spec.termination_grace);
  json pod = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", pod_name(request.key, request.epoch, replica)},
        {"namespace", spec.namespace_name},
        {"labels", labels},
        {"annotations", annotations}}},
      {"spec",
       {{"nodeName", request.nodes.at(static_cast<size_t>(replica))},
        {"restartPolicy", "Never"},
        {"automountServiceAccountToken", false},
        {"enableServiceLinks", false},
        {"terminationGracePeriodSeconds", grace},
        {"securityContext", security},
        {"containers", json::array({container})}}}};
  if (!cluster.priority_class_name.empty()) pod["spec"]["priorityClassName"] = cluster.priority_class_name;
  for (const std::string& secret : cluster.image_pull_secrets) {
    pod["spec"]["imagePullSecrets"].push_back({{"name", secret}});
  }
  for (const model::Toleration& toleration : cluster.tolerations) {
    json item = {{"operator", toleration.exists ? "Exists" : "Equal"}};
    if (!toleration.key.empty()) item["key"] = toleration.key;
    if (!toleration.value.empty()) item["value"] = toleration.value;
    if (!toleration.effect.empty()) item["effect"] = toleration.effect;
    if (toleration.seconds) item["tolerationSeconds"] = *toleration.seconds;
    pod["spec"]["tolerations"].push_back(std::move(item));
  }
  return pod.dump();
}

Status KubeRunner::launch(const LaunchRequest& request) {
  auto existing = runs_.find(request.key);
  if (existing != runs_.end() && existing->second.epoch == request.epoch) return Status::ok();  // re-attached
  if (request.nodes.size() != static_cast<size_t>(request.spec.replicas)) {
    return invalid_argument("kubernetes backend: expected a node per replica");
  }
  Run run;
  run.epoch = request.epoch;
  run.namespace_name = request.spec.namespace_name;
  run.grace_seconds = grace_seconds(request.spec.termination_grace);
  for (int replica = 0; replica < request.spec.replicas; ++replica) {
    run.pods.push_back(pod_name(request.key, request.epoch, replica));
  }
  std::string marker = marker_path(request.key, request.epoch);
  if (std::filesystem::exists(marker)) {
    // Created by this agent before it restarted: its pods are adopted from
    // the list, or reported lost; never created a second time.
    run.created_before = true;
  } else {
    SHOAL_RETURN_IF_ERROR(write_marker(marker));
    for (int replica = 0; replica < request.spec.replicas; ++replica) {
      KubeCall create = KubeCall::create(run.namespace_name, run.pods[static_cast<size_t>(replica)],
                                         pod_body(request, replica));
      create.marker = marker;
      enqueue(std::move(create));
    }
  }
  run.seen.assign(run.pods.size(), false);
  {
    std::lock_guard lock(mutex_);
    if (existing != runs_.end()) know({existing->second.namespace_name, existing->second.pods}, -1);
    know({run.namespace_name, run.pods}, +1);
  }
  if (existing != runs_.end()) index_run(request.key, existing->second, false);
  index_run(request.key, run, true);
  launched_.insert(request.key);
  runs_[request.key] = std::move(run);
  return Status::ok();
}

bool KubeRunner::stop(const std::string& key, Duration grace) {
  int64_t seconds = grace_seconds(grace);
  Pods stopped;
  auto it = runs_.find(key);
  if (it != runs_.end()) {
    stopped = {it->second.namespace_name, it->second.pods};
    index_run(key, it->second, false);
    runs_.erase(it);
    std::lock_guard lock(mutex_);
    know(stopped, -1);
    forget_calls_of(stopped);
  } else {
    // Restored after a restart and not launched again: whatever pods of
    // the key the cluster still runs for this agent, by their labels (none
    // are known before the first list: then the room is free at once).
    std::lock_guard lock(mutex_);
    const std::string copy = key_hash(key);
    for (const auto& [name, pod] : snapshot_.pods) {
      auto label = pod.labels.find("shoal.dev/copy");
      if (label == pod.labels.end() || label->second != copy || !ours(pod) || pod.terminal()) continue;
      stopped.namespace_name = pod.namespace_name;
      stopped.pods.push_back(pod.name);
    }
  }
  if (stopped.pods.empty()) return true;  // nothing runs: the room is free now
  for (const std::string& pod : stopped.pods) {
    enqueue(KubeCall::remove(stopped.namespace_name, pod, seconds));
  }
  {
    std::lock_guard lock(mutex_);
    know(stopped, +1);
  }
  stopping_[key].push_back(std::move(stopped));
  return false;  // the room stays held until the pods are gone
}

std::optional<WorkloadEvent> KubeRunner::event_for(const std::string& key, Run& run,
                                                    const Snapshot& seen, TimePoint now,
                                                    bool* finished) {
  *finished = false;
  if (!seen.pods_listed) return std::nullopt;
  bool all_running = true, all_succeeded = true;
  const KubePod* failed = nullptr;
  for (size_t i = 0; i < run.pods.size(); ++i) {
    std::string full = run.namespace_name + "/" + run.pods[i];
    auto pod = seen.pods.find(full);
    auto gone = run.gone.find(i);
    const KubePod* found = pod != seen.pods.end() ? &pod->second : nullptr;
    // Deleted once it had ended: it ended as it says.
    if (!found && gone != run.gone.end() && gone->second.terminal()) found = &gone->second;
    if (!found) {
      if (auto refused = seen.refused.find(full); refused != seen.refused.end()) {
        *finished = true;
        return WorkloadEvent{key, WorkloadEventKind::kFailed, now, -1,
                             "the API server refused pod " + run.pods[i] + ": " + refused->second};
      }
      if (auto given_up = seen.given_up.find(full); given_up != seen.given_up.end()) {
        *finished = true;
        return WorkloadEvent{key, WorkloadEventKind::kFailed, now, -1,
                             "the API server did not take pod " + run.pods[i] + ": " + given_up->second,
                             EndCause::kEvicted};
      }
      if (seen.unreadable_pods.count(full)) {
        all_running = all_succeeded = false;  // how it is, the agent cannot read: it waits
        continue;
      }
      if (gone != run.gone.end() || run.seen[i] || (run.created_before && !seen.created.count(full))) {
        // Gone: deleted behind our back (or while the agent was down).
        *finished = true;
        if (gone == run.gone.end() && !run.seen[i]) {
          return WorkloadEvent{key, WorkloadEventKind::kLost, now, 0,
                               "pod " + run.pods[i] + " is gone; it is not created twice"};
        }
        return WorkloadEvent{key, WorkloadEventKind::kFailed, now, -1,
                             "pod " + run.pods[i] + " was deleted at the cluster",
                             gone != run.gone.end() ? cause_of(gone->second) : EndCause::kEvicted};
      }
      all_running = all_succeeded = false;  // not created yet
      continue;
    }
    run.seen[i] = true;
    const KubePod& p = *found;
    // A pod deleted behind the agent's back stays Running while its
    // containers may (its grace period; a node lost, whose kubelet never
    // confirms): its room stays held and its end waits for the kubelet's
    // Failed or the pod gone, so the copy is never placed again while it
    // may still run.
    if (p.phase == "Failed") {
      if (!failed) failed = &p;
    } else if (p.phase != "Succeeded") {
      all_succeeded = false;
      if (p.phase != "Running") all_running = false;
    }
  }
  if (failed) {
    *finished = true;
    std::string message = "pod " + failed->name + " failed";
    if (!failed->reason.empty()) message += ": " + failed->reason;
    if (!failed->message.empty()) message += " (" + failed->message + ")";
    return WorkloadEvent{key, WorkloadEventKind::kFailed, now, failed->exit_code, message, cause_of(*failed)};
  }
  if (all_succeeded) {
    *finished = true;
    return WorkloadEvent{key, WorkloadEventKind::kSucceeded, now, 0, ""};
  }
  if (all_running && !run.start_reported) {
    run.start_reported = true;
    return WorkloadEvent{key, WorkloadEventKind::kStarted, now, 0, describe(key)};
  }
  if (!run.start_reported) {
    // Told again only when the reason itself changes, not its message (the
    // kubelet's backoff seconds) nor between a pull's error and its backoff.
    std::string waiting = waiting_reason(run, seen, /*unusual=*/true);
    if (reason_word(waiting) != reason_word(run.waiting_told)) {
      run.waiting_told = waiting;
      return WorkloadEvent{key, WorkloadEventKind::kWaiting, now, 0, std::move(waiting)};
    }
  }
  return std::nullopt;
}

std::vector<WorkloadEvent> KubeRunner::observe(TimePoint now) {
  last_observed_ = now;
  for (auto it = forgotten_.begin(); it != forgotten_.end();) {
    if (it->second.second > now) {
      ++it;
      continue;
    }
    for (const std::string& pod : it->second.first.pods) {
      enqueue(KubeCall::remove(it->second.first.namespace_name, pod, 1));
    }
    it = forgotten_.erase(it);
  }
  std::vector<WorkloadEvent> events;
  std::vector<std::string> ended;
  std::lock_guard lock(mutex_);
  // Only the copies whose pods changed are looked at again (and those just
  // launched); every one at each sweep, which bounds what a change missed
  // could cost to its interval.
  bool everything = snapshot_.touched_all;
  if (now >= next_sweep_ && snapshot_.pods_listed) {
    sweep_orphans(now);
    next_sweep_ = now + kSweepInterval;
    wake_.notify_all();  // deletes may have been queued
    everything = true;
  }
  std::set<std::string> look = std::move(launched_);
  launched_.clear();
  for (const std::string& pod : snapshot_.touched) {
    if (auto it = run_of_pod_.find(pod); it != run_of_pod_.end()) look.insert(it->second.first);
  }
  snapshot_.touched.clear();
  snapshot_.touched_all = false;
  // The last word of each of our pods deleted since the last look, kept
  // with its run; those of no run (a copy stopped or forgotten) go.
  for (auto& [pod, last] : snapshot_.gone) {
    auto it = run_of_pod_.find(pod);
    if (it == run_of_pod_.end()) continue;
    runs_.at(it->second.first).gone[it->second.second] = std::move(last);
    look.insert(it->second.first);
  }
  snapshot_.gone.clear();
  auto look_at = [&](const std::string& key, Run& run) {
    bool finished = false;
    if (auto event = event_for(key, run, snapshot_, now, &finished)) events.push_back(std::move(*event));
    if (finished) ended.push_back(key);
  };
  if (everything) {
    for (auto& [key, run] : runs_) look_at(key, run);
  } else {
    for (const std::string& key : look) {
      if (auto it = runs_.find(key); it != runs_.end()) look_at(key, it->second);
    }
  }
  for (const std::string& key : ended) {
    // A gang whose replica failed stops the others, by name: those not yet
    // seen too (a create still waiting is dropped; one out is deleted once
    // made). Finished pods stay (as Kubernetes keeps them) until the copy
    // is forgotten.
    Run& run = runs_.at(key);
    for (const std::string& pod : run.pods) {
      auto it = snapshot_.pods.find(run.namespace_name + "/" + pod);
      if (it == snapshot_.pods.end() || !it->second.terminal()) {
        calls_.push(KubeCall::remove(run.namespace_name, pod, run.grace_seconds));
      }
    }
    ended_[key] = {run.namespace_name, run.pods};
    forget_calls_of(ended_[key]);
    know(ended_[key], -1);
    index_run(key, run, false);
    runs_.erase(key);
  }
  if (!ended.empty()) wake_.notify_all();  // calls were queued
  if (!snapshot_.pods_listed) return events;
  for (auto it = stopping_.begin(); it != stopping_.end();) {
    std::deque<Pods>& stops = it->second;
    while (!stops.empty() && std::none_of(stops.front().pods.begin(), stops.front().pods.end(),
                                          [&](const std::string& pod) {
                                            auto found = snapshot_.pods.find(stops.front().namespace_name + "/" + pod);
                                            return found != snapshot_.pods.end() && !found->second.terminal();
                                          })) {
      events.push_back({it->first, WorkloadEventKind::kStopped, now, 0, ""});
      know(stops.front(), -1);
      stops.pop_front();
    }
    it = stops.empty() ? stopping_.erase(it) : std::next(it);
  }
  return events;
}

void KubeRunner::sweep_orphans(TimePoint now) {
  std::set<std::string> known;
  auto know = [&](const Pods& pods) {
    for (const std::string& pod : pods.pods) known.insert(pods.namespace_name + "/" + pod);
  };
  for (const auto& [key, run] : runs_) know({run.namespace_name, run.pods});
  for (const auto& [key, stops] : stopping_) std::for_each(stops.begin(), stops.end(), know);
  for (const auto& [key, pods] : ended_) know(pods);
  for (const auto& [key, entry] : forgotten_) know(entry.first);
  std::map<std::string, TimePoint> still;
  for (const auto& [name, pod] : snapshot_.pods) {
    // A pod being deleted is going already; whoever deletes it chose its grace.
    if (!ours(pod) || known.count(name) || (pod.deleting && !pod.terminal())) continue;
    auto seen = orphans_.find(name);
    if (seen == orphans_.end()) {
      // First seen now: not before the next sweep (by then every copy
      // restored at a start is launched again, and so known), and not
      // before it has been finished, or if it runs on, in being, for
      // keep_finished.
      TimePoint since = pod.terminal() ? pod.finished_at.value_or(now) : pod.created_at.value_or(now);
      still[name] = std::max(now + kSweepInterval, since + options_.keep_finished);
    } else if (now >= seen->second) {
      if (options_.logger) {
        options_.logger->info("kubernetes: deleting pod {}, {} and held by no copy here", name,
                              pod.terminal() ? "finished" : "not finished");
      }
      // With its own grace, as its copy's stop would have.
      calls_.push(KubeCall::remove(pod.namespace_name, pod.name, grace_seconds(std::chrono::seconds(pod.grace_seconds))));
      still[name] = TimePoint::max();  // asked once; gone from the list once deleted
    } else {
      still[name] = seen->second;
    }
  }
  orphans_ = std::move(still);
}

TimePoint KubeRunner::next_event_at() const {
  // Changes come from the cluster: the loop's periodic tick reads them.
  return TimePoint::max();
}

void KubeRunner::forget(const std::string& key) {
  // The copy is done with: its markers go now, its finished pods (and their
  // logs) after keep_finished.
  if (auto ended = ended_.find(key); ended != ended_.end()) {
    forgotten_[key] = {std::move(ended->second), last_observed_ + options_.keep_finished};
    ended_.erase(ended);
  }
  std::string prefix = key_hash(key) + ".";
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(options_.state_dir, error)) {
    if (entry.path().filename().string().starts_with(prefix)) std::filesystem::remove(entry.path(), error);
  }
}

}  // namespace shoal::cluster::kubernetes

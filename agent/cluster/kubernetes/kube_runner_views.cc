// The kubernetes backend, what it tells and what it counts: a copy's pods
// described, why one waits, its logs through the API server; the tallies of
// room the cluster's pods take (ours and others'), node changes, warnings,
// and the API server's answers for /metrics.
#include "agent/cluster/kubernetes/kube_runner.h"

namespace shoal::cluster::kubernetes {

std::string KubeRunner::describe(const std::string& key) const {
  auto it = runs_.find(key);
  if (it == runs_.end()) return "";
  std::string pods;
  for (const std::string& pod : it->second.pods) pods += (pods.empty() ? "" : ", ") + pod;
  return "pod " + pods + " in namespace " + it->second.namespace_name + ", bound by the agent to its node";
}

std::string KubeRunner::waiting_reason(const Run& run, const Snapshot& seen, bool unusual) {
  for (const std::string& pod : run.pods) {
    auto found = seen.pods.find(run.namespace_name + "/" + pod);
    if (found == seen.pods.end() || found->second.waiting.empty()) continue;
    std::string waiting = found->second.waiting;
    if (unusual && (waiting.rfind("ContainerCreating", 0) == 0 || waiting.rfind("PodInitializing", 0) == 0)) {
      continue;
    }
    // Kept short for the copy's reason: cut at a character's start.
    if (waiting.size() > kReasonBytes) {
      size_t cut = kReasonBytes;
      while (cut > 0 && (static_cast<unsigned char>(waiting[cut]) & 0xC0) == 0x80) --cut;
      waiting = waiting.substr(0, cut) + "...";
    }
    return "pod " + pod + ": " + waiting;
  }
  return "";
}

std::string KubeRunner::unstarted_reason(const std::string& key) const {
  auto it = runs_.find(key);
  if (it == runs_.end()) return "";
  std::lock_guard lock(mutex_);
  return waiting_reason(it->second, snapshot_, /*unusual=*/false);
}

Result<LogChunk> KubeRunner::read_log(const std::string& key, int replica, int64_t offset,
                                      size_t max_bytes) const {
  const Pods* copy = nullptr;
  Pods running;
  if (auto run = runs_.find(key); run != runs_.end()) {
    running = {run->second.namespace_name, run->second.pods};
    copy = &running;
  } else if (auto ended = ended_.find(key); ended != ended_.end()) {
    copy = &ended->second;
  } else if (auto stops = stopping_.find(key); stops != stopping_.end()) {
    copy = &stops->second.back();
  } else if (auto forgotten = forgotten_.find(key); forgotten != forgotten_.end()) {
    copy = &forgotten->second.first;
  }
  if (!copy) return not_found("no pod of " + key + " here");
  if (replica < 0 || static_cast<size_t>(replica) >= copy->pods.size()) {
    return invalid_argument("replica: expected 0.." + std::to_string(copy->pods.size() - 1));
  }
  const std::string& pod = copy->pods[static_cast<size_t>(replica)];
  std::string full = copy->namespace_name + "/" + pod;
  auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(mutex_);
  auto it = logs_.find(full);
  bool same_ask = it != logs_.end() && it->second.offset == offset && it->second.max_bytes == max_bytes;
  if (same_ask && !it->second.reading &&
      ((it->second.pod_ended && it->second.complete) || now - it->second.read_at < kLogFreshFor)) {
    const LogRead& read = it->second;
    if (!read.error.is_ok()) return read.error;
    LogChunk chunk;
    chunk.data = read.data.substr(0, max_bytes);
    chunk.offset = read.data_start;
    chunk.next_offset = read.data_start + static_cast<int64_t>(chunk.data.size());
    chunk.finished = read.pod_ended && read.complete && chunk.data.size() == read.data.size();
    return chunk;
  }
  if (!same_ask || !it->second.reading) {
    // Reads nobody asked for again in a while go; this one is queued ahead
    // of creates and deletes (an operator waits for it).
    std::erase_if(logs_, [&](const auto& entry) {
      return !entry.second.reading && now - entry.second.read_at > kLogKeptFor;
    });
    int64_t limit = offset >= 0 ? offset + static_cast<int64_t>(max_bytes) : kLogTailReadBytes;
    LogRead& read = logs_[full];
    read = LogRead();
    read.offset = offset;
    read.max_bytes = max_bytes;
    read.limit_bytes = limit;
    calls_.push(KubeCall::read_log(copy->namespace_name, pod, limit));
    wake_.notify_all();
  }
  LogChunk pending;
  pending.offset = pending.next_offset = std::max<int64_t>(offset, 0);
  pending.pending = true;
  return pending;
}

void KubeRunner::index_run(const std::string& key, const Run& run, bool add) {
  for (size_t i = 0; i < run.pods.size(); ++i) {
    std::string full = run.namespace_name + "/" + run.pods[i];
    if (add) {
      run_of_pod_[full] = {key, i};
    } else {
      run_of_pod_.erase(full);
    }
  }
}

void KubeRunner::know(const Pods& pods, int delta) {
  for (const std::string& pod : pods.pods) {
    std::string full = pods.namespace_name + "/" + pod;
    int& count = known_pods_[full];
    int before = count;
    count += delta;
    bool known = count > 0;
    if (count <= 0) known_pods_.erase(full);
    if ((before > 0) == known) continue;
    // Known now (or no longer): its room leaves (or joins) others'.
    auto seen = snapshot_.pods.find(full);
    if (seen == snapshot_.pods.end() || !holds_room(seen->second)) continue;
    model::Resources& room = snapshot_.others_room[seen->second.node_name];
    if (known) {
      room -= seen->second.requests;
    } else {
      room += seen->second.requests;
    }
  }
}

bool KubeRunner::holds_room(const KubePod& pod) { return !pod.node_name.empty() && !pod.terminal(); }

void KubeRunner::tally(const std::string& name, const KubePod& pod, int sign) {
  if (!holds_room(pod)) return;
  snapshot_.pods_on[pod.node_name] += sign;
  if (known_pods_.count(name)) return;
  model::Resources& room = snapshot_.others_room[pod.node_name];
  if (sign > 0) {
    room += pod.requests;
  } else {
    room -= pod.requests;
  }
}

void KubeRunner::put_pod(const std::string& name, KubePod&& pod) {
  auto [it, fresh] = snapshot_.pods.try_emplace(name);
  if (!fresh) tally(name, it->second, -1);
  it->second = std::move(pod);
  tally(name, it->second, +1);
  if (ours(it->second)) snapshot_.touched.insert(name);
}

void KubeRunner::erase_pod(const std::string& name) {
  auto it = snapshot_.pods.find(name);
  if (it == snapshot_.pods.end()) return;
  tally(name, it->second, -1);
  if (ours(it->second)) snapshot_.touched.insert(name);
  snapshot_.pods.erase(it);
}

std::string KubeRunner::broken_tally() const {
  std::lock_guard lock(mutex_);
  std::unordered_map<std::string, int64_t> pods_on;
  std::unordered_map<std::string, model::Resources> others;
  for (const auto& [name, pod] : snapshot_.pods) {
    if (!holds_room(pod)) continue;
    ++pods_on[pod.node_name];
    if (!known_pods_.count(name)) others[pod.node_name] += pod.requests;
  }
  for (const auto& [node, count] : snapshot_.pods_on) {
    auto it = pods_on.find(node);
    if (count != (it == pods_on.end() ? 0 : it->second)) {
      return "node " + node + ": " + std::to_string(count) + " pods tallied";
    }
  }
  for (const auto& [node, room] : snapshot_.others_room) {
    auto it = others.find(node);
    if (room != (it == others.end() ? model::Resources{} : it->second)) {
      return "node " + node + ": others' room tallied as " + room.to_string();
    }
  }
  for (const auto& [node, room] : others) {
    auto it = snapshot_.others_room.find(node);
    if (it == snapshot_.others_room.end() || it->second != room) return "node " + node + ": others' room untallied";
  }
  return "";
}

std::map<std::string, model::Resources> KubeRunner::room_taken_by_others() const {
  std::map<std::string, model::Resources> taken;
  std::lock_guard lock(mutex_);
  for (const auto& [node, room] : snapshot_.others_room) {
    if (room != model::Resources{} && nodes_told_.count(node)) taken[node] = room;
  }
  if (!snapshot_.nodes_listed) return taken;
  // A node that may take no new work (cordoned, NotReady, tainted with
  // what the pods do not tolerate, as many pods as its kubelet admits) or
  // is gone counts as full.
  for (const auto& [name, told] : nodes_told_) {
    auto it = snapshot_.nodes.find(name);
    if (it == snapshot_.nodes.end() || !it->second.usable(options_.spec.tolerations) ||
        (it->second.allocatable_pods > 0 && pods_on(name) >= it->second.allocatable_pods)) {
      taken[name] = model::Resources{int64_t{1} << 50, int64_t{1} << 60, int64_t{1} << 30};
    }
  }
  return taken;
}

std::vector<model::NodeSpec> KubeRunner::take_node_changes() {
  std::vector<model::NodeSpec> changed;
  std::lock_guard lock(mutex_);
  for (const auto& [name, node] : snapshot_.nodes) {
    auto told = nodes_told_.find(name);
    if (told == nodes_told_.end()) {
      if (node.allocatable.is_zero()) continue;  // nothing to schedule on (yet)
    } else if (told->second.capacity == node.allocatable && told->second.labels == node.labels) {
      continue;
    }
    model::NodeSpec now{name, node.allocatable, node.labels};
    nodes_told_[name] = now;
    changed.push_back(std::move(now));
  }
  return changed;
}

std::vector<std::string> KubeRunner::warnings() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> lines;
  const std::pair<const char*, const std::map<std::string, std::string>*> kinds[] = {
      {"of our pods (their copies wait)", &snapshot_.unreadable_pods},
      {"pods (their room is not counted)", &snapshot_.unreadable_other_pods},
      {"nodes (they take no new work)", &snapshot_.unreadable_nodes}};
  for (const auto& [what, unreadable] : kinds) {
    if (unreadable->empty()) continue;
    lines.push_back(std::to_string(unreadable->size()) + " " + what + " cannot be read; the first, " +
                    unreadable->begin()->first + ": " + unreadable->begin()->second);
  }
  return lines;
}

void KubeRunner::note_call(const char* verb, long status, std::chrono::steady_clock::duration took) {
  auto key = std::make_pair(std::string(verb), status > 0 ? std::to_string(status) : std::string("none"));
  auto found = snapshot_.calls.find(key);
  if (found == snapshot_.calls.end()) found = snapshot_.calls.emplace(key, Histogram(latency_buckets_seconds())).first;
  found->second.observe(std::chrono::duration<double>(took).count());
}

std::optional<ApiStats> KubeRunner::api_stats() const {
  std::lock_guard lock(mutex_);
  ApiStats stats;
  stats.calls = snapshot_.calls;
  stats.lists = snapshot_.lists;
  stats.watches_resumed = snapshot_.watches_resumed;
  stats.queued = static_cast<int64_t>(calls_.size());
  stats.refused = snapshot_.refused_total;
  stats.given_up = snapshot_.given_up_total;
  return stats;
}

Status KubeRunner::health() const {
  std::lock_guard lock(mutex_);
  if (!snapshot_.server_reachable.is_ok()) return snapshot_.server_reachable;
  if (!snapshot_.pods_reachable.is_ok()) return snapshot_.pods_reachable;
  if (!snapshot_.other_pods_reachable.is_ok()) return snapshot_.other_pods_reachable;
  if (!snapshot_.nodes_reachable.is_ok()) return snapshot_.nodes_reachable;
  if (!snapshot_.pods_listed || !snapshot_.other_pods_listed) {
    return Status(ErrorCode::kUnavailable, "kube-apiserver: pods not listed yet");
  }
  return Status::ok();
}

}  // namespace shoal::cluster::kubernetes

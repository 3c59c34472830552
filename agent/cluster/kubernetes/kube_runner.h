// The kubernetes backend (docs/backends.md): a NodeCluster whose nodes are
// the Kubernetes cluster's and whose work KubeRunner runs as pods, one per
// replica, each bound by the agent to the node its local scheduler reserved
// (spec.nodeName: the agent is the scheduler of the pods it creates, so its
// room accounting stays exact and kube-scheduler never sees them pending).
//
// Every API call runs on the runner's own threads: two list then watch
// the cluster's pods (ours by label; others' by a field selector that
// leaves out ended ones), one its nodes, and spec.parallelCalls threads, each
// on a connection of its own, create and delete pods and read their logs
// (read_log answers "pending" until it has), one pod's calls one after the
// other (KubeCallQueue); idle, one of them asks /readyz every second (a
// watch on a server that stopped answering stays open and silent). A call
// the server did not settle (no answer, 5xx, 429) is made again after an
// exponential backoff with jitter, never sooner than its Retry-After; a
// create, at most 9 times. The agent's loop only reads their
// latest snapshot and queues creates and deletes, so a slow or dead API
// server never blocks it: the runner turns unhealthy (the agent answers
// candidates BackendUnavailable) and recovers by itself when the server
// answers again.
//
// Exactly once: a pod's name derives from (key, epoch, replica), so a
// second create is AlreadyExists; a marker file <state>/<hash>.<epoch> is
// made durable before the first create, and a copy whose marker exists but
// whose pods are gone (deleted while the agent was down) is reported Lost,
// never created again.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <spdlog/logger.h>

#include "agent/cluster/kubernetes/kube_api.h"
#include "agent/cluster/kubernetes/kube_calls.h"
#include "agent/cluster/node_cluster.h"
#include "model/manifest.h"

namespace shoal::cluster::kubernetes {

// The API server and credentials `spec` names (its kubeconfig, or the
// pod's service account); one-line errors naming the field.
Result<KubeConfig> config_for(const model::KubernetesSpec& spec);

// The cluster's nodes (those spec.nodeSelector selects) as the agent's
// nodes: allocatable cpu, memory and GPUs, and their labels, as the agent
// starts (a node that joins later, or changes, is found by the nodes watch:
// KubeRunner::take_node_changes).
Result<std::vector<model::NodeSpec>> discover_nodes(const model::KubernetesSpec& spec);

// `text` as a URL query value: every byte but [A-Za-z0-9._-] as %XX.
std::string url_escaped(std::string_view text);

// `labels` as a labelSelector query value, URL-encoded ("a%3Db%2Cc%3Dd").
std::string label_selector(const model::Labels& labels);

// The name of replica `replica` of `key`'s copy at `epoch`: the same for
// every create of it, and a valid pod name whatever the key holds.
std::string pod_name(const std::string& key, uint64_t epoch, int replica);

struct KubeRunnerOptions {
  model::KubernetesSpec spec;
  KubeConfig config;
  std::string cluster_name;  // the agent's: labels its pods as its own
  std::string state_dir;     // <data>/kubernetes: the create markers
  // The cluster's nodes as the agent starts with them (discover_nodes);
  // take_node_changes tells what differs from them.
  std::vector<model::NodeSpec> nodes;
  // How long a finished copy's pods (and so their logs) outlive the core's
  // record of it (exec.keepFinished in agent.yaml).
  std::chrono::seconds keep_finished = std::chrono::hours(1);
  // Where retries and given-up creates are told (the agent's log); none: untold.
  std::shared_ptr<spdlog::logger> logger;
  // Objects per page of a list (limit): a list of a big cluster's pods in
  // one answer would outlast the call timeout and hold it all in memory.
  int list_page_size = 500;
};

class KubeRunner final : public Runner {
 public:
  // Creates the state directory and starts the threads.
  static Result<std::unique_ptr<KubeRunner>> create(KubeRunnerOptions options);
  ~KubeRunner() override;

  Status launch(const LaunchRequest& request) override;
  bool stop(const std::string& key, Duration grace) override;
  std::vector<WorkloadEvent> observe(TimePoint now) override;
  TimePoint next_event_at() const override;
  void forget(const std::string& key) override;
  std::string describe(const std::string& key) const override;
  // The first of its pods that waits: "pod NAME: REASON: MESSAGE".
  std::string unstarted_reason(const std::string& key) const override;
  Result<LogChunk> read_log(const std::string& key, int replica, int64_t offset,
                            size_t max_bytes) const override;
  std::map<std::string, model::Resources> room_taken_by_others() const override;
  // The pods and nodes of the cluster it could not read, if any.
  std::vector<std::string> warnings() const override;
  // Nodes new or whose allocatable or labels differ from what was last
  // told (options.nodes at first), as the nodes watch sees them now.
  std::vector<model::NodeSpec> take_node_changes() override;
  Status health() const override;
  // A tally of the snapshot (pods per node, others' room) that differs from
  // a count over every pod, described; empty when they agree. For tests.
  std::string broken_tally() const;
  std::optional<ApiStats> api_stats() const override;
  // Any workload: one that names no image runs spec.kubernetes.image.
  Status supports(const model::WorkloadSpec&) const override { return Status::ok(); }
  bool reports_starts() const override { return true; }

 private:
  explicit KubeRunner(KubeRunnerOptions options);

  // A pod's output as a call thread last read it (pods/log) for one
  // ask of read_log: the window at `offset` (< 0: that far before the end).
  struct LogRead {
    int64_t offset = 0;
    size_t max_bytes = 0;
    int64_t limit_bytes = 0;  // what the read asked the server for
    bool reading = true;      // queued or in flight; the rest is not set yet
    std::chrono::steady_clock::time_point read_at{};
    Status error = Status::ok();
    std::string data;         // the output from data_start on, as read
    int64_t data_start = 0;
    bool complete = false;    // the read reached the output's end
    bool pod_ended = false;   // the pod had ended before the read: nothing follows
  };
  // What the threads last saw. Guarded by mutex_.
  struct Snapshot {
    bool pods_listed = false;   // our pods were listed once since the start
    bool other_pods_listed = false;
    bool nodes_listed = false;
    Status pods_reachable = Status::ok();   // the last list or watch of our pods
    Status other_pods_reachable = Status::ok();  // ... of others' pods
    Status nodes_reachable = Status::ok();  // ... of nodes
    Status server_reachable = Status::ok();  // the last call: a create, a delete, or the probe
    // Our pods, and others' that have not ended, by "namespace/name":
    // changed only through put_pod and erase_pod, which keep the two
    // tallies below.
    std::map<std::string, KubePod> pods;
    // Per node, of the pods above that hold room there (holds_room): how
    // many there are, ours too; and what those the loop does not know
    // (known_pods_) ask, which room_taken_by_others reports without a
    // pass over every pod.
    std::unordered_map<std::string, int64_t> pods_on;
    std::unordered_map<std::string, model::Resources> others_room;
    // Our pods whose state (in pods, created, refused, given_up,
    // unreadable_pods) changed since the loop last looked, or all of them
    // (a list): observe looks again only at their copies.
    std::unordered_set<std::string> touched;
    bool touched_all = false;
    std::map<std::string, KubeNode> nodes;  // by name
    std::set<std::string> created;          // our pods the server took (or had)
    std::map<std::string, std::string> refused;  // our pods the server refused, why
    // Our pods whose create was given up without an answer that settles
    // it, why: giving_up while their delete has not yet found them gone
    // (the create may have been made all the same), then given_up: the
    // cluster failed the copy, not the job.
    std::map<std::string, std::string> giving_up, given_up;
    // Our pods the watch saw deleted, as they were last: a pod that
    // Succeeded or Failed and was deleted before the loop looked (the pod
    // garbage collector, an operator's cleanup) ended as it says, not by
    // its deletion. The loop takes them into its runs at each observe.
    std::map<std::string, KubePod> gone;
    // Pods and nodes the agent could not read, by "namespace/name" (a
    // node's: its name), with why: left out of the room counted. One of
    // our pods unreadable is neither gone nor ended: its copy waits.
    std::map<std::string, std::string> unreadable_pods, unreadable_other_pods, unreadable_nodes;
    // What api_stats() reports: every call's latency by (verb, status),
    // whole lists, watches resumed, creates refused or given up.
    std::map<std::pair<std::string, std::string>, Histogram> calls;
    int64_t lists = 0, watches_resumed = 0, refused_total = 0, given_up_total = 0;
  };
  // A copy the loop launched.
  struct Run {
    uint64_t epoch = 0;
    std::string namespace_name;
    int64_t grace_seconds = 1;      // for its pods' deletes
    std::vector<std::string> pods;  // one per replica
    bool created_before = false;    // its marker existed at launch: never create again
    std::vector<bool> seen;         // per replica: its pod was in a snapshot once
    std::map<size_t, KubePod> gone;  // per replica: its pod as last seen, once deleted
    bool start_reported = false;
    std::string waiting_told;  // the last kWaiting's message
  };
  // The pods of one copy that the loop no longer runs.
  struct Pods {
    std::string namespace_name;
    std::vector<std::string> pods;
  };

  // One collection of the API (our pods, others' pods, nodes) as the
  // snapshot keeps it. Pages and events are parsed on the watching thread
  // with mutex_ free; only what they hold is taken in under it.
  template <typename Item>
  struct Collection {
    const char* what;      // "pods", for messages
    std::string path;      // "/api/v1/pods"
    std::string selector;  // "labelSelector=...&fieldSelector=..." or ""
    Result<KubeList<Item>> (*parse_list)(std::string_view);
    Result<KubeEvent> (*parse_event)(std::string_view);
    // Under mutex_: the whole collection, every page of one list.
    std::function<void(KubeList<Item>&&)> take_list;
    // Under mutex_: one watch event (not an error: those list again).
    std::function<void(KubeEvent&&)> take_event;
    Status Snapshot::*reachable;  // how the last list or watch went
  };
  static constexpr const char* kClusterLabel = "shoal.dev/cluster";
  // Under mutex_: one call to the API server, answered with HTTP `status`
  // (0: none) after `took`.
  void note_call(const char* verb, long status, std::chrono::steady_clock::duration took);
  // Whether `pod` is one of this agent's (labelled with its cluster).
  bool ours(const KubePod& pod) const;
  // Lists `collection` in pages, then watches it from the list's
  // resourceVersion, for as long as the runner lives. A broken watch goes
  // on from the last resourceVersion it saw; only an error event (410 Gone:
  // too old to watch from) or an unreadable line lists again. A failed list
  // or watch is tried again after a backoff.
  template <typename Item>
  void list_and_watch(const Collection<Item>& collection);
  // Every page of one list (limit, continue), parsed.
  template <typename Item>
  Result<KubeList<Item>> list_pages(KubeClient& api, const Collection<Item>& collection);
  // Our pods (by label), others' pods that have not ended (by field: a
  // finished pod of theirs takes no room, and a cluster holds many), nodes.
  void watch_own_pods();
  void watch_other_pods();
  void watch_nodes();
  // Under mutex_: a whole list of our pods (`own`) or of others', in place
  // of what the snapshot held of them.
  void take_pod_list(KubeList<KubePod>&& list, bool own);
  // One of the threads that make the calls of calls_; `probes`: the one
  // that, idle, asks whether the server still answers.
  void make_calls(bool probes);
  // Under mutex_: `call` was answered (or not) with `answer`: settled,
  // made again after a backoff, or given up.
  void take_answer(KubeCall call, const Result<KubeClient::Answer>& answer);
  // A call thread's part of a kReadLog: GET pods/log, into logs_.
  void read_pod_log(KubeClient& api, const KubeCall& call);
  // The pod of replica `replica` of `request`, as JSON.
  std::string pod_body(const LaunchRequest& request, int replica) const;
  std::string marker_path(const std::string& key, uint64_t epoch) const;
  void enqueue(KubeCall call);
  // Under mutex_: what the call threads noted of `pods`' creates, once no
  // run waits on it.
  void forget_calls_of(const Pods& pods);
  // Why the first of `run`'s pods in `seen` that waits to start does so,
  // "pod NAME: REASON: MESSAGE" cut to kReasonBytes; "" when none waits.
  // `unusual`: only reasons that are not every start's (ContainerCreating,
  // PodInitializing).
  static std::string waiting_reason(const Run& run, const Snapshot& seen, bool unusual);
  // What `run`'s pods say now, as at most one event (none when nothing
  // new); `finished` when that event ends the copy.
  std::optional<WorkloadEvent> event_for(const std::string& key, Run& run, const Snapshot& seen,
                                         TimePoint now, bool* finished);

  KubeRunnerOptions options_;
  // The loop's. runs_: launched and not ended. stopping_: every stop()
  // that returned false, oldest first per key, each owed one kStopped once
  // its pods are gone (NodeCluster frees one holding per kStopped).
  // ended_: copies that ended by themselves, whose pods stay (as
  // Kubernetes keeps finished pods) until forget().
  // forgotten_: ended copies the core forgot, whose pods stay for
  // keep_finished (their logs can still be read), each with when they go.
  std::map<std::string, Run> runs_;
  std::map<std::string, std::deque<Pods>> stopping_;
  std::map<std::string, Pods> ended_;
  std::map<std::string, std::pair<Pods, TimePoint>> forgotten_;
  TimePoint last_observed_{};
  // The loop's: each pod of runs_ ("namespace/name") with its run's key and
  // replica, and the runs launched since observe last looked.
  std::unordered_map<std::string, std::pair<std::string, size_t>> run_of_pod_;
  std::set<std::string> launched_;
  // Adds (or removes) `run`'s pods in run_of_pod_.
  void index_run(const std::string& key, const Run& run, bool add);
  // Under mutex_: the pods of runs_ and stopping_ ("namespace/name", each
  // with how many of them hold it), whose room is the loop's own, not
  // others'.
  std::unordered_map<std::string, int> known_pods_;
  // Under mutex_: adds `delta` to the count of each of `pods`, moving the
  // room of those that become known (or unknown) out of (into) others'.
  void know(const Pods& pods, int delta);
  // Whether `pod` holds room on a node: bound there and not ended.
  static bool holds_room(const KubePod& pod);
  // Under mutex_: adds (`sign` 1) or takes away (-1) `pod`'s part in the
  // snapshot's tallies.
  void tally(const std::string& name, const KubePod& pod, int sign);
  // Under mutex_: `pod` in place of what the snapshot held as `name`, or
  // nothing in its place, with the tallies kept.
  void put_pod(const std::string& name, KubePod&& pod);
  void erase_pod(const std::string& name);
  int64_t pods_on(const std::string& node) const {
    auto it = snapshot_.pods_on.find(node);
    return it == snapshot_.pods_on.end() ? 0 : it->second;
  }
  // Each node the cluster schedules on, as last told to it (options.nodes,
  // then take_node_changes).
  std::map<std::string, model::NodeSpec> nodes_told_;
  // Finished pods of ours that no copy the loop knows holds (a copy
  // forgotten before a restart left them), with when they may go: finished
  // keep_finished ago, and seen at one sweep before (the copies restored at
  // a restart are launched again, and so known, by then).
  std::map<std::string, TimePoint> orphans_;
  TimePoint next_sweep_{};
  // Under mutex_: deletes the orphans whose time has come (the loop's
  // observe calls it every 10 s).
  void sweep_orphans(TimePoint now);

  mutable std::mutex mutex_;
  // mutable: read_log (const, as every Runner's) queues reads of output.
  mutable std::condition_variable wake_;
  Snapshot snapshot_;
  mutable KubeCallQueue calls_;
  std::minstd_rand jitter_;  // spreads the retries' backoffs
  mutable std::map<std::string, LogRead> logs_;  // by "namespace/pod"
  std::atomic<bool> quit_{false};
  std::vector<std::thread> threads_;
};

}  // namespace shoal::cluster::kubernetes

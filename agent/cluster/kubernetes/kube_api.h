// The Kubernetes API as the kubernetes backend uses it (docs/backends.md):
// where the API server is and how to prove who we are (a kubeconfig, or the
// pod's own service account in the cluster), Nodes and Pods as lists and as
// watch events, and the HTTP that carries them.
//
// The parsers are pure, fuzzed and unit-tested on the API server's own
// answers; every error is one line naming the field and what was expected.
// KubeClient does the HTTP over the backends' client (agent/cluster/http):
// TLS verified against the cluster's CA, a bearer token or a client
// certificate, and a timeout on every call.
// It blocks for at most that long (a watch, at most the time it is given),
// so the backend calls it off the agent's loop.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/cluster/http/http_client.h"
#include "common/status.h"
#include "common/time.h"
#include "model/manifest.h"
#include "model/resources.h"

namespace shoal::cluster::kubernetes {

// How to reach one API server and authenticate to it.
struct KubeConfig {
  std::string server;           // "https://host:port"
  std::string ca_pem;           // the cluster's CA (PEM); empty: the system's roots
  std::string token;            // a bearer token, or empty
  // Where `token` was read from, or empty (given inline). Bound
  // ServiceAccount tokens rotate, so KubeClient reads it again as client-go
  // does: every minute, and at once after a 401.
  std::string token_file;
  std::string client_cert_pem;  // a client certificate and its key (PEM), or empty
  std::string client_key_pem;
  std::string namespace_name;   // the context's namespace (in the cluster: the pod's)
};

// A kubeconfig's `context` (its current-context when empty): the cluster's
// server and CA, the user's token or client certificate. Files it names are
// read relative to the kubeconfig's folder; *-data fields are base64.
// `where` prefixes every error: "kubeconfig /etc/k.yaml: users[0].user.token: ...".
Result<KubeConfig> parse_kubeconfig(std::string_view text, const std::string& where,
                                    const std::string& base_dir, const std::string& context = "");
Result<KubeConfig> load_kubeconfig(const std::string& path, const std::string& context = "");
// A token file's token, without its trailing newline; `field` prefixes errors.
Result<std::string> read_token_file(const std::string& path, const std::string& field);
// The pod's own service account: its token, CA and namespace under
// `secrets_dir`, the API server from KUBERNETES_SERVICE_HOST and _PORT.
Result<KubeConfig> in_cluster_config(
    const std::string& secrets_dir = "/var/run/secrets/kubernetes.io/serviceaccount");

struct KubeNode {
  std::string name;
  std::map<std::string, std::string> labels;
  model::Resources allocatable;  // cpu, memory, nvidia.com/gpu
  int64_t allocatable_pods = 0;  // how many pods the kubelet admits; 0: not said
  bool ready = false;            // condition Ready is True
  bool unschedulable = false;    // cordoned
  // Its NoSchedule and NoExecute taints (those that keep pods away).
  struct Taint {
    std::string key, value, effect;
  };
  std::vector<Taint> taints;
  // Whether new work carrying `tolerations` may go there: Ready, not
  // cordoned, every taint that keeps pods away tolerated.
  bool usable(const std::vector<model::Toleration>& tolerations = {}) const;
};

struct KubePod {
  std::string namespace_name;
  std::string name;
  std::string uid;
  std::map<std::string, std::string> labels;
  std::string node_name;  // "" until bound
  int64_t grace_seconds = 30;  // spec.terminationGracePeriodSeconds (Kubernetes' default: 30)
  std::string phase;      // Pending, Running, Succeeded, Failed, Unknown
  // What the scheduler counts against its node (the effective request):
  // the containers and sidecars, at least each init step, plus overhead.
  model::Resources requests;
  bool deleting = false;   // metadata.deletionTimestamp is set
  std::optional<TimePoint> created_at;  // metadata.creationTimestamp, if it says
  int32_t exit_code = 0;   // the first terminated container's
  std::optional<TimePoint> finished_at;  // ... when it ended, if it says
  std::string reason;      // the pod's (Evicted, ...), else its container's (OOMKilled, Error, ...)
  std::string message;
  // Why the cluster is ending it, when it says (the DisruptionTarget
  // condition's reason: EvictionByEvictionAPI, DeletionByTaintManager,
  // PreemptionByScheduler, DeletionByPodGC, TerminationByKubelet); "" if not.
  std::string disruption;
  // Why its first waiting container has not started, as the kubelet says
  // ("ErrImagePull: ...", "CreateContainerConfigError: ..."); "" if none waits.
  std::string waiting;
  bool terminal() const { return phase == "Succeeded" || phase == "Failed"; }
};

// An object of a list or watch that could not be read (a field of a type
// or size the agent cannot hold), as far as it names itself. It is left
// out and reported, never the whole answer refused: one odd pod of the
// cluster's must not blind the agent to all the others.
struct Unreadable {
  std::string namespace_name;  // "" when unreadable too
  std::string name;
  std::string error;  // one line naming the field
  std::string full_name() const { return namespace_name + "/" + name; }
};

template <typename T>
struct KubeList {
  std::string resource_version;  // where a watch of the same collection starts
  std::string continue_token;    // asks for the next page of the list; "" on the last
  std::vector<T> items;
  std::vector<Unreadable> unreadable;  // items left out
};

// One line of a watch. kError carries the API's Status (code 410: the
// resourceVersion is too old, list again).
struct KubeEvent {
  enum class Type { kAdded, kModified, kDeleted, kBookmark, kError } type = Type::kAdded;
  std::string resource_version;  // of the object (a bookmark's: where to go on from)
  std::optional<KubeNode> node;  // kAdded, kModified, kDeleted of a Node watch
  std::optional<KubePod> pod;    // ... of a Pod watch
  // kAdded, kModified, kDeleted whose object could not be read (then
  // neither node nor pod is set).
  std::optional<Unreadable> unreadable;
  int32_t error_code = 0;        // kError
  std::string error;
};

Result<KubeList<KubeNode>> parse_node_list(std::string_view body);
Result<KubeList<KubePod>> parse_pod_list(std::string_view body);
Result<KubeEvent> parse_node_event(std::string_view line);
Result<KubeEvent> parse_pod_event(std::string_view line);
// The API's Status in an error answer ("pods \"x\" already exists"), or the
// body's start when it is not one.
std::string kube_status_message(std::string_view body);

struct KubeClientOptions {
  KubeConfig config;
  std::chrono::milliseconds timeout{5000};  // every call but a watch
};

class KubeClient {
 public:
  using Answer = http::Answer;  // the status, the body, and its Retry-After

  explicit KubeClient(KubeClientOptions options);
  KubeClient(const KubeClient&) = delete;
  KubeClient& operator=(const KubeClient&) = delete;

  // One request (`path` from the server's root, "/api/v1/nodes"; `body`
  // JSON). Unavailable, naming the call, when the server does not answer
  // within the timeout; otherwise its answer, whatever its status.
  Result<Answer> call(const char* method, const std::string& path, const std::string& body = "");
  // Streams a watch (`path` with ?watch=1&...): each event's line to
  // `on_line`, until the server ends the watch, `on_line` returns false,
  // `longest` passes, or `cancel` (if given) turns true (noticed within a
  // second). Ok in all four cases; Unavailable when the watch could not be
  // opened or broke; PermissionDenied or Unavailable with the API's message
  // for an HTTP error. A line longer than 16 MiB is refused (Corrupt).
  // What a watch's caller learns besides its lines (`progress`, if given).
  struct WatchProgress {
    long http_status = 0;          // what the server answered, 0 for none
    std::function<void()> on_open;  // once it answered 200, before any line
  };
  Status watch(const std::string& path, const std::function<bool(std::string_view)>& on_line,
               std::chrono::milliseconds longest, const std::atomic<bool>* cancel = nullptr,
               WatchProgress* progress = nullptr);

 private:
  // A request with what every call shares: JSON, the token, the timeout.
  http::Request request(const char* method, const std::string& path, const std::string& body);
  // The token to send: options_.config's, read again from its file when a
  // minute old or after a 401 (the last one read stays while the file
  // cannot be read).
  const std::string& token();
  // The server said 401: the token file is read again before the next call.
  void note_status(long status);

  KubeClientOptions options_;
  std::chrono::steady_clock::time_point token_read_at_ = std::chrono::steady_clock::now();
  http::Client http_;  // calls reuse its connection; a watch streams on a handle of its own
};

}  // namespace shoal::cluster::kubernetes

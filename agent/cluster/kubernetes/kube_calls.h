// The kubernetes backend's calls to the API server that are yet to be made
// (kube_runner.h): pod creates, deletes and log reads, made by several
// threads at once, in order for each pod.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

namespace shoal::cluster::kubernetes {

// One call the runner owes the API server.
struct KubeCall {
  enum class Kind { kCreate, kDelete, kReadLog } kind = Kind::kCreate;
  std::string namespace_name;
  std::string name;           // the pod's
  std::string body;           // kCreate: the pod
  // kCreate: the copy's marker file, made durable (fsync, and its folder's)
  // before the pod is created, on the call's thread and not the agent's
  // loop: many creates sync together, and the loop never waits on the disk.
  std::string marker;
  int64_t grace_seconds = 0;  // kDelete
  int64_t limit_bytes = 0;    // kReadLog: the most of the output to read
  int attempts = 0;           // how often it was made without an answer that settles it
  std::string last_error;     // why the last attempt did not settle it
  int64_t order = 0;          // KubeCallQueue's: its place among the pods' lines

  static KubeCall create(std::string namespace_name, std::string name, std::string body);
  static KubeCall remove(std::string namespace_name, std::string name, int64_t grace_seconds);
  static KubeCall read_log(std::string namespace_name, std::string name, int64_t limit_bytes);
  std::string pod() const { return namespace_name + "/" + name; }
};

// The calls waiting, each pod's in the order they came, the pods in the
// order their first waiting call came (a log read before everything).
//
// Invariant: at most one call per pod is out (taken and not yet settled),
// so a pod's delete never overtakes its create and a create retried never
// follows its delete. A create still waiting when its pod's delete comes
// is dropped: the delete removes whatever an earlier attempt of it made.
// A log read is not ordered with its pod's create and delete: it only reads.
//
// Not thread-safe: the runner guards it with its mutex.
class KubeCallQueue {
 public:
  using Clock = std::chrono::steady_clock;

  void push(KubeCall call);
  // The next call that may go at `now`, now out; none when every waiting
  // call's pod has one out or waits out a backoff.
  std::optional<KubeCall> take(Clock::time_point now);
  // The call taken last for `call`'s pod is settled: the pod's next may go.
  void settled(const KubeCall& call);
  // The call taken for its pod goes again at `at`, before the pod's others.
  void again(KubeCall call, Clock::time_point at);
  // When the earliest call waiting out a backoff may go; none when none waits.
  std::optional<Clock::time_point> next_retry() const;
  // Calls waiting, out or not.
  size_t size() const { return waiting_ + out_.size(); }
  size_t out() const { return out_.size(); }

  // A broken invariant, described; empty when it holds.
  std::string broken_invariant() const;

 private:
  struct Line {  // one pod's calls, oldest first; never empty in lines_
    std::deque<KubeCall> calls;
    std::optional<Clock::time_point> not_before;  // its first waits out a backoff
  };
  // A pod's creates and deletes share a line; its log reads have their own.
  static std::string line_of(const KubeCall& call);
  // A line with no call out joins ready_, or later_ while it backs off.
  void queue(const std::string& key, const Line& line);
  void unqueue(const std::string& key, const Line& line);

  std::map<std::string, Line> lines_;                         // lines with calls waiting
  std::set<std::pair<int64_t, std::string>> ready_;           // by their first call's order
  std::set<std::pair<Clock::time_point, std::string>> later_;  // by when their first may go
  std::set<std::string> out_;                                 // lines with a call out
  size_t waiting_ = 0;                                        // calls in lines_
  int64_t next_order_ = 1;
  int64_t next_read_order_ = -1;  // log reads go before everything: counted down
};

}  // namespace shoal::cluster::kubernetes

// The kubernetes backend's threads (kube_runner.h): the pods and nodes
// lists and watches that keep the snapshot, and the creates, deletes and
// probes of the API server. Nothing here runs on the agent's loop.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <random>

#include <nlohmann/json.hpp>

#include "agent/cluster/kubernetes/kube_runner.h"

namespace shoal::cluster::kubernetes {

using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

// How long a watch lasts before it is opened again from where it left off
// (the server ends it at timeoutSeconds; the client's bound is a little later).
constexpr int kWatchSeconds = 60;
// A failed list or watch is tried again after a backoff as a call's is
// (backoff_after): lists of every pod, at once and in a loop, are what
// overloads an API server that has just come back.
// A create or delete without an answer that settles it (none, 5xx, 429) is
// made again after kFirstBackoff, doubled each time up to kMaxBackoff; a
// create is given up after kCreateAttempts (one to two minutes), and its
// copy ends failed at the cluster with the server's last answer.
constexpr std::chrono::milliseconds kFirstBackoff = 500ms;
constexpr std::chrono::milliseconds kMaxBackoff = 30s;
constexpr int kCreateAttempts = 9;
// A Retry-After longer than this is read as this: a server's hint, not a
// reason to stall a pod for an hour.
constexpr std::chrono::milliseconds kLongestRetryAfter = 5min;
// A watch the server ends sooner than this, having said nothing, is opened
// again only after a backoff.
constexpr auto kShortestQuietWatch = 1s;
// How often an idle runner asks the server whether it still answers.
constexpr auto kProbeInterval = 1s;

// The pause before try `attempts` + 1 of something that failed `attempts`
// times: exponential, capped, and spread (half to all of it) so that what
// failed together does not come back together.
std::chrono::milliseconds backoff_after(int attempts, std::minstd_rand& random) {
  auto backoff = std::min<std::chrono::milliseconds>(kMaxBackoff, kFirstBackoff * (1 << std::clamp(attempts - 1, 0, 16)));
  return std::chrono::milliseconds(std::uniform_int_distribution<int64_t>(backoff.count() / 2, backoff.count())(random));
}

// Makes a copy's marker durable: the file, then its folder's entry.
Status sync_marker(const std::string& path) {
  bool synced = false;
  if (int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC); fd >= 0) {
    synced = ::fsync(fd) == 0;
    ::close(fd);
  }
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dir_fd >= 0) {
    synced = ::fsync(dir_fd) == 0 && synced;
    ::close(dir_fd);
  } else {
    synced = false;
  }
  if (!synced) return Status(ErrorCode::kStorage, "kubernetes backend: cannot make " + path + " durable");
  return Status::ok();
}

}  // namespace

template <typename Item>
Result<KubeList<Item>> KubeRunner::list_pages(KubeClient& api, const Collection<Item>& collection) {
  KubeList<Item> whole;
  std::string token;  // the next page's continue token; "" on the first
  do {
    std::string query = "limit=" + std::to_string(std::max(1, options_.list_page_size));
    if (!token.empty()) query += "&continue=" + url_escaped(token);
    if (!collection.selector.empty()) query += "&" + collection.selector;
    auto asked = std::chrono::steady_clock::now();
    Result<KubeClient::Answer> listed = api.call("GET", collection.path + "?" + query);
    {
      std::lock_guard lock(mutex_);
      note_call("LIST", listed.is_ok() ? listed->status : 0, std::chrono::steady_clock::now() - asked);
    }
    SHOAL_ASSIGN_OR_RETURN(KubeClient::Answer answer, std::move(listed));
    if (answer.status != 200) {
      // 410 on a later page: the snapshot it pages through is gone; the
      // next try lists from the start.
      return Status(ErrorCode::kUnavailable, std::string("kube-apiserver: listing ") + collection.what + ": HTTP " +
                                                 std::to_string(answer.status) + ": " +
                                                 kube_status_message(answer.body));
    }
    SHOAL_ASSIGN_OR_RETURN(KubeList<Item> page, collection.parse_list(answer.body));
    if (token.empty()) whole.resource_version = page.resource_version;  // every page is of that one
    whole.items.insert(whole.items.end(), std::make_move_iterator(page.items.begin()),
                       std::make_move_iterator(page.items.end()));
    whole.unreadable.insert(whole.unreadable.end(), page.unreadable.begin(), page.unreadable.end());
    token = std::move(page.continue_token);
  } while (!token.empty() && !quit_);
  return whole;
}

template <typename Item>
void KubeRunner::list_and_watch(const Collection<Item>& collection) {
  KubeClient api({options_.config, options_.spec.timeout});
  std::minstd_rand random(std::random_device{}());
  int failures = 0;  // in a row, since the last list or watch that went well
  // `why`: what the runner's health says meanwhile; none: unchanged.
  auto pause = [&](std::optional<Status> why) {
    auto backoff = backoff_after(++failures, random);
    std::unique_lock lock(mutex_);
    if (why) snapshot_.*collection.reachable = std::move(*why);
    wake_.wait_for(lock, backoff, [&] { return quit_.load(); });
  };
  auto fail = [&](Status why) { pause(std::move(why)); };
  std::string version;  // "" : list (again) before watching
  while (!quit_) {
    if (version.empty()) {
      Result<KubeList<Item>> listed = list_pages(api, collection);
      if (!listed.is_ok()) {
        fail(listed.status());
        continue;
      }
      version = listed->resource_version;
      std::lock_guard lock(mutex_);
      collection.take_list(std::move(*listed));
      snapshot_.*collection.reachable = Status::ok();
      ++snapshot_.lists;
      failures = 0;
    }
    std::optional<Status> relist;  // why the watch's own stream said to list again
    KubeClient::WatchProgress progress;
    progress.on_open = [&] {
      std::lock_guard lock(mutex_);
      snapshot_.*collection.reachable = Status::ok();  // a watch that goes on after a break
    };
    auto opened = std::chrono::steady_clock::now();
    bool heard = false;  // a line came
    Status watched = api.watch(
        collection.path + "?" + (collection.selector.empty() ? "" : collection.selector + "&") +
            "watch=1&allowWatchBookmarks=true&timeoutSeconds=" + std::to_string(kWatchSeconds) +
            "&resourceVersion=" + version,
        [&](std::string_view line) {
          heard = true;
          Result<KubeEvent> event = collection.parse_event(line);
          if (!event.is_ok()) {
            relist = event.status();  // a change we cannot read may be any change
            return false;
          }
          if (event->type == KubeEvent::Type::kError) {
            if (event->error_code != 410) {
              relist = Status(ErrorCode::kUnavailable, std::string("kube-apiserver: watching ") + collection.what +
                                                           ": " + event->error);
            } else {
              relist = Status::ok();  // too old to watch from: list again, at once
            }
            return false;
          }
          std::string seen = event->resource_version;
          std::lock_guard lock(mutex_);
          collection.take_event(std::move(*event));
          if (!seen.empty()) version = std::move(seen);
          failures = 0;
          return !quit_.load();
        },
        std::chrono::seconds(kWatchSeconds + 10), &quit_, &progress);
    {
      std::lock_guard lock(mutex_);
      note_call("WATCH", progress.http_status, std::chrono::steady_clock::now() - opened);
    }
    if (relist) {
      version.clear();
      if (!relist->is_ok()) fail(*relist);
      continue;
    }
    if (watched.is_ok() && !heard && std::chrono::steady_clock::now() - opened < kShortestQuietWatch) {
      // Ended at once with nothing said (a proxy that closes streams): not
      // opened again in a tight loop either.
      pause(std::nullopt);
      continue;
    }
    if (!watched.is_ok()) {
      // The server refused the watch (a 410 among them): list again. Not
      // opened (no answer) or broken on the way (a proxy, a restart): go on
      // from the last version seen, which the server holds for minutes. One
      // that was open and broke says nothing of the server's health: the
      // next one is opened after a pause, and says.
      if (progress.http_status >= 300) {
        version.clear();
      } else {
        std::lock_guard lock(mutex_);
        ++snapshot_.watches_resumed;
      }
      if (progress.http_status == 200) {
        pause(std::nullopt);
      } else {
        fail(watched);
      }
    }
  }
}

void KubeRunner::take_pod_list(KubeList<KubePod>&& list, bool own) {
  for (auto it = snapshot_.pods.begin(); it != snapshot_.pods.end();) {
    auto next = std::next(it);
    if (ours(it->second) == own) erase_pod(it->first);
    it = next;
  }
  for (KubePod& pod : list.items) {
    if (ours(pod) != own) continue;  // relabelled between the selector and us: the other watch's
    std::string name = pod.namespace_name + "/" + pod.name;
    put_pod(name, std::move(pod));
  }
  if (own) snapshot_.touched_all = true;
  std::map<std::string, std::string>& unreadable = own ? snapshot_.unreadable_pods : snapshot_.unreadable_other_pods;
  unreadable.clear();
  for (const Unreadable& item : list.unreadable) unreadable[item.full_name()] = item.error;
  (own ? snapshot_.pods_listed : snapshot_.other_pods_listed) = true;
}

void KubeRunner::watch_own_pods() {
  list_and_watch<KubePod>(
      {"pods", "/api/v1/pods", "labelSelector=" + url_escaped(std::string(kClusterLabel) + "=" + options_.cluster_name),
       parse_pod_list, parse_pod_event,
       [this](KubeList<KubePod>&& list) { take_pod_list(std::move(list), /*own=*/true); },
       [this](KubeEvent&& event) {
         if (event.unreadable) {
           // What was known of it stays (one of ours must not look gone)
           // until it is readable again or deleted.
           std::string name = event.unreadable->full_name();
           if (event.type == KubeEvent::Type::kDeleted) {
             erase_pod(name);
             snapshot_.unreadable_pods.erase(name);
           } else {
             snapshot_.unreadable_pods[name] = event.unreadable->error;
           }
           snapshot_.touched.insert(name);
         }
         if (event.pod) {
           std::string name = event.pod->namespace_name + "/" + event.pod->name;
           snapshot_.unreadable_pods.erase(name);
           snapshot_.touched.insert(name);
           if (event.type == KubeEvent::Type::kDeleted) {
             erase_pod(name);
             if (ours(*event.pod)) snapshot_.gone[name] = std::move(*event.pod);
           } else {
             put_pod(name, std::move(*event.pod));
           }
         }
       },
       &Snapshot::pods_reachable});
}

void KubeRunner::watch_other_pods() {
  list_and_watch<KubePod>(
      {"pods", "/api/v1/pods",
       "labelSelector=" + url_escaped(std::string(kClusterLabel) + "!=" + options_.cluster_name) +
           "&fieldSelector=" + url_escaped("status.phase!=Succeeded,status.phase!=Failed"),
       parse_pod_list, parse_pod_event,
       [this](KubeList<KubePod>&& list) { take_pod_list(std::move(list), /*own=*/false); },
       [this](KubeEvent&& event) {
         // DELETED also when one ends: it no longer matches the field selector.
         std::string name = event.pod ? event.pod->namespace_name + "/" + event.pod->name
                                      : event.unreadable ? event.unreadable->full_name() : "";
         if (name.empty()) return;
         auto known = snapshot_.pods.find(name);
         if (known != snapshot_.pods.end() && ours(known->second)) return;  // the other watch's
         if (event.type == KubeEvent::Type::kDeleted) {
           erase_pod(name);
           snapshot_.unreadable_other_pods.erase(name);
         } else if (event.pod) {
           snapshot_.unreadable_other_pods.erase(name);
           put_pod(name, std::move(*event.pod));
         } else {
           erase_pod(name);  // its room is no longer known: reported, not counted
           snapshot_.unreadable_other_pods[name] = event.unreadable->error;
         }
       },
       &Snapshot::other_pods_reachable});
}

void KubeRunner::watch_nodes() {
  std::string selector;
  if (!options_.spec.node_selector.empty()) {
    selector = "labelSelector=" + label_selector(options_.spec.node_selector);
  }
  list_and_watch<KubeNode>(
      {"nodes", "/api/v1/nodes", selector, parse_node_list, parse_node_event,
       [this](KubeList<KubeNode>&& list) {
         snapshot_.nodes.clear();
         for (KubeNode& node : list.items) snapshot_.nodes[node.name] = std::move(node);
         snapshot_.unreadable_nodes.clear();
         for (const Unreadable& item : list.unreadable) snapshot_.unreadable_nodes[item.name] = item.error;
         snapshot_.nodes_listed = true;
       },
       [this](KubeEvent&& event) {
         if (event.unreadable) {
           // Left out: a node the agent cannot read takes no new work.
           snapshot_.nodes.erase(event.unreadable->name);
           if (event.type == KubeEvent::Type::kDeleted) {
             snapshot_.unreadable_nodes.erase(event.unreadable->name);
           } else {
             snapshot_.unreadable_nodes[event.unreadable->name] = event.unreadable->error;
           }
         }
         if (event.node) {
           snapshot_.unreadable_nodes.erase(event.node->name);
           if (event.type == KubeEvent::Type::kDeleted) {
             snapshot_.nodes.erase(event.node->name);
           } else {
             snapshot_.nodes[event.node->name] = std::move(*event.node);
           }
         }
       },
       &Snapshot::nodes_reachable});
}

void KubeRunner::make_calls(bool probes) {
  KubeClient api({options_.config, options_.spec.timeout});
  auto idle_until = std::chrono::steady_clock::now() + kProbeInterval;
  while (true) {
    std::optional<KubeCall> call;
    {
      std::unique_lock lock(mutex_);
      while (!quit_ && !(call = calls_.take(std::chrono::steady_clock::now()))) {
        auto now = std::chrono::steady_clock::now();
        if (probes && now >= idle_until) {
          // Idle: is the server still answering? A watch on a server that
          // stopped answering stays open and silent, so only a call can tell.
          lock.unlock();
          auto asked = std::chrono::steady_clock::now();
          Result<KubeClient::Answer> probe = api.call("GET", "/readyz");
          auto took = std::chrono::steady_clock::now() - asked;
          Status answered = probe.is_ok() ? Status::ok() : probe.status();
          if (answered.is_ok() && probe->status != 200) {
            answered = Status(ErrorCode::kUnavailable, "kube-apiserver: /readyz: HTTP " +
                                                           std::to_string(probe->status) + ": " +
                                                           kube_status_message(probe->body));
          }
          lock.lock();
          note_call("GET", probe.is_ok() ? probe->status : 0, took);
          snapshot_.server_reachable = answered;
          idle_until = std::chrono::steady_clock::now() + kProbeInterval;
          continue;
        }
        auto until = probes ? idle_until : now + kProbeInterval;
        if (auto retry = calls_.next_retry()) until = std::min(until, *retry);
        wake_.wait_until(lock, until);
      }
      if (quit_) return;
    }
    idle_until = std::chrono::steady_clock::now() + kProbeInterval;
    if (call->kind == KubeCall::Kind::kReadLog) {
      read_pod_log(api, *call);
      std::lock_guard lock(mutex_);
      calls_.settled(*call);
      continue;
    }
    if (call->kind == KubeCall::Kind::kCreate && !call->marker.empty()) {
      if (Status synced = sync_marker(call->marker); !synced.is_ok()) {
        // Never created without a durable marker: a restart could create it again.
        std::lock_guard lock(mutex_);
        snapshot_.refused[call->pod()] = synced.message();
        snapshot_.touched.insert(call->pod());
        calls_.settled(*call);
        continue;
      }
    }
    auto asked = std::chrono::steady_clock::now();
    Result<KubeClient::Answer> answer =
        call->kind == KubeCall::Kind::kCreate
            ? api.call("POST", "/api/v1/namespaces/" + call->namespace_name + "/pods", call->body)
            : api.call("DELETE", "/api/v1/namespaces/" + call->namespace_name + "/pods/" + call->name,
                       json{{"gracePeriodSeconds", call->grace_seconds}}.dump());
    {
      std::lock_guard lock(mutex_);
      note_call(call->kind == KubeCall::Kind::kCreate ? "POST" : "DELETE", answer.is_ok() ? answer->status : 0,
                std::chrono::steady_clock::now() - asked);
      take_answer(std::move(*call), answer);
    }
    wake_.notify_one();  // the pod's next call, if any, may go
  }
}

void KubeRunner::take_answer(KubeCall call, const Result<KubeClient::Answer>& answer) {
  snapshot_.server_reachable = answer.is_ok() ? Status::ok() : answer.status();
  std::string pod = call.pod();
  // An answer that settles the call: anything but none, a 5xx or a 429.
  bool settles = answer.is_ok() && answer->status < 500 && answer->status != 429;
  if (auto giving_up = snapshot_.giving_up.find(pod);
      settles && giving_up != snapshot_.giving_up.end() && call.kind == KubeCall::Kind::kDelete) {
    // A create given up may have been made all the same. Its copy fails
    // only once the pod is known gone (404): one still terminating, or a
    // delete refused, is asked about again, so the copy is never placed
    // again while its pod may run.
    if (answer->status == 404) {
      snapshot_.given_up[pod] = std::move(giving_up->second);
      snapshot_.touched.insert(pod);
      snapshot_.giving_up.erase(giving_up);
      calls_.settled(call);
    } else {
      ++call.attempts;
      calls_.again(std::move(call), std::chrono::steady_clock::now() +
                                        std::max<std::chrono::milliseconds>(1s, backoff_after(call.attempts, jitter_)));
    }
    return;
  }
  if (settles) {
    calls_.settled(call);
    if (call.kind != KubeCall::Kind::kCreate) return;  // a delete: done, or the pod was gone (404)
    snapshot_.touched.insert(pod);
    if (answer->status == 201 || answer->status == 200 || answer->status == 409) {
      snapshot_.created.insert(pod);
    } else {
      snapshot_.refused[pod] = "HTTP " + std::to_string(answer->status) + ": " + kube_status_message(answer->body);
      ++snapshot_.refused_total;
    }
    return;
  }
  // No answer (a create may still have happened: made again, it is
  // AlreadyExists), or the server asked to be called later.
  if (call.kind == KubeCall::Kind::kCreate && snapshot_.pods.count(pod)) {
    // Its answer was lost, but the watch saw the pod: it was made.
    calls_.settled(call);
    snapshot_.created.insert(pod);
    snapshot_.touched.insert(pod);
    return;
  }
  ++call.attempts;
  call.last_error = !answer.is_ok() ? answer.status().message()
                                    : "HTTP " + std::to_string(answer->status) + ": " + kube_status_message(answer->body);
  if (call.kind == KubeCall::Kind::kCreate && call.attempts >= kCreateAttempts) {
    if (options_.logger) {
      options_.logger->warn("kubernetes: gave up creating pod {} after {} tries; the last: {}", pod, call.attempts,
                            call.last_error);
    }
    ++snapshot_.given_up_total;
    snapshot_.giving_up[pod] = "no answer after " + std::to_string(call.attempts) + " tries (the last: " +
                               call.last_error + ")";
    // It may have been made all the same: deleted first, before anything
    // else of its pod's, and the copy failed once it is known gone.
    KubeCall removal = KubeCall::remove(call.namespace_name, call.name, 1);
    removal.order = call.order;
    calls_.again(std::move(removal), std::chrono::steady_clock::now());
    return;
  }
  // Spread so that calls refused together do not come back together;
  // never sooner than the server's Retry-After.
  auto spread = backoff_after(call.attempts, jitter_);
  if (answer.is_ok()) {
    spread = std::max<std::chrono::milliseconds>(spread, std::min<std::chrono::milliseconds>(answer->retry_after,
                                                                                            kLongestRetryAfter));
  }
  if (options_.logger && (call.attempts == 1 || call.attempts % 5 == 0)) {
    options_.logger->info("kubernetes: {} of pod {} again in {} ms (try {}): {}",
                          call.kind == KubeCall::Kind::kCreate ? "create" : "delete", pod, spread.count(),
                          call.attempts + 1, call.last_error);
  }
  calls_.again(std::move(call), std::chrono::steady_clock::now() + spread);
}

void KubeRunner::read_pod_log(KubeClient& api, const KubeCall& command) {
  std::string full = command.namespace_name + "/" + command.name;
  bool ended_before = false;  // then the read below holds all it ever will
  {
    std::lock_guard lock(mutex_);
    auto pod = snapshot_.pods.find(full);
    ended_before = pod != snapshot_.pods.end() && pod->second.terminal();
  }
  auto asked = std::chrono::steady_clock::now();
  Result<KubeClient::Answer> answer =
      api.call("GET", "/api/v1/namespaces/" + command.namespace_name + "/pods/" + command.name +
                          "/log?container=main&limitBytes=" + std::to_string(command.limit_bytes));
  std::lock_guard lock(mutex_);
  note_call("GET", answer.is_ok() ? answer->status : 0, std::chrono::steady_clock::now() - asked);
  auto it = logs_.find(full);
  if (it == logs_.end() || !it->second.reading || it->second.limit_bytes != command.limit_bytes) {
    return;  // asked differently since: that read is queued
  }
  LogRead& read = it->second;
  read.reading = false;
  read.read_at = std::chrono::steady_clock::now();
  if (!answer.is_ok()) {
    read.error = answer.status();
    return;
  }
  if (answer->status != 200) {
    read.error = Status(answer->status == 404 ? ErrorCode::kNotFound : ErrorCode::kUnavailable,
                        "kube-apiserver: the log of pod " + full + ": HTTP " +
                            std::to_string(answer->status) + ": " + kube_status_message(answer->body));
    return;
  }
  const std::string& body = answer->body;
  auto size = static_cast<int64_t>(body.size());
  int64_t start = read.offset >= 0 ? std::min(read.offset, size) : std::max<int64_t>(0, size + read.offset);
  read.data = body.substr(static_cast<size_t>(start));
  read.data_start = start;
  read.complete = size < command.limit_bytes;
  read.pod_ended = ended_before;
}

}  // namespace shoal::cluster::kubernetes

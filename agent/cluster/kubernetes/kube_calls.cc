#include "agent/cluster/kubernetes/kube_calls.h"

#include <algorithm>

namespace shoal::cluster::kubernetes {

namespace {

KubeCall call_of(KubeCall::Kind kind, std::string namespace_name, std::string name) {
  KubeCall call;
  call.kind = kind;
  call.namespace_name = std::move(namespace_name);
  call.name = std::move(name);
  return call;
}

}  // namespace

KubeCall KubeCall::create(std::string namespace_name, std::string name, std::string body) {
  KubeCall call = call_of(Kind::kCreate, std::move(namespace_name), std::move(name));
  call.body = std::move(body);
  return call;
}

KubeCall KubeCall::remove(std::string namespace_name, std::string name, int64_t grace_seconds) {
  KubeCall call = call_of(Kind::kDelete, std::move(namespace_name), std::move(name));
  call.grace_seconds = grace_seconds;
  return call;
}

KubeCall KubeCall::read_log(std::string namespace_name, std::string name, int64_t limit_bytes) {
  KubeCall call = call_of(Kind::kReadLog, std::move(namespace_name), std::move(name));
  call.limit_bytes = limit_bytes;
  return call;
}

std::string KubeCallQueue::line_of(const KubeCall& call) {
  return call.kind == KubeCall::Kind::kReadLog ? "log:" + call.pod() : call.pod();
}

void KubeCallQueue::queue(const std::string& key, const Line& line) {
  if (line.not_before) {
    later_.insert({*line.not_before, key});
  } else {
    ready_.insert({line.calls.front().order, key});
  }
}

void KubeCallQueue::unqueue(const std::string& key, const Line& line) {
  if (line.not_before) {
    later_.erase({*line.not_before, key});
  } else {
    ready_.erase({line.calls.front().order, key});
  }
}

void KubeCallQueue::push(KubeCall call) {
  call.order = call.kind == KubeCall::Kind::kReadLog ? next_read_order_-- : next_order_++;
  std::string key = line_of(call);
  bool out = out_.count(key) > 0;
  auto [it, fresh] = lines_.try_emplace(key);
  Line& line = it->second;
  if (!fresh && !out) unqueue(key, line);
  if (call.kind == KubeCall::Kind::kDelete) {
    size_t before = line.calls.size();
    std::erase_if(line.calls, [](const KubeCall& waiting) { return waiting.kind == KubeCall::Kind::kCreate; });
    waiting_ -= before - line.calls.size();
    // A backoff that was a create's does not hold its delete back.
    if (line.calls.empty() || line.calls.front().attempts == 0) line.not_before.reset();
  }
  line.calls.push_back(std::move(call));
  ++waiting_;
  if (!out) queue(key, line);
}

std::optional<KubeCall> KubeCallQueue::take(Clock::time_point now) {
  while (!later_.empty() && later_.begin()->first <= now) {
    std::string key = later_.begin()->second;
    later_.erase(later_.begin());
    Line& line = lines_.at(key);
    line.not_before.reset();
    queue(key, line);
  }
  if (ready_.empty()) return std::nullopt;
  std::string key = ready_.begin()->second;
  ready_.erase(ready_.begin());
  auto it = lines_.find(key);
  KubeCall call = std::move(it->second.calls.front());
  it->second.calls.pop_front();
  --waiting_;
  if (it->second.calls.empty()) lines_.erase(it);
  out_.insert(key);
  return call;
}

void KubeCallQueue::settled(const KubeCall& call) {
  std::string key = line_of(call);
  if (out_.erase(key) == 0) return;
  if (auto it = lines_.find(key); it != lines_.end()) queue(key, it->second);
}

void KubeCallQueue::again(KubeCall call, Clock::time_point at) {
  std::string key = line_of(call);
  out_.erase(key);
  Line& line = lines_[key];
  if (call.kind == KubeCall::Kind::kCreate &&
      std::any_of(line.calls.begin(), line.calls.end(),
                  [](const KubeCall& waiting) { return waiting.kind == KubeCall::Kind::kDelete; })) {
    queue(key, line);  // its delete came while it was out: the delete removes what it made
    return;
  }
  line.calls.push_front(std::move(call));
  ++waiting_;
  line.not_before = at;
  queue(key, line);
}

std::optional<KubeCallQueue::Clock::time_point> KubeCallQueue::next_retry() const {
  if (later_.empty()) return std::nullopt;
  return later_.begin()->first;
}

std::string KubeCallQueue::broken_invariant() const {
  size_t calls = 0;
  for (const auto& [key, line] : lines_) {
    if (line.calls.empty()) return "line " + key + " is empty";
    calls += line.calls.size();
    bool in_ready = ready_.count({line.calls.front().order, key}) > 0;
    bool in_later = line.not_before && later_.count({*line.not_before, key}) > 0;
    if (out_.count(key) ? (in_ready || in_later) : (in_ready == in_later)) {
      return "line " + key + " is queued " + (in_ready && in_later ? "twice" : out_.count(key) ? "while out" : "nowhere");
    }
    for (size_t i = 0; i < line.calls.size(); ++i) {
      if (line.calls[i].kind == KubeCall::Kind::kCreate &&
          std::any_of(line.calls.begin(), line.calls.begin() + static_cast<long>(i),
                      [](const KubeCall& call) { return call.kind == KubeCall::Kind::kDelete; })) {
        return "line " + key + " holds a create behind its delete";
      }
    }
  }
  if (calls != waiting_) return "waiting_ is " + std::to_string(waiting_) + ", lines hold " + std::to_string(calls);
  if (ready_.size() + later_.size() + out_.size() < lines_.size()) return "a line is neither queued nor out";
  for (const auto& [order, key] : ready_) {
    if (!lines_.count(key)) return "ready line " + key + " holds no call";
  }
  for (const auto& [at, key] : later_) {
    if (!lines_.count(key)) return "waiting line " + key + " holds no call";
  }
  return "";
}

}  // namespace shoal::cluster::kubernetes

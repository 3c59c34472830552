#include "agent/cluster/schedule_queue.h"

namespace shoal::cluster {

std::string ScheduleQueue::group_id(const model::WorkloadSpec& spec) {
  // Every field a pass reads, '\0'-separated (no field holds a '\0').
  std::string id = spec.queue;
  id += '\0';
  id += spec.namespace_name;
  for (int64_t number : {spec.resources.cpu_milli, spec.resources.memory_bytes, spec.resources.gpu,
                         int64_t{spec.replicas}, int64_t{spec.min_available}}) {
    id += '\0';
    id += std::to_string(number);
  }
  for (const auto& [label, value] : spec.node_selector) {
    id += '\0';
    id += label;
    id += '=';
    id += value;
  }
  return id;
}

bool ScheduleQueue::push(const std::string& key, const model::WorkloadSpec& spec) {
  if (index_.contains(key)) return false;
  std::string id = group_id(spec);
  auto found = groups_.find(id);
  if (found == groups_.end()) {
    auto group = std::make_unique<Group>();
    group->shape = spec;
    group->shape.name.clear();
    group->id = id;
    Namespace& owner = namespaces_[{spec.queue, spec.namespace_name}];
    owner.queue = spec.queue;
    owner.name = spec.namespace_name;
    owner.groups += 1;
    group->owner = &owner;
    found = groups_.emplace(id, std::move(group)).first;
  }
  Group* group = found->second.get();
  Rank rank{-int64_t{spec.priority}, ++arrivals_};
  group->members.emplace(rank, key);
  index_.emplace(key, Place{group, rank});
  refile(group);
  return true;
}

bool ScheduleQueue::erase(const std::string& key) {
  auto found = index_.find(key);
  if (found == index_.end()) return false;
  Group* group = found->second.group;
  group->members.erase({found->second.rank, key});
  index_.erase(found);
  refile(group);
  return true;
}

void ScheduleQueue::refile(Group* group) {
  Namespace* owner = group->owner;
  owner->heads.erase({group->head, group});
  if (!group->members.empty()) {
    group->head = group->members.begin()->first;
    owner->heads.emplace(group->head, group);
    return;
  }
  owner->groups -= 1;
  std::string id = group->id;
  groups_.erase(id);  // `group` is gone from here on
  if (owner->groups == 0) namespaces_.erase({owner->queue, owner->name});
}

std::string_view ScheduleQueue::reason(const std::string& key) const {
  auto found = index_.find(key);
  return found == index_.end() ? std::string_view{} : std::string_view(found->second.group->reason);
}

std::vector<std::pair<std::string, std::string>> ScheduleQueue::namespaces() const {
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(namespaces_.size());
  for (const auto& [id, ns] : namespaces_) out.push_back(id);
  return out;
}

bool ScheduleQueue::check_invariants() const {
  size_t members = 0;
  size_t heads = 0;
  for (const auto& [id, group] : groups_) {
    if (group->members.empty() || group->id != id) return false;
    if (group->head != group->members.begin()->first) return false;
    if (!group->owner->heads.contains({group->head, group.get()})) return false;
    members += group->members.size();
  }
  for (const auto& [id, ns] : namespaces_) {
    if (ns.heads.size() != ns.groups || ns.groups == 0) return false;
    heads += ns.heads.size();
  }
  if (heads != groups_.size() || members != index_.size()) return false;
  for (const auto& [key, place] : index_) {
    if (!place.group->members.contains({place.rank, key})) return false;
  }
  return true;
}

}  // namespace shoal::cluster

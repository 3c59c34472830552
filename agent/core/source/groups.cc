// The source role, groups and what holds it together: multi-cluster groups
// (one copy per cluster, the group's phase from its copies), nominations,
// priorities, loading, views and the role's invariants. Deleting a
// workload everywhere is in deletion.cc.
#include <algorithm>
#include <set>
#include <tuple>

#include "agent/core/source/role.h"

namespace shoal::core::source {

SourceRole::SourceRole(Context& context, const PeerTable& peers, const InvitationBook& invitations,
                       LocalFacts local_facts)
    : context_(context),
      peers_(peers),
      invitations_(invitations),
      config_(context.config()),
      self_id_(context.self_id()),
      clock_(context.clock()),
      cluster_(context.cluster()),
      local_facts_(std::move(local_facts)) {
  // A copy's story is told in its group's history.
  context_.set_event_subject([this](std::string& subject, std::string& text) {
    const SourceWorkload* copy = book_.find(subject);
    if (!copy || copy->record.parent.empty()) return;
    text = "copy " + std::to_string(copy->record.copy_index) + ": " + text;
    subject = copy->record.parent;
  });
}

void SourceRole::load(std::vector<store::WorkloadRecord> records) {
  TimePoint now = clock_.now();
  for (auto& record : records) {
    SourceWorkload workload;
    workload.record = std::move(record);
    // Unfinished rounds restart with a new epoch; a persisted winner is
    // re-approved (APPROVE is idempotent at the target).
    workload.next_round_at = now;
    due_.wake(workload.record.uid);
    if (workload.record.phase == model::Phase::kPending) room_waiters_.insert(workload.record.uid);
    SourceWorkload& stored = book_.add(std::move(workload));
    if (stored.record.deleting) begin_delete(stored);  // a restart interrupted a delete
  }
}

void SourceRole::persist(const store::WorkloadRecord& record) {
  // The spec never changes once written: most writes leave it be (encoding
  // it was a quarter of a busy source's CPU). The first writes it all.
  Status written = context_.store().update_workload_status(record);
  if (written.code() == ErrorCode::kNotFound) written = context_.store().put_workload(record);
  context_.note_store(written);
  due_.wake(record.uid);
  due_.touch(record.uid);
  SourceWorkload* found = book_.find(record.uid);
  if (found) {
    parked_.unpark(*found);
    book_.changed(*found);
    targets_.follow(*found);
  }
  bool waits_for_slot = found && found->waiting_ticket != 0;
  if (record.phase == model::Phase::kPending && !record.deleting && !waits_for_slot) {
    room_waiters_.insert(record.uid);  // make_pending takes out what waits in queues
  } else {
    room_waiters_.erase(record.uid);
  }
  if (holds_slot(record)) {
    window_.hold(record.uid);
  } else {
    window_.release(record.uid);
  }
  // Placed (a late READY won), deleted or otherwise moved on: it no longer
  // waits for a slot.
  if (record.phase != model::Phase::kPending || record.deleting) {
    if (found) window_.leave(*found);
  }
  if (!record.parent.empty()) update_group(record.parent);
}

std::string SourceRole::broken_invariant() {
  if (std::string broken = book_.broken_invariant(); !broken.empty()) return broken;
  if (std::string broken = targets_.broken_invariant(); !broken.empty()) return broken;
  if (std::string broken = parked_.broken_invariant(book_); !broken.empty()) return broken;
  for (const auto& [uid, workload] : book_.entries()) {
    if (!workload.record.winner.empty() && workload.record.phase == model::Phase::kPending) {
      return "a Pending workload has a winner";
    }
    if (!is_quiet(workload) && !due_.is_awake(uid)) {
      return "a workload with something due is not awake";
    }
    // The window: a slot is held only by a round in flight; whoever waits
    // is Pending and in line exactly once.
    if (window_.holds(uid) && !holds_slot(workload.record)) {
      return "a workload holds a window slot without a round in flight";
    }
    if (workload.waiting_ticket && workload.record.phase != model::Phase::kPending) {
      return "a workload in line for a slot is not Pending";
    }
  }
  if (std::string broken = window_.broken_invariant(book_); !broken.empty()) return broken;
  // The digests' plan is a lower bound (next_deadline).
  if (std::string broken = leases_.broken_invariant(invitations_); !broken.empty()) return broken;
  // every batch decides what it read (decide_readied)
  if (!readied_.empty()) {
    return "a batch ended with READYs undecided";
  }
  // Room never wakes what waits for a slot (it would walk the whole line).
  for (const auto& uid : room_waiters_) {
    const SourceWorkload* found = book_.find(uid);
    if (found && found->waiting_ticket != 0) {
      return "a workload waiting for a slot also waits for room";
    }
  }
  // The due-time index keeps its contract against our due times
  // (due_index.h).
  TimePoint deadline = next_deadline();
  if (std::string broken = due_.broken_invariant(deadline); !broken.empty()) return broken;
  // The copies of a group, finished ones included, are placed on different
  // clusters.
  for (const auto& [group_uid, group] : book_.entries()) {
    if (!is_group(group)) continue;
    std::set<std::string> winners;
    for (const auto& copy_uid : book_.copy_uids(group_uid)) {
      const SourceWorkload* copy = book_.find(copy_uid);
      if (!copy || copy->record.parent != group_uid) {
        return "a group's copy is gone or names another parent";
      }
      if (copy->record.winner.empty()) continue;
      if (!winners.insert(copy->record.winner).second) {
        return "two copies of a group won the same cluster";
      }
    }
  }
  return "";
}

Status SourceRole::nominate(const std::string& namespace_name, const std::string& name,
                            const std::vector<std::string>& clusters) {
  SourceWorkload* named = book_.find_named(namespace_name + "/" + name);
  if (!named) return not_found("workload " + namespace_name + "/" + name + " not found");
  SourceWorkload& workload = *named;
  store::WorkloadRecord& record = workload.record;
  if (record.spec.placement.dispatcher.value_or(config_.default_dispatcher) !=
      model::Dispatcher::kExternal) {
    return invalid_argument(
        "workload " + record.spec.key() +
        " does not use spec.placement.dispatcher: External; nothing to nominate");
  }
  if (clusters.empty()) return invalid_argument("clusters: expected at least one cluster name");
  size_t copies = static_cast<size_t>(record.spec.placement.number_of_clusters);
  if (clusters.size() < copies) {
    return invalid_argument("clusters: expected at least " + std::to_string(copies) +
                            " cluster names (numberOfClusters " + std::to_string(copies) +
                            ", one copy per cluster)");
  }
  if (record.deleting)
    return invalid_argument("workload " + record.spec.key() + " is being deleted");
  bool bound = !record.winner.empty() ||
               (record.phase != model::Phase::kPending && record.phase != model::Phase::kPlacing);
  if (bound) {
    return invalid_argument("workload " + record.spec.key() + " is already bound at " +
                            record.cluster + "; nominations cannot change once bound");
  }
  std::vector<std::string> members = {record.uid};
  if (is_group(workload)) {
    members = book_.copy_uids(record.uid);
    for (const auto& copy_uid : members) {
      const store::WorkloadRecord& copy = book_.find(copy_uid)->record;
      if (!copy.winner.empty() ||
          (copy.phase != model::Phase::kPending && copy.phase != model::Phase::kPlacing)) {
        return invalid_argument("workload " + record.spec.key() + " copy " +
                                std::to_string(copy.copy_index) + " is already bound at " +
                                copy.cluster + "; nominations cannot change once bound");
      }
    }
  }
  record.nominations = clusters;
  persist(record);
  std::string list;
  for (const auto& cluster : clusters) list += (list.empty() ? "" : ",") + cluster;
  context_.record_event(record.uid, "nominated " + list);
  // A new round asks the nominees and cancels every candidate not nominated
  // any more.
  for (const auto& member_uid : members) {
    SourceWorkload& member = *book_.find(member_uid);
    member.record.nominations = clusters;
    persist(member.record);
    start_round(member);
  }
  return context_.store_health();
}

Status SourceRole::set_priority(const std::string& namespace_name, const std::string& name,
                                int32_t priority) {
  SourceWorkload* named = book_.find_named(namespace_name + "/" + name);
  if (!named) return not_found("workload " + namespace_name + "/" + name + " not found");
  SourceWorkload& workload = *named;
  const store::WorkloadRecord& group = workload.record;
  if (group.deleting) return invalid_argument("workload " + group.spec.key() + " is being deleted");
  if (model::is_finished(group.phase)) {
    return invalid_argument("workload " + group.spec.key() + " is " +
                            std::string(model::phase_name(group.phase)) +
                            "; only a pending or running workload's priority can change");
  }
  if (group.spec.priority == priority) return Status::ok();
  context_.record_event(group.uid, "priority " + std::to_string(priority) + " (was " +
                                       std::to_string(group.spec.priority) + ")");
  std::vector<std::string> members = {group.uid};
  if (is_group(workload)) {
    workload.record.spec.priority = priority;
    persist(workload.record);
    members = book_.copy_uids(group.uid);
  }
  for (const std::string& member_uid : members) {
    SourceWorkload& member = *book_.find(member_uid);
    store::WorkloadRecord& record = member.record;
    // Its place among ours waiting for a slot: behind those of its new
    // priority that waited before it, as a newcomer would be.
    window_.reprioritize(member, priority);
    record.spec.priority = priority;
    persist(record);
    // Every target that may queue, hold or run it; later CANDIDATEs and
    // DIGESTs carry the new priority too, should this one be lost.
    std::set<std::string> told;
    for (const auto& [peer_id, progress] : member.candidates) {
      if (may_hold_something(progress)) told.insert(peer_id);
    }
    if (!record.winner.empty()) told.insert(record.winner);
    for (const std::string& peer_id : told) {
      context_.send(peer_id, protocol::Priority{record.uid, record.epoch, priority});
    }
  }
  return context_.store_health();
}

WorkloadCounts SourceRole::workload_counts() const {
  WorkloadCounts counts = book_.counts();
  counts.awake = due_.awake_count();
  counts.parked = parked_.size();
  return counts;
}

bool SourceRole::may_place_at(const store::WorkloadRecord& record,
                              const std::string& target) const {
  // What a READY from `target` would have needed: a valid invitation into
  // the namespace, the allow list, the nominations, no sibling copy there.
  const model::PlacementSpec& placement = record.spec.placement;
  std::string cluster = context_.cluster_name_of(target);
  bool invited = target == self_id_;
  for (const auto* invitation : invitations_.valid_accepted(target, clock_.now())) {
    invited = invited || invitation->covers(record.spec.namespace_name);
  }
  auto listed = [&](const std::vector<std::string>& names) {
    return std::find(names.begin(), names.end(), cluster) != names.end();
  };
  return invited && (placement.clusters.empty() || listed(placement.clusters)) &&
         (placement.dispatcher.value_or(config_.default_dispatcher) !=
              model::Dispatcher::kExternal ||
          (record.nominations && listed(*record.nominations))) &&
         !book_.sibling_winners(record).count(target);
}

namespace {

size_t count_in(const std::vector<store::WorkloadRecord>& copies,
                std::initializer_list<model::Phase> phases) {
  return static_cast<size_t>(std::count_if(copies.begin(), copies.end(), [&](const auto& copy) {
    return std::find(phases.begin(), phases.end(), copy.phase) != phases.end();
  }));
}

// A group's phase from its copies': Running only when every copy runs (or
// has already succeeded); Failed as soon as one copy failed for good;
// Succeeded when all did.
model::Phase group_phase(const std::vector<store::WorkloadRecord>& copies) {
  using model::Phase;
  size_t n = copies.size();
  if (count_in(copies, {Phase::kSucceeded}) == n) return Phase::kSucceeded;
  if (count_in(copies, {Phase::kFailed}) > 0) return Phase::kFailed;
  if (count_in(copies, {Phase::kRunning, Phase::kSucceeded}) == n) return Phase::kRunning;
  if (count_in(copies, {Phase::kBound, Phase::kRunning, Phase::kSucceeded}) == n)
    return Phase::kBound;
  if (count_in(copies, {Phase::kPlacing, Phase::kBound, Phase::kRunning, Phase::kSucceeded}) > 0) {
    return Phase::kPlacing;
  }
  return Phase::kPending;
}

}  // namespace

void SourceRole::update_group(const std::string& group_uid) {
  SourceWorkload* found = book_.find(group_uid);
  if (!found) return;
  store::WorkloadRecord& group = found->record;
  std::vector<store::WorkloadRecord> copies = book_.copies_of(group_uid);
  if (copies.empty()) return;
  auto count = [&](std::initializer_list<model::Phase> phases) { return count_in(copies, phases); };
  using model::Phase;
  size_t n = copies.size();
  Phase phase = group_phase(copies);
  std::string clusters, reasons;
  std::vector<std::string> nodes;
  uint64_t epoch = 0;
  int32_t restarts = 0, disruptions = 0, exit_code = 0;
  int64_t started = 0, finished = 0;
  bool all_finished = true;
  for (const auto& copy : copies) {
    if (!copy.cluster.empty()) clusters += (clusters.empty() ? "" : ",") + copy.cluster;
    if (!copy.reason.empty() && !copy.deleting) {
      reasons += "; copy " + std::to_string(copy.copy_index) + ": " + copy.reason;
    }
    nodes.insert(nodes.end(), copy.nodes.begin(), copy.nodes.end());
    epoch = std::max(epoch, copy.epoch);
    restarts += copy.restarts;
    disruptions += copy.disruptions;
    if (exit_code == 0) exit_code = copy.exit_code;
    if (copy.started_at_ms && (!started || copy.started_at_ms < started))
      started = copy.started_at_ms;
    finished = std::max(finished, copy.finished_at_ms);
    all_finished = all_finished && model::is_finished(copy.phase);
  }
  std::string summary =
      std::to_string(count({Phase::kRunning})) + "/" + std::to_string(n) + " running";
  if (phase == Phase::kSucceeded)
    summary = std::to_string(n) + "/" + std::to_string(n) + " succeeded";
  if (phase == Phase::kFailed)
    summary = std::to_string(count({Phase::kFailed})) + "/" + std::to_string(n) + " failed";
  if (group.deleting) summary = "Deleting";
  store::WorkloadRecord updated = group;
  updated.phase = phase;
  updated.cluster = clusters;
  updated.reason = summary + reasons;
  updated.nodes = std::move(nodes);
  updated.epoch = epoch;
  updated.restarts = restarts;
  updated.disruptions = disruptions;
  updated.exit_code = exit_code;
  updated.started_at_ms = started;
  updated.finished_at_ms = all_finished ? finished : 0;
  if (updated.phase == group.phase && updated.cluster == group.cluster &&
      updated.reason == group.reason && updated.nodes == group.nodes &&
      updated.epoch == group.epoch && updated.restarts == group.restarts &&
      updated.disruptions == group.disruptions &&
      updated.finished_at_ms == group.finished_at_ms &&
      updated.started_at_ms == group.started_at_ms) {
    return;
  }
  bool phase_changed = updated.phase != group.phase;
  updated.updated_at = clock_.now();
  group = std::move(updated);
  persist(group);
  if (phase_changed)
    context_.record_event(group_uid,
                          std::string(model::phase_name(group.phase)) + ": " + group.reason);
}

}  // namespace shoal::core::source

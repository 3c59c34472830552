// The source role, deleting a workload everywhere: DELETE to every target
// that may hold something of it, repeated until each answers (one that can
// hold no running copy, at most as long as a reservation lives), and the
// workload forgotten once none is left.
#include <set>

#include "agent/core/source/role.h"

namespace shoal::core::source {

Status SourceRole::delete_workload(const std::string& namespace_name, const std::string& name) {
  SourceWorkload* named = book_.find_named(namespace_name + "/" + name);
  if (!named) return not_found("workload " + namespace_name + "/" + name + " not found");
  SourceWorkload& workload = *named;
  if (!workload.record.deleting) {
    std::string group_uid = workload.record.uid;
    workload.record.deleting = true;
    workload.record.reason = "Deleting";
    workload.record.updated_at = clock_.now();
    persist(workload.record);
    context_.record_event(group_uid, "delete requested");
    // A group goes once its last copy has gone (drive_source_workloads).
    std::vector<std::string> targets = {group_uid};
    if (is_group(workload)) targets = book_.copy_uids(group_uid);
    for (const auto& target_uid : targets) {
      SourceWorkload& one = *book_.find(target_uid);
      one.record.deleting = true;
      one.record.reason = "Deleting";
      persist(one.record);
      begin_delete(one);
      if (drive_delete(one, clock_.now())) forget_workload(target_uid);
    }
    SourceWorkload* group = book_.find(group_uid);
    if (group && is_group(*group) && book_.copy_uids(group_uid).empty()) {
      forget_workload(group_uid);
    }
  }
  return context_.store_health();
}

Status SourceRole::force_delete(const std::string& namespace_name, const std::string& name) {
  SourceWorkload* named = book_.find_named(namespace_name + "/" + name);
  if (!named) return not_found("workload " + namespace_name + "/" + name + " not found");
  const std::string uid = named->record.uid;
  SHOAL_RETURN_IF_ERROR(delete_workload(namespace_name, name));
  SourceWorkload* left = book_.find(uid);
  if (!left) return context_.store_health();  // every copy was confirmed stopped already
  bool group = is_group(*left);
  std::vector<std::string> uids = group ? book_.copy_uids(uid) : std::vector<std::string>{uid};
  for (const std::string& copy_uid : uids) {
    SourceWorkload& one = *book_.find(copy_uid);
    std::string unconfirmed;
    for (const auto& [peer_id, pending] : one.deletes) {
      unconfirmed += (unconfirmed.empty() ? "" : ", ") + context_.cluster_name_of(peer_id);
    }
    std::string text = "deleted by force";
    if (!unconfirmed.empty()) {
      text += ", unconfirmed by " + unconfirmed +
              ": a copy there stops when our lease there lapses, or on the DELETE that answers "
              "its next HOLDINGS";
    }
    context_.record_event(copy_uid, text);
    one.deletes.clear();
    forget_workload(copy_uid);
  }
  if (group) forget_workload(uid);  // its copies gone
  return context_.store_health();
}

void SourceRole::begin_delete(SourceWorkload& workload) {
  const store::WorkloadRecord& record = workload.record;
  TimePoint now = clock_.now();
  std::set<std::string> maybe_holding;
  for (const auto& [peer_id, progress] : workload.candidates) {
    if (may_hold_something(progress)) maybe_holding.insert(peer_id);
  }
  for (const auto& [peer_id, cancel] : workload.cancels) maybe_holding.insert(peer_id);
  if (workload.candidates.empty() && record.phase != model::Phase::kPending) {
    // After a restart nobody knows who was asked: tell every target.
    maybe_holding.insert(self_id_);
    for (const auto& [issuer, invitations] : invitations_.issuers()) {
      maybe_holding.insert(issuer);
    }
  }
  if (!record.winner.empty()) maybe_holding.insert(record.winner);
  workload.cancels.clear();
  for (const auto& peer_id : maybe_holding) {
    PendingDelete pending{record.epoch, now, now + config_.reservation_ttl};
    // A copy that may be running is waited for until it is confirmed stopped.
    if (peer_id == record.winner && !model::is_finished(record.phase)) pending.give_up_at.reset();
    workload.deletes[peer_id] = pending;
    context_.send(peer_id, protocol::Delete{record.uid, record.epoch});
  }
}

bool SourceRole::drive_delete(SourceWorkload& workload, TimePoint now) {
  for (auto it = workload.deletes.begin(); it != workload.deletes.end();) {
    PendingDelete& pending = it->second;
    std::optional<TimePoint> let_go_at = leases_.let_go_at(it->first);
    if ((pending.give_up_at && now >= *pending.give_up_at) || (let_go_at && now >= *let_go_at)) {
      it = workload.deletes.erase(it);
      continue;
    }
    if (now >= context_.resend_at(it->first, pending.last_sent, 0)) {
      pending.last_sent = now;
      context_.send(it->first, protocol::Delete{workload.record.uid, pending.epoch});
    }
    ++it;
  }
  return workload.deletes.empty();
}

void SourceRole::forget_workload(const std::string& uid) {
  SourceWorkload* found = book_.find(uid);
  if (!found) return;
  SourceWorkload& workload = *found;
  const std::string parent = workload.record.parent;
  context_.record_event(uid, "deleted " + workload.record.spec.key());
  context_.note_store(context_.store().delete_workload(uid));
  if (!parent.empty()) {
    // A deleting group goes once its last copy has: due now, so touched
    // (in a tick, the group may have been driven before this copy went).
    due_.wake(parent);
    due_.touch(parent);
  }
  window_.leave(workload);
  window_.release(uid);
  parked_.unpark(workload);
  targets_.expect_at(workload, "");
  if (!workload.counted_at.empty()) targets_.count_ours(workload.counted_at, -1);
  book_.erase(uid);
  due_.sleep(uid);
}

}  // namespace shoal::core::source

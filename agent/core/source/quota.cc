// The source role, federation-wide quotas: the most a namespace's
// workloads may hold at once across every cluster, this one's included
// (model/quota.h). A workload holds its share from the start of a round
// until it ends (SourceBook::held_in); one that would pass the quota waits
// at the source in its namespace's line, sent nowhere, highest priority
// first, until what the namespace holds leaves room.
#include "agent/core/source/role.h"

namespace shoal::core::source {

Status SourceRole::set_quota(const model::QuotaSpec& quota) {
  context_.note_store(context_.store().put_quota(quota));
  quotas_[quota.namespace_name] = quota;
  context_.record_event("quota/" + quota.namespace_name, "quota set: " + model::limits_text(quota));
  return context_.store_health();
}

Status SourceRole::delete_quota(const std::string& namespace_name) {
  if (!quotas_.count(namespace_name)) {
    return not_found("namespace " + namespace_name + " has no quota here");
  }
  context_.note_store(context_.store().delete_quota(namespace_name));
  quotas_.erase(namespace_name);
  context_.record_event("quota/" + namespace_name, "quota deleted");
  return context_.store_health();
}

void SourceRole::load_quotas(std::vector<model::QuotaSpec> quotas) {
  quotas_.clear();
  for (model::QuotaSpec& quota : quotas) {
    std::string name = quota.namespace_name;
    quotas_[name] = std::move(quota);
  }
}

size_t SourceRole::waiting_for_quota(const std::string& namespace_name) const {
  return window_.waiting_in(PlacementWindow::quota_line(namespace_name));
}

bool SourceRole::beyond_quota(const SourceWorkload& workload) const {
  const store::WorkloadRecord& record = workload.record;
  if (SourceBook::holds_quota(record)) return false;
  auto quota = quotas_.find(record.spec.namespace_name);
  if (quota == quotas_.end()) return false;
  return !model::quota_refusal(quota->second, book_.held_in(record.spec.namespace_name),
                               record.spec.total())
              .empty() ||
         window_.waits_in(PlacementWindow::quota_line(record.spec.namespace_name));
}

bool SourceRole::held_by_quota(SourceWorkload& workload) {
  store::WorkloadRecord& record = workload.record;
  if (SourceBook::holds_quota(record)) return false;  // a new round of work it holds room for
  const std::string& name = record.spec.namespace_name;
  auto quota = quotas_.find(name);
  if (quota == quotas_.end()) return false;
  model::Resources total = record.spec.total();
  if (std::string never = model::quota_refusal(quota->second, {}, total); !never.empty()) {
    // It would block the line for good: it waits for the quota to change.
    make_pending(workload, never + " (more than the whole quota)");
    return true;
  }
  std::string line = PlacementWindow::quota_line(name);
  std::string refusal = model::quota_refusal(quota->second, book_.held_in(name), total);
  if (refusal.empty() && (serving_quota_ == name || !window_.waits_in(line))) return false;
  if (refusal.empty()) refusal = "QuotaExceeded: behind work of namespace " + name + " waiting for its quota";
  wait_in_line(workload, line, refusal);
  return true;
}

bool SourceRole::admit_within_quota() {
  if (!serving_quota_.empty() || admitting_) return false;
  bool started = false;
  for (const std::string& name : window_.quota_lines()) {
    auto quota = quotas_.find(name);
    auto fits = [&](const SourceWorkload& waiting) {
      return quota == quotas_.end() ||
             model::quota_refusal(quota->second, book_.held_in(name), waiting.record.spec.total()).empty();
    };
    serving_quota_ = name;
    while (SourceWorkload* admitted = window_.admit_within_quota(book_, name, fits)) {
      due_.wake(admitted->record.uid);
      due_.touch(admitted->record.uid);
      start_round(*admitted);
      started = true;
    }
  }
  serving_quota_.clear();
  return started;
}

}  // namespace shoal::core::source

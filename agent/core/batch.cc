#include "agent/core/batch.h"

namespace shoal::core {

namespace {

BatchOutcome rolled_back(store::Store& store, Transport& transport, GroupCommit* group, BatchEnd end,
                         Status why) {
  store.rollback();
  transport.drop_batch();
  if (group) group->open_since = TimePoint{};
  return {end, std::move(why)};
}

}  // namespace

BatchOutcome run_batch(Agent& agent, store::Store& store, Transport& transport,
                       const std::function<Status()>& steps, const std::function<bool()>& abandon,
                       GroupCommit* group) {
  // A group left open is continued: its transaction is this batch's.
  if (!group || !group->open()) {
    if (Status begun = store.begin(); !begun.is_ok()) {
      transport.drop_batch();
      return {BatchEnd::kRolledBack, begun};
    }
  }
  uint64_t envelopes_before = agent.envelopes_sent();
  Status done = steps();
  if (abandon && abandon()) return rolled_back(store, transport, group, BatchEnd::kAbandoned, Status::ok());
  if (done.is_ok()) done = agent.finish_batch();
  if (!done.is_ok()) return rolled_back(store, transport, group, BatchEnd::kRolledBack, std::move(done));
  // Quiet: nothing sealed (by finish_batch, or by a control call's own
  // end_control), nothing to launch, nobody waiting for an answer.
  bool quiet = agent.envelopes_sent() == envelopes_before && !agent.has_launches() &&
               !(group && group->answers_waiting);
  if (group && group->linger.count() > 0 && quiet) {
    TimePoint now = agent.now();
    if (!group->open()) group->open_since = now;
    if (now < group->commit_due()) return {BatchEnd::kOpen, Status::ok()};
  }
  if (group) group->open_since = TimePoint{};
  done = store.commit();
  if (!done.is_ok()) return rolled_back(store, transport, group, BatchEnd::kRolledBack, std::move(done));
  transport.release_batch();
  agent.batch_committed();
  return {BatchEnd::kCommitted, Status::ok()};
}

Status load_read_only(Agent& agent, store::Store& store, Transport& transport) {
  bool batch = store.begin().is_ok();
  Status loaded = agent.load();
  if (batch) store.rollback();
  transport.drop_batch();
  if (!loaded.is_ok()) return loaded;
  agent.batch_committed();
  return Status::ok();
}

}  // namespace shoal::core

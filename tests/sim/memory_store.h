// An in-memory store::Store for the federation simulator: the
// same contract as SqliteStore — batches that commit or roll back whole —
// without a disk, and with crash(): whatever the open batch wrote is lost,
// everything committed survives for the agent's restart. Thousands of
// agents fit in one process.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "store/store.h"

namespace shoal::sim {

class MemoryStore final : public store::Store {
 public:
  Status begin() override;
  Status commit() override;
  void rollback() override;
  store::CommitStats commit_stats() const override { return stats_; }
  // The process died: an open batch never committed.
  void crash() { rollback(); }
  bool in_batch() const { return in_batch_; }

  // A failing disk, as SQLite reports one (disk full, read-only, I/O
  // errors): while set, every write (kWrites) or every commit that has
  // something to write (kCommit) answers ErrorCode::kStorage; reads go on.
  enum class Failure { kNone, kWrites, kCommit };
  void set_failure(Failure failure) { failure_ = failure; }
  bool failing() const { return failure_ != Failure::kNone; }
  // SqliteStore::probe_write's answer: whether a write would succeed now.
  Status probe_write() const;

  Result<uint64_t> next_boot() override;

  Status put_peer(const store::PeerRecord& peer) override;
  Result<std::vector<store::PeerRecord>> load_peers() override;
  Status put_invitation(const store::InvitationRecord& invitation) override;
  Result<std::vector<store::InvitationRecord>> load_invitations() override;
  Status put_workload(const store::WorkloadRecord& workload) override;
  Status update_workload_status(const store::WorkloadRecord& workload) override;
  Result<std::vector<store::WorkloadRecord>> load_workloads() override;
  Status delete_workload(const std::string& uid) override;
  Status put_reservation(const store::ReservationRecord& reservation) override;
  Status update_reservation_status(const store::ReservationRecord& reservation) override;
  Status delete_reservation(const std::string& source, const std::string& uid) override;
  Result<std::vector<store::ReservationRecord>> load_reservations() override;
  Result<std::vector<store::RunRecord>> load_runs() override;
  Status append_event(const store::EventRecord& event) override;
  Result<std::vector<store::EventRecord>> load_events(const std::string& subject) override;
  Status put_quota(const model::QuotaSpec& quota) override;
  Status delete_quota(const std::string& namespace_name) override;
  Result<std::vector<model::QuotaSpec>> load_quotas() override;

 private:
  // Sets `table[key]` to `value` (or erases it), remembering in the open
  // batch how to undo that.
  template <typename Map, typename Key, typename Value>
  void write(Map& table, const Key& key, const Value* value);

  // Sets a committed peer row.
  void apply_peer(const store::PeerRecord& peer);

  uint64_t boot_ = 0;
  // By peer id, unordered: a batch writes its senders' rows at every commit
  // (a probe rather than a tree walk), and only load_peers needs an order,
  // which it sorts.
  std::unordered_map<std::string, store::PeerRecord> peers_;
  // A batch's peer rows, applied at commit, dropped by rollback: every
  // envelope read writes its sender's row (its replay marks), and an undo
  // entry for each, with a copy of the row before, was 4-5 % of a step.
  // The slots are kept across batches, so their strings keep their room.
  std::vector<store::PeerRecord> pending_peers_;
  size_t pending_peer_count_ = 0;
  std::map<std::pair<std::string, int>, store::InvitationRecord> invitations_;  // (id, direction)
  std::map<std::string, store::WorkloadRecord> workloads_;
  std::map<std::pair<std::string, std::string>, store::ReservationRecord> reservations_;
  std::map<std::tuple<int64_t, std::string, std::string>, store::RunRecord>
      runs_;  // (started, source, uid)
  std::map<std::string, std::deque<store::EventRecord>> events_;
  std::map<std::string, model::QuotaSpec> quotas_;  // by namespace
  // kStorage while writes fail (failure_ == kWrites).
  Status refuse_write() const;

  Failure failure_ = Failure::kNone;
  bool in_batch_ = false;
  std::vector<std::function<void()>> undo_;  // newest last
  store::CommitStats stats_;
};

}  // namespace shoal::sim

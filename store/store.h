// What the agent core persists, behind an interface so the core stays free of
// I/O. Writes join the open batch; the runtime commits each batch in one
// transaction before it sends any message the batch produced.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "common/histogram.h"
#include "common/status.h"
#include "model/quota.h"
#include "store/records.h"

namespace shoal::store {

// What the batches cost the disk: a batch that changed a row is one
// synchronous WAL append (fsync), one that changed none writes nothing.
struct CommitStats {
  uint64_t written = 0;           // batches that changed rows
  uint64_t empty = 0;             // batches that changed none
  double written_seconds = 0;     // wall time inside the written batches' COMMIT
  Histogram written_latency{latency_buckets_seconds()};  // each written batch's COMMIT
};

class Store {
 public:
  virtual ~Store() = default;

  // Batches. Writes outside a batch are committed one by one.
  virtual Status begin() = 0;
  virtual Status commit() = 0;
  virtual void rollback() = 0;
  virtual CommitStats commit_stats() const = 0;

  // Increments and returns the boot counter (1 on first start).
  virtual Result<uint64_t> next_boot() = 0;

  virtual Status put_peer(const PeerRecord& peer) = 0;
  virtual Result<std::vector<PeerRecord>> load_peers() = 0;

  virtual Status put_invitation(const InvitationRecord& invitation) = 0;
  virtual Result<std::vector<InvitationRecord>> load_invitations() = 0;

  virtual Status put_workload(const WorkloadRecord& workload) = 0;
  // Writes everything of a stored workload but what never changes after
  // put_workload first wrote it (spec, names, creation, group ties): the
  // common write, without encoding the spec again. NotFound if no row.
  virtual Status update_workload_status(const WorkloadRecord& workload) = 0;
  virtual Result<std::vector<WorkloadRecord>> load_workloads() = 0;
  // Its events stay (under the uid) as the record of what happened.
  virtual Status delete_workload(const std::string& uid) = 0;

  // A reservation that is bound or later also writes its row in the run
  // history, in the same batch; delete_reservation leaves that row alone
  // (the core ends a run by persisting a terminal phase first).
  virtual Status put_reservation(const ReservationRecord& reservation) = 0;
  // put_reservation without encoding the spec again: everything of a stored
  // reservation but its spec, which stays as last written (the common
  // write: a reservation's spec changes only with its priority). NotFound
  // if no row.
  virtual Status update_reservation_status(const ReservationRecord& reservation) = 0;
  virtual Status delete_reservation(const std::string& source, const std::string& uid) = 0;
  virtual Result<std::vector<ReservationRecord>> load_reservations() = 0;

  // The run history, oldest first (see RunRecord).
  static constexpr std::chrono::hours kRunHistory{24 * 7};
  virtual Result<std::vector<RunRecord>> load_runs() = 0;

  // Keeps the newest kEventsPerSubject events of each subject.
  static constexpr int kEventsPerSubject = 200;
  virtual Status append_event(const EventRecord& event) = 0;
  virtual Result<std::vector<EventRecord>> load_events(const std::string& subject) = 0;

  // The source's federation-wide quotas, one per namespace (model/quota.h).
  virtual Status put_quota(const model::QuotaSpec& quota) = 0;
  virtual Status delete_quota(const std::string& namespace_name) = 0;
  virtual Result<std::vector<model::QuotaSpec>> load_quotas() = 0;
};

}  // namespace shoal::store

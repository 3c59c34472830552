// The Store on SQLite: one database file per agent, WAL mode, numbered
// migrations recorded in meta.schema_version.
#pragma once

#include <memory>
#include <string>

#include "store/sqlite/database.h"
#include "store/store.h"

namespace shoal::store::sqlite {

class SqliteStore final : public Store {
 public:
  // Opens `path` (":memory:" for tests), checks that it is a sound
  // database (PRAGMA quick_check) and applies pending migrations. A file
  // that is not one, or is damaged, is a kCorrupt error naming the file and
  // what to do; it is never recreated or repaired here.
  static Result<std::unique_ptr<SqliteStore>> open(const std::string& path);

  // Commits a one-row write on its own, outside any batch: whether the
  // database can be written now. kStorage while the disk is full, the file
  // or file system is read-only, or writes fail.
  Status probe_write();

  // The schema version this build writes; migrations bring older files here.
  static int latest_schema_version();
  Result<int> schema_version();

  // An online copy of what is committed (Database::backup_to); outside a batch.
  Status backup_to(const std::string& path) { return db_->backup_to(path); }

  Status begin() override;
  Status commit() override;
  void rollback() override;
  CommitStats commit_stats() const override { return commit_stats_; }

  Result<uint64_t> next_boot() override;

  Status put_peer(const PeerRecord& peer) override;
  Result<std::vector<PeerRecord>> load_peers() override;

  Status put_invitation(const InvitationRecord& invitation) override;
  Result<std::vector<InvitationRecord>> load_invitations() override;

  Status put_workload(const WorkloadRecord& workload) override;
  Status update_workload_status(const WorkloadRecord& workload) override;
  Result<std::vector<WorkloadRecord>> load_workloads() override;
  Status delete_workload(const std::string& uid) override;

  Status put_reservation(const ReservationRecord& reservation) override;
  Status update_reservation_status(const ReservationRecord& reservation) override;
  Status delete_reservation(const std::string& source, const std::string& uid) override;
  Result<std::vector<ReservationRecord>> load_reservations() override;
  Status put_quota(const model::QuotaSpec& quota) override;
  Status delete_quota(const std::string& namespace_name) override;
  Result<std::vector<model::QuotaSpec>> load_quotas() override;

  Result<std::vector<RunRecord>> load_runs() override;

  Status append_event(const EventRecord& event) override;
  Result<std::vector<EventRecord>> load_events(const std::string& subject) override;

 private:
  explicit SqliteStore(std::unique_ptr<Database> db) : db_(std::move(db)) {}
  Status migrate();
  Status quick_check();
  Status put_run(const ReservationRecord& reservation);

  static constexpr int kPruneEvery = 1024;
  int finishes_since_prune_ = 0;
  std::unique_ptr<Database> db_;
  bool in_batch_ = false;
  int64_t changes_at_begin_ = 0;
  CommitStats commit_stats_;
};

}  // namespace shoal::store::sqlite

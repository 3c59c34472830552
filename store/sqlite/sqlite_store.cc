#include "store/sqlite/sqlite_store.h"

#include <chrono>

#include <nlohmann/json.hpp>

namespace shoal::store::sqlite {
namespace {

// Numbered migrations. Migration i brings the schema from version i to i+1.
// Never edit one that has shipped; append a new one.
const char* const kMigrations[] = {
    // 0 -> 1: the walking skeleton's tables.
    R"sql(
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    INSERT INTO meta (key, value) VALUES ('boot', '0');
    CREATE TABLE peers (
      id TEXT PRIMARY KEY, cluster TEXT NOT NULL, org TEXT NOT NULL,
      endpoint TEXT NOT NULL, last_boot INTEGER NOT NULL DEFAULT 0);
    CREATE TABLE invitations (
      id TEXT NOT NULL, direction INTEGER NOT NULL, peer_id TEXT NOT NULL,
      token TEXT NOT NULL, revoked INTEGER NOT NULL DEFAULT 0,
      PRIMARY KEY (id, direction));
    CREATE TABLE workloads (
      uid TEXT PRIMARY KEY, namespace TEXT NOT NULL, name TEXT NOT NULL,
      spec TEXT NOT NULL, phase TEXT NOT NULL, epoch INTEGER NOT NULL,
      winner TEXT NOT NULL, cluster TEXT NOT NULL, nodes TEXT NOT NULL,
      reason TEXT NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,
      started_at INTEGER NOT NULL, finished_at INTEGER NOT NULL,
      exit_code INTEGER NOT NULL, status_generation INTEGER NOT NULL);
    CREATE UNIQUE INDEX workloads_by_name ON workloads (namespace, name);
    CREATE TABLE reservations (
      source TEXT NOT NULL, uid TEXT NOT NULL, epoch INTEGER NOT NULL,
      spec TEXT NOT NULL, phase TEXT NOT NULL, nodes TEXT NOT NULL,
      expires_at INTEGER NOT NULL, generation INTEGER NOT NULL,
      acked_generation INTEGER NOT NULL, started_at INTEGER NOT NULL,
      finished_at INTEGER NOT NULL, exit_code INTEGER NOT NULL, message TEXT NOT NULL,
      PRIMARY KEY (source, uid));
    CREATE TABLE events (
      id INTEGER PRIMARY KEY AUTOINCREMENT, subject TEXT NOT NULL,
      at INTEGER NOT NULL, text TEXT NOT NULL);
    CREATE INDEX events_by_subject ON events (subject, id);
    )sql",
    // 1 -> 2: replay high-water marks within a boot; renewed invitations.
    R"sql(
    ALTER TABLE peers ADD COLUMN last_seq INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE invitations ADD COLUMN replaced INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE workloads ADD COLUMN deleting INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE workloads ADD COLUMN nominations TEXT;
    )sql",
    // 2 -> 3: lease fencing (a source's lease at this target), restarts, and
    // the copies of a workload placed on several clusters (rows that share
    // the workload's name, tied to it by `parent`).
    R"sql(
    ALTER TABLE peers ADD COLUMN lease_ms INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE peers ADD COLUMN lease_until INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE workloads ADD COLUMN restarts INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE workloads ADD COLUMN parent TEXT NOT NULL DEFAULT '';
    ALTER TABLE workloads ADD COLUMN copy_index INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE workloads ADD COLUMN restart_at INTEGER NOT NULL DEFAULT 0;
    DROP INDEX workloads_by_name;
    CREATE UNIQUE INDEX workloads_by_name ON workloads (namespace, name, parent, copy_index);
    )sql",
    // 3 -> 4: the run history, an audit record that outlives reservations.
    // A run is known by when it was bound: adoption re-epochs it in place.
    R"sql(
    CREATE TABLE runs (
      source TEXT NOT NULL, uid TEXT NOT NULL, epoch INTEGER NOT NULL,
      namespace TEXT NOT NULL, name TEXT NOT NULL, cpu_milli INTEGER NOT NULL,
      memory_bytes INTEGER NOT NULL, gpu INTEGER NOT NULL, nodes TEXT NOT NULL,
      started_at INTEGER NOT NULL, finished_at INTEGER NOT NULL, phase TEXT NOT NULL,
      message TEXT NOT NULL, PRIMARY KEY (source, uid, started_at));
    CREATE INDEX runs_by_finish ON runs (finished_at);
    )sql",
    // 4 -> 5: a copy's end condition as a code (protocol::CopyCondition), so
    // no decision reads the message text; rows from before take theirs from it.
    R"sql(
    ALTER TABLE reservations ADD COLUMN condition INTEGER NOT NULL DEFAULT 0;
    UPDATE reservations SET condition = CASE
      WHEN message LIKE 'LeaseExpired%' THEN 1
      WHEN message LIKE 'DeletedAtTarget%' THEN 2
      WHEN message LIKE 'Revoked%' THEN 3
      WHEN message LIKE 'lost on restart%' THEN 4
      WHEN message LIKE 'Released%' THEN 5
      ELSE 0 END;
    )sql",
    // 5 -> 6: ends a workload's job did not cause (evictions, node failures,
    // lost copies), counted apart from restarts.
    R"sql(
    ALTER TABLE workloads ADD COLUMN disruptions INTEGER NOT NULL DEFAULT 0;
    )sql",
    // 6 -> 7: epochs given up as lost, kept across restarts so a late
    // outcome is still recognized and a group's copies stay apart.
    R"sql(
    ALTER TABLE workloads ADD COLUMN lost_copies TEXT NOT NULL DEFAULT '[]';
    )sql",
    // 7 -> 8: the source's federation-wide quotas, one per namespace (JSON).
    R"sql(
    CREATE TABLE quotas (namespace TEXT PRIMARY KEY, spec TEXT NOT NULL);
    )sql",
    // 8 -> 9: peers the operator forgot (PeerRecord::forgotten_at_ms).
    R"sql(
    ALTER TABLE peers ADD COLUMN forgotten_at INTEGER NOT NULL DEFAULT 0;
    )sql",
};

// Stored JSON never throws on the way in: bytes that are not UTF-8 (which
// every boundary refuses before they get here) would be replaced, not abort
// the agent.
std::string json_text(const nlohmann::json& json) {
  return json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string nodes_to_text(const std::vector<std::string>& nodes) { return json_text(nodes); }

Result<std::vector<std::string>> nodes_from_text(const std::string& text) {
  auto json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_array()) return corrupt("stored node list is not a JSON array");
  std::vector<std::string> out;
  for (const auto& item : json) {
    if (!item.is_string()) return corrupt("stored node list holds a non-string");
    out.push_back(item.get<std::string>());
  }
  return out;
}

std::string lost_copies_to_text(const std::vector<LostCopy>& lost) {
  nlohmann::json json = nlohmann::json::array();
  for (const auto& copy : lost) {
    json.push_back({{"target", copy.target}, {"epoch", copy.epoch}, {"succeeded", copy.succeeded}});
  }
  return json_text(json);
}

Result<std::vector<LostCopy>> lost_copies_from_text(const std::string& text) {
  auto json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_array()) return corrupt("stored lost copies are not a JSON array");
  std::vector<LostCopy> out;
  for (const auto& item : json) {
    if (!item.is_object() || !item.contains("target") || !item["target"].is_string() ||
        !item.contains("epoch") || !item["epoch"].is_number_unsigned() ||
        !item.contains("succeeded") || !item["succeeded"].is_boolean()) {
      return corrupt("stored lost copy is not {target, epoch, succeeded}");
    }
    out.push_back({item["target"].get<std::string>(), item["epoch"].get<uint64_t>(),
                   item["succeeded"].get<bool>()});
  }
  return out;
}

Result<model::WorkloadSpec> spec_from_text(const std::string& text) {
  auto json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return corrupt("stored workload spec is not JSON");
  return model::workload_spec_from_json(json);
}

template <size_t N>
int index_of(const std::string_view (&names)[N], const std::string& name) {
  for (size_t i = 0; i < N; ++i) {
    if (names[i] == name) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

int SqliteStore::latest_schema_version() { return static_cast<int>(std::size(kMigrations)); }

Result<std::unique_ptr<SqliteStore>> SqliteStore::open(const std::string& path) {
  auto refuse_corrupt = [&](const Status& status) {
    return corrupt(
        "state database " + path + " is damaged (" + status.message() +
        "); shoald will not run on it and never recreates it: restore it from a backup, "
        "or move it aside to start with no state (invitations and reservations are then lost)");
  };
  auto db = Database::open(path);
  if (!db.is_ok()) {
    return db.status().code() == ErrorCode::kCorrupt ? refuse_corrupt(db.status()) : db.status();
  }
  std::unique_ptr<SqliteStore> store(new SqliteStore(std::move(db).value()));
  Status sound = store->quick_check();
  if (!sound.is_ok()) return sound.code() == ErrorCode::kCorrupt ? refuse_corrupt(sound) : sound;
  SHOAL_RETURN_IF_ERROR(store->migrate());
  return store;
}

// quick_check reads every page and checks its structure (not index
// contents), so damage anywhere is found at start rather than at the first
// read that hits it, perhaps mid-batch.
Status SqliteStore::quick_check() {
  SHOAL_ASSIGN_OR_RETURN(Statement s, db_->prepare("PRAGMA quick_check(1)"));
  SHOAL_ASSIGN_OR_RETURN(bool row, s.step());
  std::string verdict = row ? s.column_text(0) : "no answer";
  s.reset();
  if (verdict != "ok") return corrupt("quick_check: " + verdict);
  return Status::ok();
}

Status SqliteStore::probe_write() {
  if (in_batch_) return internal_error("store: probe_write inside a batch");
  SHOAL_RETURN_IF_ERROR(db_->execute("BEGIN IMMEDIATE"));
  Status written = db_->execute(
      "INSERT OR REPLACE INTO meta (key, value) VALUES ('write_probe', "
      "CAST(COALESCE((SELECT value FROM meta WHERE key = 'write_probe'), 0) AS INTEGER) + 1)");
  if (written.is_ok()) written = db_->execute("COMMIT");
  if (!written.is_ok()) (void)db_->execute("ROLLBACK");
  return written;
}

Result<int> SqliteStore::schema_version() {
  SHOAL_ASSIGN_OR_RETURN(Statement s, db_->prepare("PRAGMA user_version"));
  SHOAL_ASSIGN_OR_RETURN(bool row, s.step());
  int version = row ? static_cast<int>(s.column_int(0)) : 0;
  s.reset();
  return version;
}

Status SqliteStore::migrate() {
  SHOAL_ASSIGN_OR_RETURN(int version, schema_version());
  if (version > latest_schema_version()) {
    return internal_error("state database has schema version " + std::to_string(version) +
                          ", newer than this shoald understands (" +
                          std::to_string(latest_schema_version()) + "); upgrade shoald");
  }
  for (int v = version; v < latest_schema_version(); ++v) {
    SHOAL_RETURN_IF_ERROR(db_->execute("BEGIN IMMEDIATE"));
    Status applied = db_->execute(kMigrations[v]);
    if (applied.is_ok()) applied = db_->execute("PRAGMA user_version = " + std::to_string(v + 1));
    if (applied.is_ok()) {
      applied = db_->execute(
          "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', '" +
          std::to_string(v + 1) + "')");
    }
    if (!applied.is_ok()) {
      (void)db_->execute("ROLLBACK");
      return applied.with_context("migration " + std::to_string(v + 1));
    }
    SHOAL_RETURN_IF_ERROR(db_->execute("COMMIT"));
  }
  return Status::ok();
}

Status SqliteStore::begin() {
  if (in_batch_) return internal_error("store: batch already open");
  SHOAL_RETURN_IF_ERROR(db_->execute("BEGIN IMMEDIATE"));
  in_batch_ = true;
  changes_at_begin_ = db_->total_changes();
  return Status::ok();
}

Status SqliteStore::commit() {
  if (!in_batch_) return internal_error("store: no batch open");
  in_batch_ = false;
  bool wrote = db_->total_changes() != changes_at_begin_;
  auto began = std::chrono::steady_clock::now();
  Status committed = db_->execute("COMMIT");
  if (committed.is_ok() && wrote) {
    ++commit_stats_.written;
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    commit_stats_.written_seconds += seconds;
    commit_stats_.written_latency.observe(seconds);
  } else if (committed.is_ok()) {
    ++commit_stats_.empty;
  }
  return committed;
}

void SqliteStore::rollback() {
  if (!in_batch_) return;
  in_batch_ = false;
  (void)db_->execute("ROLLBACK");
}

Result<uint64_t> SqliteStore::next_boot() {
  SHOAL_RETURN_IF_ERROR(
      db_->execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'boot'"));
  SHOAL_ASSIGN_OR_RETURN(Statement s, db_->prepare("SELECT value FROM meta WHERE key = 'boot'"));
  SHOAL_ASSIGN_OR_RETURN(bool row, s.step());
  if (!row) return corrupt("meta.boot is missing");
  uint64_t boot = std::stoull(s.column_text(0));
  s.reset();
  return boot;
}

Status SqliteStore::put_peer(const PeerRecord& peer) {
  SHOAL_ASSIGN_OR_RETURN(Statement s,
                         db_->prepare("INSERT OR REPLACE INTO peers (id, cluster, org, endpoint, "
                                      "last_boot, last_seq, lease_ms, lease_until, forgotten_at) "
                                      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"));
  return s.bind(1, peer.id)
      .bind(2, peer.cluster)
      .bind(3, peer.org)
      .bind(4, peer.endpoint)
      .bind(5, static_cast<int64_t>(peer.last_boot))
      .bind(6, static_cast<int64_t>(peer.last_seq))
      .bind(7, peer.lease_ms)
      .bind(8, peer.lease_until_ms)
      .bind(9, peer.forgotten_at_ms)
      .run();
}

Result<std::vector<PeerRecord>> SqliteStore::load_peers() {
  SHOAL_ASSIGN_OR_RETURN(
      Statement s, db_->prepare("SELECT id, cluster, org, endpoint, last_boot, last_seq, lease_ms, "
                                "lease_until, forgotten_at FROM peers"));
  std::vector<PeerRecord> out;
  while (true) {
    SHOAL_ASSIGN_OR_RETURN(bool row, s.step());
    if (!row) break;
    out.push_back({s.column_text(0), s.column_text(1), s.column_text(2), s.column_text(3),
                   static_cast<uint64_t>(s.column_int(4)), static_cast<uint64_t>(s.column_int(5)),
                   s.column_int(6), s.column_int(7), s.column_int(8)});
  }
  return out;
}

Status SqliteStore::put_invitation(const InvitationRecord& invitation) {
  SHOAL_ASSIGN_OR_RETURN(Statement s,
                         db_->prepare("INSERT OR REPLACE INTO invitations (id, direction, "
                                      "peer_id, token, revoked, replaced) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"));
  return s.bind(1, invitation.id)
      .bind(2, static_cast<int64_t>(invitation.direction))
      .bind(3, invitation.peer_id)
      .bind(4, invitation.token)
      .bind(5, int64_t{invitation.revoked ? 1 : 0})
      .bind(6, int64_t{invitation.replaced ? 1 : 0})
      .run();
}

Result<std::vector<InvitationRecord>> SqliteStore::load_invitations() {
  SHOAL_ASSIGN_OR_RETURN(
      Statement s,
      db_->prepare("SELECT id, direction, peer_id, token, revoked, replaced FROM invitations "
                   "ORDER BY rowid"));
  std::vector<InvitationRecord> out;
  while (true) {
    SHOAL_ASSIGN_OR_RETURN(bool row, s.step());
    if (!row) break;
    out.push_back({s.column_text(0), static_cast<InvitationDirection>(s.column_int(1)),
                   s.column_text(2), s.column_text(3), s.column_int(4) != 0,
                   s.column_int(5) != 0});
  }
  return out;
}

namespace {

// The status columns, numbered as in put_workload's INSERT: its UPDATE
// (update_workload_status) uses the same numbers, so one binding serves
// both and the two cannot drift apart.
Statement& bind_status(Statement& s, const WorkloadRecord& w) {
  return s.bind(1, w.uid)
      .bind(5, model::phase_name(w.phase))
      .bind(6, static_cast<int64_t>(w.epoch))
      .bind(7, w.winner)
      .bind(8, w.cluster)
      .bind(9, nodes_to_text(w.nodes))
      .bind(10, w.reason)
      .bind(12, to_millis(w.updated_at))
      .bind(13, w.started_at_ms)
      .bind(14, w.finished_at_ms)
      .bind(15, int64_t{w.exit_code})
      .bind(16, static_cast<int64_t>(w.status_generation))
      .bind(17, int64_t{w.deleting ? 1 : 0})
      .bind(18, w.nominations ? nodes_to_text(*w.nominations) : std::string())
      .bind(19, int64_t{w.restarts})
      .bind(22, to_millis(w.restart_at))
      .bind(23, int64_t{w.disruptions})
      .bind(24, lost_copies_to_text(w.lost_copies));
}

}  // namespace

Status SqliteStore::put_workload(const WorkloadRecord& w) {
  SHOAL_ASSIGN_OR_RETURN(
      Statement s,
      db_->prepare("INSERT OR REPLACE INTO workloads (uid, namespace, name, spec, phase, epoch, "
                   "winner, cluster, nodes, reason, created_at, updated_at, started_at, "
                   "finished_at, exit_code, status_generation, deleting, nominations, restarts, parent, "
                   "copy_index, restart_at, disruptions, lost_copies) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, "
                   "?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24)"));
  return bind_status(s, w)
      .bind(2, w.spec.namespace_name)
      .bind(3, w.spec.name)
      .bind(4, json_text(model::to_json(w.spec)))
      .bind(11, to_millis(w.created_at))
      .bind(20, w.parent)
      .bind(21, int64_t{w.copy_index})
      .run();
}

Status SqliteStore::update_workload_status(const WorkloadRecord& w) {
  SHOAL_ASSIGN_OR_RETURN(
      Statement s,
      db_->prepare("UPDATE workloads SET phase = ?5, epoch = ?6, winner = ?7, cluster = ?8, "
                   "nodes = ?9, reason = ?10, updated_at = ?12, started_at = ?13, "
                   "finished_at = ?14, exit_code = ?15, status_generation = ?16, deleting = ?17, "
                   "nominations = ?18, restarts = ?19, restart_at = ?22, disruptions = ?23, "
                   "lost_copies = ?24 WHERE uid = ?1"));
  SHOAL_RETURN_IF_ERROR(bind_status(s, w).run());
  if (db_->changes() == 0) return not_found("workload " + w.uid + " is not stored");
  return Status::ok();
}

Status SqliteStore::delete_workload(const std::string& uid) {
  SHOAL_ASSIGN_OR_RETURN(Statement s, db_->prepare("DELETE FROM workloads WHERE uid = ?1"));
  return s.bind(1, uid).run();
}

Result<std::vector<WorkloadRecord>> SqliteStore::load_workloads() {
  SHOAL_ASSIGN_OR_RETURN(
      Statement s,
      db_->prepare("SELECT uid, spec, phase, epoch, winner, cluster, nodes, reason, created_at, "
                   "updated_at, started_at, finished_at, exit_code, status_generation, deleting, "
                   "nominations, restarts, parent, copy_index, restart_at, disruptions, lost_copies "
                   "FROM workloads "
                   "ORDER BY created_at, uid"));
  std::vector<WorkloadRecord> out;
  while (true) {
    SHOAL_ASSIGN_OR_RETURN(bool row, s.step());
    if (!row) break;
    WorkloadRecord w;
    w.uid = s.column_text(0);
    auto spec = spec_from_text(s.column_text(1));
    if (!spec.is_ok()) return spec.status().with_context("workload " + w.uid);
    w.spec = std::move(spec).value();
    auto phase = model::phase_from_name(s.column_text(2));
    if (!phase) return corrupt("workload " + w.uid + ": unknown phase " + s.column_text(2));
    w.phase = *phase;
    w.epoch = static_cast<uint64_t>(s.column_int(3));
    w.winner = s.column_text(4);
    w.cluster = s.column_text(5);
    auto nodes = nodes_from_text(s.column_text(6));
    if (!nodes.is_ok()) return nodes.status();
    w.nodes = std::move(nodes).value();
    w.reason = s.column_text(7);
    w.created_at = from_millis(s.column_int(8));
    w.updated_at = from_millis(s.column_int(9));
    w.started_at_ms = s.column_int(10);
    w.finished_at_ms = s.column_int(11);
    w.exit_code = static_cast<int32_t>(s.column_int(12));
    w.status_generation = static_cast<uint64_t>(s.column_int(13));
    w.deleting = s.column_int(14) != 0;
    if (std::string text = s.column_text(15); !text.empty()) {
      auto nominations = nodes_from_text(text);
      if (!nominations.is_ok()) return nominations.status().with_context("workload " + w.uid);
      w.nominations = std::move(nominations).value();
    }
    w.restarts = static_cast<int32_t>(s.column_int(16));
    w.parent = s.column_text(17);
    w.copy_index = static_cast<int32_t>(s.column_int(18));
    w.restart_at = from_millis(s.column_int(19));
    w.disruptions = static_cast<int32_t>(s.column_int(20));
    auto lost = lost_copies_from_text(s.column_text(21));
    if (!lost.is_ok()) return lost.status().with_context("workload " + w.uid);
    w.lost_copies = std::move(lost).value();
    out.push_back(std::move(w));
  }
  return out;
}

namespace {

// A reservation's key and status columns, numbered as both of its writes
// name them (?1-?13; put_reservation adds the spec as ?14).
Statement& bind_reservation_status(Statement& s, const ReservationRecord& r) {
  return s.bind(1, r.source)
      .bind(2, r.uid)
      .bind(3, static_cast<int64_t>(r.epoch))
      .bind(4, kReservationPhaseNames[static_cast<int>(r.phase)])
      .bind(5, nodes_to_text(r.nodes))
      .bind(6, to_millis(r.expires_at))
      .bind(7, static_cast<int64_t>(r.generation))
      .bind(8, static_cast<int64_t>(r.acked_generation))
      .bind(9, r.started_at_ms)
      .bind(10, r.finished_at_ms)
      .bind(11, int64_t{r.exit_code})
      .bind(12, r.message)
      .bind(13, int64_t{r.condition});
}

}  // namespace

Status SqliteStore::put_reservation(const ReservationRecord& r) {
  SHOAL_ASSIGN_OR_RETURN(
      Statement s,
      db_->prepare(
          "INSERT OR REPLACE INTO reservations (source, uid, epoch, phase, nodes, expires_at, "
          "generation, acked_generation, started_at, finished_at, exit_code, message, condition, "
          "spec) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"));
  SHOAL_RETURN_IF_ERROR(bind_reservation_status(s, r).bind(14, json_text(model::to_json(r.spec))).run());
  if (r.phase == ReservationPhase::kReserved) return Status::ok();
  return put_run(r);
}

Status SqliteStore::update_reservation_status(const ReservationRecord& r) {
  SHOAL_ASSIGN_OR_RETURN(
      Statement s,
      db_->prepare("UPDATE reservations SET epoch = ?3, phase = ?4, nodes = ?5, expires_at = ?6, "
                   "generation = ?7, acked_generation = ?8, started_at = ?9, finished_at = ?10, "
                   "exit_code = ?11, message = ?12, condition = ?13 WHERE source = ?1 AND uid = ?2"));
  SHOAL_RETURN_IF_ERROR(bind_reservation_status(s, r).run());
  if (db_->changes() == 0) return not_found("reservation " + r.source + "/" + r.uid + " is not stored");
  if (r.phase == ReservationPhase::kReserved) return Status::ok();
  return put_run(r);
}

Status SqliteStore::put_run(const ReservationRecord& r) {
  SHOAL_ASSIGN_OR_RETURN(
      Statement s,
      db_->prepare("INSERT OR REPLACE INTO runs (source, uid, epoch, namespace, name, cpu_milli, "
                   "memory_bytes, gpu, nodes, started_at, finished_at, phase, message) VALUES "
                   "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"));
  SHOAL_RETURN_IF_ERROR(s.bind(1, r.source)
                            .bind(2, r.uid)
                            .bind(3, static_cast<int64_t>(r.epoch))
                            .bind(4, r.spec.namespace_name)
                            .bind(5, r.spec.name)
                            .bind(6, r.spec.resources.cpu_milli)
                            .bind(7, r.spec.resources.memory_bytes)
                            .bind(8, r.spec.resources.gpu)
                            .bind(9, nodes_to_text(r.nodes))
                            .bind(10, r.started_at_ms)
                            .bind(11, r.finished_at_ms)
                            .bind(12, kReservationPhaseNames[static_cast<int>(r.phase)])
                            .bind(13, r.message)
                            .run());
  // Pruned now and then, as finishes go by, against the newest finish time
  // (the store has no clock of its own).
  if (r.finished_at_ms == 0 || ++finishes_since_prune_ < kPruneEvery) return Status::ok();
  finishes_since_prune_ = 0;
  SHOAL_ASSIGN_OR_RETURN(
      Statement prune,
      db_->prepare("DELETE FROM runs WHERE finished_at != 0 AND finished_at < ?1"));
  int64_t history_ms = std::chrono::duration_cast<std::chrono::milliseconds>(kRunHistory).count();
  return prune.bind(1, r.finished_at_ms - history_ms).run();
}

Result<std::vector<RunRecord>> SqliteStore::load_runs() {
  SHOAL_ASSIGN_OR_RETURN(
      Statement s,
      db_->prepare("SELECT source, uid, epoch, namespace, name, cpu_milli, memory_bytes, gpu, "
                   "nodes, started_at, finished_at, phase, message FROM runs "
                   "ORDER BY started_at, rowid"));
  std::vector<RunRecord> out;
  while (true) {
    SHOAL_ASSIGN_OR_RETURN(bool row, s.step());
    if (!row) break;
    RunRecord r;
    r.source = s.column_text(0);
    r.uid = s.column_text(1);
    r.epoch = static_cast<uint64_t>(s.column_int(2));
    r.namespace_name = s.column_text(3);
    r.name = s.column_text(4);
    r.per_replica = {s.column_int(5), s.column_int(6), s.column_int(7)};
    auto nodes = nodes_from_text(s.column_text(8));
    if (!nodes.is_ok()) return nodes.status().with_context("run of " + r.uid);
    r.nodes = std::move(nodes).value();
    r.started_at_ms = s.column_int(9);
    r.finished_at_ms = s.column_int(10);
    r.phase = s.column_text(11);
    r.message = s.column_text(12);
    out.push_back(std::move(r));
  }
  return out;
}

Status SqliteStore::delete_reservation(const std::string& source, const std::string& uid) {
  SHOAL_ASSIGN_OR_RETURN(Statement s,
                         db_->prepare("DELETE FROM reservations WHERE source = ?1 AND uid = ?2"));
  return s.bind(1, source).bind(2, uid).run();
}

Status SqliteStore::put_quota(const model::QuotaSpec& quota) {
  SHOAL_ASSIGN_OR_RETURN(Statement s,
                         db_->prepare("INSERT OR REPLACE INTO quotas (namespace, spec) VALUES (?1, ?2)"));
  return s.bind(1, quota.namespace_name).bind(2, json_text(model::to_json(quota))).run();
}

Status SqliteStore::delete_quota(const std::string& namespace_name) {
  SHOAL_ASSIGN_OR_RETURN(Statement s, db_->prepare("DELETE FROM quotas WHERE namespace = ?1"));
  return s.bind(1, namespace_name).run();
}

Result<std::vector<model::QuotaSpec>> SqliteStore::load_quotas() {
  SHOAL_ASSIGN_OR_RETURN(Statement s, db_->prepare("SELECT spec FROM quotas ORDER BY namespace"));
  std::vector<model::QuotaSpec> out;
  while (true) {
    SHOAL_ASSIGN_OR_RETURN(bool row, s.step());
    if (!row) break;
    auto json = nlohmann::json::parse(s.column_text(0), nullptr, /*allow_exceptions=*/false);
    if (json.is_discarded()) return corrupt("stored quota is not JSON");
    SHOAL_ASSIGN_OR_RETURN(model::QuotaSpec quota, model::quota_spec_from_json(json));
    out.push_back(std::move(quota));
  }
  return out;
}

Result<std::vector<ReservationRecord>> SqliteStore::load_reservations() {
  SHOAL_ASSIGN_OR_RETURN(
      Statement s,
      db_->prepare("SELECT source, uid, epoch, spec, phase, nodes, expires_at, generation, "
                   "acked_generation, started_at, finished_at, exit_code, message, condition FROM "
                   "reservations ORDER BY rowid"));
  std::vector<ReservationRecord> out;
  while (true) {
    SHOAL_ASSIGN_OR_RETURN(bool row, s.step());
    if (!row) break;
    ReservationRecord r;
    r.source = s.column_text(0);
    r.uid = s.column_text(1);
    r.epoch = static_cast<uint64_t>(s.column_int(2));
    auto spec = spec_from_text(s.column_text(3));
    if (!spec.is_ok()) return spec.status().with_context("reservation " + r.uid);
    r.spec = std::move(spec).value();
    int phase = index_of(kReservationPhaseNames, s.column_text(4));
    if (phase < 0) return corrupt("reservation " + r.uid + ": unknown phase " + s.column_text(4));
    r.phase = static_cast<ReservationPhase>(phase);
    auto nodes = nodes_from_text(s.column_text(5));
    if (!nodes.is_ok()) return nodes.status();
    r.nodes = std::move(nodes).value();
    r.expires_at = from_millis(s.column_int(6));
    r.generation = static_cast<uint64_t>(s.column_int(7));
    r.acked_generation = static_cast<uint64_t>(s.column_int(8));
    r.started_at_ms = s.column_int(9);
    r.finished_at_ms = s.column_int(10);
    r.exit_code = static_cast<int32_t>(s.column_int(11));
    r.message = s.column_text(12);
    r.condition = static_cast<uint8_t>(s.column_int(13));
    out.push_back(std::move(r));
  }
  return out;
}

Status SqliteStore::append_event(const EventRecord& event) {
  SHOAL_ASSIGN_OR_RETURN(
      Statement insert,
      db_->prepare("INSERT INTO events (subject, at, text) VALUES (?1, ?2, ?3)"));
  SHOAL_RETURN_IF_ERROR(
      insert.bind(1, event.subject).bind(2, to_millis(event.at)).bind(3, event.text).run());
  SHOAL_ASSIGN_OR_RETURN(
      Statement trim,
      db_->prepare("DELETE FROM events WHERE subject = ?1 AND id <= (SELECT id FROM events "
                   "WHERE subject = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2)"));
  return trim.bind(1, event.subject).bind(2, int64_t{kEventsPerSubject}).run();
}

Result<std::vector<EventRecord>> SqliteStore::load_events(const std::string& subject) {
  SHOAL_ASSIGN_OR_RETURN(
      Statement s,
      db_->prepare("SELECT subject, at, text FROM events WHERE subject = ?1 ORDER BY id"));
  s.bind(1, subject);
  std::vector<EventRecord> out;
  while (true) {
    SHOAL_ASSIGN_OR_RETURN(bool row, s.step());
    if (!row) break;
    out.push_back({s.column_text(0), from_millis(s.column_int(1)), s.column_text(2)});
  }
  return out;
}

}  // namespace shoal::store::sqlite

#include "store/sqlite/database.h"

#include <sqlite3.h>

#include <cstring>
#include <filesystem>

namespace shoal::store::sqlite {
namespace {

// Sorts SQLite's result codes into ours: what the runtime may wait out
// (kStorage: the disk is full, read-only or failing), what it must never
// paper over (kCorrupt), and everything else. The message keeps SQLite's
// words and, for I/O, the system's (e.g. "File too large").
Status sqlite_error(sqlite3* db, int rc, const std::string& detail) {
  std::string message = std::string("sqlite: ") + sqlite3_errstr(rc);
  if (!detail.empty() && detail != sqlite3_errstr(rc)) message += ": " + detail;
  int system_errno = db ? sqlite3_system_errno(db) : 0;
  switch (rc & 0xff) {
    case SQLITE_FULL:
    case SQLITE_READONLY:
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
      if (system_errno != 0) message += std::string(" (") + std::strerror(system_errno) + ")";
      return Status(ErrorCode::kStorage, message);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return corrupt(message);
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Status(ErrorCode::kUnavailable, message);
    default:
      return internal_error(message);
  }
}

}  // namespace

Statement& Statement::bind(int index, int64_t value) {
  sqlite3_bind_int64(statement_, index, value);
  return *this;
}

Statement& Statement::bind(int index, std::string_view value) {
  sqlite3_bind_text(statement_, index, value.data(), static_cast<int>(value.size()),
                    SQLITE_TRANSIENT);
  return *this;
}

Status Statement::run() {
  int rc = sqlite3_step(statement_);
  sqlite3_reset(statement_);
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
    sqlite3* db = sqlite3_db_handle(statement_);
    return sqlite_error(db, rc, sqlite3_errmsg(db));
  }
  return Status::ok();
}

Result<bool> Statement::step() {
  int rc = sqlite3_step(statement_);
  if (rc == SQLITE_ROW) return true;
  sqlite3_reset(statement_);
  if (rc == SQLITE_DONE) return false;
  sqlite3* db = sqlite3_db_handle(statement_);
  return sqlite_error(db, rc, sqlite3_errmsg(db));
}

int64_t Statement::column_int(int index) const { return sqlite3_column_int64(statement_, index); }

std::string Statement::column_text(int index) const {
  const unsigned char* text = sqlite3_column_text(statement_, index);
  int size = sqlite3_column_bytes(statement_, index);
  return text ? std::string(reinterpret_cast<const char*>(text), static_cast<size_t>(size))
              : std::string();
}

void Statement::reset() { sqlite3_reset(statement_); }

Database::~Database() {
  for (auto& [sql, statement] : statements_) sqlite3_finalize(statement);
  sqlite3_close(db_);
}

Result<std::unique_ptr<Database>> Database::open(const std::string& path) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                           nullptr);
  if (rc != SQLITE_OK) {
    Status error = sqlite_error(db, rc, db ? sqlite3_errmsg(db) : "");
    sqlite3_close(db);
    return error.with_context("state database " + path);
  }
  sqlite3_extended_result_codes(db, 1);
  std::unique_ptr<Database> database(new Database(db));
  sqlite3_busy_timeout(db, 5000);
  // WAL: readers (shoalctl checks, the chaos checker) never block the agent.
  // synchronous=FULL: a committed reservation survives power loss, not just a crash.
  SHOAL_RETURN_IF_ERROR(database->execute("PRAGMA journal_mode=WAL"));
  SHOAL_RETURN_IF_ERROR(database->execute("PRAGMA synchronous=FULL"));
  SHOAL_RETURN_IF_ERROR(database->execute("PRAGMA foreign_keys=ON"));
  return database;
}

Status Database::execute(const std::string& sql) {
  char* error = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error);
  if (rc != SQLITE_OK) {
    std::string message = error ? error : "";
    sqlite3_free(error);
    return sqlite_error(db_, rc, message);
  }
  return Status::ok();
}

Result<Statement> Database::prepare(const std::string& sql) {
  auto it = statements_.find(sql);
  if (it != statements_.end()) {
    sqlite3_reset(it->second);
    sqlite3_clear_bindings(it->second);
    return Statement(it->second);
  }
  sqlite3_stmt* statement = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.c_str(), -1, &statement, nullptr);
  if (rc != SQLITE_OK) return sqlite_error(db_, rc, last_error() + " in: " + sql);
  statements_.emplace(sql, statement);
  return Statement(statement);
}

std::string Database::last_error() const { return sqlite3_errmsg(db_); }

int64_t Database::changes() const { return sqlite3_changes64(db_); }

int64_t Database::total_changes() const { return sqlite3_total_changes64(db_); }

Status Database::backup_to(const std::string& path) {
  if (!sqlite3_get_autocommit(db_)) return internal_error("backup: a transaction is open");
  // Written beside the target and renamed into place: a reader never sees
  // half a copy, and an existing file is never overwritten.
  if (std::filesystem::exists(path)) {
    return Status(ErrorCode::kAlreadyExists, path + " exists; name a new file");
  }
  std::string partial = path + ".partial";
  std::filesystem::remove(partial);
  sqlite3* copy = nullptr;
  int rc = sqlite3_open_v2(partial.c_str(), &copy, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  std::string error;
  if (rc == SQLITE_OK) {
    sqlite3_backup* backup = sqlite3_backup_init(copy, "main", db_, "main");
    if (!backup) {
      error = sqlite3_errmsg(copy);
    } else {
      rc = sqlite3_backup_step(backup, -1);
      if (rc != SQLITE_DONE) error = sqlite3_errstr(rc);
      rc = sqlite3_backup_finish(backup);
      if (error.empty() && rc != SQLITE_OK) error = sqlite3_errmsg(copy);
    }
  } else {
    error = copy ? sqlite3_errmsg(copy) : sqlite3_errstr(rc);
  }
  sqlite3_close(copy);
  std::error_code fs_error;
  if (error.empty()) {
    std::filesystem::permissions(partial, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write,
                                 fs_error);
    std::filesystem::rename(partial, path, fs_error);
    if (fs_error) error = fs_error.message();
  }
  if (!error.empty()) {
    std::filesystem::remove(partial, fs_error);
    return Status(ErrorCode::kStorage, "backup to " + path + " failed: " + error);
  }
  return Status::ok();
}

}  // namespace shoal::store::sqlite

// A thin RAII layer over the SQLite C API: a connection and cached prepared
// statements. Nothing here throws.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <string_view>

#include "common/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace shoal::store::sqlite {

class Statement {
 public:
  explicit Statement(sqlite3_stmt* statement) : statement_(statement) {}

  Statement& bind(int index, int64_t value);
  Statement& bind(int index, std::string_view value);
  // Runs to completion (for writes).
  Status run();
  // Steps once; true while a row is available.
  Result<bool> step();
  int64_t column_int(int index) const;
  std::string column_text(int index) const;
  void reset();

 private:
  sqlite3_stmt* statement_;
};

class Database {
 public:
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // Opens (creating if needed) `path` in WAL mode with a busy timeout.
  static Result<std::unique_ptr<Database>> open(const std::string& path);

  Status execute(const std::string& sql);
  // A prepared statement, cached per SQL text and reset before reuse.
  Result<Statement> prepare(const std::string& sql);
  std::string last_error() const;
  // Rows the last INSERT, UPDATE or DELETE changed.
  int64_t changes() const;
  // Rows every INSERT, UPDATE and DELETE so far changed.
  int64_t total_changes() const;
  // Copies the committed database into a new file at `path` with SQLite's
  // online backup API. Call outside a transaction (what a batch has not
  // committed must not be in the copy).
  Status backup_to(const std::string& path);

 private:
  explicit Database(sqlite3* db) : db_(db) {}
  sqlite3* db_;
  // By SQL text; hashed, since the texts share long prefixes that a
  // comparison tree would compare again and again.
  std::unordered_map<std::string, sqlite3_stmt*> statements_;
};

}  // namespace shoal::store::sqlite

// Reading a stopped agent's state.db for the checker (checker.h): apart
// from the checks, so that the simulator, which holds its records in
// memory, links no database.
#include "tests/chaos/checker.h"

#include "store/sqlite/database.h"
#include "store/sqlite/sqlite_store.h"

namespace shoal::chaos {

Result<AgentRecords> load_records(const std::string& cluster, const std::string& id,
                                  const std::string& db_path) {
  AgentRecords out;
  out.cluster = cluster;
  out.id = id;
  {
    SHOAL_ASSIGN_OR_RETURN(std::unique_ptr<store::sqlite::Database> db,
                           store::sqlite::Database::open(db_path));
    SHOAL_ASSIGN_OR_RETURN(store::sqlite::Statement check, db->prepare("PRAGMA integrity_check"));
    std::string answer;
    while (true) {
      SHOAL_ASSIGN_OR_RETURN(bool row, check.step());
      if (!row) break;
      answer += (answer.empty() ? "" : "; ") + check.column_text(0);
    }
    out.integrity = answer;
  }
  SHOAL_ASSIGN_OR_RETURN(std::unique_ptr<store::sqlite::SqliteStore> store,
                         store::sqlite::SqliteStore::open(db_path));
  SHOAL_ASSIGN_OR_RETURN(out.workloads, store->load_workloads());
  SHOAL_ASSIGN_OR_RETURN(out.runs, store->load_runs());
  return out;
}

}  // namespace shoal::chaos

// MemoryStore keeps SqliteStore's contract: the same operations on both,
// batches committed, rolled back and crashed, load the same rows.
#include "tests/sim/memory_store.h"

#include <gtest/gtest.h>

#include "store/sqlite/sqlite_store.h"

namespace shoal::sim {
namespace {

using namespace std::chrono_literals;

store::WorkloadRecord workload(const std::string& uid, model::Phase phase) {
  store::WorkloadRecord w;
  w.uid = uid;
  w.spec.namespace_name = "default";
  w.spec.name = "job-" + uid;
  w.spec.resources = {1000, 1 << 20, 0};
  w.phase = phase;
  w.created_at = from_millis(1'000);
  return w;
}

store::ReservationRecord reservation(const std::string& uid, store::ReservationPhase phase,
                                     int64_t started) {
  store::ReservationRecord r;
  r.source = "src";
  r.uid = uid;
  r.epoch = 2;
  r.spec.namespace_name = "default";
  r.spec.name = "job-" + uid;
  r.phase = phase;
  r.nodes = {"n-0"};
  r.started_at_ms = started;
  return r;
}

// What a store holds, as text: rows in key order, the fields the core reads.
std::string contents(store::Store& s) {
  std::string out;
  // (Each Result held while its rows are read.)
  auto workloads = s.load_workloads();
  auto reservations = s.load_reservations();
  auto runs = s.load_runs();
  auto peers = s.load_peers();
  for (const auto& w : *workloads) {
    out += "workload " + w.uid + " " + w.spec.name + " " + std::string(model::phase_name(w.phase)) +
           " e" + std::to_string(w.epoch) + " " + w.reason + " created " +
           std::to_string(to_millis(w.created_at)) + "\n";
  }
  for (const auto& r : *reservations) {
    out += "reservation " + r.source + "/" + r.uid + " " +
           std::string(store::kReservationPhaseNames[static_cast<size_t>(r.phase)]) + "\n";
  }
  for (const auto& r : *runs) {
    out += "run " + r.source + "/" + r.uid + " " + std::to_string(r.started_at_ms) + " " + r.phase +
           "\n";
  }
  for (const auto& p : *peers) out += "peer " + p.id + " " + p.cluster + "\n";
  auto events = *s.load_events("u1");
  out += "events " + std::to_string(events.size());
  if (!events.empty()) out += " first " + events.front().text + " last " + events.back().text;
  return out + "\n";
}

// The same story for any store; `crash` kills the process with a batch open.
void tell(store::Store& s, const std::function<void()>& crash) {
  ASSERT_EQ(*s.next_boot(), 1u);
  ASSERT_TRUE(s.begin().is_ok());
  ASSERT_TRUE(s.put_workload(workload("u1", model::Phase::kPending)).is_ok());
  ASSERT_TRUE(s.put_workload(workload("u2", model::Phase::kPending)).is_ok());
  ASSERT_TRUE(s.put_peer({"peer-a", "east", "acme", "tcp://h:1", 1, 2, 3, 4}).is_ok());
  for (int i = 0; i < store::Store::kEventsPerSubject + 5; ++i) {
    ASSERT_TRUE(s.append_event({"u1", from_millis(i), "e" + std::to_string(i)}).is_ok());
  }
  ASSERT_TRUE(s.commit().is_ok());

  // A rolled-back batch leaves nothing.
  ASSERT_TRUE(s.begin().is_ok());
  ASSERT_TRUE(s.delete_workload("u2").is_ok());
  ASSERT_TRUE(s.put_workload(workload("u3", model::Phase::kPending)).is_ok());
  ASSERT_TRUE(s.append_event({"u1", from_millis(9'999), "lost"}).is_ok());
  ASSERT_TRUE(s.put_peer({"peer-a", "rolled-back", "acme", "tcp://h:1", 1, 3, 3, 4}).is_ok());
  s.rollback();

  // A status update keeps what never changes.
  ASSERT_TRUE(s.begin().is_ok());
  store::WorkloadRecord changed = workload("u1", model::Phase::kRunning);
  changed.spec.name = "renamed";
  changed.created_at = from_millis(5'000);
  changed.epoch = 3;
  changed.reason = "ok";
  ASSERT_TRUE(s.update_workload_status(changed).is_ok());
  EXPECT_EQ(s.update_workload_status(workload("nope", model::Phase::kRunning)).code(),
            ErrorCode::kNotFound);
  ASSERT_TRUE(s.put_reservation(reservation("u1", store::ReservationPhase::kReserved, 0)).is_ok());
  ASSERT_TRUE(
      s.put_reservation(reservation("u2", store::ReservationPhase::kRunning, 7'000)).is_ok());
  // Rows written twice in one batch: the later one stands.
  ASSERT_TRUE(s.put_peer({"peer-b", "north", "acme", "tcp://n:1", 1, 1, 0, 0}).is_ok());
  ASSERT_TRUE(s.put_peer({"peer-b", "south", "acme", "tcp://s:1", 1, 2, 0, 0}).is_ok());
  ASSERT_EQ(s.load_peers()->size(), 2u);  // the open batch reads its own writes
  EXPECT_EQ(s.load_peers()->back().cluster, "south");
  ASSERT_TRUE(s.commit().is_ok());

  // A crash mid-batch: the batch is gone, the rest stays.
  ASSERT_TRUE(s.begin().is_ok());
  ASSERT_TRUE(s.delete_reservation("src", "u2").is_ok());
  ASSERT_TRUE(s.put_workload(workload("u4", model::Phase::kPending)).is_ok());
  ASSERT_TRUE(s.put_peer({"peer-a", "crashed", "acme", "tcp://h:1", 1, 9, 3, 4}).is_ok());
  (void)s.next_boot();
  crash();
  ASSERT_TRUE(s.begin().is_ok());
  ASSERT_TRUE(s.delete_reservation("src", "u1").is_ok());
  ASSERT_TRUE(s.commit().is_ok());
  EXPECT_EQ(*s.next_boot(), 2u);
}

TEST(MemoryStoreTest, KeepsTheContractOfTheSqliteStore) {
  auto sqlite = store::sqlite::SqliteStore::open(":memory:");
  ASSERT_TRUE(sqlite.is_ok()) << sqlite.status().message();
  tell(**sqlite, [&] { (*sqlite)->rollback(); });
  MemoryStore memory;
  tell(memory, [&] { memory.crash(); });
  EXPECT_EQ(contents(memory), contents(**sqlite));
  EXPECT_NE(contents(memory).find("workload u1 job-u1 Running e3 ok created 1000"),
            std::string::npos)
      << contents(memory);
  EXPECT_NE(contents(memory).find("run src/u2 7000 Running"), std::string::npos)
      << contents(memory);
  EXPECT_NE(contents(memory).find("peer peer-a east\npeer peer-b south\n"), std::string::npos)
      << contents(memory);
  EXPECT_EQ(memory.commit_stats().written, 3u);  // two batches never committed
}

}  // namespace
}  // namespace shoal::sim

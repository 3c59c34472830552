#include <gtest/gtest.h>

#include <sys/resource.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "store/sqlite/sqlite_store.h"

namespace shoal::store::sqlite {
namespace {

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/shoal-store.XXXXXX";
    dir_ = mkdtemp(pattern);
    path_ = dir_ + "/state.db";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::unique_ptr<SqliteStore> open() {
    auto store = SqliteStore::open(path_);
    EXPECT_TRUE(store.is_ok()) << store.status().message();
    return std::move(store).value();
  }
  std::string dir_, path_;
};

WorkloadRecord sample_workload() {
  WorkloadRecord w;
  w.uid = "u1";
  w.spec.name = "train";
  w.spec.resources = {2000, 1 << 20, 0};
  w.phase = model::Phase::kRunning;
  w.epoch = 3;
  w.winner = "peer";
  w.cluster = "east";
  w.nodes = {"node-1"};
  w.created_at = from_millis(1000);
  w.updated_at = from_millis(2000);
  w.started_at_ms = 1500;
  w.status_generation = 2;
  return w;
}

// Held for source "src" at epoch 1, with sample_workload's spec.
ReservationRecord sample_reservation() {
  ReservationRecord r;
  r.source = "src";
  r.uid = "u1";
  r.epoch = 1;
  r.spec = sample_workload().spec;
  return r;
}

TEST_F(StoreTest, FreshDatabaseIsMigratedToTheLatestVersion) {
  auto store = open();
  auto version = store->schema_version();
  ASSERT_TRUE(version.is_ok());
  EXPECT_EQ(*version, SqliteStore::latest_schema_version());
  // Reopening applies nothing twice.
  store.reset();
  auto again = open();
  EXPECT_EQ(*again->schema_version(), SqliteStore::latest_schema_version());
}

TEST_F(StoreTest, BootCounterGrowsAcrossReopens) {
  EXPECT_EQ(*open()->next_boot(), 1u);
  EXPECT_EQ(*open()->next_boot(), 2u);
  EXPECT_EQ(*open()->next_boot(), 3u);
}

TEST_F(StoreTest, WorkloadsAndReservationsSurviveReopen) {
  {
    auto store = open();
    ASSERT_TRUE(store->put_workload(sample_workload()).is_ok());
    WorkloadRecord nominated = sample_workload();
    nominated.uid = "u2";
    nominated.spec.name = "nominated";
    nominated.nominations = std::vector<std::string>{"east", "west"};
    nominated.deleting = true;
    ASSERT_TRUE(store->put_workload(nominated).is_ok());
    ReservationRecord r;
    r.source = "src";
    r.uid = "u1";
    r.epoch = 3;
    r.spec = sample_workload().spec;
    r.phase = ReservationPhase::kRunning;
    r.nodes = {"node-0", "node-2"};
    r.expires_at = from_millis(99);
    r.generation = 5;
    r.acked_generation = 4;
    r.condition = 3;
    ASSERT_TRUE(store->put_reservation(r).is_ok());
  }
  auto store = open();
  auto workloads = store->load_workloads();
  ASSERT_TRUE(workloads.is_ok());
  ASSERT_EQ(workloads->size(), 2u);
  const WorkloadRecord& w = workloads->at(0).uid == "u2" ? workloads->at(1) : workloads->at(0);
  const WorkloadRecord& n = workloads->at(0).uid == "u2" ? workloads->at(0) : workloads->at(1);
  EXPECT_FALSE(w.nominations.has_value());
  EXPECT_FALSE(w.deleting);
  EXPECT_EQ(n.nominations, (std::vector<std::string>{"east", "west"}));
  EXPECT_TRUE(n.deleting);
  EXPECT_EQ(w.spec, sample_workload().spec);
  EXPECT_EQ(w.phase, model::Phase::kRunning);
  EXPECT_EQ(w.epoch, 3u);
  EXPECT_EQ(w.nodes, std::vector<std::string>{"node-1"});
  EXPECT_EQ(w.status_generation, 2u);
  auto reservations = store->load_reservations();
  ASSERT_TRUE(reservations.is_ok());
  ASSERT_EQ(reservations->size(), 1u);
  EXPECT_EQ(reservations->front().nodes.size(), 2u);
  EXPECT_EQ(reservations->front().condition, 3);
  EXPECT_EQ(reservations->front().phase, ReservationPhase::kRunning);
  EXPECT_EQ(reservations->front().acked_generation, 4u);
  ASSERT_TRUE(store->delete_reservation("src", "u1").is_ok());
  EXPECT_TRUE(store->load_reservations()->empty());
}

TEST_F(StoreTest, AStatusUpdateWritesEveryChangingFieldAndKeepsTheSpec) {
  auto store = open();
  WorkloadRecord missing = sample_workload();
  EXPECT_EQ(store->update_workload_status(missing).code(), ErrorCode::kNotFound);
  ASSERT_TRUE(store->put_workload(sample_workload()).is_ok());
  WorkloadRecord changed = sample_workload();
  changed.spec.name = "ignored";  // never rewritten by a status update
  changed.phase = model::Phase::kFailed;
  changed.epoch = 4;
  changed.winner = "other";
  changed.cluster = "west";
  changed.nodes = {"node-2", "node-3"};
  changed.reason = "exited";
  changed.updated_at = from_millis(3000);
  changed.started_at_ms = 2500;
  changed.finished_at_ms = 2900;
  changed.exit_code = 3;
  changed.status_generation = 9;
  changed.deleting = true;
  changed.nominations = std::vector<std::string>{"east"};
  changed.restarts = 2;
  changed.disruptions = 3;
  changed.restart_at = from_millis(4000);
  changed.lost_copies = {{"east-key", 2, false}, {"west-key", 3, true}};
  ASSERT_TRUE(store->update_workload_status(changed).is_ok());
  auto loaded = open()->load_workloads();
  ASSERT_TRUE(loaded.is_ok());
  ASSERT_EQ(loaded->size(), 1u);
  const WorkloadRecord& got = loaded->front();
  EXPECT_EQ(got.spec.name, "train");
  EXPECT_EQ(got.spec.resources, sample_workload().spec.resources);
  EXPECT_EQ(got.phase, changed.phase);
  EXPECT_EQ(got.epoch, changed.epoch);
  EXPECT_EQ(got.winner, changed.winner);
  EXPECT_EQ(got.cluster, changed.cluster);
  EXPECT_EQ(got.nodes, changed.nodes);
  EXPECT_EQ(got.reason, changed.reason);
  EXPECT_EQ(got.updated_at, changed.updated_at);
  EXPECT_EQ(got.started_at_ms, changed.started_at_ms);
  EXPECT_EQ(got.finished_at_ms, changed.finished_at_ms);
  EXPECT_EQ(got.exit_code, changed.exit_code);
  EXPECT_EQ(got.status_generation, changed.status_generation);
  EXPECT_EQ(got.deleting, changed.deleting);
  EXPECT_EQ(got.nominations, changed.nominations);
  EXPECT_EQ(got.restarts, changed.restarts);
  EXPECT_EQ(got.disruptions, changed.disruptions);
  EXPECT_EQ(got.restart_at, changed.restart_at);
  EXPECT_EQ(got.lost_copies, changed.lost_copies);
  EXPECT_EQ(got.created_at, sample_workload().created_at);
}

TEST_F(StoreTest, RolledBackBatchLeavesNothing) {
  auto store = open();
  ASSERT_TRUE(store->begin().is_ok());
  ASSERT_TRUE(store->put_workload(sample_workload()).is_ok());
  store->rollback();
  EXPECT_TRUE(store->load_workloads()->empty());
  ASSERT_TRUE(store->begin().is_ok());
  ASSERT_TRUE(store->put_workload(sample_workload()).is_ok());
  ASSERT_TRUE(store->commit().is_ok());
  EXPECT_EQ(open()->load_workloads()->size(), 1u);
}

TEST_F(StoreTest, EventsAreBoundedPerSubject) {
  auto store = open();
  for (int i = 0; i < Store::kEventsPerSubject + 50; ++i) {
    ASSERT_TRUE(store->append_event({"u1", from_millis(i), "event " + std::to_string(i)}).is_ok());
  }
  ASSERT_TRUE(store->append_event({"u2", from_millis(0), "other"}).is_ok());
  auto events = store->load_events("u1");
  ASSERT_TRUE(events.is_ok());
  ASSERT_EQ(events->size(), static_cast<size_t>(Store::kEventsPerSubject));
  EXPECT_EQ(events->back().text, "event " + std::to_string(Store::kEventsPerSubject + 49));
  EXPECT_EQ(store->load_events("u2")->size(), 1u);
}

// A reservation is written at every step of its life; what is read back
// is the spec of the last write, whichever of its fields changed.
TEST_F(StoreTest, AReservationReadsBackTheSpecOfItsLastWrite) {
  ReservationRecord r = sample_reservation();
  {
    auto store = open();
    ASSERT_TRUE(store->put_reservation(r).is_ok());
    r.phase = ReservationPhase::kBound;
    r.spec.priority = 7;  // patched at the source
    ASSERT_TRUE(store->put_reservation(r).is_ok());
    r.phase = ReservationPhase::kRunning;
    ASSERT_TRUE(store->put_reservation(r).is_ok());
    // The same workload's copy for another source has a text of its own.
    ReservationRecord other = r;
    other.source = "other";
    other.spec.priority = 3;
    ASSERT_TRUE(store->put_reservation(other).is_ok());
    // Gone, then held again at a new epoch with another spec.
    ReservationRecord again = r;
    again.source = "again";
    ASSERT_TRUE(store->put_reservation(again).is_ok());
    ASSERT_TRUE(store->delete_reservation("again", "u1").is_ok());
    again.epoch = 2;
    again.spec.resources.cpu_milli = 500;
    ASSERT_TRUE(store->put_reservation(again).is_ok());
  }
  auto reservations = open()->load_reservations();
  ASSERT_TRUE(reservations.is_ok());
  std::map<std::string, model::WorkloadSpec> specs;
  for (const ReservationRecord& read : *reservations) specs[read.source] = read.spec;
  ASSERT_EQ(specs.size(), 3u);
  EXPECT_EQ(specs["src"].priority, 7);
  EXPECT_EQ(specs["other"].priority, 3);
  EXPECT_EQ(specs["again"].resources.cpu_milli, 500);
  EXPECT_EQ(specs["src"].resources.cpu_milli, 2000);
}

TEST_F(StoreTest, AReservationsStatusUpdateWritesEveryChangingFieldAndKeepsTheSpec) {
  ReservationRecord r = sample_reservation();
  {
    auto store = open();
    EXPECT_EQ(store->update_reservation_status(r).code(), ErrorCode::kNotFound);
    ASSERT_TRUE(store->put_reservation(r).is_ok());
    ReservationRecord changed = r;
    changed.spec.priority = 9;  // never rewritten by a status update
    changed.epoch = 3;
    changed.phase = ReservationPhase::kSucceeded;
    changed.nodes = {"node-1", "node-2"};
    changed.expires_at = from_millis(9000);
    changed.generation = 5;
    changed.acked_generation = 4;
    changed.started_at_ms = 1000;
    changed.finished_at_ms = 2000;
    changed.exit_code = 2;
    changed.message = "done";
    changed.condition = 6;
    ASSERT_TRUE(store->update_reservation_status(changed).is_ok());
  }
  auto store = open();
  auto reservations = store->load_reservations();
  ASSERT_TRUE(reservations.is_ok());
  ASSERT_EQ(reservations->size(), 1u);
  const ReservationRecord& got = reservations->front();
  EXPECT_EQ(got.spec, sample_workload().spec);
  EXPECT_EQ(got.epoch, 3u);
  EXPECT_EQ(got.phase, ReservationPhase::kSucceeded);
  EXPECT_EQ(got.nodes, (std::vector<std::string>{"node-1", "node-2"}));
  EXPECT_EQ(got.expires_at, from_millis(9000));
  EXPECT_EQ(got.generation, 5u);
  EXPECT_EQ(got.acked_generation, 4u);
  EXPECT_EQ(got.started_at_ms, 1000);
  EXPECT_EQ(got.finished_at_ms, 2000);
  EXPECT_EQ(got.exit_code, 2);
  EXPECT_EQ(got.message, "done");
  EXPECT_EQ(got.condition, 6);
  // A copy past Reserved is in the run history too, as put_reservation writes it.
  auto runs = store->load_runs();
  ASSERT_TRUE(runs.is_ok());
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_EQ(runs->front().finished_at_ms, 2000);
}

TEST_F(StoreTest, RunHistoryKeepsEveryBoundCopyAfterItsReservationIsGone) {
  auto store = open();
  ReservationRecord r;
  r.source = "src";
  r.uid = "u1";
  r.epoch = 1;
  r.spec.namespace_name = "default";
  r.spec.name = "train";
  r.spec.resources = {1500, 1 << 20, 0};
  r.nodes = {"n-0"};
  ASSERT_TRUE(store->put_reservation(r).is_ok());  // Reserved: not a run yet
  EXPECT_TRUE(store->load_runs()->empty());
  r.phase = ReservationPhase::kBound;
  r.started_at_ms = 1000;
  ASSERT_TRUE(store->put_reservation(r).is_ok());
  r.phase = ReservationPhase::kFailed;
  r.finished_at_ms = 4000;
  r.message = "LeaseExpired";
  ASSERT_TRUE(store->put_reservation(r).is_ok());
  ASSERT_TRUE(store->delete_reservation("src", "u1").is_ok());
  r.epoch = 2;  // placed here again later: a second run
  r.phase = ReservationPhase::kBound;
  r.started_at_ms = 9000;
  r.finished_at_ms = 0;
  ASSERT_TRUE(store->put_reservation(r).is_ok());
  r.epoch = 3;  // adopted under a newer epoch: the same run
  r.phase = ReservationPhase::kRunning;
  r.started_at_ms = 9000;
  r.finished_at_ms = 0;
  ASSERT_TRUE(store->put_reservation(r).is_ok());
  store.reset();

  auto runs = open()->load_runs();
  ASSERT_TRUE(runs.is_ok()) << runs.status().message();
  ASSERT_EQ(runs->size(), 2u);
  EXPECT_EQ((*runs)[0].epoch, 1u);
  EXPECT_EQ((*runs)[0].phase, "Failed");
  EXPECT_EQ((*runs)[0].started_at_ms, 1000);
  EXPECT_EQ((*runs)[0].finished_at_ms, 4000);
  EXPECT_EQ((*runs)[0].per_replica.cpu_milli, 1500);
  EXPECT_EQ((*runs)[0].nodes, std::vector<std::string>{"n-0"});
  EXPECT_EQ((*runs)[1].epoch, 3u);
  EXPECT_EQ((*runs)[1].phase, "Running");
  EXPECT_EQ((*runs)[1].finished_at_ms, 0);
}

TEST_F(StoreTest, RunHistoryForgetsRunsFinishedLongBeforeTheNewest) {
  auto store = open();
  ReservationRecord r;
  r.source = "src";
  r.phase = ReservationPhase::kSucceeded;
  int64_t week_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Store::kRunHistory).count();
  r.uid = "old";
  r.started_at_ms = 1;
  r.finished_at_ms = 2;
  ASSERT_TRUE(store->put_reservation(r).is_ok());
  // Enough newer finishes to trigger a prune, all within the history.
  for (int i = 0; i < 1100; ++i) {
    r.uid = "new-" + std::to_string(i);
    r.started_at_ms = week_ms + 10;
    r.finished_at_ms = week_ms + 20 + i;
    ASSERT_TRUE(store->put_reservation(r).is_ok());
  }
  auto runs = store->load_runs();
  ASSERT_TRUE(runs.is_ok());
  EXPECT_EQ(runs->size(), 1100u);
  for (const auto& run : *runs) EXPECT_NE(run.uid, "old");
}

TEST_F(StoreTest, NewerSchemaThanThisBuildIsRefused) {
  { auto store = open(); }
  {
    auto db = Database::open(path_);
    ASSERT_TRUE(db.is_ok());
    ASSERT_TRUE((*db)->execute("PRAGMA user_version = 999").is_ok());
  }
  auto store = SqliteStore::open(path_);
  ASSERT_FALSE(store.is_ok());
  EXPECT_NE(store.status().message().find("newer"), std::string::npos);
}

TEST_F(StoreTest, AMalformedLostCopyListIsRefusedNamingTheWorkload) {
  {
    auto store = open();
    ASSERT_TRUE(store->put_workload(sample_workload()).is_ok());
  }
  {
    auto db = Database::open(path_);
    ASSERT_TRUE(db.is_ok());
    ASSERT_TRUE((*db)->execute("UPDATE workloads SET lost_copies = '[{\"target\": 1}]'").is_ok());
  }
  auto loaded = open()->load_workloads();
  ASSERT_FALSE(loaded.is_ok());
  EXPECT_NE(loaded.status().message().find("lost copy"), std::string::npos)
      << loaded.status().message();
  EXPECT_NE(loaded.status().message().find(sample_workload().uid), std::string::npos)
      << loaded.status().message();
}

// RLIMIT_FSIZE makes every write past the first byte of any file fail
// (EFBIG): the closest thing to a failing disk a test can make without
// privileges. Restored when the object goes.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &saved_);
    previous_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    rlimit limit{bytes, saved_.rlim_max};
    setrlimit(RLIMIT_FSIZE, &limit);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, previous_handler_);
  }

 private:
  rlimit saved_{};
  void (*previous_handler_)(int) = nullptr;
};

TEST_F(StoreTest, AWriteTheDiskRefusesIsAStorageErrorAndNothingOfItsBatchRemains) {
  auto store = open();
  ASSERT_TRUE(store->probe_write().is_ok());
  {
    FileSizeLimit failing_disk(1);
    ASSERT_TRUE(store->begin().is_ok());
    Status written = store->put_workload(sample_workload());
    if (written.is_ok()) written = store->commit();
    store->rollback();
    EXPECT_EQ(written.code(), ErrorCode::kStorage) << written.message();
    Status probed = store->probe_write();
    EXPECT_EQ(probed.code(), ErrorCode::kStorage) << probed.message();
  }
  // The disk is back: writes work again, and the failed batch left nothing.
  EXPECT_TRUE(store->probe_write().is_ok());
  EXPECT_TRUE(store->load_workloads()->empty());
  store.reset();
  EXPECT_TRUE(open()->load_workloads()->empty());
}

TEST_F(StoreTest, AFileThatIsNotADatabaseIsRefusedAndLeftAsItWas) {
  const std::string garbage(10000, 'x');
  { std::ofstream(path_, std::ios::binary) << garbage; }
  auto store = SqliteStore::open(path_);
  ASSERT_FALSE(store.is_ok());
  EXPECT_EQ(store.status().code(), ErrorCode::kCorrupt);
  EXPECT_NE(store.status().message().find("is damaged"), std::string::npos)
      << store.status().message();
  EXPECT_NE(store.status().message().find(path_), std::string::npos);
  std::ifstream in(path_, std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), garbage);
}

TEST_F(StoreTest, ADamagedPageIsFoundAtOpenAndTheFileLeftAsItWas) {
  {
    auto store = open();
    ASSERT_TRUE(store->begin().is_ok());
    for (int i = 0; i < 200; ++i) {
      WorkloadRecord w = sample_workload();
      w.uid = "u" + std::to_string(i);
      w.spec.name = "w" + std::to_string(i);
      ASSERT_TRUE(store->put_workload(w).is_ok());
    }
    ASSERT_TRUE(store->commit().is_ok());
  }  // closing checkpoints the WAL into the file
  std::string bytes;
  {
    std::ifstream in(path_, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_GT(bytes.size(), 3u * 4096);
  // Page 2 (bytes 4096..8191) is a table's b-tree page; scribble over it.
  std::fill(bytes.begin() + 4096, bytes.begin() + 8192, '\xA5');
  { std::ofstream(path_, std::ios::binary | std::ios::trunc) << bytes; }
  auto store = SqliteStore::open(path_);
  ASSERT_FALSE(store.is_ok());
  EXPECT_EQ(store.status().code(), ErrorCode::kCorrupt) << store.status().message();
  EXPECT_NE(store.status().message().find("never recreates"), std::string::npos)
      << store.status().message();
  std::ifstream in(path_, std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), bytes);
}

}  // namespace
}  // namespace shoal::store::sqlite

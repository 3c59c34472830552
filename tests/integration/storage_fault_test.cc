// Storage faults: a state database that cannot be written — a
// failing disk (RLIMIT_FSIZE makes every write fail), files turned read-only
// (immutable), a full file system (a small tmpfs, where the test may mount
// one) — makes the agent refuse new
// work with the reason while it answers reads, and resume by itself when
// writes succeed again; its peers go on working. A damaged or missing
// database is refused at start and left exactly as it was.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "harness.h"
#include "tests/support/immutable_file.h"

namespace shoal::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

std::string phase_of(const AgentProcess& agent, const std::string& name) {
  json list = agent.ctl_json({"get", "workloads"});
  if (list.is_null()) return "";
  for (const auto& item : list["items"]) {
    if (item["metadata"]["name"] == name) return item["status"]["phase"];
  }
  return "";
}

bool storage_writable(const AgentProcess& agent) {
  json status = agent.ctl_json({"status"});
  return !status.is_null() && status["storage"]["writable"].get<bool>();
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class StorageFault : public ::testing::Test {
 protected:
  void SetUp() override {
    source_.init();
    target_.init();
    ASSERT_TRUE(source_.start());
    ASSERT_TRUE(target_.start());
    invite_full_mesh({&source_, &target_}, "default");
  }
  TempDir dir_;
  AgentProcess source_{"src", dir_.path()};
  AgentProcess target_{"dst", dir_.path()};
};

TEST_F(StorageFault, AnAgentThatCannotWriteRefusesNewWorkAnswersReadsAndResumes) {
  ASSERT_EQ(
      source_.ctl({"submit", "-f", write_workloads(dir_.path(), "before", 1, "1", "1s")}).exit_code,
      0);
  ASSERT_TRUE(wait_until([&] { return phase_of(source_, "before-0") == "Succeeded"; }, 20s));

  source_.limit_file_size(1);  // every write now fails (EFBIG)
  std::string during = write_workloads(dir_.path(), "during", 1, "1", "1s");
  CommandResult refused = source_.ctl({"submit", "-f", during});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("cannot write its state database"), std::string::npos) << refused.err;
  EXPECT_EQ(std::count(refused.err.begin(), refused.err.end(), '\n'), 1) << refused.err;
  CommandResult invite =
      source_.ctl({"invite", "create", "--to", target_.identity(), "--namespace", "x"});
  EXPECT_NE(invite.exit_code, 0);
  EXPECT_NE(invite.err.find("cannot write its state database"), std::string::npos) << invite.err;

  // Reads answer, from what was committed; the agent did not exit.
  EXPECT_EQ(phase_of(source_, "before-0"), "Succeeded");
  EXPECT_EQ(phase_of(source_, "during-0"), "");
  EXPECT_FALSE(storage_writable(source_));
  EXPECT_EQ(source_.ctl({"peers"}).exit_code, 0);
  EXPECT_EQ(source_.reap_if_exited(), -1);

  // Its peer is not held up: the target still runs its own work.
  ASSERT_EQ(
      target_.ctl({"submit", "-f", write_workloads(dir_.path(), "own", 1, "1", "1s")}).exit_code,
      0);
  EXPECT_TRUE(wait_until([&] { return phase_of(target_, "own-0") == "Succeeded"; }, 20s));

  // The disk is back: the agent resumes by itself and takes the work it refused.
  source_.limit_file_size(std::nullopt);
  ASSERT_TRUE(wait_until([&] { return storage_writable(source_); }, 20s)) << source_.log();
  ASSERT_EQ(source_.ctl({"submit", "-f", during}).exit_code, 0);
  EXPECT_TRUE(wait_until([&] { return phase_of(source_, "during-0") == "Succeeded"; }, 20s))
      << source_.log();
  EXPECT_EQ(phase_of(source_, "before-0"), "Succeeded");
  EXPECT_NE(source_.log().find("state database writable again"), std::string::npos);
}

// A database whose files turn read-only under the running agent (here:
// immutable, which even root cannot write) is one more storage fault.
TEST_F(StorageFault, ADatabaseThatTurnsReadOnlyIsRefusedTheSameWayAndTheAgentResumes) {
  std::vector<std::string> files = {source_.data_dir() + "/state.db",
                                    source_.data_dir() + "/state.db-wal"};
  if (!set_immutable(files[0], true) || !set_immutable(files[1], true)) {
    for (const auto& file : files)
      set_immutable(file, false);  // else TempDir could not remove them
    GTEST_SKIP()
        << "cannot make files immutable here (needs CAP_LINUX_IMMUTABLE and ext4 or similar)";
  }
  CommandResult refused =
      source_.ctl({"submit", "-f", write_workloads(dir_.path(), "ro", 1, "1", "1s")});
  for (const auto& file : files) set_immutable(file, false);
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("cannot write its state database"), std::string::npos) << refused.err;
  EXPECT_EQ(source_.reap_if_exited(), -1);
  ASSERT_TRUE(wait_until([&] { return storage_writable(source_); }, 20s)) << source_.log();
  ASSERT_EQ(
      source_.ctl({"submit", "-f", write_workloads(dir_.path(), "ro", 1, "1", "1s")}).exit_code, 0);
  EXPECT_TRUE(wait_until([&] { return phase_of(source_, "ro-0") == "Succeeded"; }, 20s));
}

// A full file system: the agent's data directory is a 1 MiB tmpfs, filled
// by another file. Needs the right to mount; skipped without it.
class FullDisk : public ::testing::Test {
 protected:
  void TearDown() override {
    if (agent_) agent_->stop();
    if (mounted_) ::umount2(mount_point_.c_str(), MNT_DETACH);
  }
  TempDir dir_;
  std::string mount_point_ = dir_.path() + "/small";
  bool mounted_ = false;
  std::unique_ptr<AgentProcess> agent_;
};

TEST_F(FullDisk, IsReportedAsSuchAndTheAgentResumesWhenSpaceIsFreed) {
  std::filesystem::create_directories(mount_point_);
  if (::mount("tmpfs", mount_point_.c_str(), "tmpfs", 0, "size=1m,mode=0700") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here (needs CAP_SYS_ADMIN)";
  }
  mounted_ = true;
  // The data directory is the mount point itself; the agent's log stays outside it.
  agent_ = std::make_unique<AgentProcess>("small", dir_.path());
  agent_->init();
  ASSERT_TRUE(agent_->start());
  std::string filler = mount_point_ + "/filler";
  {
    std::ofstream out(filler, std::ios::binary);
    std::string block(64 * 1024, 'f');
    while (out.write(block.data(), static_cast<std::streamsize>(block.size())) && out.flush()) {
    }
  }
  // Writes may still land in space SQLite already holds; submits go on until
  // one needs more than that.
  std::string refusal;
  for (int i = 0; i < 200 && refusal.empty(); ++i) {
    CommandResult result = agent_->ctl(
        {"submit", "-f", write_workloads(dir_.path(), "fill" + std::to_string(i), 20, "1m", "1h")});
    if (result.exit_code != 0) refusal = result.err;
  }
  ASSERT_FALSE(refusal.empty()) << "the agent never noticed the full disk";
  EXPECT_NE(refusal.find("full"), std::string::npos) << refusal;
  EXPECT_FALSE(storage_writable(*agent_));
  EXPECT_EQ(agent_->reap_if_exited(), -1);

  std::filesystem::remove(filler);
  EXPECT_TRUE(wait_until([&] { return storage_writable(*agent_); }, 20s)) << agent_->log();
  EXPECT_EQ(
      agent_->ctl({"submit", "-f", write_workloads(dir_.path(), "after", 1, "1m", "1s")}).exit_code,
      0);
}

TEST(DamagedDatabase, IsRefusedAtStartWithTheFixAndLeftAsItWas) {
  TempDir dir;
  AgentProcess agent("hurt", dir.path());
  agent.init();
  ASSERT_TRUE(agent.start());
  ASSERT_EQ(agent.ctl({"submit", "-f", write_workloads(dir.path(), "w", 50, "1m", "1h")}).exit_code,
            0);
  agent.stop();
  std::string path = agent.data_dir() + "/state.db";
  std::string bytes = file_bytes(path);
  ASSERT_GT(bytes.size(), 3u * 4096);
  std::fill(bytes.begin() + 4096, bytes.begin() + 8192, '\xA5');  // page 2: a table's b-tree page
  { std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes; }

  CommandResult run = run_command({bin_path("shoald"), "run", "--data", agent.data_dir()}, 20s);
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.err.find("is damaged"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("restore it from a backup"), std::string::npos) << run.err;
  EXPECT_EQ(file_bytes(path), bytes);
}

TEST(DamagedDatabase, AMissingOneIsNotSilentlyRecreated) {
  TempDir dir;
  AgentProcess agent("gone", dir.path());
  agent.init();
  std::string path = agent.data_dir() + "/state.db";
  std::filesystem::remove(path);
  CommandResult run = run_command({bin_path("shoald"), "run", "--data", agent.data_dir()}, 20s);
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.err.find("is missing"), std::string::npos) << run.err;
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace shoal::testing

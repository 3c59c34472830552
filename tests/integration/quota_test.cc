// A federation-wide quota with real agents: a source's quota of 16 cpu for
// namespace ml, three targets with room for far more. Sampled at the
// targets while it runs, never more than 16 cpu of ml is held anywhere at
// once; the rest waits at the source, Pending with QuotaExceeded; every
// workload finishes.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "harness.h"

namespace shoal::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

TEST(Quota, ANamespaceHoldsNoMoreThanItsQuotaAcrossTheFederation) {
  TempDir dir;
  AgentProcess source("source", dir.path());
  std::vector<std::unique_ptr<AgentProcess>> targets;
  std::string tiny = dir.path() + "/tiny.yaml";
  std::ofstream(tiny) << "apiVersion: shoal.dev/v1\nkind: Cluster\nmetadata: {name: source}\n"
                         "spec:\n  nodes:\n  - {name: n, count: 1, capacity: {cpu: 100m, memory: 1Gi}}\n";
  source.init({"--cluster-config", tiny});
  source.set_config("heartbeatInterval", "300ms");
  ASSERT_TRUE(source.start());
  for (const char* name : {"t1", "t2", "t3"}) {
    targets.push_back(std::make_unique<AgentProcess>(name, dir.path()));
    AgentProcess& target = *targets.back();
    target.init();  // the sim backend's default: 4 nodes of 8 cpu
    target.set_config("heartbeatInterval", "300ms");
    ASSERT_TRUE(target.start()) << name;
    CommandResult token = target.ctl({"invite", "create", "--to", source.identity(), "--namespace", "ml"});
    ASSERT_EQ(token.exit_code, 0) << token.err;
    ASSERT_EQ(source.ctl({"invite", "accept", token.out.substr(0, token.out.find('\n'))}).exit_code, 0);
  }
  std::string quota = dir.path() + "/quota.yaml";
  std::ofstream(quota) << "apiVersion: shoal.dev/v1\nkind: Quota\nmetadata: {name: ml, namespace: ml}\n"
                          "spec:\n  hard: {cpu: \"16\"}\n";
  CommandResult set = source.ctl({"quota", "set", "-f", quota});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  ASSERT_TRUE(wait_until(
      [&] {
        json peers = source.ctl_json({"peers"});
        int active = 0;
        for (const auto& p : peers.value("items", json::array())) active += p["state"] == "Active";
        return active == 3;
      },
      20s));

  std::string work = dir.path() + "/ml.yaml";
  {
    std::ofstream out(work);
    for (int i = 0; i < 30; ++i) {
      out << "---\napiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: job-" << i
          << ", namespace: ml}\nspec: {resources: {cpu: \"2\", memory: 1Gi}, sim: {duration: 1s}}\n";
    }
  }
  ASSERT_EQ(source.ctl({"submit", "-f", work}).exit_code, 0);

  // The targets are read one after another, so one pass is no snapshot: a
  // copy read at t1 may end, and the quota it frees go to a copy read at t3
  // moments later. A copy's phase only moves forward (Bound, Running, then
  // ended), so a copy held at its target in two passes in a row was held all
  // the time between them; every such copy was held at once, between the end
  // of the first pass and the start of the second.
  using Held = std::set<std::string>;  // "uid/epoch" of copies Bound or Running
  auto held_at = [&](AgentProcess& target) {
    Held held;
    json listed = target.ctl_json({"get", "reservations"});
    for (const auto& r : listed.value("items", json::array())) {
      if (r["phase"] == "Running" || r["phase"] == "Bound") {
        held.insert(r["uid"].get<std::string>() + "/" + std::to_string(r["epoch"].get<int64_t>()));
      }
    }
    return held;
  };
  std::vector<Held> last_pass(targets.size());
  int64_t most_running = 0;
  bool saw_quota_wait = false;
  bool done = wait_until(
      [&] {
        int64_t held_throughout = 0;
        for (size_t i = 0; i < targets.size(); ++i) {
          Held now = held_at(*targets[i]);
          for (const auto& copy : now) held_throughout += 2 * static_cast<int64_t>(last_pass[i].count(copy));
          last_pass[i] = std::move(now);
        }
        most_running = std::max(most_running, held_throughout);
        json listed = source.ctl_json({"get", "workloads", "-n", "ml"});
        int succeeded = 0;
        for (const auto& w : listed.value("items", json::array())) {
          succeeded += w["status"]["phase"] == "Succeeded";
          std::string reason = w["status"].value("reason", "");
          saw_quota_wait = saw_quota_wait || reason.rfind("QuotaExceeded", 0) == 0;
        }
        return succeeded == 30;
      },
      90s);
  EXPECT_TRUE(done);
  EXPECT_LE(most_running, 16) << "cpu of ml held anywhere at once";
  EXPECT_GT(most_running, 0);
  EXPECT_TRUE(saw_quota_wait) << "the rest waited at the source with QuotaExceeded";
  json quotas = source.ctl_json({"get", "quotas"});
  ASSERT_EQ(quotas["items"].size(), 1u);
  EXPECT_EQ(quotas["items"][0]["hard"]["cpu"], "16");
  EXPECT_EQ(quotas["items"][0]["used"]["cpu"], "0");
  CommandResult table = source.ctl({"get", "quotas"});
  EXPECT_NE(table.out.find("0/16"), std::string::npos) << table.out;
}

}  // namespace
}  // namespace shoal::testing

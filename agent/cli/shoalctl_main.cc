// shoalctl: the operator's tool. Every command but `identity`, `place` and
// `schedule` talks to the agent through its control socket in the data dir
// (agent/control/commands.h); the commands live in *_commands.cc by group.
//
// Exit codes: 0 ok, 1 runtime error (agent down, internal), 2 bad usage or
// bad input (with a one-line message naming the field).
#include <cstdlib>
#include <iostream>

#include <CLI/CLI.hpp>

#include "agent/cli/commands.h"
#include "agent/cli/place_command.h"
#include "agent/cli/schedule_command.h"

namespace shoal::cli {
namespace {

// The offline commands: they read files, and the agent only with --live.
void add_offline_commands(CLI::App& app, Options& options, Runners& runners) {
  auto place_arguments = std::make_shared<PlaceArguments>();
  auto* place = app.add_subcommand(
      "place", "What-if placement of one workload: over an Inventory file (offline), or over the "
               "clusters a running agent sees (--live)");
  auto* place_inventory =
      place->add_option("--inventory", place_arguments->inventory_path, "Inventory file (kind: Inventory)");
  auto* place_live = place->add_flag("--live", place_arguments->live,
                                     "Over the agent's live inventory (shoalctl get clusters), as it "
                                     "would decide now; needs --data");
  place_inventory->excludes(place_live);
  place->add_option("-f,--filename", place_arguments->workload_path, "Workload manifest (one document)")
      ->required();
  place->add_option("--draw", place_arguments->draw,
                    "Fix the random draw in [0, sum of weights) for routing metric \"\"");
  place->add_option("-o,--output", place_arguments->output, "json")->check(CLI::IsMember({"json"}));
  place->add_flag("--explain", place_arguments->explain,
                  "Show filtered clusters, routing ratios and every selectOne step");
  runners.push_back({place, [&options, place_arguments] {
                       place_arguments->data_dir = options.data_dir;
                       return run_place(*place_arguments);
                     }});

  auto schedule_arguments = std::make_shared<ScheduleArguments>();
  auto* schedule = app.add_subcommand(
      "schedule", "Offline dry-run of the local scheduler: allocate pending workloads on an empty cluster, or beside --running work");
  schedule->add_option("--cluster", schedule_arguments->cluster_path, "Cluster manifest (kind: Cluster)")
      ->required();
  schedule->add_option("-f,--filename", schedule_arguments->workloads_path, "Workloads (multi-document YAML)")
      ->required();
  schedule->add_option("--running", schedule_arguments->running_path,
                       "Workloads the cluster runs already (multi-document YAML); with the cluster's "
                       "spec.preemption, pending work may stop some of them");
  schedule->add_option("-o,--output", schedule_arguments->output, "json")->check(CLI::IsMember({"json"}));
  runners.push_back({schedule, [schedule_arguments] { return run_schedule(*schedule_arguments); }});
}

// A parent command: it only groups subcommands.
CLI::App* add_parent(CLI::App& app, const char* name, const char* description) {
  CLI::App* parent = app.add_subcommand(name, description);
  parent->require_subcommand(1);
  return parent;
}

}  // namespace
}  // namespace shoal::cli

int main(int argc, char** argv) {
  using namespace shoal::cli;
  CLI::App app{"shoalctl: operate a shoal agent"};
  app.require_subcommand(1);
  Options options;
  if (const char* env = std::getenv("SHOAL_DATA")) options.data_dir = env;
  app.add_option("--data", options.data_dir, "The agent's data directory (or SHOAL_DATA)");

  Runners agent_runners, offline_runners;
  CommandTree tree{app, nullptr, nullptr, nullptr, nullptr, nullptr};
  add_agent_commands(tree, options, agent_runners);
  tree.invite = add_parent(app, "invite", "Invitations between clusters");
  tree.get = add_parent(app, "get", "List resources");
  tree.describe = add_parent(app, "describe", "Show one resource in detail");
  tree.remove = add_parent(app, "delete", "Delete a resource");
  tree.patch = add_parent(app, "patch", "Change a resource after it was created");
  add_peer_commands(tree, options, agent_runners);
  add_listing_commands(tree, options, agent_runners);
  add_workload_commands(tree, options, agent_runners);
  add_quota_commands(tree, options, agent_runners);
  add_offline_commands(app, options, offline_runners);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  for (const Runner& runner : offline_runners) {
    if (*runner.command) return runner.run();
  }
  if (options.data_dir.empty()) {
    std::cerr << "shoalctl: --data: expected the agent's data directory (or set SHOAL_DATA)\n";
    return 2;
  }
  for (const Runner& runner : agent_runners) {
    if (*runner.command) return runner.run();
  }
  return 2;
}

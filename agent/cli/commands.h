// shoalctl's commands that talk to an agent, in groups: each group adds its
// subcommands to the command tree and says what runs each once the command
// line is parsed. shoalctl_main.cc builds the tree and runs the one chosen.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common/status.h"
#include "common/text.h"

namespace shoal::cli {

// What every command reads beside its own arguments.
struct Options {
  std::string data_dir;  // --data or SHOAL_DATA
  std::string output;    // -o
};

// The parents several groups add to.
struct CommandTree {
  CLI::App& app;
  CLI::App* invite;
  CLI::App* get;
  CLI::App* describe;
  CLI::App* remove;  // "delete"
  CLI::App* patch;
};

// A subcommand and what runs it once parsed; its exit code.
struct Runner {
  CLI::App* command;
  std::function<int()> run;
};
using Runners = std::vector<Runner>;

// Every listing prints as a table (wide: more columns) or as a document.
inline const auto kListFormats = CLI::IsMember({"json", "yaml", "name", "wide"});
inline const auto kDocumentFormats = CLI::IsMember({"json", "yaml"});
// The rule every name keeps (common/text.h), checked as the command line is
// read: a namespace or queue that cannot exist is refused (exit 2), not
// answered with an empty list.
inline const CLI::Validator kNameRule(
    [](std::string& value) { return name_rule_violation(value); }, "NAME");

// identity, status, backup.
void add_agent_commands(CommandTree& tree, Options& options, Runners& runners);
// invite create|list|revoke|accept, peers, describe peer.
void add_peer_commands(CommandTree& tree, Options& options, Runners& runners);
// submit, get workloads (-w), get reservations, get clusters.
void add_listing_commands(CommandTree& tree, Options& options, Runners& runners);
// describe workload, logs, delete workload, nominate, patch workload.
void add_workload_commands(CommandTree& tree, Options& options, Runners& runners);
// quota set|delete, get quotas.
void add_quota_commands(CommandTree& tree, Options& options, Runners& runners);

// Prints "shoalctl: <message>" and returns the exit code for its kind: 2
// for bad input (InvalidArgument, AlreadyExists, NotFound), else 1.
int fail(const Status& status);
// Asks `question` on stderr and reads the answer from stdin: true only for
// "y" or "yes" (any case); an end of input is a no.
bool confirmed(const std::string& question);
// An RFC 3339 time's age, as kubectl prints it ("?" if unreadable).
std::string age_since(const std::string& rfc3339);
// A JSON list of strings joined; "-" when empty.
std::string join(const nlohmann::json& list, const char* separator = ",");

}  // namespace shoal::cli

// shoalctl identity, status and backup: the agent itself.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <thread>

#include "agent/cli/commands.h"
#include "agent/cli/output.h"
#include "agent/cli/read_file.h"
#include "agent/cli/table.h"
#include "agent/control/client.h"
#include "agent/control/data_dir.h"
#include "crypto/id_card.h"
#include "crypto/identity.h"

namespace shoal::cli {
namespace {

using control::call;
using nlohmann::json;

int cmd_identity(const Options& o) {
  // Offline: the card is built from the data dir, so it works before `shoald run`.
  auto file = control::read_agent_name(o.data_dir);
  if (!file.is_ok()) return fail(file.status());
  if (Status s = crypto::initialize(); !s.is_ok()) return fail(s);
  auto identity = crypto::Identity::load(control::identity_path(o.data_dir));
  if (!identity.is_ok()) return fail(identity.status());
  std::cout << crypto::IdCard{file->cluster, file->org, identity->public_key(), file->advertise}
                   .to_string()
            << "\n";
  return 0;
}

// An online copy of the agent's state database (SQLite's backup API, made
// by the agent between batches); restore by stopping the agent and putting
// the copy in place of <data>/state.db (docs/operating.md).
int cmd_backup(const Options& o, const std::string& file) {
  std::error_code error;
  std::filesystem::path path = std::filesystem::absolute(file, error);
  if (error) return fail(invalid_argument("FILE: " + error.message()));
  auto reply = call(o.data_dir, control::BackupRequest{.path = path.lexically_normal().string()},
                    std::chrono::minutes(5));
  if (!reply.is_ok()) return fail(reply.status());
  std::cout << "state database copied to " << (*reply)["path"].get<std::string>() << "\n";
  return 0;
}

int cmd_status(const Options& o) {
  auto reply = call(o.data_dir, control::StatusRequest{});
  if (!reply.is_ok()) return fail(reply.status());
  json copy = *reply;
  copy.erase("ok");
  if (print_structured(o.output, copy, {})) return 0;
  std::cout << "cluster " << copy["cluster"].get<std::string>() << "  messages received "
            << copy["messages"]["received"] << ", sent " << copy["messages"]["sent"] << "\n";
  if (copy.contains("storage") && !copy["storage"].value("writable", true)) {
    std::cout << "  state database NOT WRITABLE: " << copy["storage"].value("error", "")
              << " (taking no new work; reads answer)\n";
  }
  if (copy.contains("backend") && !copy["backend"].value("healthy", true)) {
    std::cout << "  backend " << copy["backend"].value("name", "") << " UNAVAILABLE: "
              << copy["backend"].value("error", "") << " (refusing new candidates)\n";
  }
  if (copy.contains("backend") && copy["backend"].contains("warnings")) {
    for (const auto& warning : copy["backend"]["warnings"]) {
      if (warning.is_string()) std::cout << "  backend warning: " << warning.get<std::string>() << "\n";
    }
  }
  if (int64_t backlog = copy.contains("backend") ? copy["backend"].value("backlog", int64_t{0}) : 0;
      backlog > 0) {
    std::cout << "  backend " << copy["backend"].value("name", "") << " backlog: " << backlog
              << " pending job(s) of others (counted in every queue's length)\n";
  }
  for (const auto& [reason, count] : copy["messages"]["dropped"].items()) {
    if (count.get<uint64_t>() > 0) std::cout << "  dropped " << reason << ": " << count << "\n";
  }
  Table table({"NODE", "CPU", "MEMORY", "GPU", "ALLOCATED CPU", "PEAK CPU", "OTHERS' CPU"});
  for (const auto& node : copy["nodes"]) {
    table.add({node["name"], node["capacity"]["cpu"], node["capacity"]["memory"],
               std::to_string(node["capacity"]["gpu"].get<int64_t>()), node["allocated"]["cpu"],
               node["peakAllocated"]["cpu"], node["takenByOthers"]["cpu"]});
  }
  table.print(std::cout);
  return 0;
}

}  // namespace

void add_agent_commands(CommandTree& tree, Options& options, Runners& runners) {
  auto* identity = tree.app.add_subcommand("identity", "Print this agent's id card (one line)");
  runners.push_back({identity, [&options] { return cmd_identity(options); }});

  auto* status = tree.app.add_subcommand("status", "Agent counters (messages, drops) and node usage");
  status->add_option("-o,--output", options.output, "json or yaml")->check(kDocumentFormats);
  runners.push_back({status, [&options] { return cmd_status(options); }});

  auto file = std::make_shared<std::string>();
  auto* backup = tree.app.add_subcommand(
      "backup", "Copy the agent's state database while it runs (restore: stop the agent, put the "
                "copy in place of <data>/state.db)");
  backup->add_option("FILE", *file, "A new file to write (never overwritten)")->required();
  runners.push_back({backup, [&options, file] { return cmd_backup(options, *file); }});
}

bool confirmed(const std::string& question) {
  std::cerr << question << " [y/N] " << std::flush;
  std::string answer;
  if (!std::getline(std::cin, answer)) return false;
  std::transform(answer.begin(), answer.end(), answer.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return answer == "y" || answer == "yes";
}

int fail(const Status& status) {
  std::cerr << "shoalctl: " << status.message() << "\n";
  switch (status.code()) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kAlreadyExists:
    case ErrorCode::kNotFound:
      return 2;
    default:
      return 1;
  }
}

std::string age_since(const std::string& rfc3339) {
  std::tm tm{};
  if (rfc3339.size() < 19 || !strptime(rfc3339.c_str(), "%Y-%m-%dT%H:%M:%S", &tm)) return "?";
  return human_duration(static_cast<long long>(std::time(nullptr) - timegm(&tm)));
}

std::string join(const json& list, const char* separator) {
  std::string out;
  for (const auto& item : list) out += (out.empty() ? "" : separator) + item.get<std::string>();
  return out.empty() ? "-" : out;
}

}  // namespace shoal::cli

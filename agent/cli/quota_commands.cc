// shoalctl quota set|delete and get quotas: the federation-wide quotas of
// this agent's namespaces (docs/scheduling.md, "Federation-wide quotas").
#include <iostream>
#include <memory>

#include "agent/cli/commands.h"
#include "agent/cli/output.h"
#include "agent/cli/read_file.h"
#include "agent/cli/table.h"
#include "agent/control/client.h"
#include "model/quota.h"

namespace shoal::cli {
namespace {

using control::call;
using nlohmann::json;

struct QuotaSetArguments {
  std::string namespace_name, file, cpu, memory, gpu, workloads;
};

int cmd_quota_set(const Options& o, const QuotaSetArguments& a) {
  std::vector<control::QuotaSetRequest> requests;
  if (!a.file.empty()) {
    if (!a.namespace_name.empty() || !a.cpu.empty() || !a.memory.empty() || !a.gpu.empty() ||
        !a.workloads.empty()) {
      return fail(invalid_argument("-f: the quotas come from the file; give no NAMESPACE or limits beside it"));
    }
    auto text = read_input_file(a.file, "-f");
    if (!text.is_ok()) return fail(text.status());
    auto quotas = model::parse_quotas(*text);
    if (!quotas.is_ok()) return fail(quotas.status());
    for (const model::QuotaSpec& quota : *quotas) {
      json hard = model::to_json(quota)["hard"];
      requests.push_back({quota.namespace_name, hard.value("cpu", ""), hard.value("memory", ""),
                          hard.value("gpu", ""), hard.value("workloads", "")});
    }
  } else {
    if (a.namespace_name.empty()) return fail(invalid_argument("NAMESPACE: expected a namespace, or -f FILE"));
    requests.push_back({a.namespace_name, a.cpu, a.memory, a.gpu, a.workloads});
  }
  for (const control::QuotaSetRequest& request : requests) {
    auto reply = call(o.data_dir, request);
    if (!reply.is_ok()) return fail(reply.status());
    std::cout << "quota/" << request.namespace_name << " set\n";
  }
  return 0;
}

int cmd_quota_delete(const Options& o, const std::string& namespace_name) {
  auto reply = call(o.data_dir, control::QuotaDeleteRequest{namespace_name});
  if (!reply.is_ok()) return fail(reply.status());
  std::cout << "quota/" << namespace_name << " deleted\n";
  return 0;
}

int cmd_get_quotas(const Options& o) {
  auto reply = call(o.data_dir, control::GetQuotasRequest{});
  if (!reply.is_ok()) return fail(reply.status());
  if (print_structured(o.output, json{{"items", (*reply)["items"]}},
                       [](const json& q) { return "quota/" + q["namespace"].get<std::string>(); })) {
    return 0;
  }
  // USED/LIMIT per resource: "-" where the quota sets no limit.
  Table table({"NAMESPACE", "CPU", "MEMORY", "GPU", "WORKLOADS", "WAITING"});
  for (const auto& q : (*reply)["items"]) {
    auto cell = [&](const char* key) {
      const json& hard = q["hard"];
      std::string used = q["used"][key];
      return hard.contains(key) ? used + "/" + hard[key].get<std::string>() : used + "/-";
    };
    table.add({q["namespace"], cell("cpu"), cell("memory"), cell("gpu"), cell("workloads"),
               std::to_string(q["waiting"].get<int>())});
  }
  table.print(std::cout);
  return 0;
}

}  // namespace

void add_quota_commands(CommandTree& tree, Options& options, Runners& runners) {
  auto* quota = tree.app.add_subcommand(
      "quota", "Federation-wide quotas: the most a namespace's workloads hold at once on every cluster");
  quota->require_subcommand(1);
  auto* set = quota->add_subcommand(
      "set", "Set (replace) a namespace's quota, from flags or from kind: Quota documents (-f)");
  auto set_arguments = std::make_shared<QuotaSetArguments>();
  set->add_option("NAMESPACE", set_arguments->namespace_name, "The namespace it limits");
  set->add_option("-f,--filename", set_arguments->file, "A YAML file of kind: Quota documents");
  set->add_option("--cpu", set_arguments->cpu, "Most cpu at once (e.g. 16, 500m)");
  set->add_option("--memory", set_arguments->memory, "Most memory at once (e.g. 64Gi)");
  set->add_option("--gpu", set_arguments->gpu, "Most GPUs at once");
  set->add_option("--workloads", set_arguments->workloads, "Most workloads placed or running at once");
  runners.push_back({set, [&options, set_arguments] { return cmd_quota_set(options, *set_arguments); }});
  auto* remove = quota->add_subcommand("delete", "Remove a namespace's quota");
  auto namespace_name = std::make_shared<std::string>();
  remove->add_option("NAMESPACE", *namespace_name, "The namespace")->required();
  runners.push_back({remove, [&options, namespace_name] { return cmd_quota_delete(options, *namespace_name); }});

  auto* get_quotas = tree.get->add_subcommand("quotas", "Federation-wide quotas: used/limit, and how many wait");
  get_quotas->add_option("-o,--output", options.output, "json, yaml or name")
      ->check(CLI::IsMember({"json", "yaml", "name"}));
  runners.push_back({get_quotas, [&options] { return cmd_get_quotas(options); }});
}

}  // namespace shoal::cli

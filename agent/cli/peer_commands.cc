// shoalctl invite create|list|revoke|accept, peers, peer forget and describe peer.
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

namespace shoal::cli {
namespace {

using control::call;
using nlohmann::json;

struct InviteCreateArguments {
  std::string to, out_file, cpu, memory, gpu, workloads, expires, not_before, max_priority;
  std::vector<std::string> namespaces;
  bool preemptible = false;
};

int cmd_invite_create(const Options& o, const InviteCreateArguments& a) {
  auto reply = call(o.data_dir, control::InviteCreateRequest{.to = a.to,
                                                              .namespaces = a.namespaces,
                                                              .cpu = a.cpu,
                                                              .memory = a.memory,
                                                              .gpu = a.gpu,
                                                              .workloads = a.workloads,
                                                              .expires = a.expires,
                                                              .not_before = a.not_before,
                                                              .preemptible = a.preemptible,
                                                              .max_priority = a.max_priority});
  const std::string& out_file = a.out_file;
  if (!reply.is_ok()) return fail(reply.status());
  std::string token = (*reply)["token"];
  if (out_file.empty()) {
    std::cout << token << "\n";
  } else {
    std::ofstream out(out_file);
    out << token << "\n";
    if (!out) return fail(internal_error("-o " + out_file + ": cannot write"));
  }
  return 0;
}

int cmd_invite_accept(const Options& o, const std::string& token_or_file) {
  std::string token = token_or_file;
  if (token_or_file.rfind("shoal-invite:", 0) != 0) {
    auto text = read_input_file(token_or_file, "TOKEN_OR_FILE");
    if (!text.is_ok()) return fail(text.status());
    token = *text;
  }
  auto reply = call(o.data_dir, control::InviteAcceptRequest{.token = token});
  if (!reply.is_ok()) return fail(reply.status());
  std::cout << "accepted invitation from " << (*reply)["cluster"].get<std::string>() << "\n";
  return 0;
}

int cmd_invite_list(const Options& o) {
  auto reply = call(o.data_dir, control::InviteListRequest{});
  if (!reply.is_ok()) return fail(reply.status());
  if (print_structured(o.output, json{{"items", (*reply)["items"]}},
                       [](const json& item) { return "invitation/" + item["id"].get<std::string>(); })) {
    return 0;
  }
  bool wide = o.output == "wide";
  std::vector<std::string> header = {"ID", "DIRECTION", "PEER", "NAMESPACES", "STATE", "LIMITS", "USAGE", "EXPIRES"};
  if (wide) header.insert(header.end(), {"NOT BEFORE", "PEER ID"});
  Table table(header);
  for (const auto& item : (*reply)["items"]) {
    std::string limits;
    for (const auto& [key, value] : item["limits"].items()) {
      limits += (limits.empty() ? "" : ",") + key + "=" +
                (value.is_string() ? value.get<std::string>() : value.dump());
    }
    const json& usage = item["usage"];
    std::string used = "cpu=" + usage["cpu"].get<std::string>() + ",memory=" +
                       usage["memory"].get<std::string>() + ",workloads=" + usage["workloads"].dump();
    std::vector<std::string> row = {item["id"], item["direction"], item["peer"], join(item["namespaces"]),
                                    item["state"], limits.empty() ? "-" : limits, used, item["expires"]};
    if (wide) {
      std::string not_before = item.value("notBefore", "");
      row.push_back(not_before.empty() ? "-" : not_before);
      row.push_back(item.value("peerId", "-"));
    }
    table.add(row);
  }
  table.print(std::cout);
  return 0;
}

int cmd_invite_revoke(const Options& o, const std::string& id, bool evict) {
  auto reply = call(o.data_dir, control::InviteRevokeRequest{.id = id, .evict = evict});
  if (!reply.is_ok()) return fail(reply.status());
  std::cout << "invitation " << id << " revoked" << (evict ? "; its workloads here are being stopped" : "")
            << "\n";
  return 0;
}

int cmd_peer_forget(const Options& o, const std::string& name, bool yes) {
  if (!yes && !confirmed("forget peer " + name +
                         "? Every invitation with it is revoked both ways, its workloads here are "
                         "stopped, and ours there are placed again once its lease has ended")) {
    std::cerr << "shoalctl: not forgotten (confirm with y, or pass --yes)\n";
    return 1;
  }
  auto reply = call(o.data_dir, control::PeerForgetRequest{.name = name});
  if (!reply.is_ok()) return fail(reply.status());
  const auto& r = *reply;
  std::cout << "peer " << r.value("cluster", name)
            << " forgotten: " << r.value("invitationsRevoked", nlohmann::json::array()).size()
            << " invitation(s) revoked, " << r.value("hostedStopped", 0)
            << " of its workload(s) here stopped, " << r.value("copiesLost", 0)
            << " of ours there placed again from " << r.value("placedAgainAt", std::string("-"))
            << "\n";
  return 0;
}

int cmd_describe_peer(const Options& o, const std::string& name) {
  auto reply = call(o.data_dir, control::DescribePeerRequest{.name = name});
  if (!reply.is_ok()) return fail(reply.status());
  json peer = *reply;
  peer.erase("ok");
  if (print_structured(o.output, peer, {})) return 0;
  std::cout << "Cluster:    " << peer["cluster"].get<std::string>() << "\n"
            << "Org:        " << peer["org"].get<std::string>() << "\n"
            << "Id:         " << peer["id"].get<std::string>() << "\n"
            << "Endpoint:   " << peer["endpoint"].get<std::string>() << "\n"
            << "State:      " << peer["state"].get<std::string>()
            << (peer["reason"] == "" ? "" : " (" + peer["reason"].get<std::string>() + ")") << "\n"
            << "Last seen:  " << (peer["lastSeen"] == "" ? "never" : peer["lastSeen"].get<std::string>()) << "\n"
            << "Lease:      "
            << (peer.value("leaseUntil", "") == ""
                    ? std::string("none (its work here is not fenced)")
                    : "its work here may run until " + peer["leaseUntil"].get<std::string>() +
                          " unless renewed")
            << "\n"
            << "We offer:   " << join(peer["namespacesOffered"]) << "\n"
            << "They offer: " << join(peer["namespacesAccepted"]) << "\n"
            << "Invitations:\n";
  for (const auto& item : peer["invitations"]) {
    std::cout << "  " << item["id"].get<std::string>() << "  " << item["direction"].get<std::string>()
              << "  " << item["state"].get<std::string>() << "  " << join(item["namespaces"])
              << "  expires " << item["expires"].get<std::string>() << "\n";
  }
  std::cout << "Events:\n";
  for (const auto& event : peer["events"]) {
    std::cout << "  " << event["at"].get<std::string>() << "  " << event["text"].get<std::string>() << "\n";
  }
  return 0;
}

int cmd_peers(const Options& o) {
  auto reply = call(o.data_dir, control::PeersRequest{});
  if (!reply.is_ok()) return fail(reply.status());
  if (print_structured(o.output, json{{"items", (*reply)["items"]}},
                       [](const json& peer) { return "peer/" + peer["cluster"].get<std::string>(); })) {
    return 0;
  }
  bool wide = o.output == "wide";
  std::vector<std::string> header = {"CLUSTER", "ORG", "STATE", "LAST SEEN", "WE OFFER", "THEY OFFER",
                                     "WORKLOADS", "ENDPOINT"};
  if (wide) header.insert(header.end(), {"FREE CPU", "FREE MEMORY", "LEASE UNTIL", "REASON"});
  Table table(header);
  for (const auto& peer : (*reply)["items"]) {
    std::string seen = peer["lastSeen"];
    std::vector<std::string> row = {peer["cluster"], peer["org"], peer["state"],
                                    seen.empty() ? "never" : age_since(seen) + " ago",
                                    join(peer["namespacesOffered"]), join(peer["namespacesAccepted"]),
                                    std::to_string(peer["workloads"].get<int>()), peer["endpoint"]};
    if (wide) {
      // What it advertises to us, per namespace it invited us into.
      std::string cpu, memory;
      json capacity = peer.value("capacity", json::object());
      for (const auto& [name, ns] : capacity.items()) {
        cpu += (cpu.empty() ? "" : ",") + name + "=" + ns["free"].value("cpu", "?");
        memory += (memory.empty() ? "" : ",") + name + "=" + ns["free"].value("memory", "?");
      }
      std::string lease = peer.value("leaseUntil", "");
      std::string reason = peer.value("reason", "");
      row.insert(row.end(), {cpu.empty() ? "-" : cpu, memory.empty() ? "-" : memory,
                             lease.empty() ? "-" : lease, reason.empty() ? "-" : reason});
    }
    table.add(row);
  }
  table.print(std::cout);
  return 0;
}

// peers, peer forget and describe peer.
void add_peers_and_peer(CommandTree& tree, Options& options, Runners& runners) {
  auto* peers =
      tree.app.add_subcommand("peers", "Peer status: state, last seen, namespaces, workloads");
  peers->add_option("-o,--output", options.output, "json, yaml, name or wide")->check(kListFormats);
  runners.push_back({peers, [&options] { return cmd_peers(options); }});

  struct Forget {
    std::string name;
    bool yes = false;
  };
  auto forget = std::make_shared<Forget>();
  auto* peer = tree.app.add_subcommand("peer", "Act on one peer");
  peer->require_subcommand(1);
  auto* peer_forget = peer->add_subcommand(
      "forget",
      "For a cluster gone for good: revoke every invitation with it both ways, stop its workloads "
      "here, place ours there again once its lease has ended, and stop listing it (asks first; a "
      "new invitation makes it a peer again)");
  peer_forget->add_option("NAME", forget->name, "The peer's cluster name or id")->required();
  peer_forget->add_flag("--yes", forget->yes, "Do not ask");
  runners.push_back({peer_forget, [&options, forget] {
                       return cmd_peer_forget(options, forget->name, forget->yes);
                     }});

  auto peer_name = std::make_shared<std::string>();
  auto* describe_peer =
      tree.describe->add_subcommand("peer", "A peer's state, invitations and audit events");
  describe_peer->add_option("NAME", *peer_name, "The peer's cluster name or id")->required();
  describe_peer->add_option("-o,--output", options.output, "json or yaml")->check(kDocumentFormats);
  runners.push_back(
      {describe_peer, [&options, peer_name] { return cmd_describe_peer(options, *peer_name); }});
}

}  // namespace

void add_peer_commands(CommandTree& tree, Options& options, Runners& runners) {
  auto create_arguments = std::make_shared<InviteCreateArguments>();
  auto* invite_create = tree.invite->add_subcommand(
      "create", "Invite a source cluster; prints the token. A new invitation to the same source "
                "replaces (renews) the previous one; running work is not disturbed");
  invite_create->add_option("--to", create_arguments->to, "The source agent's id card")->required();
  invite_create->add_option("--namespace", create_arguments->namespaces,
                            "A namespace to invite into (repeatable)")
      ->required();
  invite_create->add_option("--cpu", create_arguments->cpu,
                            "Most cpu the source may hold here at once (e.g. 16, 500m)");
  invite_create->add_option("--memory", create_arguments->memory, "Most memory (e.g. 64Gi)");
  invite_create->add_option("--gpu", create_arguments->gpu, "Most GPUs");
  invite_create->add_option("--workloads", create_arguments->workloads, "Most concurrent workloads");
  invite_create->add_flag("--preemptible", create_arguments->preemptible,
                          "The source's work here may be stopped for ours (and for guests "
                          "that are not preemptible), as this cluster's spec.preemption allows");
  invite_create->add_option("--max-priority", create_arguments->max_priority,
                            "The highest priority the source's work holds here; more is held to it");
  invite_create->add_option("--expires", create_arguments->expires,
                            "Lifetime from --not-before (e.g. 720h, 30d; default 30d), or \"never\"");
  invite_create->add_option("--not-before", create_arguments->not_before,
                            "Valid from this UTC time (e.g. 2026-12-01T00:00:00Z; default now)");
  invite_create->add_option("-o,--output-file", create_arguments->out_file, "Write the token to this file");
  runners.push_back({invite_create, [&options, create_arguments] {
                       return cmd_invite_create(options, *create_arguments);
                     }});

  auto* invite_list = tree.invite->add_subcommand(
      "list", "Issued and accepted invitations: state, limits and current usage");
  invite_list->add_option("-o,--output", options.output, "json, yaml, name or wide")->check(kListFormats);
  runners.push_back({invite_list, [&options] { return cmd_invite_list(options); }});

  struct Revoke {
    std::string id;
    bool evict = false;
  };
  auto revoke = std::make_shared<Revoke>();
  auto* invite_revoke = tree.invite->add_subcommand(
      "revoke", "Revoke an issued invitation at once (new work is refused; the source is told)");
  invite_revoke->add_option("ID", revoke->id, "The invitation id (see `invite list`)")->required();
  invite_revoke->add_flag("--evict", revoke->evict,
                          "Also stop the source's running workloads here (reported Failed: Revoked)");
  runners.push_back({invite_revoke, [&options, revoke] {
                       return cmd_invite_revoke(options, revoke->id, revoke->evict);
                     }});

  auto token_or_file = std::make_shared<std::string>();
  auto* invite_accept = tree.invite->add_subcommand("accept", "Accept an invitation token (text or file)");
  invite_accept->add_option("TOKEN_OR_FILE", *token_or_file, "The token, or a file holding it")->required();
  runners.push_back({invite_accept, [&options, token_or_file] {
                       return cmd_invite_accept(options, *token_or_file);
                     }});

  add_peers_and_peer(tree, options, runners);
}

}  // namespace shoal::cli

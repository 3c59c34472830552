#include "agent/control/commands.h"
#include "agent/control/data_dir.h"

#include <gtest/gtest.h>

#include <set>

namespace shoal::control {
namespace {

using nlohmann::json;

TEST(CommandTable, EveryCommandHasOneNameThatFindsItAgain) {
  std::set<std::string_view> names;
  for (const CommandInfo& command : commands()) {
    EXPECT_TRUE(names.insert(command.name).second) << command.name;
    ASSERT_TRUE(command_named(command.name).has_value()) << command.name;
    EXPECT_EQ(*command_named(command.name), command.command);
    EXPECT_EQ(info(command.command).name, command.name);
  }
  EXPECT_EQ(names.size(), std::tuple_size_v<AllRequests>);
  EXPECT_FALSE(command_named("get-everything").has_value());
}

TEST(CommandTable, AReadOnlyAgentAnswersExactlyTheReads) {
  for (const CommandInfo& command : commands()) {
    json request = {{"command", std::string(command.name)}};
    EXPECT_EQ(is_read_only_command(request), command.access == Access::kRead) << command.name;
  }
  EXPECT_TRUE(is_read_only_command({{"command", "status"}}));
  EXPECT_FALSE(is_read_only_command({{"command", "submit"}}));
  EXPECT_FALSE(is_read_only_command({{"command", "watch-workloads"}}));
  EXPECT_FALSE(is_read_only_command({{"command", 7}}));
  EXPECT_FALSE(is_read_only_command(json::array()));
}

TEST(TypedRequests, WhatTheClientEncodesTheAgentDecodesTheSame) {
  LogsRequest logs{.namespace_name = "team", .name = "train", .copy = 2, .replica = 3, .offset = 4096, .limit = 77};
  json wire = encode(logs);
  EXPECT_EQ(wire["command"], "logs");
  auto decoded = decode<LogsRequest>(wire);
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().message();
  EXPECT_EQ(decoded->namespace_name, "team");
  EXPECT_EQ(decoded->name, "train");
  EXPECT_EQ(decoded->copy, 2);
  EXPECT_EQ(decoded->replica, 3);
  EXPECT_EQ(decoded->offset, 4096);
  EXPECT_EQ(decoded->limit, 77);

  InviteCreateRequest invite{.to = "card", .namespaces = {"a", "b"}, .cpu = "4", .expires = "never"};
  auto invite_back = decode<InviteCreateRequest>(encode(invite));
  ASSERT_TRUE(invite_back.is_ok()) << invite_back.status().message();
  EXPECT_EQ(invite_back->namespaces, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(invite_back->cpu, "4");
  EXPECT_EQ(invite_back->memory, "");
  EXPECT_EQ(invite_back->expires, "never");

  PatchWorkloadRequest patch{.namespace_name = "n", .name = "w", .patch = {{"spec", {{"priority", 5}}}}};
  auto patch_back = decode<PatchWorkloadRequest>(encode(patch));
  ASSERT_TRUE(patch_back.is_ok());
  EXPECT_EQ(patch_back->patch["spec"]["priority"], 5);
}

TEST(TypedRequests, AbsentOptionalFieldsKeepTheirDefaults) {
  auto page = decode<GetWorkloadsRequest>({{"command", "get-workloads"}});
  ASSERT_TRUE(page.is_ok());
  EXPECT_EQ(page->namespace_name, "");
  EXPECT_EQ(page->limit, GetWorkloadsRequest::kDefaultPage);
  auto clusters = decode<GetClustersRequest>({{"command", "get-clusters"}, {"queue", nullptr}});
  ASSERT_TRUE(clusters.is_ok());
  EXPECT_EQ(clusters->namespace_name, "default");
  EXPECT_EQ(clusters->queue, "default");
}

TEST(TypedRequests, ABadFieldIsRefusedNamingIt) {
  auto missing = decode<DescribeWorkloadRequest>({{"command", "describe-workload"}, {"namespace", "n"}});
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().message(), "control request field \"name\": expected a string, and it is missing");

  auto wrong_type = decode<InviteRevokeRequest>({{"id", "x"}, {"evict", "yes"}});
  ASSERT_FALSE(wrong_type.is_ok());
  EXPECT_NE(wrong_type.status().message().find("\"evict\": expected true or false"), std::string::npos);

  auto out_of_range = decode<GetWorkloadsRequest>({{"limit", 0}});
  ASSERT_FALSE(out_of_range.is_ok());
  EXPECT_NE(out_of_range.status().message().find("\"limit\": expected a whole number from 1 to 5000"),
            std::string::npos);

  auto not_a_list = decode<NominateRequest>({{"namespace", "n"}, {"name", "w"}, {"clusters", "a,b"}});
  ASSERT_FALSE(not_a_list.is_ok());
  EXPECT_NE(not_a_list.status().message().find("\"clusters\": expected a list of strings"), std::string::npos);

  EXPECT_FALSE(decode<StatusRequest>(json::array()).is_ok());
}

TEST(TypedRequests, CheckRequestDecodesAsTheNamedCommand) {
  EXPECT_TRUE(check_request({{"command", "status"}}).is_ok());
  EXPECT_TRUE(check_request({{"command", "backup"}, {"path", "/tmp/x"}}).is_ok());
  Status missing = check_request({{"command", "backup"}});
  EXPECT_NE(missing.message().find("\"path\""), std::string::npos) << missing.message();
  EXPECT_NE(check_request({{"command", "reboot"}}).message().find("unknown command"), std::string::npos);
  EXPECT_NE(check_request({{"verb", "status"}}).message().find("\"command\""), std::string::npos);
}

TEST(TypedRequests, ASubmitCarriesEitherFormOfTheManifest) {
  json documents = json::array({{{"apiVersion", "shoal.dev/v1"}, {"kind", "Workload"}}});
  auto as_json = decode<SubmitRequest>(encode(SubmitRequest{.workloads = documents}));
  ASSERT_TRUE(as_json.is_ok()) << as_json.status().message();
  EXPECT_EQ(as_json->workloads, documents);
  EXPECT_EQ(as_json->manifest, "");
  json yaml_wire = encode(SubmitRequest{.manifest = "kind: Workload\n"});
  EXPECT_FALSE(yaml_wire.contains("workloads"));  // absent, not null
  auto as_yaml = decode<SubmitRequest>(yaml_wire);
  ASSERT_TRUE(as_yaml.is_ok());
  EXPECT_TRUE(as_yaml->workloads.is_null());
  EXPECT_EQ(as_yaml->manifest, "kind: Workload\n");
  auto not_a_list = decode<SubmitRequest>({{"workloads", {{"kind", "Workload"}}}});
  ASSERT_FALSE(not_a_list.is_ok());
  EXPECT_EQ(not_a_list.status().message(), "control request field \"workloads\": expected a list");
}

TEST(ParseRequest, RefusesWhatIsNotJsonAndWhatNestsTooDeep) {
  auto request = parse_request(R"({"command": "status"})");
  ASSERT_TRUE(request.is_ok());
  EXPECT_EQ((*request)["command"], "status");
  EXPECT_EQ(parse_request("{\"command\": ").status().message(), "control request: not JSON");
  std::string at_limit = std::string(kMaxRequestDepth, '[') + std::string(kMaxRequestDepth, ']');
  EXPECT_TRUE(parse_request(at_limit).is_ok());
  // Deep enough to overflow a stack if any step recursed over it.
  std::string bomb = std::string(1 << 20, '[') + std::string(1 << 20, ']');
  auto refused = parse_request(bomb);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().message(), "control request: nested deeper than 64 levels");
}

// Peers dial what the agent advertises; a wildcard bind names no machine.
TEST(AdvertisedEndpoint, IsTheAdvertiseElseAListenThatNamesAHost) {
  EXPECT_EQ(*advertised_endpoint("tcp://*:7400", "tcp://east.example.org:7400", "--advertise"),
            "tcp://east.example.org:7400");
  EXPECT_EQ(*advertised_endpoint("tcp://10.0.0.5:7400", "", "--advertise"), "tcp://10.0.0.5:7400");
  for (auto [listen, advertise] : std::initializer_list<std::pair<const char*, const char*>>{
           {"tcp://*:7400", ""}, {"tcp://0.0.0.0:7400", ""}, {"tcp://[::]:7400", ""},
           {"tcp://*:7400", "tcp://0.0.0.0:7400"}, {"tcp://*:7400", "east:7400"}}) {
    Result<std::string> refused = advertised_endpoint(listen, advertise, "--advertise");
    ASSERT_FALSE(refused.is_ok()) << listen << " " << advertise;
    EXPECT_EQ(refused.status().message().rfind("--advertise: expected", 0), 0u) << refused.status().message();
  }
}

}  // namespace
}  // namespace shoal::control

#include <gtest/gtest.h>

#include <set>

#include <nlohmann/json.hpp>

#include "model/manifest.h"
#include "model/yaml_document.h"

namespace shoal::model {
namespace {

std::string error_of(std::string_view yaml) {
  auto result = parse_workloads(yaml);
  EXPECT_FALSE(result.is_ok());
  return result.is_ok() ? "" : result.status().message();
}

TEST(ManifestTest, ParsesAFullWorkload) {
  auto result = parse_workloads(R"(
apiVersion: shoal.dev/v1
kind: Workload
metadata: {name: train, namespace: ml, labels: {team: ml}}
spec:
  queue: gpu
  priority: 5
  replicas: 3
  resources: {cpu: "2", memory: 4Gi, gpu: 1}
  duration: 5s
  exitCode: 1
)");
  ASSERT_TRUE(result.is_ok()) << result.status().message();
  const WorkloadSpec& spec = result->front();
  EXPECT_EQ(spec.key(), "ml/train");
  EXPECT_EQ(spec.labels.at("team"), "ml");
  EXPECT_EQ(spec.queue, "gpu");
  EXPECT_EQ(spec.priority, 5);
  EXPECT_EQ(spec.replicas, 3);
  EXPECT_EQ(spec.resources, (Resources{2000, int64_t{4} << 30, 1}));
  EXPECT_EQ(spec.total().cpu_milli, 6000);
  EXPECT_EQ(spec.sim.duration.count(), 5000);
  EXPECT_EQ(spec.sim.exit_code, 1);
}

TEST(ManifestTest, ReadsWhatAnExecWorkloadRunsInEitherSpelling) {
  const std::string text = R"(apiVersion: shoal.dev/v1
kind: Workload
metadata: {name: job}
spec:
  resources: {cpu: 1}
  command: [sh, -c]
  args: ["echo $GREETING"]
  env: [{name: GREETING, value: hello}, {name: EMPTY}]
  workingDir: out
  image: ghcr.io/acme/trainer:2.1@sha256:0a1b
  terminationGracePeriod: 5s
  startTimeout: 10m
  maxDisruptions: 0
  maxRestarts: 5
  sim: {duration: 2s, exitCode: 4}
)";
  auto parsed = parse_workloads(text);
  ASSERT_TRUE(parsed.is_ok()) << parsed.status().message();
  const WorkloadSpec& spec = parsed->front();
  EXPECT_EQ(spec.command, (std::vector<std::string>{"sh", "-c"}));
  EXPECT_EQ(spec.args, (std::vector<std::string>{"echo $GREETING"}));
  EXPECT_EQ(spec.env, (Labels{{"EMPTY", ""}, {"GREETING", "hello"}}));
  EXPECT_EQ(spec.working_dir, "out");
  EXPECT_EQ(spec.image, "ghcr.io/acme/trainer:2.1@sha256:0a1b");
  EXPECT_EQ(spec.termination_grace, std::chrono::seconds(5));
  EXPECT_EQ(spec.start_timeout, std::chrono::minutes(10));
  EXPECT_EQ(spec.max_disruptions, 0);
  EXPECT_EQ(spec.max_restarts, 5);
  EXPECT_EQ(spec.sim.duration, std::chrono::seconds(2));
  EXPECT_EQ(spec.sim.exit_code, 4);
  // The JSON the store keeps round-trips every field.
  auto back = workload_spec_from_json(to_json(spec));
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(*back, spec);
  // A mapping is the short form of env; a plain string a one-word command.
  auto short_form = parse_workloads(
      "apiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: j}\n"
      "spec: {resources: {cpu: 1}, command: true, env: {A: b}}\n");
  ASSERT_TRUE(short_form.is_ok()) << short_form.status().message();
  EXPECT_EQ(short_form->front().command, (std::vector<std::string>{"true"}));
  EXPECT_EQ(short_form->front().env, (Labels{{"A", "b"}}));
  EXPECT_EQ(short_form->front().termination_grace, kDefaultTerminationGrace);
  EXPECT_EQ(short_form->front().start_timeout, Duration(0));
}

TEST(ManifestTest, DefaultsMatchTheDocumentedOnes) {
  auto result = parse_workloads(
      "apiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: a}\nspec: {resources: {cpu: 1}}\n");
  ASSERT_TRUE(result.is_ok());
  EXPECT_EQ(result->front().namespace_name, "default");
  EXPECT_EQ(result->front().queue, "default");
  EXPECT_EQ(result->front().replicas, 1);
}

TEST(ManifestTest, ErrorsNameTheDocumentAndField) {
  const std::string head = "apiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: a}\n";
  EXPECT_NE(error_of(head + "spec: {resources: {cpu: four}}").find(
                "manifest document 1 spec.resources.cpu: expected a quantity"),
            std::string::npos);
  EXPECT_NE(error_of(head + "spec: {resources: {cpu: 1}, replicas: 0}").find("spec.replicas"),
            std::string::npos);
  EXPECT_NE(error_of(head + "spec: {resources: {cpu: 1}, duraton: 5s}").find("spec.duraton: unknown field"),
            std::string::npos);
  EXPECT_NE(error_of(head + "spec: {resources: {cpu: 1}, duration: soon}").find("spec.duration"),
            std::string::npos);
  EXPECT_NE(error_of(head + "spec: {resources: {cpu: 1}, sim: {duration: soon}}").find("spec.sim.duration"),
            std::string::npos);
  EXPECT_NE(error_of(head + "spec: {resources: {cpu: 1}, sim: {exitcode: 3}}").find("spec.sim.exitcode: unknown field"),
            std::string::npos);
  EXPECT_NE(error_of(head + "spec: {resources: {cpu: 1}, args: [x]}").find("spec.args: expected spec.command too"),
            std::string::npos);
  EXPECT_NE(error_of(head + "spec: {resources: {cpu: 1}, command: [sh], env: [{name: A, valu: b}]}")
                .find("spec.env[0].valu: unknown field"),
            std::string::npos);
  EXPECT_NE(error_of(head + "spec: {resources: {cpu: 1}, command: [sh], env: {\"A=B\": c}}").find("spec.env"),
            std::string::npos);
  EXPECT_NE(error_of(head + "spec: {resources: {cpu: 1}, terminationGracePeriod: later}")
                .find("spec.terminationGracePeriod"),
            std::string::npos);
  EXPECT_NE(error_of(head + "spec: {resources: {cpu: 1}, startTimeout: soon}").find("spec.startTimeout"),
            std::string::npos);
  EXPECT_NE(error_of(head + "spec: {resources: {cpu: 1}, maxDisruptions: -1}").find("spec.maxDisruptions"),
            std::string::npos);
  EXPECT_NE(error_of(head + "spec: {resources: {cpu: 1}, maxRestarts: many}").find("spec.maxRestarts"),
            std::string::npos);
  EXPECT_NE(error_of(head + "spec: {resources: {cpu: 1}, image: \"busybox; rm -rf /\"}").find("spec.image"),
            std::string::npos);
  EXPECT_NE(error_of(head + "spec: {resources: {cpu: 1}, image: \"\"}").find("spec.image"), std::string::npos);
  EXPECT_NE(error_of(head + "spec: {resources: {cpu: 1}, image: " + std::string(513, 'a') + "}").find("spec.image"),
            std::string::npos);
  EXPECT_NE(error_of(head + "spec: {resources: {}}").find("spec.resources"), std::string::npos);
  EXPECT_NE(error_of("apiVersion: v2\nkind: Workload\n").find("apiVersion"), std::string::npos);
  EXPECT_NE(error_of("apiVersion: shoal.dev/v1\nkind: Pod\n").find("kind"), std::string::npos);
  EXPECT_NE(error_of("apiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: Bad_Name}\nspec: {resources: {cpu: 1}}")
                .find("metadata.name"),
            std::string::npos);
  EXPECT_NE(error_of("apiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: a, labels: {team: \"ml ops\"}}\n"
                     "spec: {resources: {cpu: 1}}")
                .find("manifest document 1 metadata.labels.team: expected at most 63 letters"),
            std::string::npos);
  EXPECT_NE(error_of("apiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: a, labels: {\"-x\": y}}\n"
                     "spec: {resources: {cpu: 1}}")
                .find("metadata.labels: key \"-x\""),
            std::string::npos);
  EXPECT_NE(error_of("key: [unclosed").find("not valid YAML"), std::string::npos);
  EXPECT_NE(error_of(head + "spec: {resources: {cpu: 1}}\n---\n" + head +
                     "spec: {resources: {cpu: 1}}")
                .find("appears twice"),
            std::string::npos);
}

// Text that is not UTF-8 aborted shoalctl; a duplicate key was
// taken silently; a name holding a newline gave a two-line error.
TEST(ManifestTest, HostileTextIsRefusedOnOneLineNamingWhereItIs) {
  const std::string head = "apiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: a}\n";
  std::string not_utf8 = error_of(head + "spec: {resources: {cpu: 1}}\n---\n" + head +
                                  "spec: {resources: {cpu: 1}, queue: \"q\xff\"}");
  EXPECT_EQ(not_utf8, "manifest: line 9: expected UTF-8 text (column 38 is not)");
  std::string twice = error_of(head + "spec:\n  resources: {cpu: 1}\n  replicas: 2\n  replicas: 3\n");
  EXPECT_EQ(twice, "manifest: line 7: key \"replicas\" appears twice in this mapping");
  std::string newline = error_of("apiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: \"a\\nb\"}\n"
                                 "spec: {resources: {cpu: 1}}");
  EXPECT_NE(newline.find("got \"a\\x0Ab\""), std::string::npos) << newline;
  EXPECT_EQ(newline.find('\n'), std::string::npos) << newline;
  EXPECT_NE(error_of(std::string(model::kMaxYamlBytes + 1, '#')).find("expected at most 4 MiB"), std::string::npos);
  auto cluster = parse_cluster("apiVersion: shoal.dev/v1\nkind: Cluster\nkind: Cluster\n");
  ASSERT_FALSE(cluster.is_ok());
  EXPECT_NE(cluster.status().message().find("\"kind\" appears twice"), std::string::npos);
}

TEST(ManifestTest, ClusterManifestExpandsNodeGroups) {
  auto result = parse_cluster(R"(
apiVersion: shoal.dev/v1
kind: Cluster
metadata: {name: east-1, labels: {region: us-east}}
spec:
  claims: {platform: bare-metal}
  nodes:
  - {name: n, count: 3, capacity: {cpu: "4", memory: 16Gi}, labels: {pool: a}}
  - {name: big, capacity: {cpu: "64", memory: 256Gi, gpu: 8}}
)");
  ASSERT_TRUE(result.is_ok()) << result.status().message();
  ASSERT_EQ(result->nodes.size(), 4u);
  EXPECT_EQ(result->nodes[0].name, "n-0");
  EXPECT_EQ(result->nodes[2].name, "n-2");
  EXPECT_EQ(result->nodes[3].name, "big");
  EXPECT_EQ(result->nodes[3].capacity.gpu, 8);
  EXPECT_EQ(result->labels.at("region"), "us-east");
}

TEST(ManifestTest, PreemptionIsOffUnlessTheClusterSaysAndPoliciesAreNamed) {
  const std::string head =
      "apiVersion: shoal.dev/v1\nkind: Cluster\nmetadata: {name: c}\nspec:\n"
      "  nodes: [{name: n, capacity: {cpu: \"4\", memory: 4Gi}}]\n";
  auto plain = parse_cluster(head);
  ASSERT_TRUE(plain.is_ok()) << plain.status().message();
  EXPECT_FALSE(plain->preemption.enabled());
  auto on = parse_cluster(head + "  preemption: {withinQueue: LowerPriority, reclaim: Any}\n");
  ASSERT_TRUE(on.is_ok()) << on.status().message();
  EXPECT_EQ(on->preemption.within_queue, PreemptionSpec::WithinQueue::kLowerPriority);
  EXPECT_EQ(on->preemption.reclaim, PreemptionSpec::Reclaim::kAny);
  auto bad = parse_cluster(head + "  preemption: {withinQueue: Always}\n");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("spec.preemption.withinQueue"), std::string::npos)
      << bad.status().message();
  auto unknown = parse_cluster(head + "  preemption: {borrow: yes}\n");
  EXPECT_FALSE(unknown.is_ok());

  const std::string workload =
      "apiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: w}\n"
      "spec: {resources: {cpu: \"1\"}, preemptionPolicy: ";
  auto never = parse_workloads(workload + "Never}\n");
  ASSERT_TRUE(never.is_ok()) << never.status().message();
  EXPECT_EQ(never->front().preemption_policy, PreemptionPolicy::kNever);
  auto json_back = workload_spec_from_json(to_json(never->front()));
  ASSERT_TRUE(json_back.is_ok());
  EXPECT_EQ(json_back->preemption_policy, PreemptionPolicy::kNever);
  auto wrong = parse_workloads(workload + "Sometimes}\n");
  ASSERT_FALSE(wrong.is_ok());
  EXPECT_NE(wrong.status().message().find("spec.preemptionPolicy"), std::string::npos);
}

TEST(ManifestTest, DefaultClusterIsFourNodesOfEightCpu) {
  ClusterSpec spec = default_cluster_spec("x");
  ASSERT_EQ(spec.nodes.size(), 4u);
  for (const auto& node : spec.nodes) {
    EXPECT_EQ(node.capacity, (Resources{8000, int64_t{32} << 30, 0}));
  }
}

}  // namespace
}  // namespace shoal::model

namespace shoal::model {
namespace {

// Found by fuzzing: yaml-cpp's LoadAll never returned on this input.
TEST(ManifestTest, MalformedStreamsEndWithAnError) {
  for (const char* input : {",;.", "---\n,;.\n---\n", "--- ,;.", "...\n...", "- [", "{{{{"}) {
    auto result = parse_workloads(input);
    EXPECT_FALSE(result.is_ok()) << input;
  }
}

TEST(ManifestTest, DispatcherFieldsParseAndRoundTripThroughJson) {
  auto result = parse_workloads(
      "apiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: a}\nspec:\n  resources: {cpu: 1}\n"
      "  placement: {dispatcher: Incremental, incrementalBatch: 4, roundTimeout: 250ms}\n");
  ASSERT_TRUE(result.is_ok()) << result.status().message();
  const PlacementSpec& placement = result->front().placement;
  EXPECT_EQ(placement.dispatcher, Dispatcher::kIncremental);
  EXPECT_EQ(placement.incremental_batch, 4);
  EXPECT_EQ(placement.round_timeout, Duration(250));
  auto back = workload_spec_from_json(to_json(result->front()));
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(back->placement, placement);
  std::string head = "apiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: a}\nspec:\n  resources: {cpu: 1}\n";
  EXPECT_NE(error_of(head + "  placement: {dispatcher: Random}\n").find("spec.placement.dispatcher: expected AllAtOnce"),
            std::string::npos);
  EXPECT_NE(error_of(head + "  placement: {roundTimeout: 10ms}\n").find("roundTimeout: expected at least 100ms"),
            std::string::npos);
}

TEST(ManifestTest, DocumentNumbersCountRealDocumentsOnly) {
  std::string good = "apiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: a}\nspec: {resources: {cpu: 1}}\n";
  std::string bad = "apiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: b}\nspec: {resources: {cpu: x}}\n";
  auto result = parse_workloads("---\n" + good + "---\n---\n" + bad);
  ASSERT_FALSE(result.is_ok());
  EXPECT_NE(result.status().message().find("manifest document 2 "), std::string::npos)
      << result.status().message();
  auto two = parse_workloads("--- " + std::string("{apiVersion: shoal.dev/v1, kind: Workload, metadata: {name: c}, spec: {resources: {cpu: 1}}}\n") + "---\n" + good);
  ASSERT_TRUE(two.is_ok()) << two.status().message();
  EXPECT_EQ(two->size(), 2u);
}

TEST(ManifestTest, AKubernetesClusterNamesItsKubeconfigAndTakesItsNodesFromTheCluster) {
  const std::string head = "apiVersion: shoal.dev/v1\nkind: Cluster\nmetadata: {name: east}\nspec:\n";
  auto parsed = parse_cluster(head +
                              "  backend: kubernetes\n  kubernetes:\n    kubeconfig: /etc/shoal/kubeconfig\n"
                              "    context: prod\n    nodeSelector: {pool: batch}\n    image: alpine:3\n"
                              "    timeout: 750ms\n    parallelCalls: 4\n");
  ASSERT_TRUE(parsed.is_ok()) << parsed.status().message();
  ASSERT_TRUE(parsed->kubernetes.has_value());
  EXPECT_EQ(parsed->kubernetes->kubeconfig, "/etc/shoal/kubeconfig");
  EXPECT_EQ(parsed->kubernetes->context, "prod");
  EXPECT_FALSE(parsed->kubernetes->in_cluster);
  EXPECT_EQ(parsed->kubernetes->node_selector, (Labels{{"pool", "batch"}}));
  EXPECT_EQ(parsed->kubernetes->image, "alpine:3");
  EXPECT_EQ(parsed->kubernetes->timeout, std::chrono::milliseconds(750));
  EXPECT_EQ(parsed->kubernetes->parallel_calls, 4);
  EXPECT_TRUE(parsed->nodes.empty()) << "the cluster's Nodes are read when the agent starts";
  auto in_cluster = parse_cluster(head + "  backend: kubernetes\n  kubernetes: {inCluster: true}\n");
  ASSERT_TRUE(in_cluster.is_ok()) << in_cluster.status().message();
  EXPECT_TRUE(in_cluster->kubernetes->in_cluster);
  EXPECT_EQ(in_cluster->kubernetes->parallel_calls, 16) << "the default";

  auto error_of = [&](const std::string& body) {
    auto result = parse_cluster(head + body);
    return result.is_ok() ? std::string("(accepted)") : result.status().message();
  };
  EXPECT_NE(error_of("  backend: kubernetes\n").find("spec.kubernetes: expected a mapping"), std::string::npos);
  EXPECT_NE(error_of("  backend: kubernetes\n  kubernetes: {}\n").find("either kubeconfig: PATH or inCluster: true"),
            std::string::npos);
  EXPECT_NE(error_of("  backend: kubernetes\n  kubernetes: {kubeconfig: /k, inCluster: true}\n")
                .find("either kubeconfig"),
            std::string::npos);
  EXPECT_NE(error_of("  backend: kubernetes\n  kubernetes: {kubeconfig: k.yaml}\n").find("absolute"),
            std::string::npos);
  EXPECT_NE(error_of("  backend: kubernetes\n  kubernetes: {inCluster: yes please}\n").find("spec.kubernetes.inCluster"),
            std::string::npos);
  EXPECT_NE(error_of("  backend: kubernetes\n  kubernetes: {inCluster: true, timeout: 1h}\n")
                .find("spec.kubernetes.timeout"),
            std::string::npos);
  for (const char* calls : {"0", "65", "many"}) {
    EXPECT_NE(error_of(std::string("  backend: kubernetes\n  kubernetes: {inCluster: true, parallelCalls: ") + calls +
                       "}\n")
                  .find("spec.kubernetes.parallelCalls"),
              std::string::npos)
        << calls;
  }
  EXPECT_NE(error_of("  backend: kubernetes\n  kubernetes: {inCluster: true, namespace: x}\n")
                .find("spec.kubernetes.namespace: unknown field"),
            std::string::npos);
  EXPECT_NE(error_of("  backend: kubernetes\n  kubernetes: {inCluster: true}\n"
                     "  nodes:\n  - {name: n, capacity: {cpu: 1}}\n")
                .find("spec.nodes: expected none with backend kubernetes"),
            std::string::npos);
  EXPECT_NE(error_of("  kubernetes: {inCluster: true}\n  nodes:\n  - {name: n, capacity: {cpu: 1}}\n")
                .find("spec.kubernetes: expected only with backend kubernetes"),
            std::string::npos);
  EXPECT_NE(error_of("  backend: mesos\n  nodes:\n  - {name: n, capacity: {cpu: 1}}\n").find("\"kubernetes\""),
            std::string::npos);
}

TEST(ManifestTest, AKubernetesClustersPodsCarryWhatTheManifestSaysAndPassRestrictedByDefault) {
  const std::string head =
      "apiVersion: shoal.dev/v1\nkind: Cluster\nmetadata: {name: k}\nspec:\n  backend: kubernetes\n"
      "  kubernetes:\n    inCluster: true\n";
  auto plain = parse_cluster(head);
  ASSERT_TRUE(plain.is_ok() && plain->kubernetes) << plain.status().message();
  EXPECT_EQ(plain->kubernetes->run_as_user, 65534) << "not root unless asked";
  EXPECT_TRUE(plain->kubernetes->tolerations.empty());

  auto full = parse_cluster(head +
                            "    tolerations: [{key: pool, operator: Equal, value: gpu, effect: NoSchedule},\n"
                            "                  {operator: Exists, effect: NoExecute, tolerationSeconds: 30}]\n"
                            "    priorityClassName: batch-low\n    imagePullSecrets: [regcred]\n"
                            "    annotations: {example.com/team: ml}\n"
                            "    securityContext: {runAsUser: 1000, runAsGroup: 2000}\n");
  ASSERT_TRUE(full.is_ok() && full->kubernetes) << full.status().message();
  const KubernetesSpec& spec = *full->kubernetes;
  ASSERT_EQ(spec.tolerations.size(), 2u);
  EXPECT_TRUE(spec.tolerations[0].tolerates("pool", "gpu", "NoSchedule"));
  EXPECT_FALSE(spec.tolerations[0].tolerates("pool", "cpu", "NoSchedule"));
  EXPECT_TRUE(spec.tolerations[1].tolerates("anything", "", "NoExecute"));
  EXPECT_FALSE(spec.tolerations[1].tolerates("anything", "", "NoSchedule"));
  EXPECT_EQ(spec.tolerations[1].seconds, 30);
  EXPECT_EQ(spec.priority_class_name, "batch-low");
  EXPECT_EQ(spec.image_pull_secrets, std::vector<std::string>{"regcred"});
  EXPECT_EQ(spec.annotations.at("example.com/team"), "ml");
  EXPECT_EQ(spec.run_as_user, 1000);
  EXPECT_EQ(spec.run_as_group, 2000);

  for (auto [bad, field] : std::initializer_list<std::pair<std::string, std::string>>{
           {"    tolerations: [{key: a, operator: Maybe}]\n", "spec.kubernetes.tolerations[0].operator"},
           {"    tolerations: [{key: a, operator: Exists, value: b}]\n", "spec.kubernetes.tolerations[0].value"},
           {"    tolerations: [{value: b}]\n", "spec.kubernetes.tolerations[0].key"},
           {"    tolerations: [{key: a, effect: NoRun}]\n", "spec.kubernetes.tolerations[0].effect"},
           {"    tolerations: [{key: a, tolerationSeconds: 5}]\n", "spec.kubernetes.tolerations[0].tolerationSeconds"},
           {"    priorityClassName: Batch_Low\n", "spec.kubernetes.priorityClassName"},
           {"    imagePullSecrets: [\"a b\"]\n", "spec.kubernetes.imagePullSecrets[0]"},
           {"    annotations: {\"-x\": y}\n", "spec.kubernetes.annotations"},
           {"    securityContext: {runAsUser: -1}\n", "spec.kubernetes.securityContext.runAsUser"},
           {"    securityContext: {privileged: true}\n", "spec.kubernetes.securityContext.privileged"}}) {
    auto refused = parse_cluster(head + bad);
    ASSERT_FALSE(refused.is_ok()) << bad;
    EXPECT_NE(refused.status().message().find(field), std::string::npos) << refused.status().message();
    EXPECT_EQ(refused.status().message().find('\n'), std::string::npos) << refused.status().message();
  }
}

TEST(ManifestTest, ASlurmClusterNamesItsEndpointAndTakesItsNodesFromSlurm) {
  const std::string head = "apiVersion: shoal.dev/v1\nkind: Cluster\nmetadata: {name: east}\nspec:\n";
  auto parsed = parse_cluster(head +
                              "  backend: slurm\n  slurm:\n    endpoint: unix:///run/slurmrestd.sock\n"
                              "    partition: batch\n    account: shared\n    timeout: 750ms\n");
  ASSERT_TRUE(parsed.is_ok()) << parsed.status().message();
  ASSERT_TRUE(parsed->slurm.has_value());
  EXPECT_EQ(parsed->slurm->endpoint, "unix:///run/slurmrestd.sock");
  EXPECT_EQ(parsed->slurm->partition, "batch");
  EXPECT_EQ(parsed->slurm->account, "shared");
  EXPECT_EQ(parsed->slurm->api_version, "v0.0.38");
  EXPECT_EQ(parsed->slurm->timeout, std::chrono::milliseconds(750));
  EXPECT_TRUE(parsed->nodes.empty()) << "Slurm's nodes are read when the agent starts";

  auto error_of = [&](const std::string& body) {
    auto result = parse_cluster(head + body);
    return result.is_ok() ? std::string("(accepted)") : result.status().message();
  };
  EXPECT_NE(error_of("  backend: slurm\n").find("spec.slurm: expected a mapping with endpoint"),
            std::string::npos);
  EXPECT_NE(error_of("  backend: slurm\n  slurm: {endpoint: 'ftp://x'}\n").find("spec.slurm.endpoint"),
            std::string::npos);
  EXPECT_NE(error_of("  backend: slurm\n  slurm: {endpoint: 'http://h:6820'}\n").find("spec.slurm.tokenFile"),
            std::string::npos)
      << "TCP needs a JWT";
  EXPECT_NE(error_of("  backend: slurm\n  slurm: {endpoint: 'unix:///s', apiVersion: v0.0.39}\n")
                .find("spec.slurm.apiVersion"),
            std::string::npos);
  EXPECT_NE(error_of("  backend: slurm\n  slurm: {endpoint: 'unix:///s', outputDir: out}\n")
                .find("absolute"),
            std::string::npos);
  EXPECT_NE(error_of("  backend: slurm\n  slurm: {endpoint: 'unix:///s', timeout: 1h}\n")
                .find("spec.slurm.timeout"),
            std::string::npos);
  EXPECT_NE(error_of("  backend: slurm\n  slurm: {endpoint: 'unix:///s', queue: q}\n").find("spec.slurm"),
            std::string::npos);
  EXPECT_NE(error_of("  backend: slurm\n  slurm: {endpoint: 'unix:///s'}\n"
                     "  nodes:\n  - {name: n, capacity: {cpu: 1}}\n")
                .find("spec.nodes: expected none with backend slurm"),
            std::string::npos);
  EXPECT_NE(error_of("  slurm: {endpoint: 'unix:///s'}\n  nodes:\n  - {name: n, capacity: {cpu: 1}}\n")
                .find("spec.slurm: expected only with backend slurm"),
            std::string::npos);
}

}  // namespace
}  // namespace shoal::model

namespace shoal::model {
namespace {

std::string workload_document(int i) {
  return "apiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: w" + std::to_string(i) +
         "}\nspec: {resources: {cpu: 1}}\n";
}

// shoalctl sends a manifest's documents as JSON; the agent must read from
// them exactly what it reads from the YAML.
TEST(WorkloadListTest, TheJsonFormReadsAsTheYamlDoes) {
  std::string stream = "# a header of comments only\n";
  for (int i = 0; i < 3; ++i) stream += "---\n" + workload_document(i);
  stream += R"(---
apiVersion: shoal.dev/v1
kind: Workload
metadata: {name: full, namespace: ml, labels: {team: ml}}
spec:
  queue: gpu
  priority: -5
  replicas: 2
  minAvailable: 1
  resources: {cpu: 500m, memory: 1Gi, gpu: 1}
  sim: {duration: 2s, exitCode: 3}
  command: [python, train.py]
  env: [{name: A, value: "1"}, {name: B}]
  startTimeout: 30s
  restartPolicy: OnFailure
  preemptionPolicy: Never
  nodeSelector: {zone: a}
  placement: {clusters: [a, b], dispatcher: Incremental, incrementalBatch: 2}
---
# a trailing document of comments only
)";
  auto from_yaml = parse_workloads(stream);
  ASSERT_TRUE(from_yaml.is_ok()) << from_yaml.status().message();
  auto documents = workload_documents_as_json(stream);
  ASSERT_TRUE(documents.is_ok()) << documents.status().message();
  ASSERT_EQ(documents->size(), 4u);  // the empty documents are left out
  // Every scalar as the text the YAML held.
  EXPECT_EQ((*documents)[3]["spec"]["priority"], "-5");
  EXPECT_EQ((*documents)[3]["spec"]["env"][1], (nlohmann::json{{"name", "B"}}));
  // Through text, as the agent gets it.
  auto wire = nlohmann::json::parse(nlohmann::json(*documents).dump());
  auto from_json = parse_workload_list(wire);
  ASSERT_TRUE(from_json.is_ok()) << from_json.status().message();
  ASSERT_EQ(from_json->size(), from_yaml->size());
  for (size_t i = 0; i < from_yaml->size(); ++i) {
    EXPECT_EQ(to_json((*from_json)[i]), to_json((*from_yaml)[i])) << i;
  }
}

TEST(WorkloadListTest, JsonNumbersAndBooleansReadAsTheirText) {
  auto specs = parse_workload_list(nlohmann::json::parse(R"([{
    "apiVersion": "shoal.dev/v1", "kind": "Workload", "metadata": {"name": "n"},
    "spec": {"priority": 7, "replicas": 2, "resources": {"cpu": 1.5, "gpu": 1}}}])"));
  ASSERT_TRUE(specs.is_ok()) << specs.status().message();
  EXPECT_EQ(specs->front().priority, 7);
  EXPECT_EQ(specs->front().replicas, 2);
  EXPECT_EQ(specs->front().resources, (Resources{1500, 0, 1}));
}

TEST(WorkloadListTest, ABadListIsRefusedNamingTheDocumentAndField) {
  auto error = [](const nlohmann::json& list) {
    auto result = parse_workload_list(list);
    EXPECT_FALSE(result.is_ok());
    return result.is_ok() ? std::string() : result.status().message();
  };
  nlohmann::json good = nlohmann::json::parse(R"({"apiVersion": "shoal.dev/v1", "kind": "Workload",
    "metadata": {"name": "a"}, "spec": {"resources": {"cpu": "1"}}})");
  EXPECT_EQ(error(good), "workloads: expected a list of Workload documents");
  EXPECT_EQ(error(nlohmann::json::array()), "manifest: expected at least one Workload document");
  EXPECT_EQ(error(nlohmann::json::array({good, "text"})),
            "manifest document 2: expected a mapping with apiVersion, kind, metadata, spec");
  nlohmann::json typo = good;
  typo["spec"]["replica"] = 2;
  EXPECT_EQ(error(nlohmann::json::array({typo})).rfind("manifest document 1 spec.replica: unknown field", 0), 0u) << error(nlohmann::json::array({typo}));
  nlohmann::json wrong = good;
  wrong["spec"]["resources"]["cpu"] = {{"a", 1}};
  EXPECT_EQ(error(nlohmann::json::array({wrong})), "manifest document 1 spec.resources.cpu: expected a string or number");
  EXPECT_EQ(error(nlohmann::json::array({good, good})),
            "manifest document 2 metadata.name: \"default/a\" appears twice in this file");
  nlohmann::json deep = "leaf";
  for (int i = 0; i < kMaxJsonDepth + 1; ++i) deep = nlohmann::json::array({deep});
  nlohmann::json nested = good;
  nested["spec"]["command"] = deep;
  EXPECT_EQ(error(nlohmann::json::array({nested})), "manifest document 1: nested deeper than 64 levels");
}

}  // namespace
}  // namespace shoal::model

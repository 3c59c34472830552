// Without libFuzzer: feeds LLVMFuzzerTestOneInput a seed corpus of valid
// inputs for every decoder and every saved regression (tests/fuzz/regressions,
// inputs that once crashed a decoder), then a bounded number of
// deterministic random mutations of them (bit flips, truncations, splices).
// Each input has kSecondsPerInput, as libFuzzer's -timeout gives it: a
// decoder whose work an input can multiply (a YAML alias bomb) fails the run
// instead of stalling it. Exits non-zero on a timeout, or when no saved
// regression was found. `--write-seeds DIR` writes the seed corpus for
// libFuzzer instead.
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "crypto/identity.h"
#include "crypto/invitation.h"
#include "protocol/envelope.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

// Generous beside the few milliseconds an input takes, even under the
// sanitizers; a timeout means a decoder's work grows with something other
// than the input's size.
constexpr unsigned kSecondsPerInput = 10;

// What is being decoded, for the alarm handler (which may only write).
char g_current_input[256] = "";

void on_timeout(int) {
  const char head[] = "fuzz replay: an input took longer than the per-input limit: ";
  (void)!write(STDERR_FILENO, head, sizeof head - 1);
  (void)!write(STDERR_FILENO, g_current_input, std::strlen(g_current_input));
  (void)!write(STDERR_FILENO, "\n", 1);
  _exit(1);
}

// Decodes one input under the per-input time limit.
void decode(const std::vector<uint8_t>& input, const std::string& what) {
  std::snprintf(g_current_input, sizeof g_current_input, "%s", what.c_str());
  alarm(kSecondsPerInput);
  LLVMFuzzerTestOneInput(input.data(), input.size());
  alarm(0);
}

std::vector<uint8_t> tagged(uint8_t tag, const std::vector<uint8_t>& body) {
  std::vector<uint8_t> out = {tag};
  out.insert(out.end(), body.begin(), body.end());
  return out;
}
std::vector<uint8_t> tagged(uint8_t tag, const std::string& text) {
  return tagged(tag, std::vector<uint8_t>(text.begin(), text.end()));
}

std::vector<std::vector<uint8_t>> seeds() {
  using namespace shoal;
  (void)crypto::initialize();
  crypto::Identity a = crypto::Identity::generate(), b = crypto::Identity::generate();
  std::vector<std::vector<uint8_t>> out;
  model::WorkloadSpec spec;
  spec.name = "x";
  spec.resources = {1000, 1024, 0};
  model::WorkloadSpec imaged = spec;
  imaged.image = "busybox:1.36";
  model::WorkloadSpec polite = spec;  // spec field 20: the preemption policy
  polite.preemption_policy = model::PreemptionPolicy::kNever;
  std::vector<protocol::Body> bodies = {
      protocol::Hello{"c", "o", "tcp://h:1"},
      protocol::Candidate{"u", 1, spec},
      protocol::Candidate{"u", 1, imaged},
      protocol::Candidate{"u", 1, polite},
      protocol::Ready{"u", 1, 50.0},
      protocol::Ready{"u", 1, 0.0, 2, 7},  // an offer to preempt
      protocol::WorkloadStatus{"u", 1, 2, model::Phase::kRunning, {"n"}, 1, 0, 0, ""},
      protocol::Capacity{{{"default", {1, 2, 3}, {1, 1, 1}, {{"q", {1, 2, 3}, {1, 1, 1}, 0}}, {}}}, std::nullopt},
      // With the fields appended since: queue and namespace counts, labels,
      // claims, allocatable and cluster-wide counts (and labels left out).
      protocol::Capacity{{{"default", {1, 2, 3}, {1, 1, 1}, {{"q", {1, 2, 3}, {1, 1, 1}, 4}}, {5, 6, 7, 8}}},
                         protocol::ClusterFacts{model::Labels{{"region", "r"}}, model::Labels{{"tier", "t"}},
                                                {9, 9, 0}, model::UsageCounts{1, 2, 3, 4}}},
      protocol::Capacity{{}, protocol::ClusterFacts{std::nullopt, std::nullopt, {9, 9, 0}, std::nullopt}},
      protocol::Digest{120000, {{"u", 1, 5}, {"v", 2, std::nullopt}}},
      protocol::Holdings{{{"u", 1, model::Phase::kRunning}}},
      protocol::LogRequest{3, "u", 1, 0, -100, 4096},
      protocol::LogChunk{3, "", "", "line\n", 0, 5, true},
      protocol::LogChunk{4, "", "", "", 5, 5, false, true},
      protocol::Priority{"u", 1, 9}};
  for (const auto& body : bodies) {
    protocol::Envelope e;
    e.type = protocol::type_of(body);
    e.from = a.public_key();
    e.to = b.public_key();
    e.body = protocol::encode_body(body);
    out.push_back(tagged(0, protocol::seal(e, a)));
    out.push_back(tagged(1, e.body));
  }
  {
    // A BATCH of every body above.
    std::vector<protocol::BatchItem> items;
    for (const auto& body : bodies) {
      items.push_back({static_cast<uint8_t>(protocol::type_of(body)), protocol::encode_body(body)});
    }
    protocol::Envelope e;
    e.type = protocol::MessageType::kBatch;
    e.from = a.public_key();
    e.to = b.public_key();
    e.body = protocol::encode_batch(items);
    out.push_back(tagged(0, protocol::seal(e, a)));
    out.push_back(tagged(1, e.body));
  }
  crypto::Invitation invitation;
  invitation.id = "id";
  invitation.issuer = {"t", "o", a.public_key(), "tcp://h:1"};
  invitation.subject = b.public_key();
  invitation.namespaces = {"default"};
  std::string token = crypto::issue_token(invitation, a);
  out.push_back(tagged(2, token));
  invitation.limits.preemptible = true;  // with the preemption terms appended
  invitation.limits.max_priority = 10;
  out.push_back(tagged(2, crypto::issue_token(invitation, a)));
  out.push_back(tagged(3, invitation.issuer.to_string()));
  for (const char* flag : {"30d", "1h30m", "2026-11-22T10:00:00.250Z", "1500m", "64Gi", "never"}) {
    out.push_back(tagged(5, std::string(flag)));
  }
  out.push_back(tagged(4, std::string("apiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: a}\n"
                                      "spec: {resources: {cpu: \"1\", memory: 1Gi}, duration: 1s}\n")));
  out.push_back(tagged(4, std::string("apiVersion: shoal.dev/v1\nkind: Cluster\nmetadata: {name: a}\n"
                                      "spec: {nodes: [{name: n, count: 2, capacity: {cpu: 4}}]}\n")));
  out.push_back(tagged(4, std::string("apiVersion: shoal.dev/v1\nkind: Quota\nmetadata: {namespace: ml}\n"
                                      "spec: {hard: {cpu: \"16\", memory: 64Gi, gpu: \"2\", workloads: \"9\"}}\n")));
  out.push_back(tagged(4, std::string("apiVersion: shoal.dev/v1\nkind: Cluster\nmetadata: {name: a}\n"
                                      "spec: {nodes: [{name: n, capacity: {cpu: 4}}], "
                                      "preemption: {withinQueue: LowerPriority, reclaim: Any}}\n")));
  out.push_back(tagged(4, std::string("{\"command\": \"quota-set\", \"namespace\": \"ml\", \"cpu\": \"16\"}")));
  out.push_back(tagged(4, std::string("apiVersion: shoal.dev/v1\nkind: Inventory\nclusters:\n- name: a\n"
                                      "  labels: {zone: z}\n  capacity: {free: {cpu: 4}}\n  scores: {x: 5}\n")));
  out.push_back(tagged(4, std::string("apiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: a}\nspec:\n"
                                      "  resources: {cpu: 1}\n  placement:\n    numberOfClusters: 2\n"
                                      "    spreadPolicy: {spreadConstraints: [{topologyKey: zone, maxSkew: 1}]}\n")));
  out.push_back(tagged(4, std::string("apiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: a}\nspec:\n"
                                      "  resources: {cpu: 1}\n  restartPolicy: OnFailure\n"
                                      "  placement: {readyWindow: 2s, minReady: 2, dispatcher: Sample}\n")));
  out.push_back(tagged(4, std::string("apiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: a}\nspec:\n"
                                      "  resources: {cpu: 1}\n  placement:\n    predicates: [{requiredClusterSelector: "
                                      "{labelSelector: {matchLabels: {a: b}}}}]\n    routing: {weights: {a: 1}, "
                                      "metric: SparkApp}\n    prioritizerPolicy: {configurations: [{scoreCoordinate: "
                                      "{type: BuiltIn, builtIn: Balance}}]}\n")));
  out.push_back(tagged(4, std::string("{\"items\": [{\"cluster\": \"a\", \"labels\": {\"zone\": \"z\"}, "
                                      "\"allocatable\": {\"cpu\": \"4\", \"memory\": \"1Gi\", \"gpu\": 0}, "
                                      "\"free\": {\"cpu\": \"2\"}, \"namespaces\": [\"default\"], \"counts\": "
                                      "{\"cluster\": {\"workloads\": 3, \"cpu\": \"1\", \"queued\": 1}, "
                                      "\"namespaces\": {\"default\": {\"workloads\": 1}}, \"queues\": {\"q\": 2}}, "
                                      "\"sourceWorkloads\": 1}]}")));
  // slurmrestd's answers (v0.0.38, trimmed) and a jobcomp/filetxt line.
  out.push_back(tagged(4, std::string("{\"nodes\": [{\"name\": \"n1\", \"state\": \"mixed\", \"state_flags\": "
                                      "[\"DRAIN\"], \"cpus\": 8, \"alloc_cpus\": 2, \"real_memory\": 16384, "
                                      "\"alloc_memory\": 512, \"reason\": \"\"}], \"errors\": []}")));
  out.push_back(tagged(4, std::string("{\"jobs\": [{\"job_id\": 7, \"name\": \"shoal\", \"comment\": \"shoal "
                                      "uid=u epoch=1\", \"job_state\": \"FAILED\", \"state_reason\": \"None\", "
                                      "\"exit_code\": 768, \"nodes\": \"n1\", \"start_time\": 1795557423, "
                                      "\"end_time\": 1795557424, \"standard_output\": \"/o.log\"}]}")));
  out.push_back(tagged(4, std::string("{\"job_id\": 1, \"step_id\": \"BATCH\", \"errors\": [{\"description\": "
                                      "\"Unable to find JobId=9\", \"error_number\": 2017}]}")));
  out.push_back(tagged(4, std::string("JobId=1 UserId=root(0) GroupId=root(0) Name=wrap JobState=FAILED "
                                      "Partition=dev NodeList=n1 ExitCode=3:0")));
  out.push_back(tagged(4, std::string("shoal cluster=east key=ab12/u-1 epoch=3")));
  out.push_back(tagged(4, std::string("apiVersion: shoal.dev/v1\nkind: Cluster\nmetadata: {name: east}\n"
                                      "spec:\n  backend: slurm\n  slurm: {endpoint: 'http://h:6820', "
                                      "tokenFile: /t, userName: u, partition: p, timeout: 2s}\n")));
  // An API server's answers to the kubernetes backend, and a kubeconfig.
  out.push_back(tagged(4, std::string(R"({"kind":"NodeList","metadata":{"resourceVersion":"9"},"items":[{"metadata":)"
                                      R"({"name":"n","labels":{"a":"b"}},"spec":{"unschedulable":true,"taints":[{"key":)"
                                      R"("k","effect":"NoSchedule"}]},"status":{"allocatable":{"cpu":"8","memory":"32Gi",)"
                                      R"("nvidia.com/gpu":"1"},"conditions":[{"type":"Ready","status":"True"}]}}]})")));
  out.push_back(tagged(4, std::string(R"({"type":"MODIFIED","object":{"metadata":{"name":"p","namespace":"d",)"
                                      R"("resourceVersion":"3","labels":{"shoal.dev/uid":"u"},"deletionTimestamp":"x"},)"
                                      R"("spec":{"nodeName":"n","containers":[{"resources":{"requests":{"cpu":"1"}}}],)"
                                      R"("initContainers":[{"resources":{"requests":{"memory":"1Gi"}}}]},"status":)"
                                      R"({"phase":"Failed","reason":"Evicted","containerStatuses":[{"state":{"terminated":)"
                                      R"({"exitCode":137,"reason":"OOMKilled"}}}]}}})")));
  out.push_back(tagged(4, std::string(R"json({"type":"ERROR","object":{"kind":"Status","message":"too old (1)","code":410}})json")));
  out.push_back(tagged(4, std::string("clusters:\n- name: c\n  cluster: {server: \"https://h:1\", "
                                      "certificate-authority-data: Q0EK}\nusers:\n- name: u\n  user: "
                                      "{client-certificate-data: Q0VSVAo=, client-key-data: S0VZCg==}\ncontexts:\n"
                                      "- name: x\n  context: {cluster: c, user: u, namespace: n}\ncurrent-context: x\n")));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  auto corpus = seeds();
  if (argc == 3 && std::string(argv[1]) == "--write-seeds") {
    std::filesystem::create_directories(argv[2]);
    for (size_t i = 0; i < corpus.size(); ++i) {
      std::ofstream out(std::string(argv[2]) + "/seed-" + std::to_string(i), std::ios::binary);
      out.write(reinterpret_cast<const char*>(corpus[i].data()), static_cast<std::streamsize>(corpus[i].size()));
    }
    std::printf("wrote %zu seeds to %s\n", corpus.size(), argv[2]);
    return 0;
  }
  int iterations = argc > 1 ? std::stoi(argv[1]) : 20000;
  std::mt19937_64 rng(20261122);
  std::signal(SIGALRM, on_timeout);
  std::vector<std::string> names;
  for (size_t i = 0; i < corpus.size(); ++i) names.push_back("built-in seed " + std::to_string(i));
  size_t regressions = 0;
  std::error_code missing;
  for (const auto& entry : std::filesystem::directory_iterator(SHOAL_FUZZ_REGRESSIONS, missing)) {
    if (entry.path().extension() == ".md") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::vector<uint8_t> input((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    corpus.push_back(input);
    names.push_back(entry.path().string());
    ++regressions;
  }
  if (regressions == 0) {
    std::fprintf(stderr, "fuzz replay: no saved regression in %s\n", SHOAL_FUZZ_REGRESSIONS);
    return 1;
  }
  for (size_t i = 0; i < corpus.size(); ++i) decode(corpus[i], names[i]);
  for (int i = 0; i < iterations; ++i) {
    std::vector<uint8_t> input = corpus[rng() % corpus.size()];
    int mutations = 1 + static_cast<int>(rng() % 4);
    for (int m = 0; m < mutations && input.size() > 1; ++m) {
      size_t at = 1 + rng() % (input.size() - 1);
      switch (rng() % 4) {
        case 0: input[at] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
        case 1: input.resize(at); break;
        case 2: input[at] = static_cast<uint8_t>(rng()); break;
        case 3: {
          const auto& other = corpus[rng() % corpus.size()];
          input.insert(input.begin() + static_cast<long>(at), other.begin() + 1, other.end());
          break;
        }
      }
    }
    decode(input, "mutation " + std::to_string(i));
  }
  std::printf("fuzz replay: %zu seeds (%zu saved regressions) and %d mutations decoded without a crash\n",
              corpus.size(), regressions, iterations);
  return 0;
}

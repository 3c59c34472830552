// Fuzz targets for every decoder that faces untrusted input. Built as
// libFuzzer targets with SHOAL_FUZZ=ON (clang), one per family of decoders
// (SHOAL_FUZZ_DECODER fixes the family; see tests/fuzz/CMakeLists.txt);
// otherwise as an ordinary executable that replays a built-in corpus, the
// saved regressions, and bounded random mutations, so every ctest run
// exercises them. An input's first byte names its family either way, so
// one corpus serves every build.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "agent/cluster/kubernetes/kube_api.h"
#include "agent/cluster/slurm/slurm_rest.h"
#include "agent/cluster/slurm/slurm_runner.h"
#include "agent/control/commands.h"
#include "agent/control/inventory_json.h"
#include "crypto/id_card.h"
#include "crypto/identity.h"
#include "crypto/invitation.h"
#include "common/time.h"
#include "model/manifest.h"
#include "model/quota.h"
#include "model/quantity.h"
#include "model/placement_parse.h"
#include "protocol/envelope.h"

namespace {

std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

bool crypto_initialized_once() { return shoal::crypto::initialize().is_ok(); }

}  // namespace

// Each decoder must return a value or an error for any input; a crash,
// sanitizer report or hang is the bug.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool initialized = crypto_initialized_once();
  (void)initialized;
  if (size == 0) return 0;
  std::span<const uint8_t> bytes(data + 1, size - 1);
#ifdef SHOAL_FUZZ_DECODER
  const int family = SHOAL_FUZZ_DECODER;
#else
  const int family = data[0] % 6;
#endif
  switch (family) {
    case 0: {
      shoal::protocol::DropReason reason;
      auto envelope = shoal::protocol::open(bytes, &reason);
      if (!envelope.is_ok()) break;
      if (envelope->type != shoal::protocol::MessageType::kBatch) {
        (void)shoal::protocol::decode_body(envelope->type, envelope->body);
        break;
      }
      if (auto items = shoal::protocol::decode_batch(envelope->body); items.is_ok()) {
        for (const auto& item : *items) {
          (void)shoal::protocol::decode_body(static_cast<shoal::protocol::MessageType>(item.type),
                                             item.body);
        }
      }
      break;
    }
    case 1:
      for (uint8_t type = 1; type <= shoal::protocol::kMaxMessageType; ++type) {
        (void)shoal::protocol::decode_body(static_cast<shoal::protocol::MessageType>(type), bytes);
      }
      (void)shoal::protocol::decode_batch(bytes);
      break;
    case 2:
      (void)shoal::crypto::open_token(as_text(bytes.data(), bytes.size()));
      break;
    case 3:
      (void)shoal::crypto::parse_id_card(as_text(bytes.data(), bytes.size()));
      break;
    case 4:
      (void)shoal::model::parse_workloads(as_text(bytes.data(), bytes.size()));
      (void)shoal::model::parse_cluster(as_text(bytes.data(), bytes.size()));
      (void)shoal::model::parse_inventory(as_text(bytes.data(), bytes.size()));
      (void)shoal::model::parse_quotas(as_text(bytes.data(), bytes.size()));
      // A request on the control socket as the agent reads it (any local
      // process may write one), and a submit's manifest in its JSON form.
      if (auto request = shoal::control::parse_request(as_text(bytes.data(), bytes.size())); request.is_ok()) {
        (void)shoal::control::check_request(*request);
        (void)shoal::model::parse_workload_list(*request);
        if (request->is_object() && request->contains("workloads")) {
          (void)shoal::model::parse_workload_list((*request)["workloads"]);
        }
      }
      // The live inventory `shoalctl place --live` reads from an agent.
      if (auto json = nlohmann::json::parse(as_text(bytes.data(), bytes.size()), nullptr, false);
          !json.is_discarded()) {
        (void)shoal::control::candidate_from_json(json);
        if (json.is_object() && json.contains("items") && json["items"].is_array()) {
          for (const auto& item : json["items"]) (void)shoal::control::candidate_from_json(item);
        }
      }
      // What slurmrestd answers the slurm backend, and jobcomp's lines.
      {
        std::string_view text = as_text(bytes.data(), bytes.size());
        (void)shoal::cluster::slurm::parse_nodes(text);
        (void)shoal::cluster::slurm::parse_jobs(text);
        (void)shoal::cluster::slurm::parse_submitted_job_id(text);
        (void)shoal::cluster::slurm::slurm_errors(text);
        (void)shoal::cluster::slurm::parse_jobcomp_line(text);
        (void)shoal::cluster::slurm::parse_tag(text);  // a job's comment: anyone's text
      }
      // What an API server answers the kubernetes backend, and kubeconfigs.
      {
        namespace kube = shoal::cluster::kubernetes;
        std::string_view text = as_text(bytes.data(), bytes.size());
        (void)kube::parse_node_list(text);
        (void)kube::parse_pod_list(text);
        (void)kube::parse_node_event(text);
        (void)kube::parse_pod_event(text);
        (void)kube::kube_status_message(text);
        (void)kube::parse_kubeconfig(text, "kubeconfig", "/nonexistent");
      }
      break;
    case 5: {
      // Operator flags that reach the agent as text (invite create, agent.yaml).
      std::string_view text = as_text(bytes.data(), bytes.size());
      (void)shoal::parse_duration(text, "f");
      (void)shoal::parse_time(text, "f");
      (void)shoal::model::parse_cpu_milli(text, "f");
      (void)shoal::model::parse_memory_bytes(text, "f");
      (void)shoal::model::parse_count(text, "f");
      break;
    }
  }
  return 0;
}

// How shoald builds its agent: the cluster manifest read and checked (a
// Slurm's or a Kubernetes cluster's nodes discovered), and a factory of
// agents over one store, transport and identity, each with a fresh runner
// for the backend that re-adopts what still runs.
#pragma once

#include <memory>
#include <string>

#include <spdlog/spdlog.h>

#include "agent/cluster/exec/exec_runner.h"
#include "agent/cluster/node_cluster.h"
#include "agent/core/agent.h"
#include "agent/runtime/config.h"
#include "agent/runtime/zmq_transport.h"
#include "model/manifest.h"
#include "store/store.h"

namespace shoal::runtime {

// The cluster manifest agent.yaml names (or the default one-node sim
// cluster), its name checked against the agent's, its nodes discovered
// from a Slurm or a Kubernetes backend, and its scheduler settings checked.
Result<model::ClusterSpec> load_cluster_spec(const AgentFile& file);

// The agent and the cluster it drives, built from what the store holds.
struct AgentInstance {
  std::unique_ptr<cluster::NodeCluster> cluster;
  std::unique_ptr<core::Agent> agent;
};

// Builds agents over one store, transport and identity. The loop needs a
// fresh one whenever memory may be ahead of the disk: after a batch that
// could not be committed, the only trustworthy state is the committed one.
class AgentFactory {
 public:
  AgentFactory(std::string data_dir, core::AgentConfig config, crypto::Identity identity,
               model::ClusterSpec cluster_spec, cluster::ExecOptions exec_options,
               const Clock& clock, ZmqTransport& transport, store::Store& store, core::Rng& rng,
               std::shared_ptr<spdlog::logger> logger)
      : data_dir_(std::move(data_dir)),
        config_(std::move(config)),
        identity_(std::move(identity)),
        cluster_spec_(std::move(cluster_spec)),
        exec_options_(std::move(exec_options)),
        clock_(clock),
        transport_(transport),
        store_(store),
        rng_(rng),
        logger_(std::move(logger)) {}

  // A fresh runner and cluster for the agent's backend, and an agent over
  // them; nothing started (Agent::start or load, through batch.h).
  Result<AgentInstance> make() const;

 private:
  std::string data_dir_;
  core::AgentConfig config_;
  crypto::Identity identity_;
  model::ClusterSpec cluster_spec_;
  cluster::ExecOptions exec_options_;  // the agent.yaml part; the rest is filled in make()
  const Clock& clock_;
  ZmqTransport& transport_;
  store::Store& store_;
  core::Rng& rng_;
  std::shared_ptr<spdlog::logger> logger_;
};

}  // namespace shoal::runtime

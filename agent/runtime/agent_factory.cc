#include "agent/runtime/agent_factory.h"

#include "agent/cluster/fair_share.h"
#include "agent/cluster/kubernetes/kube_runner.h"
#include "agent/cluster/slurm/slurm_runner.h"
#include "common/file.h"
#include "model/yaml_document.h"

namespace shoal::runtime {

Result<model::ClusterSpec> load_cluster_spec(const AgentFile& file) {
  if (file.cluster_config.empty()) return model::default_cluster_spec(file.cluster);
  SHOAL_ASSIGN_OR_RETURN(std::string text, read_bounded_file(file.cluster_config, model::kMaxYamlBytes,
                                                             "cluster manifest"));
  Result<model::ClusterSpec> parsed = model::parse_cluster(text);
  if (!parsed.is_ok()) return parsed.status().with_context(file.cluster_config);
  model::ClusterSpec spec = std::move(parsed).value();
  if (spec.name != file.cluster) {
    return invalid_argument("cluster manifest metadata.name: expected \"" + file.cluster +
                            "\" (the agent's cluster), got \"" + spec.name + "\"");
  }
  if (spec.slurm) {
    // The nodes are Slurm's, as it has them at start (a node added to the
    // partition later is used after a restart).
    SHOAL_ASSIGN_OR_RETURN(spec.nodes, cluster::slurm::discover_nodes(*spec.slurm));
  }
  if (spec.kubernetes) {
    // The API server's Nodes as they are at start (one that joins later is
    // found by the runner's watch); cordoned, NotReady or tainted ones count
    // as full.
    Result<std::vector<model::NodeSpec>> nodes = cluster::kubernetes::discover_nodes(*spec.kubernetes);
    if (!nodes.is_ok()) return nodes.status().with_context(file.cluster_config);
    spec.nodes = std::move(nodes).value();
  }
  SHOAL_RETURN_IF_ERROR(cluster::FairShareScheduler::create(spec).status());
  return spec;
}

Result<AgentInstance> AgentFactory::make() const {
  std::unique_ptr<cluster::Runner> runner;
  if (cluster_spec_.backend == "exec") {
    // A fresh runner re-adopts from the work directories what still runs:
    // the core launches every bound copy again after a restore.
    cluster::ExecOptions options = exec_options_;
    options.work_root = data_dir_ + "/work";
    options.monitor_path = cluster::default_monitor_path();
    options.cluster_name = config_.cluster;
    options.cgroup_root = cluster::find_writable_cgroup();
    runner = std::make_unique<cluster::ExecRunner>(std::move(options));
  } else if (cluster_spec_.slurm) {
    // A fresh runner lists every job first and re-adopts the copies it
    // finds by their tags: the core launches every bound copy again.
    cluster::slurm::SlurmRunnerOptions options;
    options.spec = *cluster_spec_.slurm;
    SHOAL_ASSIGN_OR_RETURN(options.client, cluster::slurm::client_options(options.spec));
    options.cluster_name = config_.cluster;
    options.state_dir = data_dir_ + "/slurm";
    // Not under the data directory, which is private: jobs run as Slurm's
    // user for them and could not reach it. /var/tmp is on every host;
    // a partition of many nodes needs a shared outputDir instead.
    options.output_dir = options.spec.output_dir.empty()
                             ? "/var/tmp/shoal-" + config_.cluster + "-slurm-output"
                             : options.spec.output_dir;
    options.keep_finished = exec_options_.keep_finished;
    SHOAL_ASSIGN_OR_RETURN(runner, cluster::slurm::SlurmRunner::create(std::move(options)));
  } else if (cluster_spec_.kubernetes) {
    // A fresh runner lists every pod first and re-adopts the copies it
    // created by their names: the core launches every bound copy again.
    cluster::kubernetes::KubeRunnerOptions options;
    options.spec = *cluster_spec_.kubernetes;
    SHOAL_ASSIGN_OR_RETURN(options.config, cluster::kubernetes::config_for(options.spec));
    options.cluster_name = config_.cluster;
    options.state_dir = data_dir_ + "/kubernetes";
    options.keep_finished = exec_options_.keep_finished;
    options.logger = logger_;
    options.nodes = cluster_spec_.nodes;
    SHOAL_ASSIGN_OR_RETURN(runner, cluster::kubernetes::KubeRunner::create(std::move(options)));
  } else {
    runner = std::make_unique<cluster::SimRunner>();
  }
  SHOAL_ASSIGN_OR_RETURN(std::unique_ptr<cluster::NodeCluster> cluster,
                         cluster::NodeCluster::create(cluster_spec_, std::move(runner)));
  std::unique_ptr<core::Agent> agent =
      core::make_agent(config_, identity_, clock_, transport_, store_, *cluster, rng_, logger_);
  return AgentInstance{std::move(cluster), std::move(agent)};
}

}  // namespace shoal::runtime

// The router: the one implementation of both faces of an agent, the step
// contract (agent.h) and the operator's (operations.h). It checks each
// message (trust, replay, permission), hands it to the part that owns it —
// PeerTable, InvitationBook, SourceRole, TargetRole — and owns the step's
// effects (agent/core/README.md). Internal to agent/core: the runtime, the
// simulator and the tests hold an Agent from make_agent.
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "agent/cluster/cluster.h"
#include "agent/core/agent.h"
#include "agent/core/config.h"
#include "agent/core/context.h"
#include "agent/core/interfaces.h"
#include "agent/core/invitation_book.h"
#include "agent/core/operations.h"
#include "agent/core/peer_table.h"
#include "agent/core/remote_logs.h"
#include "agent/core/source/role.h"
#include "agent/core/target/role.h"
#include "agent/core/views.h"
#include "crypto/id_card.h"
#include "crypto/identity.h"
#include "protocol/envelope.h"
#include "protocol/messages.h"
#include "store/store.h"

namespace spdlog {
class logger;
}

namespace shoal::core {

class Router final : public Agent, public Operations {
 public:
  Router(AgentConfig config, crypto::Identity identity, const Clock& clock, Transport& transport,
         store::Store& store, cluster::Cluster& cluster, Rng& rng,
         std::shared_ptr<spdlog::logger> logger, const crypto::SignatureScheme& signatures);
  ~Router() override;

  // ---- Agent: the step contract (agent.h) ----
  Status start() override;
  Status load() override;
  size_t handle_wire(std::span<const uint8_t> wire) override;
  void tick() override;
  Operations& operations() override { return *this; }
  const Operations& operations() const override { return *this; }
  Status finish_batch() override;
  const Status& store_health() const override { return context_.store_health(); }
  uint64_t envelopes_sent() const override { return context_.stats().envelopes_sent; }
  bool has_launches() const override { return target_.has_launches(); }
  Duration commit_linger() const override {
    Duration lazy = context_.lazy_delay();
    return lazy.count() == 0 ? lazy : std::max(lazy, context_.config().heartbeat_interval / 2);
  }
  void batch_committed() override;
  TimePoint now() const override { return context_.now(); }
  TimePoint next_deadline() override;
  std::string broken_invariant() override;

  // ---- Operations: the operator's face (operations.h; operations.cc) ----
  using Operations::create_invitation;
  std::string id_card() const override;
  const std::string& self_id() const override { return context_.self_id(); }
  Result<std::string> create_invitation(std::string_view to_card,
                                        const InvitationOptions& options) override;
  Status revoke_invitation(const std::string& id, bool evict) override;
  Result<std::string> accept_invitation(std::string_view token) override;
  std::vector<InvitationView> invitations() const override;
  bool admits_connection(const std::string& peer_id) const override;
  std::vector<std::string> peer_ids() const override;
  std::vector<PeerView> peers() const override;
  Result<PeerForgotten> forget_peer(const std::string& name) override;
  Status set_quota(const model::QuotaSpec& quota) override;
  Status delete_quota(const std::string& namespace_name) override;
  std::vector<QuotaView> quotas() const override;
  Result<std::vector<std::string>> submit(const std::vector<model::WorkloadSpec>& specs) override;
  Status delete_workload(const std::string& namespace_name, const std::string& name) override;
  Status force_delete_workload(const std::string& namespace_name,
                               const std::string& name) override;
  Status set_priority(const std::string& namespace_name, const std::string& name,
                      int32_t priority) override;
  Status nominate(const std::string& namespace_name, const std::string& name,
                  const std::vector<std::string>& clusters) override;
  std::vector<store::WorkloadRecord> workloads() const override;
  WorkloadPage workloads_page(const std::string& namespace_name, const std::string& after,
                              size_t limit) const override {
    return source_.book().workloads_page(namespace_name, after, limit);
  }
  std::vector<store::WorkloadRecord> copies_of(const std::string& uid) const override;
  std::optional<store::WorkloadRecord> find_workload(const std::string& namespace_name,
                                                     const std::string& name) const override;
  std::optional<store::WorkloadRecord> workload_by_uid(const std::string& uid) const override;
  WorkloadCounts workload_counts() const override { return source_.workload_counts(); }
  std::vector<LiveCluster> live_inventory(const std::string& namespace_name,
                                          const std::string& queue) const override {
    return source_.live_inventory(namespace_name, queue);
  }
  Result<std::vector<store::EventRecord>> events(const std::string& subject) override;
  void watch_workloads(bool on) override { source_.book().watch_changes(on); }
  std::vector<store::WorkloadRecord> take_workload_changes() override {
    return source_.book().take_changes();
  }
  Result<LogRead> read_log(const store::WorkloadRecord& record, int replica, int64_t offset,
                           size_t max_bytes) override;
  std::optional<Result<cluster::LogChunk>> take_peer_log(uint64_t id) override {
    return remote_logs_.take(id);
  }
  void abandon_peer_log(uint64_t id) override { remote_logs_.abandon(id); }
  Result<cluster::LogChunk> read_hosted_log(const std::string& namespace_name,
                                            const std::string& name, int replica, int64_t offset,
                                            size_t max_bytes) override;
  Status stop_hosted(const std::string& namespace_name, const std::string& name,
                     const std::string& from_cluster) override;
  std::vector<store::ReservationRecord> reservations() const override;
  std::map<std::string, model::UsageCounts> namespace_counts() const override {
    return target_.counts().by_namespace();
  }
  model::UsageCounts cluster_counts() const override { return target_.counts().cluster(); }
  std::map<std::pair<std::string, std::string>, int64_t> queue_depths() const override {
    return target_.counts().queue_depths();
  }
  const AgentStats& stats() const override { return context_.stats(); }
  uint64_t boot() const override { return context_.boot(); }

 private:
  // An accepted envelope's sender: its row and its invitations on record,
  // found once for every check and mark of the envelope's messages.
  struct Sender {
    PeerTable::Row row;
    InvitationBook::OnRecord invitations;
  };
  // A known peer's invitations on record, from its row's copy while the
  // book has made no new index entry since (else looked up and kept).
  const InvitationBook::OnRecord& invitations_of(TextMap<PeerTable::Peer>::value_type& row);
  // One message of an accepted envelope: type, body and permission checks,
  // then dispatch. False if it was dropped.
  bool handle_message(const std::string& from, const Sender& sender, uint8_t type,
                      std::span<const uint8_t> bytes);
  // `sender` is null for our own messages.
  void dispatch(const std::string& from, const protocol::Body& body, const Sender* sender);
  void drain_local();
  void drop(protocol::DropReason reason, const std::string& peer, const std::string& detail);
  void on_hello(const std::string& from, const Sender& sender, const protocol::Hello& hello);
  void on_revoke(const std::string& from, const protocol::Revoke& message);
  // HELLO to every peer we sent nothing since `silent_since` (a source or
  // a target of ours).
  void send_heartbeats(TimePoint silent_since);
  void remember_peer(const crypto::IdCard& card);
  // forget_peer's steps: the peer it names, and every invitation with it revoked.
  Result<std::string> forgettable_peer(const std::string& name) const;
  Result<std::vector<std::string>> revoke_all_with(const std::string& peer_id);
  // The end of a control mutation: self-addressed messages handled, peer
  // rows written; the first store failure, if any.
  Status end_control();
  bool is_source(const std::string& peer_id) const {
    return invitations_.is_source(peer_id, context_.now());
  }
  bool is_target(const std::string& peer_id) const {
    return invitations_.is_target(peer_id, context_.now());
  }

  PeerTable peers_;
  Context context_;
  InvitationBook invitations_;
  target::TargetRole target_;
  source::SourceRole source_;
  RemoteLogs remote_logs_;
  TimePoint last_heartbeat_{};
  TimePoint last_tick_{};
  std::map<std::string, TimePoint> last_drop_log_;
};

}  // namespace shoal::core

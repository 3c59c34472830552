// A deterministic little world for the agent core: a fake clock, an
// in-memory network that can drop messages, and agents with real SQLite
// stores (files, so an agent can be "restarted") and sim clusters.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "agent/cluster/node_cluster.h"
#include "agent/core/agent.h"
#include "agent/core/batch.h"
#include "store/sqlite/sqlite_store.h"
#include "tests/sim/clocks.h"

namespace shoal::core::testing {

// The world's clock, and each agent's skewed view of it.
using FakeClock = sim::VirtualClock;
using sim::SkewedClock;

class CountingRng final : public Rng {
 public:
  uint64_t next() override { return ++counter_ * 0x9E3779B97F4A7C15ull; }

 private:
  uint64_t counter_ = 0;
};

// One message in flight. Agents seal everything one step sends to a peer
// into one envelope (a BATCH); the world splits it so that a test can see,
// drop or hold each message on its own, and re-joins what it delivers.
struct Wire {
  std::string from;
  std::string to;
  // This message alone, sealed as its envelope was (same boot and seq):
  // deliverable by hand, once.
  std::vector<uint8_t> bytes;
  protocol::MessageType type;
  // The envelope it was sealed in, and how many messages that carried; the
  // world delivers `sealed` as it is when nothing of it was dropped.
  uint64_t envelope = 0;
  size_t parts = 1;
  std::shared_ptr<const std::vector<uint8_t>> sealed;
};

class QueueTransport final : public Transport {
 public:
  QueueTransport(std::string self, const crypto::Identity& identity)
      : self_(std::move(self)), identity_(identity) {}
  void send(const std::string& peer_id, const std::string&, std::vector<uint8_t> wire) override {
    protocol::DropReason reason;
    auto envelope = protocol::open(wire, &reason);
    EXPECT_TRUE(envelope.is_ok()) << envelope.status().message();
    if (!envelope.is_ok()) return;
    auto sealed = std::make_shared<const std::vector<uint8_t>>(std::move(wire));
    uint64_t id = ++next_envelope_;
    if (envelope->type != protocol::MessageType::kBatch) {
      outbox.push_back({self_, peer_id, *sealed, envelope->type, id, 1, sealed});
      return;
    }
    auto items = protocol::decode_batch(envelope->body);
    EXPECT_TRUE(items.is_ok()) << items.status().message();
    if (!items.is_ok()) return;
    for (protocol::BatchItem& item : *items) {
      protocol::Envelope alone = *envelope;
      alone.type = static_cast<protocol::MessageType>(item.type);
      alone.body = std::move(item.body);
      outbox.push_back({self_, peer_id, protocol::seal(alone, identity_), alone.type, id,
                        items->size(), sealed});
    }
  }
  // What a batch sent goes to the outbox at once (tests read and drop from
  // it); a batch that rolls back takes back what it added since its start.
  void mark_batch_start() { batch_start_ = outbox.size(); }
  void release_batch() override { batch_start_ = outbox.size(); }
  void drop_batch() override { outbox.resize(std::min(batch_start_, outbox.size())); }
  std::vector<Wire> outbox;

 private:
  size_t batch_start_ = 0;
  std::string self_;
  const crypto::Identity& identity_;
  // Across restarts too: envelope ids must not repeat within one delivery.
  inline static uint64_t next_envelope_ = 0;
};

// The envelope that carries `kept` (messages of one envelope, in order): the
// original when none of its messages was dropped, else the kept ones alone,
// sealed by their sender under the original boot and seq.
inline std::vector<uint8_t> rejoin(const std::vector<const Wire*>& kept,
                                   const crypto::Identity& sender) {
  if (kept.size() == kept.front()->parts) return *kept.front()->sealed;
  if (kept.size() == 1) return kept.front()->bytes;
  protocol::DropReason reason;
  protocol::Envelope envelope = std::move(protocol::open(*kept.front()->sealed, &reason)).value();
  std::vector<protocol::BatchItem> items;
  for (const Wire* w : kept) {
    items.push_back({static_cast<uint8_t>(w->type), protocol::open(w->bytes, &reason)->body});
  }
  envelope.body = protocol::encode_batch(items);
  return protocol::seal(envelope, sender);
}

struct Node {
  std::string name;
  std::string db_path;
  crypto::Identity identity;
  std::string id;
  std::unique_ptr<store::sqlite::SqliteStore> store;
  std::unique_ptr<cluster::NodeCluster> cluster;
  std::unique_ptr<QueueTransport> transport;
  std::unique_ptr<Agent> agent;
  std::unique_ptr<SkewedClock> clock;
  // Set: the node's next step crashes before its batch commits (the batch
  // is rolled back, nothing it sent leaves, and the node restarts).
  bool crash_in_next_step = false;
  // SIGSTOP in the small: a frozen node neither ticks nor reads; what is
  // sent to it waits here, in order, until it thaws.
  bool frozen = false;
  std::vector<Wire> held;
};

class World {
 public:
  World() {
    EXPECT_TRUE(crypto::initialize().is_ok());
    char pattern[] = "/tmp/shoal-world.XXXXXX";
    dir_ = mkdtemp(pattern);
  }
  ~World() {
    nodes_.clear();
    std::filesystem::remove_all(dir_);
  }

  // A node with `nodes` nodes of `cpu_each` millicores.
  Node& add(const std::string& name, int nodes = 4, int64_t cpu_each = 8000,
            const std::function<void(model::ClusterSpec&)>& customize = nullptr) {
    auto node = std::make_unique<Node>();
    node->name = name;
    node->db_path = dir_ + "/" + name + ".db";
    node->identity = crypto::Identity::generate();
    node->id = crypto::key_to_text(node->identity.public_key());
    model::ClusterSpec spec;
    spec.name = name;
    for (int i = 0; i < nodes; ++i) {
      spec.nodes.push_back({"node-" + std::to_string(i), {cpu_each, int64_t{32} << 30, 0}, {}});
    }
    spec.queues = {{"default", 1}};
    if (customize) customize(spec);
    cluster_specs_[name] = spec;
    Duration skew{0};
    if (max_skew_.count() > 0) {
      skew = Duration(std::uniform_int_distribution<int64_t>(-max_skew_.count() / 2,
                                                             max_skew_.count() / 2)(skew_rng_));
    }
    node->clock = std::make_unique<SkewedClock>(clock_, skew);
    Node& ref = *node;
    nodes_.push_back(std::move(node));
    boot(ref);
    return ref;
  }

  // Agents added from now on have clocks off the world's by a seeded skew in
  // [-max/2, max/2], so any two differ by at most `max`.
  void skew_clocks(Duration max, uint32_t seed) {
    max_skew_ = max;
    skew_rng_.seed(seed);
  }

  // One step of `node` as the runtime runs it: inside a store batch that
  // commits, after which what it sent may leave. A failed write, or a crash
  // (crash_in_next_step), rolls the batch back and nothing it sent leaves;
  // a crash then restarts the node from what was committed.
  void step(Node& node, const std::function<void()>& work) {
    node.transport->mark_batch_start();
    BatchOutcome batch = run_batch(
        *node.agent, *node.store, *node.transport,
        [&] {
          work();
          return Status::ok();
        },
        [&] { return node.crash_in_next_step; });
    if (batch.end == BatchEnd::kCommitted) {
      // Every step ends with the agent whole: its deadlines' plans among them.
      EXPECT_EQ(node.agent->broken_invariant(), "") << node.name << " after a step";
      return;
    }
    bool crash = batch.end == BatchEnd::kAbandoned;
    node.crash_in_next_step = false;
    if (crash) {
      // What earlier, committed steps sent had left before the crash.
      std::vector<Wire> already_sent = std::move(node.transport->outbox);
      restart(node);
      node.transport->outbox.insert(node.transport->outbox.begin(), already_sent.begin(),
                                    already_sent.end());
    } else {
      ADD_FAILURE() << node.name << ": a store write failed: " << batch.why.message();
    }
  }

  // Simulates a crash and restart: memory is lost, the database file stays.
  void restart(Node& node) {
    node.agent.reset();
    node.store.reset();
    boot(node);
  }

  // `target` invites `source` into `namespaces`.
  void invite(Node& target, Node& source, std::vector<std::string> namespaces = {"default"}) {
    crypto::IdCard card{source.name, "org", source.identity.public_key(), "tcp://" + source.name + ":1"};
    auto token = target.agent->operations().create_invitation(card.to_string(), namespaces);
    ASSERT_TRUE(token.is_ok()) << token.status().message();
    auto accepted = source.agent->operations().accept_invitation(*token);
    ASSERT_TRUE(accepted.is_ok()) << accepted.status().message();
  }

  // `target` invites `source` with `options`; returns the invitation id.
  std::string invite(Node& target, Node& source, const InvitationOptions& options) {
    crypto::IdCard card{source.name, "org", source.identity.public_key(), "tcp://" + source.name + ":1"};
    auto token = target.agent->operations().create_invitation(card.to_string(), options);
    EXPECT_TRUE(token.is_ok()) << token.status().message();
    if (!token.is_ok()) return "";
    EXPECT_TRUE(source.agent->operations().accept_invitation(*token).is_ok());
    auto opened = crypto::open_token(*token);
    return opened.is_ok() ? opened->id : "";
  }

  // Delivers queued messages (and the answers they cause) until the network
  // is quiet; `keep` may drop any of them.
  void deliver(const std::function<bool(const Wire&)>& keep = nullptr) {
    // A control call made outside step() wrote with autocommit: its effects
    // on the cluster are due now.
    for (auto& node : nodes_) {
      if (node->agent) node->agent->batch_committed();
    }
    for (int round = 0; round < 1000; ++round) {
      std::vector<Wire> in_flight;
      for (auto& node : nodes_) {
        for (auto& w : node->transport->outbox) in_flight.push_back(std::move(w));
        node->transport->outbox.clear();
      }
      if (in_flight.empty()) return;
      // One delivery per envelope, of the messages `keep` let through.
      for (size_t first = 0; first < in_flight.size();) {
        size_t end = first + 1;
        while (end < in_flight.size() && in_flight[end].envelope == in_flight[first].envelope &&
               in_flight[end].from == in_flight[first].from) {
          ++end;
        }
        std::vector<const Wire*> kept;
        for (size_t i = first; i < end; ++i) {
          if (!keep || keep(in_flight[i])) kept.push_back(&in_flight[i]);
        }
        first = end;
        if (kept.empty()) continue;
        Node* from = find(kept.front()->from);
        Node* to = find(kept.front()->to);
        if (!from || !to) continue;
        Wire joined = *kept.front();
        joined.bytes = rejoin(kept, from->identity);
        if (to->frozen) {
          to->held.push_back(std::move(joined));
        } else if (to->agent) {
          step(*to, [&] { to->agent->handle_wire(joined.bytes); });
        }
      }
    }
    ADD_FAILURE() << "network never went quiet";
  }

  // Advances time in steps, ticking every agent and delivering after each.
  void run_for(Duration total, Duration step_length = Duration(250),
               const std::function<bool(const Wire&)>& keep = nullptr) {
    for (Duration passed{0}; passed < total; passed += step_length) {
      clock_.advance(step_length);
      for (auto& node : nodes_) {
        if (node->agent && !node->frozen) step(*node, [&] { tick_until_idle(*node); });
      }
      deliver(keep);
    }
  }

  // Advances time as the runtime does: each agent ticks only when its
  // next_deadline() is due, and `lateness` after it (a real loop always
  // wakes a little late), not on a fixed beat.
  void run_as_runtime_for(Duration total, Duration lateness = Duration(1),
                          const std::function<bool(const Wire&)>& keep = nullptr) {
    TimePoint end = clock_.now() + total;
    for (int steps = 0; steps < 1'000'000 && clock_.now() < end; ++steps) {
      TimePoint next = end;
      for (auto& node : nodes_) {
        if (!node->agent || node->frozen) continue;
        TimePoint deadline = node->agent->next_deadline();  // may be TimePoint::min()
        if (deadline <= node->clock->now()) {
          next = clock_.now();
          continue;
        }
        Duration skew = node->clock->now() - clock_.now();
        next = std::min(next, deadline - skew + lateness);
      }
      clock_.advance(std::max(next - clock_.now(), Duration(1)));
      for (auto& node : nodes_) {
        if (node->agent && !node->frozen && node->agent->next_deadline() <= node->clock->now()) {
          step(*node, [&] { tick_until_idle(*node); });
        }
      }
      deliver(keep);
    }
  }

  // A tick, and more while the agent says something is due now, as the
  // runtime ticks; a timer that stays due after its ticks would make the
  // runtime spin, so it fails the test.
  static void tick_until_idle(Node& node) {
    node.agent->tick();
    for (int again = 0; again < 3 && node.agent->next_deadline() <= node.clock->now(); ++again) {
      node.agent->tick();
    }
    EXPECT_GT(node.agent->next_deadline(), node.clock->now())
        << node.name << ": a timer is still due after its tick (the runtime would spin)";
  }

  // Time passes and nobody steps (a test that runs batches by hand).
  void advance_clock(Duration d) { clock_.advance(d); }

  void freeze(Node& node) { node.frozen = true; }

  // SIGCONT. `read_first`: the node reads what waited for it before its
  // first tick (as the runtime does when the messages are already in its
  // socket); otherwise it ticks first, as when the kernel has not handed the
  // bytes over yet, and reads them after. `woke` runs before anything the
  // node sent on waking is delivered.
  void thaw(Node& node, bool read_first, const std::function<void()>& woke = nullptr) {
    node.frozen = false;
    std::vector<Wire> held = std::move(node.held);
    node.held.clear();
    if (!read_first) step(node, [&] { node.agent->tick(); });
    for (const Wire& w : held) step(node, [&] { node.agent->handle_wire(w.bytes); });
    if (read_first) step(node, [&] { node.agent->tick(); });
    if (woke) woke();
    deliver();
  }

  Node* find(const std::string& id) {
    for (auto& node : nodes_) {
      if (node->id == id) return node.get();
    }
    return nullptr;
  }

  FakeClock& clock() { return clock_; }

  // Applied to every agent's config at (re)boot, before start().
  std::function<void(AgentConfig&)> configure;
  // The runner behind a node's cluster at (re)boot, by node name; the sim
  // runner when unset or when it returns null.
  std::function<std::unique_ptr<cluster::Runner>(const std::string&)> runner_for;

 private:
  void boot(Node& node) {
    auto store = store::sqlite::SqliteStore::open(node.db_path);
    ASSERT_TRUE(store.is_ok()) << store.status().message();
    node.store = std::move(store).value();
    std::unique_ptr<cluster::Runner> runner = runner_for ? runner_for(node.name) : nullptr;
    auto cluster = runner ? cluster::NodeCluster::create(cluster_specs_[node.name], std::move(runner))
                          : cluster::make_sim_cluster(cluster_specs_[node.name]);
    ASSERT_TRUE(cluster.is_ok()) << cluster.status().message();
    node.cluster = std::move(cluster).value();
    node.transport = std::make_unique<QueueTransport>(node.id, node.identity);
    AgentConfig config;
    config.cluster = node.name;
    config.org = "org";
    config.endpoint = "tcp://" + node.name + ":1";
    // What these tests check step by step: every target asked at once, and
    // every message sent in the step that made it (deliver() lets no time
    // pass). The tests of Preferred and of deferred messages set their own.
    config.default_dispatcher = model::Dispatcher::kAllAtOnce;
    config.lazy_delay = Duration(0);
    if (configure) configure(config);
    node.agent = make_agent(config, node.identity, *node.clock, *node.transport, *node.store,
                            *node.cluster, rng_);
    node.transport->mark_batch_start();
    BatchOutcome started = run_batch(*node.agent, *node.store, *node.transport,
                                     [&] { return node.agent->start(); });
    ASSERT_EQ(started.end, BatchEnd::kCommitted) << started.why.message();
  }

  std::string dir_;
  FakeClock clock_;
  Duration max_skew_{0};
  std::mt19937 skew_rng_;
  CountingRng rng_;
  std::map<std::string, model::ClusterSpec> cluster_specs_;
  std::vector<std::unique_ptr<Node>> nodes_;
};

// Reservations at `node` that are or were bound (not merely reserved).
inline int bound_copies(Node& node, const std::string& uid) {
  int count = 0;
  for (const auto& r : node.agent->operations().reservations()) {
    count += r.uid == uid && r.phase != store::ReservationPhase::kReserved;
  }
  return count;
}

// The phase and reason of a workload in namespace "default" at `node`.
inline model::Phase phase_of(Node& node, const std::string& name) {
  auto record = node.agent->operations().find_workload("default", name);
  EXPECT_TRUE(record.has_value()) << name;
  return record ? record->phase : model::Phase::kPending;
}

inline std::string reason_of(Node& node, const std::string& name) {
  auto record = node.agent->operations().find_workload("default", name);
  return record ? record->reason : "";
}

// A message from `from` to `to` sealed with from's key, as its wire would
// carry it at `seq` of a boot later than any `from` has used: it is applied
// unless a higher seq of that boot was seen.
inline std::vector<uint8_t> forge(Node& from, Node& to, const protocol::Body& body, uint64_t seq,
                                  TimePoint now) {
  protocol::Envelope envelope;
  envelope.type = protocol::type_of(body);
  envelope.from = from.identity.public_key();
  envelope.to = to.identity.public_key();
  envelope.boot = 1'000'000;
  envelope.seq = seq;
  envelope.sent_at_ms = to_millis(now);
  envelope.body = protocol::encode_body(body);
  return protocol::seal(envelope, from.identity);
}

// Lifecycle timers in simulated seconds: lease 2s, worker lost after 6s.
inline void fast_lifecycle_timers(AgentConfig& config) {
  using namespace std::chrono_literals;
  config.lease = 2s;
  config.max_clock_skew = 500ms;
  config.worker_lost_timeout = 6s;
  config.gc_interval = 1s;
  config.pending_retry = 1s;
  config.pending_retry_max = 4s;
}

inline model::WorkloadSpec workload(const std::string& name, int64_t cpu_milli,
                                    Duration duration = Duration(2000),
                                    const std::string& namespace_name = "default") {
  model::WorkloadSpec spec;
  spec.name = name;
  spec.namespace_name = namespace_name;
  spec.resources = {cpu_milli, int64_t{1} << 30, 0};
  spec.sim.duration = duration;
  return spec;
}

// A source of one node of `source_cpu_milli` (by default too small for any
// of the work) and two default targets that invited it, peered.
struct SourceAndTwoTargets {
  SourceAndTwoTargets(const std::string& first, const std::string& second,
                      int64_t source_cpu_milli = 100)
      : source(world.add("source", 1, source_cpu_milli)),
        a(world.add(first)),
        b(world.add(second)) {
    world.invite(a, source);
    world.invite(b, source);
    world.run_for(std::chrono::seconds(3));
  }
  World world;
  Node& source;
  Node& a;
  Node& b;
};

}  // namespace shoal::core::testing

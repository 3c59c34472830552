// The federation simulator's engine: N agents — the real,
// unchanged core::Agent, each with a MemoryStore and a sim NodeCluster — in
// one process on one virtual clock, talking through the seeded Network.
//
// Time advances only by popping the event queue: a delivery, an agent's
// timer, a submission, a fault. Every step of an agent runs as the runtime
// runs one (agent/core/agent.h): Store::begin, the input, finish_batch,
// commit, and only then do its messages leave and its effects reach the
// cluster. Nothing reads the wall clock, the filesystem or an unseeded
// random source, so one seed is one run, bit for bit: digest() fingerprints
// every delivery and every agent's final records.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "agent/cluster/node_cluster.h"
#include "agent/core/agent.h"
#include "agent/core/batch.h"
#include "common/time.h"
#include "crypto/identity.h"
#include "tests/sim/clocks.h"
#include "tests/sim/memory_store.h"
#include "tests/sim/network.h"
#include "tests/sim/watched_cluster.h"
#include "tests/sim/workers.h"

namespace shoal::sim {

// splitmix64: the agents' injected randomness, one stream per agent and boot.
class SeededRng final : public core::Rng {
 public:
  explicit SeededRng(uint64_t seed) : state_(seed) {}
  uint64_t next() override;

 private:
  uint64_t state_;
};

uint64_t mix(uint64_t a, uint64_t b);

// What the agent handed its transport during one step, by recipient agent:
// held while the step's batch is open, in `sent` once it committed (the
// engine routes it from there), dropped when it rolled back. A message to
// a key nobody in this world holds goes nowhere, as to an endpoint nobody
// listens on.
class OutboxTransport final : public core::Transport {
 public:
  // `index_by_id`: the world's agents by peer id, only read (and so shared
  // by the steps of one instant), outliving the transport.
  explicit OutboxTransport(const std::unordered_map<std::string, uint32_t>& index_by_id)
      : index_by_id_(index_by_id) {}
  void send(const std::string& peer_id, const std::string&, std::vector<uint8_t> wire) override {
    auto to = index_by_id_.find(peer_id);
    if (to != index_by_id_.end()) held.emplace_back(to->second, std::move(wire));
  }
  void release_batch() override {
    if (sent.empty()) {
      sent.swap(held);
    } else {
      sent.insert(sent.end(), std::make_move_iterator(held.begin()), std::make_move_iterator(held.end()));
      held.clear();
    }
  }
  void drop_batch() override { held.clear(); }
  std::vector<std::pair<uint32_t, std::vector<uint8_t>>> held;  // by the open batch
  std::vector<std::pair<uint32_t, std::vector<uint8_t>>> sent;  // released, not yet routed

 private:
  const std::unordered_map<std::string, uint32_t>& index_by_id_;
};

// A preemption a target carried out in a step that committed, and the
// approval that asked for it: the APPROVE for the preemptor's uid from its
// source in the envelope that step delivered (none when the step was no
// such delivery).
struct PreemptionSeen {
  uint32_t target = 0;
  std::string source;  // peer id
  std::string uid;
  std::vector<std::string> victims;
  TimePoint at{};
  std::optional<uint64_t> approved_epoch;
};

// One agent of the federation and everything that outlives its crashes
// (identity, committed store, the spec of its cluster).
struct SimAgent {
  uint32_t index = 0;
  std::string name;
  uint32_t org = 0;
  crypto::Identity identity;
  std::string id;  // peer id
  model::ClusterSpec cluster_spec;
  std::unique_ptr<SkewedClock> clock;
  std::unique_ptr<MemoryStore> store;
  // Gone while the agent is down.
  std::unique_ptr<cluster::NodeCluster> cluster;
  std::unique_ptr<WatchedCluster> watched;  // over `cluster`: what the agent drives
  std::unique_ptr<SeededRng> rng;
  std::unique_ptr<OutboxTransport> transport;
  std::unique_ptr<core::Agent> agent;
  uint32_t boots = 0;
  bool frozen = false;  // SIGSTOP: reads and ticks nothing until thawed
  // Its store failed a batch: as the runtime's read-only mode, rebuilt
  // from what was committed, it reads no peer message, ticks nothing and
  // takes no request until a probe write succeeds; then it starts again (a
  // new boot) and reads what waited for it.
  bool read_only = false;
  bool paused() const { return frozen || read_only; }
  // Since its last boot: until its first tick, a restarted agent's records
  // are as old as its crash (it re-attaches its copies, then its first tick
  // takes what they did and fences lapsed leases, dated at the lease end).
  bool ticked_since_boot = false;
  bool crash_in_next_step = false;       // the next step dies before it commits
  // Its quiet batches left open (FederationOptions::group_commit); reset
  // at every boot, lost with a crash.
  core::GroupCommit group;
  TimePoint wake_at = TimePoint::max();  // world time of its pending timer event
  // The envelope the running step delivers (null in a timer or control
  // step), and the preemptions of the running step, handed to the world
  // once its batch commits.
  const std::vector<uint8_t>* delivering = nullptr;
  std::vector<PreemptionSeen> step_preemptions;
  bool up() const { return agent != nullptr; }
};

struct FederationOptions {
  uint64_t seed = 1;
  NetworkOptions network;
  // Applied to every agent's config at every boot.
  std::function<void(core::AgentConfig&)> configure;
  // Threads that run the steps of one instant (Federation::run_instant).
  // The run is the same for every count: only its wall time differs.
  int threads = 1;
  // Ed25519, as agents sign; by default the simulator's cheaper stand-in
  // (simulated_signatures.h), which decides alike.
  bool real_signatures = false;
  // Group commit as shoald runs it (core::GroupCommit, batch.h): a quiet
  // batch stays open for up to the agent's commit_linger(), and a crash
  // loses the open group. Off: every batch commits.
  bool group_commit = false;
};

class Federation {
 public:
  explicit Federation(FederationOptions options);
  ~Federation();

  // An agent of `org` running `spec`; its identity and skew derive from the
  // seed and its index. Boots it at the current time.
  SimAgent& add_agent(model::ClusterSpec spec, uint32_t org, Duration skew);
  // `target` invites `source` (as `shoalctl invite` + `accept` would).
  Status invite(SimAgent& target, SimAgent& source, const core::InvitationOptions& options);

  // Scheduled inputs, run when the clock reaches `at`.
  void at(TimePoint at, std::function<void()> action);
  // A control step on `agent` now (submit, delete...): inside a batch, as
  // the runtime runs one; skipped (false) while the agent is down or frozen.
  bool control(SimAgent& agent, const std::function<void(core::Agent&)>& request);
  // The same at `when`, run among the deliveries and timers of its instant:
  // on a worker thread with them, so the requests of many agents (every
  // arrival of a large run) no longer run one by one. `then` runs after
  // it, on the caller's thread and in event order, told whether the
  // request ran in a step that committed (false: the agent was down or
  // frozen, or died in that step). The run is the same as an at() that
  // calls control(). Other steps of the instant may still be running on
  // other threads when `then` runs: it may read the world and schedule
  // (at, at_control), but must not step, crash, freeze or restart an agent.
  using Request = std::function<void(core::Agent&)>;
  void at_control(TimePoint when, SimAgent& agent, Request request,
                  std::function<void(bool ran)> then);

  // Faults.
  // The process dies now: what its open batch wrote is lost, its cluster's
  // work with it (the sim backend's work lives in the process; it restarts
  // from the committed reservations). It stays down until restart().
  void crash(SimAgent& agent);
  void restart(SimAgent& agent);
  // Every running agent commits what its quiet batches left open, as shoald
  // does when it stops (the records are then what the agents decided).
  void commit_open_groups();
  void freeze(SimAgent& agent) { agent.frozen = true; }
  void thaw(SimAgent& agent);
  // Its disk fails (MemoryStore::Failure) from now until set to kNone: the
  // next batch that writes rolls back and the agent turns read-only.
  void fail_store(SimAgent& agent, MemoryStore::Failure failure) { agent.store->set_failure(failure); }
  Network& network() { return network_; }

  // Pops events until the clock would pass `end` (then sets it to `end`),
  // or `stop` says so after an event. Returns false when stopped.
  bool run_until(TimePoint end, const std::function<bool()>& stop = nullptr);

  TimePoint now() const { return clock_.now(); }
  TimePoint start_time() const { return start_; }
  std::vector<std::unique_ptr<SimAgent>>& agents() { return agents_; }
  SimAgent* by_id(const std::string& id) {
    auto it = index_by_id_.find(id);
    return it == index_by_id_.end() ? nullptr : agents_[it->second].get();
  }

  // Problems the engine itself saw (a timer still due after its ticks, a
  // store write that failed): each is a broken contract, not a fault.
  std::vector<std::string> take_engine_findings() { return std::exchange(engine_findings_, {}); }
  // Every preemption carried out since the last call, in event order.
  std::vector<PreemptionSeen> take_preemptions() { return std::exchange(preemptions_, {}); }

  // Fingerprint of the run so far: every delivery (time, link, bytes) and
  // every step. Equal digests, equal runs.
  uint64_t digest() const { return digest_; }

  struct Stats {
    uint64_t events = 0, steps = 0, deliveries = 0, crashes = 0, restarts = 0;
    uint64_t read_only = 0;  // times an agent turned read-only (its store failed a batch)
    // Instants whose steps went to the worker threads (several agents'
    // steps, FederationOptions::threads > 1).
    uint64_t shared_instants = 0;
    // Group commit: batches left open, and crashes that lost an open group.
    uint64_t batches_left_open = 0, open_groups_lost = 0;
  };
  const Stats& stats() const { return stats_; }

 private:
  // A delivery or an agent's timer.
  struct Event {
    TimePoint at{};
    uint64_t seq = 0;  // FIFO among equal times: deterministic
    enum class Kind : uint8_t { kDeliver, kWake, kControl } kind = Kind::kWake;
    uint32_t agent = 0;
    uint32_t control = 0;  // kControl: its slot in controls_
    // kControl: that slot's request, reached without indexing controls_,
    // which the caller's thread may grow while steps run (a `then` that
    // schedules another control step).
    const Request* request = nullptr;
    std::shared_ptr<const std::vector<uint8_t>> bytes;  // kDeliver
    bool operator>(const Event& other) const {
      return at != other.at ? at > other.at : seq > other.seq;
    }
  };
  // A scheduled input (at()). Numbered from the same sequence as events:
  // the two queues together are one order by (at, seq).
  struct Action {
    TimePoint at{};
    uint64_t seq = 0;
    std::function<void()> run;  // unless a control step (at_control)
    bool is_control = false;
    uint32_t agent = 0;    // a control step's
    uint32_t control = 0;  // and its slot in controls_
    bool operator>(const Action& other) const {
      return at != other.at ? at > other.at : seq > other.seq;
    }
  };
  // What a step sent, its recipient found (on the step's own thread).
  struct Outgoing {
    uint32_t to = 0;
    std::shared_ptr<const std::vector<uint8_t>> bytes;
  };

  // What one step hands the world: the digest's inputs, what the agent
  // sent, its next timer, what went wrong. A step changes only its own
  // agent; apply() then changes the world, in event order.
  struct StepEffects {
    bool control_ran = false;  // a kControl event's request ran and committed
    bool delivered = false;
    uint64_t delivery_hash = 0;
    bool stepped = false;
    std::vector<Outgoing> sent;  // to agents of this world, in the order sent
    TimePoint wake = TimePoint::max();  // a timer event to queue, unless max
    std::vector<std::string> findings;
    std::vector<PreemptionSeen> preemptions;
    bool left_open = false;  // the batch joined an open group (not committed)
  };
  void push(Event event);
  Event pop();  // the earliest
  Action pop_action();  // the earliest
  // Whether the next input is an action (else an event, or nothing).
  bool action_is_next() const;
  void boot(SimAgent& agent);
  // One runtime step of `agent`: begin, work, finish, commit, send, effects.
  // A fresh agent over the committed store (cluster, transport, randomness
  // and core::Agent, a new boot's); false if its cluster spec is refused.
  bool build(SimAgent& agent);
  // How the world's agents sign (FederationOptions::real_signatures).
  const crypto::SignatureScheme& signatures() const;
  // `agent`'s cluster carried out a preemption for `key` in the running step.
  void note_preemption(SimAgent& agent, const std::string& key, const std::vector<std::string>& victims);
  // The runtime's answer to a batch the store refused: the agent is rebuilt
  // read-only (core::load_read_only) and probes its store every
  // kStorageProbeInterval.
  void enter_read_only(SimAgent& agent);
  void probe_store(SimAgent& agent, uint32_t boots);
  // After a pause or a read-only spell: what waited for the agent is read,
  // in order, then its timers run; a step that turns it read-only leaves
  // the rest waiting.
  void read_what_waited(SimAgent& agent);
  static constexpr Duration kStorageProbeInterval = std::chrono::seconds(2);
  // `answered`: someone waits on the step's commit (a control request, a
  // start), so its batch commits even when quiet, as the runtime's does.
  void step(SimAgent& agent, const std::function<void()>& work, bool answered = false);
  // The step on the agent alone; its effects on the world go to `effects`.
  void run_step(SimAgent& agent, const std::function<void()>& work, StepEffects& effects,
                bool answered = false);
  // The same for work whose Status decides the batch (a failed one rolls it back).
  void run_batch_step(SimAgent& agent, const std::function<Status()>& work, StepEffects& effects,
                      bool answered = false);
  void apply(const SimAgent& agent, StepEffects& effects);
  void tick_until_idle(SimAgent& agent, StepEffects& effects);
  // Its next timer's world time, if not queued yet (else max); notes it in wake_at.
  TimePoint next_wake(SimAgent& agent);
  void deliver(SimAgent& agent, const std::vector<uint8_t>& bytes);
  void deliver_local(SimAgent& agent, const std::vector<uint8_t>& bytes, StepEffects& effects);
  void wake_local(SimAgent& agent, StepEffects& effects);
  // A delivery or timer of an agent that is up and not frozen.
  void run_local(const Event& event, StepEffects& effects);
  // The deliveries, timers and control steps of one instant, between two
  // other actions.
  void run_instant(const std::vector<Event>& events);
  // The second half of event `i` of the instant, on the caller's thread
  // and in event order: applies what its step did in a lane, or runs the
  // step here (an agent down, frozen or about to crash).
  void finish_event(const Event& event, size_t i);
  // A control action joins the events of its instant, at its place.
  void enqueue_control(const Action& action);
  // Runs a control step's `then` and frees its slot.
  void finish_control(uint32_t slot, bool ran);
  void fold(uint64_t value) { digest_ = mix(digest_, value); }

  FederationOptions options_;
  VirtualClock clock_;
  TimePoint start_;
  Network network_;
  std::vector<std::unique_ptr<SimAgent>> agents_;
  std::unordered_map<std::string, uint32_t> index_by_id_;
  // Min-heaps by (at, seq) (std::push_heap with std::greater): vectors
  // rather than std::priority_queue, whose top() cannot be moved from.
  // Actions apart: a scenario schedules every arrival at the start (100,000
  // in the large run), and the events' heap, pushed and popped on every
  // step, stays as small as what is in flight.
  std::vector<Event> queue_;
  std::vector<Action> actions_;
  // The requests of control steps scheduled and not yet run, by slot;
  // freed slots are reused. A deque: growing it moves no slot, so a step
  // running in a lane keeps its request (Event::request) while a `then`
  // on the caller's thread schedules more.
  struct Control {
    Request request;
    std::function<void(bool)> then;
  };
  std::deque<Control> controls_;
  std::vector<uint32_t> free_controls_;
  uint64_t next_seq_ = 0;
  uint64_t digest_ = 0xcbf29ce484222325ull;
  // Held for a frozen or read-only agent, in arrival order.
  std::unordered_map<uint32_t, std::vector<std::shared_ptr<const std::vector<uint8_t>>>> held_;
  std::vector<std::string> engine_findings_;
  std::vector<PreemptionSeen> preemptions_;
  Stats stats_;
  std::unique_ptr<Workers> workers_;  // null: one thread
  // run_until's and run_instant's scratch, kept for their capacity: the
  // events of the instant, each one's effects, whether it runs in a lane
  // and whether its lane has run it (set with release by the lane's
  // thread, read with acquire by the caller's), each agent's lane (else
  // kNoLane) and each lane's event indexes.
  std::vector<Event> instant_;
  std::vector<StepEffects> effects_;
  std::vector<uint8_t> in_lane_;
  std::unique_ptr<std::atomic<uint8_t>[]> lane_done_;
  size_t lane_done_capacity_ = 0;
  static constexpr uint32_t kNoLane = UINT32_MAX;
  std::vector<uint32_t> lane_of_;
  std::vector<std::vector<size_t>> lanes_;
};

}  // namespace shoal::sim

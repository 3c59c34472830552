#include "tests/sim/federation.h"

#include <algorithm>
#include <cstring>

#include "agent/core/batch.h"
#include "crypto/id_card.h"
#include "protocol/envelope.h"
#include "protocol/messages.h"
#include "tests/sim/simulated_signatures.h"

namespace shoal::sim {

namespace {

// What the runtime's loop adds to a timer: it never wakes exactly on time.
constexpr Duration kWakeLateness{1};

uint64_t splitmix(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A delivery's fingerprint for the digest: two lanes take the bytes 8 at a
// time (byte-wise FNV-1a was 2 % of a large run), the length closes it. Not
// cryptographic: it tells runs apart, which only a changed byte can do.
uint64_t hash_bytes(const std::vector<uint8_t>& bytes) {
  uint64_t lane[2] = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull};
  size_t size = bytes.size(), whole = size / 8;
  auto take = [&](uint64_t& h, uint64_t word) {
    h = (h ^ word) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
  };
  for (size_t i = 0; i < whole; ++i) {
    uint64_t word;
    std::memcpy(&word, bytes.data() + 8 * i, 8);
    take(lane[i % 2], word);
  }
  uint64_t tail = 0;
  if (size % 8) std::memcpy(&tail, bytes.data() + 8 * whole, size % 8);
  take(lane[whole % 2], tail ^ (uint64_t{size} << 56));
  return mix(lane[0], lane[1] ^ size);
}

}  // namespace

uint64_t SeededRng::next() { return splitmix(state_); }

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t state = a ^ (b + 0x9E3779B97F4A7C15ull + (a << 6) + (a >> 2));
  return splitmix(state);
}

Federation::Federation(FederationOptions options)
    : options_(std::move(options)),
      start_(clock_.now()),
      network_(mix(options_.seed, 0x6e6574), options_.network) {
  if (options_.threads > 1) workers_ = std::make_unique<Workers>(options_.threads);
}

Federation::~Federation() = default;

SimAgent& Federation::add_agent(model::ClusterSpec spec, uint32_t org, Duration skew) {
  auto agent = std::make_unique<SimAgent>();
  agent->index = static_cast<uint32_t>(agents_.size());
  agent->name = spec.name;
  agent->org = org;
  // The identity derives from the seed: the same seed, the same keys, the
  // same bytes on every wire.
  std::array<uint8_t, 32> key_seed{};
  uint64_t state = mix(options_.seed, 0x6b6579 + agent->index);
  for (size_t i = 0; i < key_seed.size(); i += 8) {
    uint64_t word = splitmix(state);
    std::memcpy(key_seed.data() + i, &word, 8);
  }
  agent->identity = crypto::Identity::from_seed(key_seed);
  agent->id = crypto::key_to_text(agent->identity.public_key());
  agent->cluster_spec = std::move(spec);
  agent->clock = std::make_unique<SkewedClock>(clock_, skew);
  agent->store = std::make_unique<MemoryStore>();
  network_.place(agent->index, org);
  index_by_id_[agent->id] = agent->index;
  SimAgent& ref = *agent;
  agents_.push_back(std::move(agent));
  boot(ref);
  return ref;
}

bool Federation::build(SimAgent& agent) {
  auto cluster = cluster::make_sim_cluster(agent.cluster_spec);
  if (!cluster.is_ok()) {
    engine_findings_.push_back(agent.name +
                               ": its cluster spec is refused: " + cluster.status().message());
    return false;
  }
  agent.cluster = std::move(cluster).value();
  agent.watched = std::make_unique<WatchedCluster>(
      *agent.cluster, [this, &agent](const std::string& key, const std::vector<std::string>& victims) {
        note_preemption(agent, key, victims);
      });
  agent.rng = std::make_unique<SeededRng>(mix(mix(options_.seed, agent.index), agent.boots));
  agent.transport = std::make_unique<OutboxTransport>(index_by_id_);
  core::AgentConfig config;
  config.cluster = agent.name;
  config.org = "org" + std::to_string(agent.org);
  config.endpoint = "tcp://" + agent.name + ":1";
  if (options_.configure) options_.configure(config);
  agent.agent = core::make_agent(config, agent.identity, *agent.clock, *agent.transport,
                                 *agent.store, *agent.watched, *agent.rng, nullptr, signatures());
  ++agent.boots;
  agent.ticked_since_boot = false;
  agent.wake_at = TimePoint::max();
  agent.group = core::GroupCommit{options_.group_commit ? agent.agent->commit_linger() : Duration{0}};
  return true;
}

void Federation::boot(SimAgent& agent) {
  if (!build(agent)) return;
  // As the runtime starts one: a start that fails fails its batch (on a
  // failing disk, the agent turns read-only).
  StepEffects effects;
  run_batch_step(agent, [&] { return agent.agent->start(); }, effects, /*answered=*/true);
  apply(agent, effects);
}

void Federation::enter_read_only(SimAgent& agent) {
  ++stats_.read_only;
  agent.read_only = true;
  if (!build(agent)) return;
  Status loaded = core::load_read_only(*agent.agent, *agent.store, *agent.transport);
  if (!loaded.is_ok()) {
    engine_findings_.push_back(agent.name + ": its committed state cannot be loaded: " +
                               loaded.message());
  }
  uint32_t boots = agent.boots;
  at(clock_.now() + kStorageProbeInterval, [this, &agent, boots] { probe_store(agent, boots); });
}

void Federation::probe_store(SimAgent& agent, uint32_t boots) {
  // Crashed (and perhaps restarted) since: that boot probes for itself.
  if (!agent.up() || !agent.read_only || agent.boots != boots) return;
  if (agent.frozen || !agent.store->probe_write().is_ok()) {
    at(clock_.now() + kStorageProbeInterval, [this, &agent, boots] { probe_store(agent, boots); });
    return;
  }
  agent.read_only = false;
  boot(agent);
  if (!agent.up() || agent.read_only) return;
  read_what_waited(agent);
}

void Federation::read_what_waited(SimAgent& agent) {
  auto held = std::move(held_[agent.index]);
  held_.erase(agent.index);
  for (size_t i = 0; i < held.size(); ++i) {
    if (agent.up() && agent.read_only) {
      // A step turned it read-only: the rest wait in its socket again.
      held_[agent.index].assign(held.begin() + static_cast<std::ptrdiff_t>(i), held.end());
      return;
    }
    if (agent.up()) deliver(agent, *held[i]);
  }
  if (agent.up() && !agent.read_only) {
    agent.ticked_since_boot = true;
    StepEffects effects;
    run_step(agent, [&] { tick_until_idle(agent, effects); }, effects);
    apply(agent, effects);
  }
}

Status Federation::invite(SimAgent& target, SimAgent& source,
                          const core::InvitationOptions& options) {
  crypto::IdCard card{source.name, "org" + std::to_string(source.org), source.identity.public_key(),
                      "tcp://" + source.name + ":1"};
  Result<std::string> token = internal_error("the target is down");
  control(target, [&](core::Agent& a) {
    token = a.operations().create_invitation(card.to_string(), options);
  });
  if (!token.is_ok()) return token.status();
  Status accepted = internal_error("the source is down");
  control(source, [&](core::Agent& a) {
    auto name = a.operations().accept_invitation(*token);
    accepted = name.is_ok() ? Status::ok() : name.status();
  });
  return accepted;
}

void Federation::push(Event event) {
  event.seq = next_seq_++;
  queue_.push_back(std::move(event));
  std::push_heap(queue_.begin(), queue_.end(), std::greater<>());
}

Federation::Event Federation::pop() {
  std::pop_heap(queue_.begin(), queue_.end(), std::greater<>());
  Event event = std::move(queue_.back());
  queue_.pop_back();
  return event;
}

Federation::Action Federation::pop_action() {
  std::pop_heap(actions_.begin(), actions_.end(), std::greater<>());
  Action action = std::move(actions_.back());
  actions_.pop_back();
  return action;
}

bool Federation::action_is_next() const {
  if (actions_.empty()) return false;
  if (queue_.empty()) return true;
  const Action& action = actions_.front();
  const Event& event = queue_.front();
  return action.at != event.at ? action.at < event.at : action.seq < event.seq;
}

void Federation::at(TimePoint when, std::function<void()> action) {
  actions_.push_back({std::max(when, clock_.now()), next_seq_++, std::move(action)});
  std::push_heap(actions_.begin(), actions_.end(), std::greater<>());
}

void Federation::at_control(TimePoint when, SimAgent& agent, Request request,
                            std::function<void(bool)> then) {
  uint32_t slot;
  if (free_controls_.empty()) {
    slot = static_cast<uint32_t>(controls_.size());
    controls_.emplace_back();
  } else {
    slot = free_controls_.back();
    free_controls_.pop_back();
  }
  controls_[slot] = {std::move(request), std::move(then)};
  Action action;
  action.at = std::max(when, clock_.now());
  action.seq = next_seq_++;
  action.is_control = true;
  action.agent = agent.index;
  action.control = slot;
  actions_.push_back(std::move(action));
  std::push_heap(actions_.begin(), actions_.end(), std::greater<>());
}

void Federation::enqueue_control(const Action& action) {
  // Same (at, seq): the same place in the one order of actions and events.
  Event event;
  event.at = action.at;
  event.seq = action.seq;
  event.kind = Event::Kind::kControl;
  event.agent = action.agent;
  event.control = action.control;
  event.request = &controls_[action.control].request;
  queue_.push_back(std::move(event));
  std::push_heap(queue_.begin(), queue_.end(), std::greater<>());
}

void Federation::finish_control(uint32_t slot, bool ran) {
  std::function<void(bool)> then = std::move(controls_[slot].then);
  controls_[slot] = Control{};
  free_controls_.push_back(slot);
  if (then) then(ran);
}

bool Federation::control(SimAgent& agent, const std::function<void(core::Agent&)>& request) {
  if (!agent.up() || agent.paused()) return false;
  step(agent, [&] { request(*agent.agent); }, /*answered=*/true);
  return true;
}

void Federation::step(SimAgent& agent, const std::function<void()>& work, bool answered) {
  StepEffects effects;
  run_step(agent, work, effects, answered);
  apply(agent, effects);
}

void Federation::run_step(SimAgent& agent, const std::function<void()>& work, StepEffects& effects,
                          bool answered) {
  run_batch_step(
      agent,
      [&] {
        work();
        return Status::ok();
      },
      effects, answered);
}

void Federation::run_batch_step(SimAgent& agent, const std::function<Status()>& work,
                                StepEffects& effects, bool answered) {
  effects.stepped = true;
  agent.group.answers_waiting = answered;
  bool group_was_open = agent.group.open();
  core::BatchOutcome batch = core::run_batch(*agent.agent, *agent.store, *agent.transport, work,
                                             [&] { return agent.crash_in_next_step; }, &agent.group);
  if (batch.end == core::BatchEnd::kAbandoned) {
    // Dies before its batch commits: nothing it sent leaves, nothing it
    // wrote stays. Never on a helper thread (run_instant keeps such an
    // agent's steps on the caller): crash and restart change the world.
    agent.crash_in_next_step = false;
    if (group_was_open) ++stats_.open_groups_lost;  // rolled back with this batch
    crash(agent);
    restart(agent);
    return;
  }
  if (batch.end == core::BatchEnd::kRolledBack) {
    agent.step_preemptions.clear();  // undone with the batch
    // Only a failing disk may refuse a batch (never on a helper thread:
    // run_instant keeps an agent whose store fails on the caller's).
    if (batch.why.code() == ErrorCode::kStorage && agent.store->failing()) {
      enter_read_only(agent);
    } else {
      effects.findings.push_back(agent.name + ": a batch did not commit: " + batch.why.message());
    }
    return;
  }
  if (batch.end == core::BatchEnd::kOpen) {
    // Quiet, so nothing of it may have left: no envelope sealed, nothing
    // bound to launch, nobody answered. What it decided waits in memory and
    // in the open transaction for the group's commit, or dies with a crash.
    if (!agent.transport->sent.empty() || !agent.transport->held.empty() || answered) {
      effects.findings.push_back(agent.name + ": a batch left open sent, or answered, before its commit");
    }
    effects.left_open = true;
    effects.wake = next_wake(agent);
    return;
  }
  effects.preemptions = std::move(agent.step_preemptions);
  agent.step_preemptions.clear();
  for (auto& [to, wire] : agent.transport->sent) {
    effects.sent.push_back({to, std::make_shared<const std::vector<uint8_t>>(std::move(wire))});
  }
  agent.transport->sent.clear();
  if (!agent.transport->held.empty()) {
    effects.findings.push_back(agent.name + ": sent outside a batch (in batch_committed)");
    agent.transport->held.clear();
  }
  effects.wake = next_wake(agent);
}

void Federation::apply(const SimAgent& agent, StepEffects& effects) {
  if (effects.delivered) {
    ++stats_.deliveries;
    fold(effects.delivery_hash);
  }
  if (!effects.stepped) return;
  ++stats_.steps;
  if (effects.left_open) ++stats_.batches_left_open;
  fold(agent.index);
  fold(static_cast<uint64_t>(to_millis(clock_.now())));
  for (std::string& finding : effects.findings) engine_findings_.push_back(std::move(finding));
  for (PreemptionSeen& seen : effects.preemptions) preemptions_.push_back(std::move(seen));
  for (Outgoing& message : effects.sent) {
    for (TimePoint arrival : network_.route(agent.index, message.to, clock_.now())) {
      Event event;
      event.at = arrival;
      event.kind = Event::Kind::kDeliver;
      event.agent = message.to;
      event.bytes = message.bytes;
      push(std::move(event));
    }
  }
  if (effects.wake != TimePoint::max()) {
    Event event;
    event.at = effects.wake;
    event.kind = Event::Kind::kWake;
    event.agent = agent.index;
    push(std::move(event));
  }
}

void Federation::tick_until_idle(SimAgent& agent, StepEffects& effects) {
  agent.agent->tick();
  for (int again = 0; again < 3 && agent.agent->next_deadline() <= agent.clock->now(); ++again) {
    agent.agent->tick();
  }
  if (agent.agent->next_deadline() <= agent.clock->now()) {
    effects.findings.push_back(agent.name + " at " + format_time(clock_.now()) +
                               ": a timer is still due after its ticks (the runtime would spin)");
  }
}

TimePoint Federation::next_wake(SimAgent& agent) {
  if (!agent.up()) return TimePoint::max();
  // Never at this very instant: a timer due now runs in the loop's next
  // iteration, and one that stays due (a bug tick_until_idle reports)
  // cannot stop the clock.
  // An open group commits by its due time, as the runtime's poll waits for.
  TimePoint deadline = std::min(agent.agent->next_deadline(), agent.group.commit_due());
  TimePoint world =
      std::max(deadline <= agent.clock->now() ? clock_.now() : deadline - agent.clock->skew(),
               clock_.now()) +
      kWakeLateness;
  if (world == agent.wake_at) return TimePoint::max();  // that timer event is queued
  // A wake already queued for another time is skipped when it comes up.
  agent.wake_at = world;
  return world;
}

const crypto::SignatureScheme& Federation::signatures() const {
  static const SimulatedSignatures simulated;
  return options_.real_signatures ? crypto::ed25519_signatures() : simulated;
}

void Federation::note_preemption(SimAgent& agent, const std::string& key,
                                 const std::vector<std::string>& victims) {
  PreemptionSeen seen;
  seen.target = agent.index;
  size_t slash = key.find('/');
  seen.source = key.substr(0, slash);
  seen.uid = slash == std::string::npos ? "" : key.substr(slash + 1);
  seen.victims = victims;
  seen.at = clock_.now();
  if (seen.source == agent.id) {
    // Its own work: the source part of this same agent approved in-process,
    // deciding (in memory, before any APPROVE) on this cluster at an epoch.
    std::optional<store::WorkloadRecord> own = agent.agent->operations().workload_by_uid(seen.uid);
    if (own && own->winner == agent.id) seen.approved_epoch = own->epoch;
    agent.step_preemptions.push_back(std::move(seen));
    return;
  }
  protocol::DropReason reason{};
  Result<protocol::Envelope> envelope =
      agent.delivering ? protocol::open(*agent.delivering, &reason, signatures())
                       : Result<protocol::Envelope>(not_found("no delivery"));
  if (envelope.is_ok() && crypto::key_to_text(envelope->from) == seen.source) {
    auto approves = [&](protocol::MessageType type, std::span<const uint8_t> body) {
      if (type != protocol::MessageType::kApprove) return;
      Result<protocol::Body> decoded = protocol::decode_body(type, body);
      if (!decoded.is_ok()) return;
      const auto& approve = std::get<protocol::Approve>(*decoded);
      if (approve.uid == seen.uid) seen.approved_epoch = std::max(seen.approved_epoch.value_or(0), approve.epoch);
    };
    if (envelope->type == protocol::MessageType::kBatch) {
      Result<std::vector<protocol::BatchItem>> items = protocol::decode_batch(envelope->body);
      if (items.is_ok()) {
        for (const auto& item : *items) approves(static_cast<protocol::MessageType>(item.type), item.body);
      }
    } else {
      approves(envelope->type, envelope->body);
    }
  }
  agent.step_preemptions.push_back(std::move(seen));
}

void Federation::deliver(SimAgent& agent, const std::vector<uint8_t>& bytes) {
  StepEffects effects;
  deliver_local(agent, bytes, effects);
  apply(agent, effects);
}

void Federation::deliver_local(SimAgent& agent, const std::vector<uint8_t>& bytes,
                               StepEffects& effects) {
  effects.delivered = true;
  effects.delivery_hash = hash_bytes(bytes);
  agent.delivering = &bytes;
  run_step(agent, [&] { agent.agent->handle_wire(bytes); }, effects);
  agent.delivering = nullptr;
}

void Federation::wake_local(SimAgent& agent, StepEffects& effects) {
  agent.wake_at = TimePoint::max();
  agent.ticked_since_boot = true;
  run_step(agent, [&] { tick_until_idle(agent, effects); }, effects);
}

void Federation::crash(SimAgent& agent) {
  if (!agent.up()) return;
  ++stats_.crashes;
  if (agent.group.open()) ++stats_.open_groups_lost;
  agent.store->crash();
  agent.agent.reset();
  agent.watched.reset();
  agent.cluster.reset();
  agent.step_preemptions.clear();
  agent.transport.reset();
  agent.rng.reset();
  agent.frozen = false;
  agent.read_only = false;
  agent.wake_at = TimePoint::max();
  agent.group = core::GroupCommit{};  // its open group died with it
  held_.erase(agent.index);
}

void Federation::commit_open_groups() {
  for (auto& agent : agents_) {
    if (agent->up() && !agent->read_only && agent->group.open()) step(*agent, [] {}, /*answered=*/true);
  }
}

void Federation::restart(SimAgent& agent) {
  if (agent.up()) return;
  ++stats_.restarts;
  boot(agent);
}

void Federation::thaw(SimAgent& agent) {
  if (!agent.frozen) return;
  agent.frozen = false;
  if (!agent.up() || agent.read_only) return;  // read-only: its probe starts it again
  read_what_waited(agent);
}

bool Federation::run_until(TimePoint end, const std::function<bool()>& stop) {
  while (!queue_.empty() || !actions_.empty()) {
    bool action = action_is_next();
    TimePoint next = action ? actions_.front().at : queue_.front().at;
    if (next > end) break;
    clock_.set(std::max(clock_.now(), next));
    if (action && !actions_.front().is_control) {
      Action scheduled = pop_action();
      ++stats_.events;
      scheduled.run();
    } else {
      // Every delivery, timer and control step of this instant up to the
      // next other action.
      instant_.clear();
      while (true) {
        if (action_is_next() && actions_.front().at == clock_.now() &&
            actions_.front().is_control) {
          enqueue_control(pop_action());
          continue;
        }
        if (queue_.empty() || queue_.front().at != clock_.now() || action_is_next()) break;
        instant_.push_back(pop());
      }
      stats_.events += instant_.size();
      run_instant(instant_);
    }
    if (stop && stop()) return false;
  }
  clock_.set(std::max(clock_.now(), end));
  return true;
}

void Federation::run_instant(const std::vector<Event>& events) {
  // Steps of one instant are independent when they belong to different
  // agents: a step changes its own agent only, and whatever it sends or
  // schedules enters the queue when its effects are applied, behind every
  // event already queued for this instant, as on one thread. So each
  // agent's steps run in order on some thread, and their effects on the
  // world are applied in event order, on this thread, as soon as each
  // step and every one before it is done: any thread count makes the same
  // run, and the helpers keep stepping while this thread applies.
  //
  // An agent that is down, frozen, read-only, about to crash or over a
  // failing store (whose step changes the world: held messages, a restart,
  // a probe) runs on this thread instead, at its events' places.
  effects_.resize(std::max(effects_.size(), events.size()));
  in_lane_.assign(events.size(), 0);
  size_t lanes = 0;
  if (workers_) {
    lane_of_.resize(agents_.size(), kNoLane);
    for (size_t i = 0; i < events.size(); ++i) {
      const SimAgent& agent = *agents_[events[i].agent];
      if (!agent.up() || agent.paused() || agent.crash_in_next_step || agent.store->failing()) continue;
      uint32_t& lane = lane_of_[agent.index];
      if (lane == kNoLane) {
        lane = static_cast<uint32_t>(lanes++);
        if (lanes_.size() < lanes) lanes_.emplace_back();
        lanes_[lane].clear();
      }
      lanes_[lane].push_back(i);
      in_lane_[i] = 1;
    }
    for (const Event& event : events) lane_of_[event.agent] = kNoLane;
  }
  if (lanes < 2) {
    std::fill(in_lane_.begin(), in_lane_.end(), 0);
    for (size_t i = 0; i < events.size(); ++i) finish_event(events[i], i);
    return;
  }
  ++stats_.shared_instants;
  if (lane_done_capacity_ < events.size()) {
    lane_done_capacity_ = std::max(events.size(), 2 * lane_done_capacity_);
    lane_done_ = std::make_unique<std::atomic<uint8_t>[]>(lane_done_capacity_);
  }
  for (size_t i = 0; i < events.size(); ++i) lane_done_[i].store(0, std::memory_order_relaxed);
  size_t finished = 0;  // events [0, finished) are applied
  auto finish_ready = [&] {
    while (finished < events.size() &&
           (!in_lane_[finished] || lane_done_[finished].load(std::memory_order_acquire))) {
      finish_event(events[finished], finished);
      ++finished;
    }
  };
  workers_->run(
      lanes,
      [&](size_t lane) {
        for (size_t i : lanes_[lane]) {
          run_local(events[i], effects_[i]);
          lane_done_[i].store(1, std::memory_order_release);
        }
      },
      finish_ready);
  finish_ready();  // every lane is done: the rest, in order
}

void Federation::finish_event(const Event& event, size_t i) {
  SimAgent& agent = *agents_[event.agent];
  bool control = event.kind == Event::Kind::kControl;
  if (in_lane_[i]) {
    apply(agent, effects_[i]);
    if (control) finish_control(event.control, effects_[i].control_ran);
    effects_[i] = StepEffects{};
  } else if (event.kind == Event::Kind::kDeliver && agent.up() && agent.paused()) {
    held_[agent.index].push_back(event.bytes);
  } else if (agent.up() && !agent.paused()) {
    StepEffects now;
    run_local(event, now);
    apply(agent, now);
    if (control) finish_control(event.control, now.control_ran);
  } else if (control) {
    finish_control(event.control, false);  // down, frozen or read-only: not run
  }
  // else: a dead process reads nothing (the message is lost) and wakes for nothing
}

void Federation::run_local(const Event& event, StepEffects& effects) {
  SimAgent& agent = *agents_[event.agent];
  if (event.kind == Event::Kind::kDeliver) {
    deliver_local(agent, *event.bytes, effects);
  } else if (event.kind == Event::Kind::kControl) {
    // As control(): a step dying here restarts the agent (never in a lane).
    uint32_t boots = agent.boots;
    run_step(agent, [&] { (*event.request)(*agent.agent); }, effects, /*answered=*/true);
    effects.control_ran = agent.up() && agent.boots == boots;
  } else if (event.at == agent.wake_at) {  // else a timer since moved: nothing to do
    wake_local(agent, effects);
  }
}

}  // namespace shoal::sim

#include "tests/sim/federation.h"

#include <cstring>

#include "crypto/id_card.h"

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

uint64_t hash_bytes(const std::vector<uint8_t>& bytes) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (uint8_t b : bytes) h = (h ^ b) * 0x100000001b3ull;
  return h;
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
      network_(mix(options_.seed, 0x6e6574), options_.network) {}

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

void Federation::boot(SimAgent& agent) {
  auto cluster = cluster::make_sim_cluster(agent.cluster_spec);
  if (!cluster.is_ok()) {
    engine_findings_.push_back(agent.name +
                               ": its cluster spec is refused: " + cluster.status().message());
    return;
  }
  agent.cluster = std::move(cluster).value();
  agent.rng = std::make_unique<SeededRng>(mix(mix(options_.seed, agent.index), agent.boots));
  agent.transport = std::make_unique<OutboxTransport>();
  core::AgentConfig config;
  config.cluster = agent.name;
  config.org = "org" + std::to_string(agent.org);
  config.endpoint = "tcp://" + agent.name + ":1";
  if (options_.configure) options_.configure(config);
  agent.agent =
      std::make_unique<core::Agent>(config, agent.identity, *agent.clock, *agent.transport,
                                    *agent.store, *agent.cluster, *agent.rng);
  ++agent.boots;
  agent.ticked_since_boot = false;
  step(agent, [&] {
    Status started = agent.agent->start();
    if (!started.is_ok()) {
      engine_findings_.push_back(agent.name + ": start failed: " + started.message());
    }
  });
}

Status Federation::invite(SimAgent& target, SimAgent& source,
                          const core::InvitationOptions& options) {
  crypto::IdCard card{source.name, "org" + std::to_string(source.org), source.identity.public_key(),
                      "tcp://" + source.name + ":1"};
  Result<std::string> token = internal_error("the target is down");
  control(target, [&](core::Agent& a) { token = a.create_invitation(card.to_string(), options); });
  if (!token.is_ok()) return token.status();
  Status accepted = internal_error("the source is down");
  control(source, [&](core::Agent& a) {
    auto name = a.accept_invitation(*token);
    accepted = name.is_ok() ? Status::ok() : name.status();
  });
  return accepted;
}

void Federation::push(Event event) {
  event.seq = next_seq_++;
  queue_.push(std::move(event));
}

void Federation::at(TimePoint when, std::function<void()> action) {
  Event event;
  event.at = std::max(when, clock_.now());
  event.kind = Event::Kind::kAction;
  event.agent = UINT32_MAX;
  event.action = std::move(action);
  push(std::move(event));
}

bool Federation::control(SimAgent& agent, const std::function<void(core::Agent&)>& request) {
  if (!agent.up() || agent.frozen) return false;
  step(agent, [&] { request(*agent.agent); });
  return true;
}

void Federation::step(SimAgent& agent, const std::function<void()>& work) {
  ++stats_.steps;
  fold(agent.index);
  fold(static_cast<uint64_t>(to_millis(clock_.now())));
  Status begun = agent.store->begin();
  if (!begun.is_ok()) {
    engine_findings_.push_back(agent.name + ": begin failed: " + begun.message());
    return;
  }
  work();
  if (agent.crash_in_next_step) {
    // Died inside the step: the batch never commits, nothing it sent
    // leaves; it comes back at once from what was committed.
    agent.crash_in_next_step = false;
    agent.transport->sent.clear();
    crash(agent);
    restart(agent);
    return;
  }
  Status finished = agent.agent->finish_batch();
  if (finished.is_ok()) finished = agent.store->commit();
  if (!finished.is_ok()) {
    engine_findings_.push_back(agent.name + ": a batch did not commit: " + finished.message());
    agent.store->rollback();
    agent.transport->sent.clear();
    return;
  }
  std::vector<std::pair<std::string, std::vector<uint8_t>>> sent = std::move(agent.transport->sent);
  agent.transport->sent.clear();
  agent.agent->batch_committed();
  if (!agent.transport->sent.empty()) {
    engine_findings_.push_back(agent.name + ": sent outside a batch (in batch_committed)");
    agent.transport->sent.clear();
  }
  for (auto& [peer_id, wire] : sent) {
    auto to = index_by_id_.find(peer_id);
    if (to == index_by_id_.end()) continue;  // nobody of that key in this world
    auto bytes = std::make_shared<const std::vector<uint8_t>>(std::move(wire));
    for (TimePoint arrival : network_.route(agent.index, to->second, clock_.now())) {
      Event event;
      event.at = arrival;
      event.kind = Event::Kind::kDeliver;
      event.agent = to->second;
      event.bytes = bytes;
      push(std::move(event));
    }
  }
  schedule_wake(agent);
}

void Federation::tick_until_idle(SimAgent& agent) {
  agent.agent->tick();
  for (int again = 0; again < 3 && agent.agent->next_deadline() <= agent.clock->now(); ++again) {
    agent.agent->tick();
  }
  if (agent.agent->next_deadline() <= agent.clock->now()) {
    engine_findings_.push_back(agent.name + " at " + format_time(clock_.now()) +
                               ": a timer is still due after its ticks (the runtime would spin)");
  }
}

void Federation::schedule_wake(SimAgent& agent) {
  if (!agent.up()) return;
  // Never at this very instant: a timer due now runs in the loop's next
  // iteration, and one that stays due (a bug tick_until_idle reports)
  // cannot stop the clock.
  TimePoint deadline = agent.agent->next_deadline();
  TimePoint world =
      std::max(deadline <= agent.clock->now() ? clock_.now() : deadline - agent.clock->skew(),
               clock_.now()) +
      kWakeLateness;
  if (world == agent.wake_at) return;
  // A wake already queued for another time is skipped when it comes up.
  agent.wake_at = world;
  Event event;
  event.at = world;
  event.kind = Event::Kind::kWake;
  event.agent = agent.index;
  push(std::move(event));
}

void Federation::deliver(SimAgent& agent, const std::vector<uint8_t>& bytes) {
  ++stats_.deliveries;
  fold(hash_bytes(bytes));
  step(agent, [&] { agent.agent->handle_wire(bytes); });
}

void Federation::crash(SimAgent& agent) {
  if (!agent.up()) return;
  ++stats_.crashes;
  agent.store->crash();
  agent.agent.reset();
  agent.cluster.reset();
  agent.transport.reset();
  agent.rng.reset();
  agent.frozen = false;
  agent.wake_at = TimePoint::max();
  held_.erase(agent.index);
}

void Federation::restart(SimAgent& agent) {
  if (agent.up()) return;
  ++stats_.restarts;
  boot(agent);
}

void Federation::thaw(SimAgent& agent) {
  if (!agent.frozen) return;
  agent.frozen = false;
  if (!agent.up()) return;
  auto held = std::move(held_[agent.index]);
  held_.erase(agent.index);
  for (const auto& bytes : held) {
    if (agent.up()) deliver(agent, *bytes);
  }
  if (agent.up()) {
    agent.ticked_since_boot = true;
    step(agent, [&] { tick_until_idle(agent); });
  }
}

bool Federation::run_until(TimePoint end, const std::function<bool()>& stop) {
  while (!queue_.empty() && queue_.top().at <= end) {
    Event event = queue_.top();
    queue_.pop();
    clock_.set(std::max(clock_.now(), event.at));
    ++stats_.events;
    switch (event.kind) {
      case Event::Kind::kAction:
        event.action();
        break;
      case Event::Kind::kWake: {
        SimAgent& agent = *agents_[event.agent];
        if (event.at != agent.wake_at || !agent.up() || agent.frozen) break;
        agent.wake_at = TimePoint::max();
        agent.ticked_since_boot = true;
        step(agent, [&] { tick_until_idle(agent); });
        break;
      }
      case Event::Kind::kDeliver: {
        SimAgent& agent = *agents_[event.agent];
        if (!agent.up()) break;  // a dead process reads nothing; the message is lost
        if (agent.frozen) {
          held_[agent.index].push_back(event.bytes);
        } else {
          deliver(agent, *event.bytes);
        }
        break;
      }
    }
    if (stop && stop()) return false;
  }
  clock_.set(std::max(clock_.now(), end));
  return true;
}

}  // namespace shoal::sim

// The agent: one state machine that plays both roles of the placement
// protocol. As a source it places the workloads submitted to it; as a
// target it reserves and runs what invited sources ask for, its own cluster
// included. It never touches a socket, a file, a thread or the wall clock:
// every input is a call (a wire message, a tick, an operator's request),
// every output goes through Transport, Store or Cluster.
//
// This header is the step contract, all the runtime's loop may call; the
// operator's requests and views are the other face, Operations
// (operations.h). Both are implemented by the router (router.h), which no
// caller outside agent/core includes.
//
// Per batch of steps (run_batch in batch.h is the one implementation):
// Store::begin; the steps (handle_wire, tick, operator requests);
// finish_batch(); commit; then release what Transport was handed and call
// batch_committed(). Sleep until next_deadline().
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "agent/cluster/cluster.h"
#include "agent/core/config.h"
#include "agent/core/interfaces.h"
#include "agent/core/operations.h"
#include "common/status.h"
#include "common/time.h"
#include "crypto/identity.h"
#include "store/store.h"

namespace spdlog {
class logger;
}

namespace shoal::core {

class Agent {
 public:
  virtual ~Agent() = default;

  // Loads persisted state, bumps the boot counter, restores reservations on
  // the cluster and greets peers. Call once, inside a batch.
  virtual Status start() = 0;
  // Only the loading half of start(): memory and cluster as the store holds
  // them, nothing sent. For a read-only agent while the store cannot be
  // written (the runtime then answers reads from it and nothing else); any
  // write it attempts belongs in a batch the caller rolls back. Call once,
  // instead of start().
  virtual Status load() = 0;

  // Inputs. Returns how many messages the envelope carried that were
  // handled (a BATCH carries several; a dropped envelope none).
  virtual size_t handle_wire(std::span<const uint8_t> wire) = 0;
  virtual void tick() = 0;
  // The operator's face: call between steps of a batch, like the inputs.
  virtual Operations& operations() = 0;
  virtual const Operations& operations() const = 0;

  // Call before committing a batch: writes what the batch accumulated (peer
  // rows, replay marks). Returns store_health().
  virtual Status finish_batch() = 0;
  // The first failed store write since start, if any: the runtime must not
  // commit or send after one (it rolls back and rebuilds the agent from the
  // store, read-only while writes keep failing).
  virtual const Status& store_health() const = 0;
  // Envelopes sealed since start, and whether copies bound since the last
  // batch_committed() wait for a commit to launch them: a batch that moved
  // neither is quiet, and its commit may wait (GroupCommit in batch.h).
  virtual uint64_t envelopes_sent() const = 0;
  virtual bool has_launches() const = 0;
  // How long a quiet batch's commit may wait for the next batch's: half a
  // heartbeat, when the next heartbeat pass sends and so commits the group,
  // or the lazy delay (Context::send_later) if that is longer (0 with it:
  // every batch commits). A quiet batch that deferred a message commits
  // sooner, with the batch that sends it; only one that sends nothing at
  // all waits longer, so an idle agent fsyncs about once per heartbeat pass.
  virtual Duration commit_linger() const = 0;
  // Call after the batch committed: applies its effects on the cluster
  // (launches of copies bound in it). Also after load(), whose state is
  // committed.
  virtual void batch_committed() = 0;
  // The agent's clock, and when tick() next has something to do: the
  // runtime may sleep until then unless a message or request arrives. At
  // most a heartbeat away.
  virtual TimePoint now() const = 0;
  virtual TimePoint next_deadline() = 0;

  // Cross-checks every part's invariants (the simulations call it after
  // every step): "" while all hold, else the part and the first broken one.
  virtual std::string broken_invariant() = 0;
};

// `signatures`: Ed25519 for every agent; the simulator passes its own.
std::unique_ptr<Agent> make_agent(
    AgentConfig config, crypto::Identity identity, const Clock& clock, Transport& transport,
    store::Store& store, cluster::Cluster& cluster, Rng& rng,
    std::shared_ptr<spdlog::logger> logger = nullptr,
    const crypto::SignatureScheme& signatures = crypto::ed25519_signatures());

}  // namespace shoal::core

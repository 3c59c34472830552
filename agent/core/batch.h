// The batch contract, in one place for every caller: the runtime's loop,
// the federation simulator and the core's unit world all run the agent's
// steps through run_batch, so the simulator runs the path that ships
// (agent/core/README.md, "The step contract").
//
// Write-ahead: nothing a batch produced reaches the wire or the cluster
// before the batch is on disk. A batch that fails at any point is rolled
// back whole and what it sent is dropped; the agent's memory is then ahead
// of its disk, and the caller must replace it with one built from the
// store (Agent::start, or load_read_only while the store cannot be written).
#pragma once

#include <functional>

#include "agent/core/agent.h"
#include "agent/core/interfaces.h"
#include "common/status.h"
#include "store/store.h"

namespace shoal::core {

// How a batch ended.
enum class BatchEnd {
  kCommitted,   // on disk; what it sent was released, the cluster acts on it
  kRolledBack,  // a step, a write or the commit failed: nothing of it happened
  kAbandoned,   // given up before its commit (a simulated crash): rolled back
};

struct BatchOutcome {
  BatchEnd end = BatchEnd::kCommitted;
  Status why;  // kRolledBack: what failed
};

// Runs `steps` as one batch of `agent` over `store`: Store::begin, the
// steps, Agent::finish_batch (which seals what they sent and reports the
// store's health), Store::commit; then Transport::release_batch and
// Agent::batch_committed, in that order. A failed step (its Status), a
// failed write or a failed commit rolls the batch back and drops what it
// sent. `abandon`, asked once the steps ran, lets a simulator die just
// before the commit (the batch is rolled back as a crash would lose it).
BatchOutcome run_batch(Agent& agent, store::Store& store, Transport& transport,
                       const std::function<Status()>& steps,
                       const std::function<bool()>& abandon = nullptr);

// An agent over a store that cannot be written, for answering reads:
// Agent::load in a batch that is always rolled back (a write it attempts
// belongs to a later start), nothing sent, then Agent::batch_committed so
// that what was committed as bound or running runs on.
Status load_read_only(Agent& agent, store::Store& store, Transport& transport);

}  // namespace shoal::core

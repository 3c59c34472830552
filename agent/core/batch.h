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
  kOpen,        // quiet, left open for the next batch to commit (GroupCommit)
};

// Group commit, for a caller that opts in (the runtime does, the simulator
// for part of its seeds; the unit world commits every batch). A quiet
// batch — it sealed no envelope, bound nothing to launch
// (Agent::has_launches), and the caller has no answer waiting for its
// commit — is left open for up to `linger`:
// the batches after it join its transaction, and the first that is not
// quiet, or the first to end once the group has lingered that long,
// commits them all. At everyday rates a third of an agent's batches were
// quiet (a report read, an acknowledgement, a start observed), each its own
// commit and fsync. Write-ahead holds: nothing a quiet batch decided leaves
// before the commit (its deferred messages wait for it, Context::send_later).
// A crash loses the open group as it would lose the messages it read, which
// their senders repeat; a failed batch rolls the whole group back.
struct GroupCommit {
  Duration linger{0};           // 0: every batch commits
  bool answers_waiting = false;  // set by the caller each batch: replies wait for a commit
  TimePoint open_since{};       // {}: no group open
  bool open() const { return open_since != TimePoint{}; }
  // When the open group must commit (TimePoint::max(): none open).
  TimePoint commit_due() const { return open() ? open_since + linger : TimePoint::max(); }
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
// With `group`, a quiet batch may end kOpen instead of committing.
BatchOutcome run_batch(Agent& agent, store::Store& store, Transport& transport,
                       const std::function<Status()>& steps,
                       const std::function<bool()>& abandon = nullptr,
                       GroupCommit* group = nullptr);

// An agent over a store that cannot be written, for answering reads:
// Agent::load in a batch that is always rolled back (a write it attempts
// belongs to a later start), nothing sent, then Agent::batch_committed so
// that what was committed as bound or running runs on.
Status load_read_only(Agent& agent, store::Store& store, Transport& transport);

}  // namespace shoal::core

// How an agent is configured (agent.yaml, docs/configuration.md): what the
// core's timers and defaults are. Shared by every part of the core.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "common/time.h"
#include "model/workload.h"

namespace shoal::core {

using namespace std::chrono_literals;

// What a target tells the sources it invited about itself, beyond room
// (agent.yaml `disclose`, docs/invitations.md). Node and pod lists never
// leave, whatever this says.
struct Disclosure {
  std::vector<std::string> labels{"*"};  // label keys sent; "*": all
  std::vector<std::string> claims{"*"};  // claim names sent; "*": all
  bool cluster_counts = false;           // cluster-wide counts (routing domain cluster)
  static bool lists(const std::vector<std::string>& allowed, const std::string& key) {
    return std::find(allowed.begin(), allowed.end(), "*") != allowed.end() ||
           std::find(allowed.begin(), allowed.end(), key) != allowed.end();
  }
};

struct AgentConfig {
  std::string cluster;
  std::string org;
  std::string endpoint;
  Duration reservation_ttl = 30s;    // an unapproved reservation is released after this
  Duration heartbeat_interval = 2s;  // HELLO and CAPACITY to every peer
  Duration retry_interval = 1s;      // unanswered protocol messages are re-sent this often; a
                                     // target heard from within a fifth of it may be approved
                                     // in advance (SourceRole::approves_in_advance)
  Duration pending_retry = 5s;       // first retry of a workload nobody can take now ...
  Duration pending_retry_max = 60s;  // ... doubling per attempt up to this
  Duration queue_hold = 2min;        // a candidate waits in a target's queue this long after
                                     // its last CANDIDATE (must exceed pending_retry_max)
  Duration replay_window = 5min;     // messages sent longer ago (or ahead) than this are dropped
  Duration invitation_lifetime = 720h;
  model::Dispatcher default_dispatcher =
      model::Dispatcher::kPreferred;  // spec.placement.dispatcher unset
  // Lease fencing (docs/lifecycle.md): a target runs our work only while we
  // renew its lease, every lease/4. 0 turns fencing off (MultiKueue's model).
  Duration lease = 2min;
  Duration max_clock_skew = 30s;         // between any two agents; part of the fencing arithmetic
  Duration worker_lost_timeout = 15min;  // a silent winner's work is re-placed after this
                                         // (see check_fencing_timers)
  Duration gc_interval = 1min;           // reconciliation digests at least this often
  // A workload submitted here without spec.startTimeout gets this one: its
  // copy, bound but not started within it, is given up by its target and
  // placed again elsewhere. 0: a bound copy waits as long as its cluster
  // keeps it pending.
  Duration start_timeout{0};
  // A workload submitted here without spec.maxDisruptions gets this one
  // (model/workload.h); -1: none, ends not its own are placed again forever.
  int32_t max_disruptions = -1;
  // Flow control at the source: at most this many workloads have a round in
  // flight (candidates out, no winner yet); the rest wait in priority order
  // (Pending, WaitingForSlot). Bounds every target's backlog of our
  // candidates, so a burst of submissions is placed at a steady rate instead
  // of timing out rounds.
  int64_t placement_window = 1000;
  // At the source, with no readyWindow: how long READYs from other targets
  // wait for the round's first-ranked target to answer, so that the target
  // the policy prefers is not beaten by whoever answers fastest. 0: the
  // first READYs win.
  Duration preferred_wait = 1s;
  // What nobody waits on — acknowledgements, a copy's reports of what its
  // cluster observed — may wait this long (at most a quarter of
  // retryInterval, so never long enough to be repeated) to share an
  // envelope (Context::send_later); a quiet batch's commit waits at least
  // as long (Agent::commit_linger). At 100 placements/s over 8 targets most
  // of them then share; at 100 ms, fewer than half did. 0: nothing waits.
  Duration lazy_delay = 250ms;
  Disclosure disclose;
};

// The contract between lease, skew, heartbeats and the worker-lost timeout
// that makes fencing sound: "" when it holds, else what to change.
std::string check_fencing_timers(const AgentConfig& config);

}  // namespace shoal::core

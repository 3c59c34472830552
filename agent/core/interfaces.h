// How the sans-I/O core reaches the world. The runtime provides real
// implementations; tests and the simulator provide fakes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/time.h"

namespace shoal::core {

using shoal::Clock;

// Fire and forget, batch by batch (batch.h): what the core sends while a
// store batch is open is held until the batch ends. release_batch: the
// batch committed, what it sent may leave, in the order sent. drop_batch:
// it rolled back, nothing it sent may ever leave.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual void send(const std::string& peer_id, const std::string& endpoint,
                    std::vector<uint8_t> wire) = 0;
  virtual void release_batch() = 0;
  virtual void drop_batch() = 0;
};

class Rng {
 public:
  virtual ~Rng() = default;
  virtual uint64_t next() = 0;
};

}  // namespace shoal::core

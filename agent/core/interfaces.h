// How the sans-I/O core reaches the world. The runtime provides real
// implementations; tests and the simulator provide fakes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/time.h"

namespace shoal::core {

using shoal::Clock;

// Fire and forget. The runtime buffers what the core sends during one loop
// iteration and delivers it only after that iteration's store batch commits.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual void send(const std::string& peer_id, const std::string& endpoint,
                    std::vector<uint8_t> wire) = 0;
};

class Rng {
 public:
  virtual ~Rng() = default;
  virtual uint64_t next() = 0;
};

}  // namespace shoal::core

// A bundle of the three resources shoal schedules.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "model/quantity.h"

namespace shoal::model {

struct Resources {
  int64_t cpu_milli = 0;
  int64_t memory_bytes = 0;
  int64_t gpu = 0;

  Resources& operator+=(const Resources& other) {
    cpu_milli += other.cpu_milli;
    memory_bytes += other.memory_bytes;
    gpu += other.gpu;
    return *this;
  }
  Resources& operator-=(const Resources& other) {
    cpu_milli -= other.cpu_milli;
    memory_bytes -= other.memory_bytes;
    gpu -= other.gpu;
    return *this;
  }
  friend Resources operator+(Resources a, const Resources& b) { return a += b; }
  friend Resources operator-(Resources a, const Resources& b) { return a -= b; }
  friend Resources operator*(Resources a, int64_t n) {
    a.cpu_milli *= n;
    a.memory_bytes *= n;
    a.gpu *= n;
    return a;
  }
  friend bool operator==(const Resources&, const Resources&) = default;

  // True when every resource of `request` fits within this one.
  bool fits(const Resources& request) const {
    return request.cpu_milli <= cpu_milli && request.memory_bytes <= memory_bytes &&
           request.gpu <= gpu;
  }
  bool is_zero() const { return cpu_milli == 0 && memory_bytes == 0 && gpu == 0; }

  // Component-wise maximum.
  static Resources max(const Resources& a, const Resources& b) {
    return {std::max(a.cpu_milli, b.cpu_milli), std::max(a.memory_bytes, b.memory_bytes),
            std::max(a.gpu, b.gpu)};
  }

  // "cpu=2,memory=4Gi,gpu=0"
  std::string to_string() const {
    return "cpu=" + format_cpu(cpu_milli) + ",memory=" + format_memory(memory_bytes) +
           ",gpu=" + std::to_string(gpu);
  }
};

}  // namespace shoal::model

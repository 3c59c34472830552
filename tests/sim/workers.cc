#include "tests/sim/workers.h"

#include <algorithm>
#include <chrono>

namespace shoal::sim {

namespace {

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

// How long an idle helper spins for the next batch before it sleeps.
constexpr std::chrono::microseconds kSpinBeforeSleep{200};

}  // namespace

Workers::Workers(int threads) {
  for (int i = 1; i < threads; ++i) helpers_.emplace_back([this] { help(); });
}

Workers::~Workers() {
  if (helpers_.empty()) return;
  stopping_.store(true, std::memory_order_release);
  claim_.fetch_add(uint64_t{1} << (kIndexBits + kCountBits), std::memory_order_release);
  claim_.notify_all();
  for (std::thread& helper : helpers_) helper.join();
}

void Workers::run(size_t count, const std::function<void(size_t)>& task,
                  const std::function<void()>& between) {
  if (helpers_.empty() || count < 2) {
    for (size_t i = 0; i < count; ++i) {
      task(i);
      if (between) between();
    }
    return;
  }
  if (count > kMaxBatch) {  // far beyond any instant's steps; kept correct anyway
    for (size_t offset = 0; offset < count; offset += kMaxBatch) {
      run(std::min(kMaxBatch, count - offset), [&](size_t i) { task(offset + i); }, between);
    }
    return;
  }
  task_ = &task;
  finished_.store(0, std::memory_order_relaxed);
  generation_ = (generation_ + 1) & ((uint64_t{1} << (64 - kIndexBits - kCountBits)) - 1);
  claim_.store(generation_ << (kIndexBits + kCountBits) | uint64_t{count} << kIndexBits,
               std::memory_order_release);
  claim_.notify_all();
  take_tasks(generation_, between ? &between : nullptr);
  while (finished_.load(std::memory_order_acquire) != count) {
    if (between) between();
    cpu_relax();
  }
}

void Workers::take_tasks(uint64_t generation, const std::function<void()>* between) {
  uint64_t claim = claim_.load(std::memory_order_acquire);
  while (generation_of(claim) == generation && index_of(claim) < count_of(claim)) {
    if (!claim_.compare_exchange_weak(claim, claim + 1, std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
      continue;  // `claim` now holds the current word
    }
    (*task_)(index_of(claim));
    finished_.fetch_add(1, std::memory_order_release);
    if (between) (*between)();
    claim = claim_.load(std::memory_order_acquire);
  }
}

void Workers::help() {
  uint64_t seen = 0;  // the generation this helper last worked on
  for (;;) {
    uint64_t claim = claim_.load(std::memory_order_acquire);
    auto spin_until = std::chrono::steady_clock::now() + kSpinBeforeSleep;
    for (int spins = 0; generation_of(claim) == seen; ++spins) {
      if (spins % 256 == 255 && std::chrono::steady_clock::now() > spin_until) {
        claim_.wait(claim, std::memory_order_acquire);
      } else {
        cpu_relax();
      }
      claim = claim_.load(std::memory_order_acquire);
    }
    if (stopping_.load(std::memory_order_acquire)) return;
    seen = generation_of(claim);
    take_tasks(seen, nullptr);
  }
}

}  // namespace shoal::sim

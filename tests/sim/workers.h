// A fixed team of threads that runs one batch of independent tasks at a
// time: the federation's steps of one instant (Federation::run_instant).
//
// Contract: run() returns only when every task has returned, so what the
// tasks wrote is visible to the caller afterwards. Tasks of one batch must
// not touch anything another task of it touches. The caller takes part,
// so a team of one thread is the caller alone and starts no thread. While
// the batch runs, the caller may also do work of its own between tasks
// (`between`): the federation applies the effects of the steps already
// done, in order, instead of leaving the helpers idle while it does so
// after the batch.
//
// Between batches a helper spins briefly, then sleeps on the claim word:
// a busy federation hands out a batch every few microseconds, and a
// futex wake-up per batch would cost more than the batch.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace shoal::sim {

class Workers {
 public:
  // `threads` counts the caller: 1 (or less) runs everything inline.
  explicit Workers(int threads);
  ~Workers();
  Workers(const Workers&) = delete;
  Workers& operator=(const Workers&) = delete;

  // task(i) for every i in [0, count), on any thread, each exactly once.
  // `between`, unless null, runs on the caller's thread only: after each
  // task the caller took, and over and over while it waits for the
  // helpers' last tasks. It must not touch what a task touches except
  // through what the tasks publish (with release) for it.
  void run(size_t count, const std::function<void(size_t)>& task,
           const std::function<void()>& between = nullptr);

 private:
  // The claim word packs the batch (generation), its size and the next
  // task to take, so a helper that wakes late can never take a task of a
  // batch it did not see published: its compare-exchange fails instead.
  static constexpr int kIndexBits = 20, kCountBits = 20;
  static constexpr uint64_t kIndexMask = (uint64_t{1} << kIndexBits) - 1;
  static constexpr uint64_t kCountMask = (uint64_t{1} << kCountBits) - 1;
  static constexpr size_t kMaxBatch = kIndexMask;
  static uint64_t generation_of(uint64_t claim) { return claim >> (kIndexBits + kCountBits); }
  static uint64_t count_of(uint64_t claim) { return (claim >> kIndexBits) & kCountMask; }
  static uint64_t index_of(uint64_t claim) { return claim & kIndexMask; }

  void help();
  // Takes and runs tasks of `generation` until none is left, calling
  // `between` (unless null) after each.
  void take_tasks(uint64_t generation, const std::function<void()>* between);

  std::vector<std::thread> helpers_;
  std::atomic<uint64_t> claim_{0};
  std::atomic<size_t> finished_{0};  // tasks of the current batch that returned
  std::atomic<bool> stopping_{false};
  uint64_t generation_ = 0;  // the caller's: the current batch's
  // Written before the batch is published (claim_, release) and read only
  // after a task of it is claimed (acquire).
  const std::function<void(size_t)>* task_ = nullptr;
};

}  // namespace shoal::sim

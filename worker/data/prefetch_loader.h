// PrefetchLoader<T>: N background threads prepare items 0..count-1 (e.g. the
// batches of one epoch for this rank) ahead of the consumer, in a bounded
// window; Next() hands them out strictly in index order.
//
// Bound: at most `capacity` items are being prepared or waiting at any time.
// Errors: a producer's non-OK Result or exception becomes the Status that
// Next() returns in that item's place; the loader then stops and keeps
// returning that Status. Shutdown: the destructor (or Stop()) wakes and joins
// every thread; items not yet handed out are dropped. A producer call already
// running is waited for, so producers should be reasonably short.
//
// Thread safety: Next() and Stop() may be called from any one consumer
// thread; the producer is called concurrently from the worker threads and
// must be thread-safe.
#ifndef TESSERA_WORKER_DATA_PREFETCH_LOADER_H_
#define TESSERA_WORKER_DATA_PREFETCH_LOADER_H_

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/status.h"

namespace tessera::worker {

template <typename T>
class PrefetchLoader {
 public:
  using Producer = std::function<Result<T>(int64_t index)>;

  // threads and capacity are raised to at least 1.
  PrefetchLoader(Producer produce, int64_t count, int threads, int64_t capacity)
      : produce_(std::move(produce)),
        count_(std::max<int64_t>(count, 0)),
        capacity_(std::max<int64_t>(capacity, 1)) {
    const int n = std::max(threads, 1);
    workers_.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) workers_.emplace_back([this] { Work(); });
  }
  ~PrefetchLoader() {
    Stop();
    for (auto& t : workers_) t.join();
  }
  PrefetchLoader(const PrefetchLoader&) = delete;
  PrefetchLoader& operator=(const PrefetchLoader&) = delete;

  // The next item; std::nullopt after the last one; the producer's error in
  // place of a failed item; kUnavailable after Stop().
  Result<std::optional<T>> Next() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!error_.ok()) return error_;
    if (next_deliver_ >= count_) return std::optional<T>();
    cv_.wait(lock, [&] { return stop_ || ready_.count(next_deliver_) > 0; });
    if (stop_ && ready_.count(next_deliver_) == 0) return Unavailable("prefetch loader stopped");
    auto node = ready_.extract(next_deliver_);
    ++next_deliver_;
    cv_.notify_all();
    Result<T>& item = node.mapped();
    if (!item.ok()) {
      error_ = item.status();
      stop_ = true;
      cv_.notify_all();
      return error_;
    }
    return std::optional<T>(std::move(item).value());
  }

  void Stop() {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }

  int64_t count() const { return count_; }

 private:
  void Work() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [&] {
        return stop_ || next_claim_ >= count_ || next_claim_ < next_deliver_ + capacity_;
      });
      if (stop_ || next_claim_ >= count_) return;
      const int64_t index = next_claim_++;
      lock.unlock();
      std::optional<Result<T>> result;
      try {
        result.emplace(produce_(index));
      } catch (const std::exception& e) {
        result.emplace(Internal("preparing item " + std::to_string(index) + ": " + e.what()));
      } catch (...) {
        result.emplace(Internal("preparing item " + std::to_string(index) + ": unknown exception"));
      }
      lock.lock();
      ready_.emplace(index, std::move(*result));
      cv_.notify_all();
    }
  }

  Producer produce_;
  const int64_t count_;
  const int64_t capacity_;
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t next_claim_ = 0;
  int64_t next_deliver_ = 0;
  bool stop_ = false;
  Status error_;
  std::map<int64_t, Result<T>> ready_;
  std::vector<std::thread> workers_;
};

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_DATA_PREFETCH_LOADER_H_

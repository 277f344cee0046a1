// InputLister: lists infer jobs' inputs in the background and writes them as
// chunks in batches, so the controller loop never waits for a large folder
// or list file and memory stays bounded however many items there are.
//
// Poll(job) starts the job's listing on its own thread the first time it is
// asked (an input already sealed in the store is done at once; a listing an
// earlier process left unsealed is dropped and done again) and says where it
// stands: listing (with the items found so far), done, or failed (with the
// reason, e.g. the input cannot be read). Items go through ForEachInferInput
// (daemon/controller/infer_input.h, its checks included) into chunks of chunk_images,
// written batch_chunks chunks per store transaction (Store::AppendChunks)
// and sealed at the end (Store::SealChunks).
//
// Order: a list file's order. A folder's items in byte order when there are
// at most sort_limit of them (as ListInferInputs gives them); a bigger folder
// is written in the order its walk meets the items, so that memory does not
// grow with it.
//
// Ownership: borrows the store (must outlive the lister). Thread safety:
// every method may be called from any thread. The destructor stops the
// listings in progress (left unsealed: listed again by the next process)
// and joins their threads.
#ifndef TESSERA_DAEMON_CONTROLLER_INPUT_LISTER_H_
#define TESSERA_DAEMON_CONTROLLER_INPUT_LISTER_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "api/types.h"
#include "common/mutex.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "daemon/controller/infer_input.h"
#include "daemon/store/store.h"

namespace tessera::daemon {

struct InputListerOptions {
  int64_t chunk_images = 32;     // items per chunk
  int64_t batch_chunks = 256;    // chunks per store transaction
  int64_t sort_limit = 100'000;  // a folder up to this many items is sorted
};

class InputLister {
 public:
  enum class Phase { kListing, kDone, kFailed };
  struct Progress {
    Phase phase = Phase::kListing;
    int64_t found = 0;  // items found so far (all of them once done)
    Status error;       // kFailed: why
  };

  // REQUIRES: store outlives the lister; options' sizes >= 1.
  InputLister(Store* store, InputListerOptions options);
  ~InputLister();
  InputLister(const InputLister&) = delete;
  InputLister& operator=(const InputLister&) = delete;

  // Where the listing of `job`'s input stands; starts it when not started.
  // may_read is used by the listing thread (it must stay valid for it).
  // A store error is returned as is (nothing started).
  Result<Progress> Poll(const api::Job& job, const InputPathCheck& may_read) EXCLUDES(mu_);

  // Stops the job's listing if it runs and forgets it (the job left the
  // queue).
  void Forget(api::JobId job) EXCLUDES(mu_);
  // Forget for every job not in `keep`.
  void ForgetAllBut(const std::set<api::JobId>& keep) EXCLUDES(mu_);

 private:
  struct Listing {
    std::atomic<bool> stop{false};
    std::atomic<int64_t> found{0};
    Mutex mu;
    Phase phase GUARDED_BY(mu) = Phase::kListing;
    Status error GUARDED_BY(mu);
  };

  void Run(api::JobId job, std::string dataset, InputPathCheck may_read,
           std::shared_ptr<Listing> listing);
  Status ListAndWrite(api::JobId job, const std::string& dataset, const InputPathCheck& may_read,
                      Listing& listing);

  Store* const store_;
  const InputListerOptions options_;
  Mutex mu_;
  std::map<api::JobId, std::shared_ptr<Listing>> listings_ GUARDED_BY(mu_);
  std::vector<std::thread> threads_ GUARDED_BY(mu_);
};

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_CONTROLLER_INPUT_LISTER_H_

#include "daemon/controller/input_lister.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <utility>

namespace tessera::daemon {

InputLister::InputLister(Store* store, InputListerOptions options)
    : store_(store), options_(options) {}

InputLister::~InputLister() {
  std::vector<std::thread> threads;
  {
    MutexLock lock(mu_);
    for (auto& [job, listing] : listings_) listing->stop = true;
    threads.swap(threads_);
  }
  for (std::thread& t : threads) t.join();
}

Result<InputLister::Progress> InputLister::Poll(const api::Job& job,
                                                const InputPathCheck& may_read) {
  MutexLock lock(mu_);
  auto it = listings_.find(job.id);
  if (it == listings_.end()) {
    TESSERA_ASSIGN_OR_RETURN(bool sealed, store_->ChunksSealed(job.id));
    auto listing = std::make_shared<Listing>();
    if (sealed) {
      TESSERA_ASSIGN_OR_RETURN(ChunkCounts counts, store_->CountChunks(job.id));
      MutexLock listing_lock(listing->mu);  // not shared yet; the rule holds all the same
      listing->phase = Phase::kDone;
      listing->found = counts.images_total;
    } else {
      // Whatever an earlier process wrote before it stopped is listed again.
      TESSERA_RETURN_IF_ERROR(store_->DeleteChunks(job.id));
      threads_.emplace_back(&InputLister::Run, this, job.id, job.spec.dataset, may_read, listing);
    }
    it = listings_.emplace(job.id, std::move(listing)).first;
  }
  Listing& l = *it->second;
  Progress p;
  p.found = l.found.load();
  MutexLock listing_lock(l.mu);
  p.phase = l.phase;
  p.error = l.error;
  return p;
}

void InputLister::Forget(api::JobId job) {
  MutexLock lock(mu_);
  auto it = listings_.find(job);
  if (it == listings_.end()) return;
  it->second->stop = true;
  listings_.erase(it);
}

void InputLister::ForgetAllBut(const std::set<api::JobId>& keep) {
  MutexLock lock(mu_);
  for (auto it = listings_.begin(); it != listings_.end();) {
    if (keep.contains(it->first)) {
      ++it;
      continue;
    }
    it->second->stop = true;
    it = listings_.erase(it);
  }
}

void InputLister::Run(api::JobId job, std::string dataset, InputPathCheck may_read,
                      std::shared_ptr<Listing> listing) {
  Status st = ListAndWrite(job, dataset, may_read, *listing);
  if (st.ok()) st = store_->SealChunks(job);
  if (listing->stop) return;  // forgotten or shutting down: nothing to report
  MutexLock lock(listing->mu);
  if (st.ok()) {
    listing->phase = Phase::kDone;
    spdlog::info("job {}: {} input images in chunks of {}", job, listing->found.load(),
                 options_.chunk_images);
  } else {
    listing->phase = Phase::kFailed;
    listing->error = st;
  }
}

Status InputLister::ListAndWrite(api::JobId job, const std::string& dataset,
                                 const InputPathCheck& may_read, Listing& listing) {
  const auto chunk_images = static_cast<size_t>(std::max<int64_t>(1, options_.chunk_images));
  const auto batch_chunks = static_cast<size_t>(std::max<int64_t>(1, options_.batch_chunks));
  const auto sort_limit = static_cast<size_t>(std::max<int64_t>(0, options_.sort_limit));
  std::error_code ec;
  const bool folder = std::filesystem::is_directory(dataset, ec);

  int64_t next_chunk = 0;
  std::vector<std::vector<std::string>> batch;
  std::vector<std::string> chunk;
  auto flush_batch = [&]() -> Status {
    if (batch.empty()) return Status::Ok();
    TESSERA_RETURN_IF_ERROR(store_->AppendChunks(job, next_chunk, batch));
    next_chunk += static_cast<int64_t>(batch.size());
    batch.clear();
    return Status::Ok();
  };
  auto add = [&](std::string item) -> Status {
    chunk.push_back(std::move(item));
    if (chunk.size() == chunk_images) {
      batch.push_back(std::move(chunk));
      chunk.clear();
      if (batch.size() == batch_chunks) return flush_batch();
    }
    return Status::Ok();
  };
  // A folder's first sort_limit items wait here: if that is all of them they
  // are sorted (byte order, as ListInferInputs), else written as found.
  std::vector<std::string> held;
  bool holding = folder;
  TESSERA_RETURN_IF_ERROR(ForEachInferInput(dataset, may_read, [&](std::string item) -> Status {
    if (listing.stop) return Unavailable("listing stopped");
    ++listing.found;
    if (holding) {
      held.push_back(std::move(item));
      if (held.size() <= sort_limit) return Status::Ok();
      holding = false;
      for (std::string& h : held) TESSERA_RETURN_IF_ERROR(add(std::move(h)));
      held.clear();
      held.shrink_to_fit();
      return Status::Ok();
    }
    return add(std::move(item));
  }));
  std::sort(held.begin(), held.end());
  for (std::string& h : held) TESSERA_RETURN_IF_ERROR(add(std::move(h)));
  if (!chunk.empty()) batch.push_back(std::move(chunk));
  return flush_batch();
}

}  // namespace tessera::daemon

#include "worker/runtime/infer_pipeline.h"

#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <utility>

#include "worker/runtime/emulated_memory.h"
#include "worker/runtime/infer_items.h"

namespace tessera::worker {
namespace fs = std::filesystem;
namespace {

using SteadyClock = std::chrono::steady_clock;

// How often a waiting compute thread looks at the caller's stop flag.
constexpr auto kStopPoll = std::chrono::milliseconds(20);

}  // namespace

struct InferPipeline::Chunk {
  int64_t id = 0;
  int64_t unresolved = 0;  // items not yet written, skipped, failed or dropped
  int64_t skipped = 0;
  int64_t failed = 0;
  int64_t forwards = 0;
  bool cut = false;  // items dropped by a stop
  SteadyClock::time_point started;
  std::unique_ptr<StagedOutputs> staged;
  std::vector<std::string> staged_paths;
};

struct InferPipeline::Item {
  enum class Kind { kPending, kSkip, kFail, kRun };
  int64_t seq = 0;
  Chunk* chunk = nullptr;
  std::string item;
  Kind kind = Kind::kPending;
  bool taken = false;    // a decode thread took it (counts in in_memory_)
  bool decoded = false;  // kind and, for kRun, input are set
  Status error;          // a failure that stops the pipeline (not an unreadable image)
  std::string out_path;  // from Submit; empty when the item has none:
  Status bad_path;       // why (the item would leave the output folder)
  int64_t channels = 0;
  torch::Tensor input, output;
};

InferPipeline::InferPipeline(InferenceModel& model, InferPipelineOptions options)
    : model_(model),
      options_(std::move(options)),
      window_(std::max(1, options_.decode_threads) + std::max(1, options_.encode_threads) +
              2 * std::max<int64_t>(1, options_.batch)) {
  options_.decode_threads = std::max(1, options_.decode_threads);
  options_.encode_threads = std::max(1, options_.encode_threads);
  options_.batch = std::max<int64_t>(1, options_.batch);
  if (!options_.compute_one) {
    options_.compute_one = [this](const torch::Tensor& input) {
      return RunImage(model_, input, options_.tiles);
    };
  }
  // Named for top -H and perf: "infer-decode", "infer-compute", "infer-encode".
  for (int i = 0; i < options_.decode_threads; ++i) {
    threads_.emplace_back([this] {
      pthread_setname_np(pthread_self(), "infer-decode");
      const HostMemoryScope host;  // images in host memory, not the device's
      DecodeLoop();
    });
  }
  threads_.emplace_back([this] {
    pthread_setname_np(pthread_self(), "infer-compute");
    ComputeLoop();
  });
  for (int i = 0; i < options_.encode_threads; ++i) {
    threads_.emplace_back([this] {
      pthread_setname_np(pthread_self(), "infer-encode");
      const HostMemoryScope host;
      EncodeLoop();
    });
  }
}

InferPipeline::~InferPipeline() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void InferPipeline::Submit(const api::LeasedChunk& leased) {
  auto chunk = std::make_unique<Chunk>();
  chunk->id = leased.chunk;
  chunk->unresolved = static_cast<int64_t>(leased.items.size());
  chunk->started = SteadyClock::now();
  chunk->staged = std::make_unique<StagedOutputs>(options_.write_faults);
  std::vector<std::unique_ptr<Item>> items;
  std::vector<std::string> paths;  // of the items that have one
  for (const std::string& name : leased.items) {
    auto item = std::make_unique<Item>();
    item->chunk = chunk.get();
    item->item = name;
    auto p =
        OutputPathFor(options_.output_dir, options_.data_root, name, model_.output_extension());
    if (p.ok()) {
      item->out_path = *std::move(p);
      paths.push_back(item->out_path);
    } else {
      item->bad_path = p.status();
    }
    items.push_back(std::move(item));
  }
  Result<int64_t> removed = RemoveStaleTempsOf(paths);
  if (!removed.ok()) {
    Fail(removed.status());
  } else if (*removed > 0) {
    std::fprintf(stderr, "tessera-worker: removed %lld stale temporary file(s) of chunk %lld\n",
                 static_cast<long long>(*removed), static_cast<long long>(leased.chunk));
  }
  std::lock_guard<std::mutex> lock(mu_);
  Chunk* c = chunk.get();
  chunks_[next_chunk_++] = std::move(chunk);
  for (std::unique_ptr<Item>& item : items) {
    item->seq = next_seq_;
    items_[next_seq_++] = std::move(item);
  }
  if (c->unresolved == 0) commit_queue_.push_back(c);
  cv_.notify_all();
}

std::vector<InferChunkDone> InferPipeline::TakeDone() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<InferChunkDone> out;
  out.swap(done_);
  return out;
}

void InferPipeline::Wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout,
               [this] { return !done_.empty() || !status_.ok() || chunks_.empty(); });
}

void InferPipeline::Drain() {
  std::unique_lock<std::mutex> lock(mu_);
  stopping_ = true;
  cv_.notify_all();
  cv_.wait(lock, [this] { return !status_.ok() || (compute_parked_ && decoding_ == 0); });
  if (!status_.ok()) return;
  // Items the model has not taken are dropped; their chunks are cut short.
  while (!items_.empty()) {
    auto it = items_.lower_bound(next_compute_);
    if (it == items_.end()) break;
    it->second->chunk->cut = true;
    ResolveLocked(*it->second);
  }
  cv_.notify_all();
  cv_.wait(lock, [this] { return !status_.ok() || chunks_.empty(); });
}

int64_t InferPipeline::chunks_in_flight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(chunks_.size());
}

Status InferPipeline::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

void InferPipeline::Fail(Status s) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (status_.ok()) status_ = std::move(s);
  }
  cv_.notify_all();
}

bool InferPipeline::StoppingLocked() const {
  return stopping_ || (options_.stop != nullptr && options_.stop->load());
}

// ---- decode ----

void InferPipeline::DecodeLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] {
      return shutdown_ ||
             (status_.ok() && !stopping_ && next_decode_ < next_seq_ && in_memory_ < window_);
    });
    if (shutdown_) return;
    Item* item = items_.at(next_decode_++).get();
    item->taken = true;
    ++in_memory_;
    ++decoding_;
    lock.unlock();
    Decode(*item);
    lock.lock();
    item->decoded = true;
    --decoding_;
    cv_.notify_all();
  }
}

void InferPipeline::Decode(Item& item) {
  if (!item.bad_path.ok()) {
    std::fprintf(stderr, "tessera-worker: skipping item \"%s\": %s\n", item.item.c_str(),
                 item.bad_path.message().c_str());
    item.kind = Item::Kind::kFail;
    return;
  }
  std::error_code ec;
  if (fs::exists(item.out_path, ec)) {
    item.kind = Item::Kind::kSkip;
    return;
  }
  const fs::path source = fs::path(item.item).is_absolute()
                              ? fs::path(item.item)
                              : fs::path(options_.data_root) / item.item;
  Result<Image> image = ReadImage(source.string());
  if (!image.ok()) {
    std::fprintf(stderr, "tessera-worker: cannot read %s: %s\n", source.c_str(),
                 image.status().ToString().c_str());
    const std::string note = item.out_path + ".error.txt";
    Status s = RemoveStaleTemps(note).status();
    if (s.ok()) {
      AtomicWriteOptions shared;
      shared.create_parent_dirs = true;
      shared.shared_writer = true;
      shared.faults = options_.write_faults;
      s = WriteFileAtomically(*FileSystem::Default(), note, image.status().ToString() + "\n",
                              shared);
    }
    item.error = s;
    item.kind = Item::Kind::kFail;
    return;
  }
  Result<torch::Tensor> input = model_.Prepare(*image);
  if (!input.ok()) {
    item.error = input.status();
    return;
  }
  item.input = std::move(input).value();
  item.channels = image->channels;
  item.kind = Item::Kind::kRun;
}

// ---- compute ----

InferPipeline::Item* InferPipeline::PeekDecoded(const Chunk* same_chunk) {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    if (shutdown_ || !status_.ok() || StoppingLocked()) return nullptr;
    if (next_compute_ < next_seq_) {
      Item* item = items_.at(next_compute_).get();
      if (same_chunk != nullptr && item->chunk != same_chunk) return nullptr;
      if (item->decoded) return item;
    } else if (same_chunk != nullptr) {
      return nullptr;  // the chunk's items were all taken
    }
    cv_.wait_for(lock, kStopPoll);
  }
}

bool InferPipeline::Batchable(const Item& item) const {
  return options_.batches && RunsWhole(model_, item.input, options_.tiles);
}

bool InferPipeline::Joins(const Item& first, const Item& next, int64_t count) const {
  if (count >= options_.batch || next.kind != Item::Kind::kRun || !Batchable(next) ||
      next.input.sizes() != first.input.sizes()) {
    return false;
  }
  const int64_t align = model_.geometry().align_px;
  const int64_t pixels = PadTo(first.input.size(-2), align) * PadTo(first.input.size(-1), align);
  return (count + 1) * pixels <= options_.batch_pixels;
}

void InferPipeline::ComputeLoop() {
  while (true) {
    Item* first = PeekDecoded(nullptr);
    if (first != nullptr) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++next_compute_;
        if (first->error.ok() && first->kind != Item::Kind::kRun) {
          ResolveLocked(*first);
          cv_.notify_all();
          continue;
        }
      }
      Status s = first->error;
      if (s.ok() && options_.before_item) s = options_.before_item(first->item);
      std::vector<Item*> group = {first};
      while (s.ok() && Batchable(*first)) {
        Item* next = PeekDecoded(first->chunk);
        if (next == nullptr || !next->error.ok()) break;
        if (next->kind != Item::Kind::kRun) {
          std::lock_guard<std::mutex> lock(mu_);
          ++next_compute_;
          ResolveLocked(*next);
          continue;
        }
        if (!Joins(*first, *next, static_cast<int64_t>(group.size()))) break;
        if (options_.before_item) s = options_.before_item(next->item);
        std::lock_guard<std::mutex> lock(mu_);
        ++next_compute_;
        group.push_back(next);
      }
      if (s.ok()) s = RunForward(group);
      if (s.ok()) {
        std::lock_guard<std::mutex> lock(mu_);
        ++first->chunk->forwards;
        for (Item* item : group) encode_queue_.push_back(item);
        cv_.notify_all();
        continue;
      }
      Fail(s);
    }
    // Stopping, failed or shut down: the model takes no more items.
    std::unique_lock<std::mutex> lock(mu_);
    compute_parked_ = true;
    cv_.notify_all();
    cv_.wait(lock, [this] { return shutdown_; });
    return;
  }
}

Status InferPipeline::RunForward(std::vector<Item*>& group) {
  if (!Batchable(*group[0])) {
    TESSERA_ASSIGN_OR_RETURN(group[0]->output, options_.compute_one(group[0]->input));
    return Status::Ok();
  }
  std::vector<torch::Tensor> inputs;
  inputs.reserve(group.size());
  for (const Item* item : group) inputs.push_back(item->input);
  TESSERA_ASSIGN_OR_RETURN(std::vector<torch::Tensor> outputs, RunBatch(model_, inputs));
  for (size_t i = 0; i < group.size(); ++i) group[i]->output = std::move(outputs[i]);
  return Status::Ok();
}

// ---- encode and commit ----

void InferPipeline::EncodeLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] {
      return shutdown_ || (status_.ok() && (!encode_queue_.empty() || !commit_queue_.empty()));
    });
    if (shutdown_) return;
    if (!commit_queue_.empty()) {
      Chunk* chunk = commit_queue_.front();
      commit_queue_.pop_front();
      lock.unlock();
      Commit(*chunk);
      lock.lock();
      continue;
    }
    Item* item = encode_queue_.front();
    encode_queue_.pop_front();
    lock.unlock();
    Status s = item->chunk->staged->Stage(item->out_path, [this, item](const std::string& tmp) {
      return model_.WriteOutput(tmp, item->item, item->channels, item->input, item->output);
    });
    lock.lock();
    if (!s.ok()) {
      if (status_.ok()) status_ = s;
      cv_.notify_all();
      continue;
    }
    item->chunk->staged_paths.push_back(item->out_path);
    ResolveLocked(*item);
    cv_.notify_all();
  }
}

void InferPipeline::ResolveLocked(Item& item) {
  Chunk* chunk = item.chunk;
  if (item.decoded && item.kind == Item::Kind::kSkip) ++chunk->skipped;
  if (item.decoded && item.kind == Item::Kind::kFail) ++chunk->failed;
  if (item.taken) --in_memory_;
  items_.erase(item.seq);  // `item` is gone from here on
  if (--chunk->unresolved == 0) commit_queue_.push_back(chunk);
}

void InferPipeline::Commit(Chunk& chunk) {
  Result<StagedOutputs::Committed> committed = chunk.staged->Commit();
  if (!committed.ok()) {
    Fail(committed.status());
    return;
  }
  for (const std::string& lost : committed->lost) {
    std::fprintf(stderr,
                 "tessera-worker: output %s vanished before it was final (another writer of "
                 "chunk %lld?); the chunk is left to its lease\n",
                 lost.c_str(), static_cast<long long>(chunk.id));
  }
  std::error_code ec;
  for (const std::string& path : chunk.staged_paths) fs::remove(path + ".error.txt", ec);
  std::lock_guard<std::mutex> lock(mu_);
  // Read under the lock: encode threads commit concurrently, and a time read
  // before another thread's later last_done_ would make this chunk's share
  // negative (which the controller refuses).
  const auto now = SteadyClock::now();
  InferChunkDone done;
  done.chunk = chunk.id;
  done.written = committed->written;
  done.skipped = chunk.skipped;
  done.failed = chunk.failed;
  done.forwards = chunk.forwards;
  done.seconds = std::chrono::duration<double>(now - std::max(last_done_, chunk.started)).count();
  done.reportable = !chunk.cut && committed->lost.empty();
  last_done_ = now;
  done_.push_back(done);
  for (auto it = chunks_.begin(); it != chunks_.end(); ++it) {
    if (it->second.get() == &chunk) {
      chunks_.erase(it);
      break;
    }
  }
  cv_.notify_all();
}

}  // namespace tessera::worker

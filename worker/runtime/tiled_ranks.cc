#include "worker/runtime/tiled_ranks.h"

#include <utility>

namespace tessera::worker {
namespace {

enum class TiledCommand : int64_t { kAbort = -1, kDone = 0, kImage = 1 };
constexpr int kTileTag = 7;

}  // namespace

TiledRanks::TiledRanks(Collectives& world, InferenceModel& model, TileSpec spec,
                       std::vector<int64_t> weights, torch::Device comm_device)
    : world_(world),
      model_(model),
      spec_(spec),
      weights_(std::move(weights)),
      comm_device_(comm_device) {}

Result<torch::Tensor> TiledRanks::Run(const torch::Tensor& input) {
  try {
    torch::Tensor header = torch::tensor(
        {static_cast<int64_t>(TiledCommand::kImage), input.size(0), input.size(1), input.size(2)},
        torch::kLong);
    TESSERA_RETURN_IF_ERROR(Bcast(header));
    torch::Tensor data = input.to(torch::kFloat).contiguous();
    TESSERA_RETURN_IF_ERROR(Bcast(data));
    return Compute(data);
  } catch (const std::exception& e) {
    return Internal(std::string("tiled run: ") + e.what());
  }
}

Status TiledRanks::Finish(bool abort) {
  try {
    const auto cmd = abort ? TiledCommand::kAbort : TiledCommand::kDone;
    torch::Tensor header = torch::tensor({static_cast<int64_t>(cmd), 0L, 0L, 0L}, torch::kLong);
    return Bcast(header);
  } catch (const std::exception& e) {
    return Internal(std::string("tiled finish: ") + e.what());
  }
}

Result<int64_t> TiledRanks::Serve() {
  int64_t images = 0;
  try {
    while (true) {
      torch::Tensor header = torch::zeros({4}, torch::kLong);
      TESSERA_RETURN_IF_ERROR(Bcast(header));
      const auto cmd = static_cast<TiledCommand>(header[0].item<int64_t>());
      if (cmd == TiledCommand::kDone) return images;
      if (cmd == TiledCommand::kAbort) return Internal("rank 0 stopped with an error");
      torch::Tensor data = torch::zeros(
          {header[1].item<int64_t>(), header[2].item<int64_t>(), header[3].item<int64_t>()});
      TESSERA_RETURN_IF_ERROR(Bcast(data));
      Result<torch::Tensor> done = Compute(data);
      if (!done.ok()) return done.status();
      ++images;
    }
  } catch (const std::exception& e) {
    return Internal(std::string("tiled serve: ") + e.what());
  }
}

Status TiledRanks::Bcast(torch::Tensor& t) {
  torch::Tensor on = t.to(comm_device_);
  TESSERA_RETURN_IF_ERROR(world_.Broadcast({on}, 0));
  if (on.device() != t.device()) t.copy_(on.to(t.device()));
  return Status::Ok();
}

Result<torch::Tensor> TiledRanks::Compute(const torch::Tensor& input) {
  const int64_t h = input.size(1), w = input.size(2);
  const torch::Tensor padded = PadForModel(input, model_.geometry().align_px);
  const int64_t hp = padded.size(1), wp = padded.size(2);
  const TileGrid grid = MakeTileGrid(hp, wp, spec_);
  const int64_t n = static_cast<int64_t>(grid.tiles.size());
  const std::vector<Span> ranges = ShareRanges(n, weights_);
  const int me = world_.rank();
  const Span mine = ranges[static_cast<size_t>(me)];
  std::vector<torch::Tensor> parts;
  for (int64_t i = mine.begin; i < mine.end; ++i) {
    const Tile& t = grid.tiles[static_cast<size_t>(i)];
    TESSERA_ASSIGN_OR_RETURN(torch::Tensor out, model_.Forward(CropTileInput(padded, t)));
    parts.push_back(OwnedPart(out, t));
    ++tiles_computed_;
  }
  if (me != 0) {
    if (parts.empty()) return torch::Tensor();
    std::vector<torch::Tensor> flat;
    for (auto& p : parts) flat.push_back(p.reshape({-1}));
    torch::Tensor msg = torch::cat(flat).to(comm_device_);
    TESSERA_RETURN_IF_ERROR(world_.SendAsync({msg}, 0, kTileTag)->Wait());
    return torch::Tensor();
  }
  if (out_channels_ == 0) {
    if (!parts.empty()) {
      out_channels_ = parts.front().size(0);
    } else {
      TESSERA_ASSIGN_OR_RETURN(out_channels_, ProbeOutputChannels());
    }
  }
  torch::Tensor canvas = torch::empty({out_channels_, hp, wp});
  for (int64_t i = mine.begin; i < mine.end; ++i) {
    PlaceOwnedPart(canvas, parts[static_cast<size_t>(i - mine.begin)],
                   grid.tiles[static_cast<size_t>(i)]);
  }
  for (int r = 1; r < world_.size(); ++r) {
    const Span theirs = ranges[static_cast<size_t>(r)];
    if (theirs.size() == 0) continue;
    int64_t pixels = 0;
    for (int64_t i = theirs.begin; i < theirs.end; ++i) {
      const Tile& t = grid.tiles[static_cast<size_t>(i)];
      pixels += t.own_y.size() * t.own_x.size();
    }
    torch::Tensor buf =
        torch::empty({out_channels_ * pixels}, torch::TensorOptions().device(comm_device_));
    TESSERA_RETURN_IF_ERROR(world_.Recv({buf}, r, kTileTag));
    buf = buf.to(torch::kCPU);
    int64_t at = 0;
    for (int64_t i = theirs.begin; i < theirs.end; ++i) {
      const Tile& t = grid.tiles[static_cast<size_t>(i)];
      const int64_t count = out_channels_ * t.own_y.size() * t.own_x.size();
      PlaceOwnedPart(canvas,
                     buf.narrow(0, at, count).view({out_channels_, t.own_y.size(), t.own_x.size()}),
                     t);
      at += count;
    }
  }
  return canvas.narrow(1, 0, h).narrow(2, 0, w).contiguous();
}

Result<int64_t> TiledRanks::ProbeOutputChannels() {
  const int64_t side = 2 * model_.geometry().align_px;
  const int64_t c = model_.input_channels();
  TESSERA_ASSIGN_OR_RETURN(torch::Tensor out, model_.Forward(torch::zeros({c, side, side})));
  return out.size(0);
}

}  // namespace tessera::worker

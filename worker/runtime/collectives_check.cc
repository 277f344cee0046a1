#include "worker/runtime/collectives_check.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "worker/runtime/collectives.h"
#include "worker/runtime/rank_device.h"

namespace tessera::worker {

Result<nlohmann::json> RunCollectivesCheck(const DistEnv& env,
                                           const CollectivesCheckOptions& options) {
  if (options.size_mb <= 0) return InvalidArgument("must be positive", "size-mb");
  if (options.iters <= 0) return InvalidArgument("must be positive", "iters");
  TESSERA_ASSIGN_OR_RETURN(torch::Device device, SelectRankDevice(env.device, env.local_rank));
  TESSERA_ASSIGN_OR_RETURN(Backend backend, BackendForDevice(env.device));
  ConnectOptions co;
  co.backend = backend;
  co.op_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(env.collective_timeout);
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<World> world, ConnectWorld(env, co));
  Collectives& c = world->world();
  const int n = c.size();
  const int rank = c.rank();
  const int64_t elements = options.size_mb * (int64_t{1} << 20) / 4;
  auto opts = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  torch::NoGradGuard no_grad;

  // All-reduce: every rank contributes rank + 1, so each element sums to n(n+1)/2.
  torch::Tensor t = torch::empty({elements}, opts);
  const double expected = n * (n + 1) / 2.0;
  bool allreduce_ok = true;
  std::vector<double> ms;
  for (int i = 0; i <= options.iters; ++i) {
    t.fill_(static_cast<float>(rank + 1));
    if (device.is_cuda()) torch::cuda::synchronize(device.index());
    const auto t0 = std::chrono::steady_clock::now();
    TESSERA_RETURN_IF_ERROR(c.AllReduceSum({t}));
    if (device.is_cuda()) torch::cuda::synchronize(device.index());
    const double took =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (i > 0) ms.push_back(took);  // the first one sets the communicator up
    const double lo = t.min().item<double>();
    const double hi = t.max().item<double>();
    allreduce_ok = allreduce_ok && lo == expected && hi == expected;
  }
  std::sort(ms.begin(), ms.end());
  const double median_ms = ms[ms.size() / 2];
  // Bus bandwidth as NCCL's tests define it: bytes * 2(n-1)/n per second.
  const double bytes = static_cast<double>(elements) * 4.0;
  const double busbw = n > 1 ? bytes * 2.0 * (n - 1) / n / (median_ms / 1e3) / 1e9 : 0.0;

  // Broadcast from rank 0: every rank ends with rank 0's 7.
  torch::Tensor b = torch::full({1024}, static_cast<float>(rank == 0 ? 7 : -rank), opts);
  TESSERA_RETURN_IF_ERROR(c.Broadcast({b}, 0));
  const bool broadcast_ok = b.min().item<double>() == 7.0 && b.max().item<double>() == 7.0;
  TESSERA_RETURN_IF_ERROR(c.Barrier());

  return nlohmann::json{{"backend", backend == Backend::kNccl ? "nccl" : "gloo"},
                        {"device", device.str()},
                        {"rank", rank},
                        {"world_size", n},
                        {"size_mb", options.size_mb},
                        {"allreduce_ok", allreduce_ok},
                        {"allreduce_ms", median_ms},
                        {"allreduce_busbw_gbps", busbw},
                        {"broadcast_ok", broadcast_ok},
                        {"barrier_ok", true}};
}

}  // namespace tessera::worker

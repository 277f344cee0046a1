#include "scheduler/step_bound.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <vector>

namespace tessera::scheduler {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// HybridStepLowerBound: micro-batch counts bounded one by one; above, one bound for all.
constexpr int64_t kEachMicroBatchCount = 64;

// What the bounds read of a set of devices (PipelineStepLowerBound, step 1).
struct Terms {
  double compute = 0;          // per sample: every layer on its fastest class
  double fixed = 0;            // per micro-batch: every layer's least fixed time
  double work = 0;             // per sample on the reference class
  std::vector<double> speeds;  // per device, against the reference, fastest first
  double per_byte = 0;         // the smallest message over the fastest link, per sample
  double latency = 0;          // the least link latency
};

Terms TermsOf(const CostModel& cm, const std::vector<int>& devices) {
  const int L = cm.num_layers();
  Terms t;
  std::set<int> classes;
  std::vector<int> one_of_class;
  for (int d : devices) {
    if (classes.insert(cm.device(d).speed_class).second) one_of_class.push_back(d);
  }
  const std::vector<double>& W = cm.ComputePrefix(one_of_class.front());
  for (int l = 0; l < L; ++l) {
    double c = kInf, f = kInf;
    for (int d : one_of_class) {
      const std::vector<double>& C = cm.ComputePrefix(d);
      const std::vector<double>& F = cm.FixedPrefix(d);
      c = std::min(c, C[l + 1] - C[l]);
      f = std::min(f, F[l + 1] - F[l]);
    }
    t.compute += std::max(c, 0.0);
    t.fixed += std::max(f, 0.0);
  }
  t.work = std::max(W[L], 0.0);
  // Every layer takes a class at least rho x the reference's time: speed 1 / rho.
  std::map<int, double> class_speed;
  for (int d : one_of_class) {
    const std::vector<double>& C = cm.ComputePrefix(d);
    double rho = kInf;
    for (int l = 0; l < L; ++l) {
      const double w = W[l + 1] - W[l];
      if (w > 0) rho = std::min(rho, std::max(C[l + 1] - C[l], 0.0) / w);
    }
    class_speed[cm.device(d).speed_class] = rho > 0 ? 1 / rho : kInf;
  }
  for (int d : devices) t.speeds.push_back(class_speed.at(cm.device(d).speed_class));
  std::sort(t.speeds.begin(), t.speeds.end(), std::greater<>());
  double bandwidth = 0, latency = kInf;
  for (int a : devices) {
    for (int b : devices) {
      if (a == b) continue;
      const Link link = cm.LinkBetween(a, b);
      bandwidth = std::max(bandwidth, link.bandwidth_bytes_per_s);
      latency = std::min(latency, link.latency_s);
    }
  }
  double message = kInf;
  for (int l = 0; l + 1 < L; ++l) message = std::min(message, cm.OutputBytes(l));
  if (bandwidth > 0 && std::isfinite(bandwidth) && std::isfinite(message)) {
    t.per_byte = message / bandwidth;
  }
  t.latency = std::isfinite(latency) ? std::max(latency, 0.0) : 0;
  return t;
}

// The most micro-batches a step may have.
int64_t MaxMicroBatches(const CostModel& cm) {
  int64_t max_m = cm.global_batch();
  if (cm.training() && cm.max_micro_batches() > 0) {
    max_m = std::min<int64_t>(max_m, cm.max_micro_batches());
  }
  return max_m;
}

// A replica's time for b samples is at least max(slope1 b + base1, slope2 b + base2)
// (PipelineStepLowerBound, step 2).
struct Line {
  double slope1 = 0, base1 = 0, slope2 = 0, base2 = 0;
  double At(double b) const { return std::max(slope1 * b + base1, slope2 * b + base2); }
};

// A replica of S stages on devices of `t` whose speeds sum to speed_sum.
class ReplicaTerms {
 public:
  ReplicaTerms(const CostModel& cm, const Terms& t, int S, double speed_sum)
      : S_(S), overhead_(cm.options().micro_batch_overhead_s) {
    per_sample_ = t.compute + (S - 1) * t.per_byte;
    per_micro_ = t.fixed + S * overhead_ + (S - 1) * cm.options().forward_send_messages * t.latency;
    share_ = std::isfinite(speed_sum) && speed_sum > 0 ? t.work / speed_sum : 0;
  }

  // At m micro-batches: the stage times sum to sum = b / m x per_sample + per_micro,
  // the slowest is at least max(sum / S, b / m x share + overhead), the replica takes
  // sum + (m - 1) x slowest.
  Line At(double m) const {
    Line l;
    l.slope1 = (m + S_ - 1) / S_ * per_sample_ / m;
    l.base1 = (m + S_ - 1) / S_ * per_micro_;
    l.slope2 = per_sample_ / m + (m - 1) * share_ / m;
    l.base2 = per_micro_ + (m - 1) * overhead_;
    return l;
  }

  // Below At(m) for every m >= m0: (m + S - 1) / (S m) >= 1 / S, (m + S - 1) / S >=
  // m0 / S, (m - 1) / m >= (m0 - 1) / m0.
  Line From(double m0) const {
    Line l;
    l.slope1 = per_sample_ / S_;
    l.base1 = m0 / S_ * per_micro_;
    l.slope2 = (m0 - 1) / m0 * share_;
    l.base2 = per_micro_ + (m0 - 1) * overhead_;
    return l;
  }

 private:
  int S_;
  double overhead_;
  double per_sample_ = 0, per_micro_ = 0, share_ = 0;
};

// The least level at which replicas on `lines`, each holding at least `least`
// samples, hold `batch` between them, or a level below it. From the level where
// every replica holds `least`, the samples held grow with the level, concave
// (each replica's: the lesser of two rising lines), so Newton's steps approach
// the answer from below and reach it within a step per line a replica leaves.
double Level(const std::vector<Line>& lines, double least, double batch) {
  double level = 0;
  for (const Line& l : lines) level = std::max(level, l.At(least));
  for (size_t step = 0; step < 2 * lines.size() + 4; ++step) {
    double held = 0, rate = 0;  // samples within `level`, and their growth per second
    for (const Line& l : lines) {
      const double by1 = l.slope1 > 0 ? (level - l.base1) / l.slope1 : kInf;
      const double by2 = l.slope2 > 0 ? (level - l.base2) / l.slope2 : kInf;
      if (!std::isfinite(std::min(by1, by2))) return level;  // no slope: holds any batch
      held += std::min(by1, by2);
      // The growth just above `level` (at a kink, the lesser one): Newton's step
      // then stays below the answer.
      rate += by1 < by2   ? 1 / l.slope1
              : by2 < by1 ? 1 / l.slope2
                          : std::min(1 / l.slope1, 1 / l.slope2);
    }
    if (held >= batch * (1 - 1e-12) || !(rate > 0)) return level;
    level += (batch - held) / rate;
  }
  return level;
}

}  // namespace

double PipelineStepLowerBound(const CostModel& cm, const std::vector<int>& devices,
                              int max_stages) {
  const int K = std::min({max_stages, static_cast<int>(devices.size()), cm.num_layers()});
  if (K < 2) return kInf;
  const Terms t = TermsOf(cm, devices);
  const int64_t max_m = MaxMicroBatches(cm);
  if (max_m < 1) return kInf;
  const auto B = static_cast<double>(cm.global_batch());
  double best = kInf, top_speeds = t.speeds.front();
  for (int S = 2; S <= K; ++S) {
    top_speeds += t.speeds[S - 1];
    const ReplicaTerms replica(cm, t, S, top_speeds);
    auto bound = [&](int64_t m) { return replica.At(static_cast<double>(m)).At(B); };
    // (3) Convex in m: the least m whose successor is no lower.
    int64_t lo = 1, hi = max_m;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (bound(mid + 1) >= bound(mid)) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    best = std::min(best, bound(lo));
  }
  return best;
}

double HybridStepLowerBound(const CostModel& cm, const std::vector<std::vector<int>>& replicas) {
  const int R = static_cast<int>(replicas.size());
  const int64_t B = cm.global_batch();
  const int64_t max_m = std::min<int64_t>(MaxMicroBatches(cm), R > 0 ? B / R : 0);
  if (R == 0 || max_m < 1) return kInf;
  // Inference on single-stage replicas only is paced per replica (CostModel::Evaluate):
  // its step is not the slowest replica's, so the level below does not bound it.
  const bool staged = std::any_of(replicas.begin(), replicas.end(),
                                  [](const std::vector<int>& r) { return r.size() >= 2; });
  if (!staged && !cm.training()) return 0;
  std::vector<ReplicaTerms> terms;
  for (const std::vector<int>& devices : replicas) {
    const int S = static_cast<int>(devices.size());
    if (S == 0 || S > cm.num_layers()) return kInf;
    const Terms t = TermsOf(cm, devices);
    double speed_sum = 0;
    for (double s : t.speeds) speed_sum += s;
    terms.emplace_back(cm, t, S, speed_sum);
  }
  const auto batch = static_cast<double>(B);
  double best = kInf;
  std::vector<Line> lines(R);
  for (int64_t m = 1; m <= std::min(max_m, kEachMicroBatchCount); ++m) {
    for (int r = 0; r < R; ++r) lines[r] = terms[r].At(static_cast<double>(m));
    best = std::min(best, Level(lines, static_cast<double>(m), batch));
  }
  if (max_m > kEachMicroBatchCount) {
    const double m0 = kEachMicroBatchCount + 1;
    for (int r = 0; r < R; ++r) lines[r] = terms[r].From(m0);
    best = std::min(best, Level(lines, m0, batch));
  }
  return best;
}

}  // namespace tessera::scheduler

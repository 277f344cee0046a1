// A training job's metrics history (GET /api/v1/jobs/{id}/metrics) as the
// job page draws it. Pure functions over points {step, attempt, rank, ts_ms,
// loss, samples_per_s, compute_s, comm_s, bubble_s, peak_memory_bytes,
// predicted_peak_memory_bytes}; no DOM, so node --test checks them.

// Ranks more than this many steps behind the others are not waited for
// when polling (a dead rank must not make every poll read its attempt again).
export const MAX_RANK_LAG = 200;

const keyOf = (p) => `${p.step}:${p.attempt}:${p.rank}`;
const byStepAttemptRank = (a, b) => a.step - b.step || a.attempt - b.attempt || a.rank - b.rank;

// The points a job page holds: merged from pages, one per (step, attempt,
// rank), in page order.
export class MetricsHistory {
  constructor() {
    this.clear();
  }

  clear() {
    this.byKey = new Map();
    this.sorted = [];
    this.attempt = null;  // the job's attempt when the history was read
  }

  // Adds a page's points; a point already held is replaced.
  add(points) {
    let added = 0;
    for (const p of points || []) {
      if (!Number.isFinite(Number(p.step))) continue;
      if (!this.byKey.has(keyOf(p))) added++;
      this.byKey.set(keyOf(p), p);
    }
    if (points && points.length) this.sorted = [...this.byKey.values()].sort(byStepAttemptRank);
    return added;
  }

  get points() {
    return this.sorted;
  }

  // What to ask for next: the whole history when the job's attempt changed
  // (a resumed attempt repeats steps) or was never read, else the current
  // attempt's steps after the lowest last step of its ranks.
  nextQuery(jobAttempt) {
    if (this.attempt !== jobAttempt) return { full: true };
    const last = new Map();
    for (const p of this.sorted) {
      if (p.attempt === jobAttempt) last.set(p.rank, Math.max(last.get(p.rank) ?? -1, p.step));
    }
    if (!last.size) return { full: false, attempt: jobAttempt };
    const steps = [...last.values()];
    const since = Math.max(Math.min(...steps), Math.max(...steps) - MAX_RANK_LAG);
    return { full: false, attempt: jobAttempt, since };
  }
}

// One point per step for a job-wide figure (loss, samples/s): the newest
// attempt wins where attempts repeat a step, then the lowest rank.
// Returns [{x: step, y, attempt, ts_ms}] by step.
export function stepSeries(points, field) {
  const best = new Map();
  for (const p of points) {
    const y = Number(p[field]);
    if (p[field] === undefined || p[field] === null || !Number.isFinite(y)) continue;
    const q = best.get(p.step);
    if (!q || p.attempt > q.attempt || (p.attempt === q.attempt && p.rank < q.rank)) {
      best.set(p.step, p);
    }
  }
  return [...best.values()].sort((a, b) => a.step - b.step)
    .map((p) => ({ x: p.step, y: Number(p[field]), attempt: p.attempt, ts_ms: p.ts_ms }));
}

// At most `max` points of a series for drawing: each of max/2 runs of
// consecutive points keeps its lowest and highest (so spikes stay), and the
// first and last points always stay. Shorter series come back unchanged.
export function downsample(series, max) {
  if (!Array.isArray(series) || series.length <= max || max < 4) return series || [];
  const runs = Math.floor((max - 2) / 2);
  const keep = new Set([0, series.length - 1]);
  for (let r = 0; r < runs; r++) {
    const begin = Math.floor((r * series.length) / runs);
    const end = Math.floor(((r + 1) * series.length) / runs);
    let lo = begin;
    let hi = begin;
    for (let i = begin; i < end; i++) {
      if (series[i].y < series[lo].y) lo = i;
      if (series[i].y > series[hi].y) hi = i;
    }
    keep.add(lo);
    keep.add(hi);
  }
  return [...keep].sort((a, b) => a - b).map((i) => series[i]);
}

// Where each later attempt begins: [{attempt, step, ts_ms, label}] by
// attempt. `step` is the attempt's lowest step in the history; `ts_ms` the
// time its ranks were all running (its "running" event), else its first
// point's time.
export function recoveryMarkers(points, events = []) {
  const first = new Map();  // attempt -> lowest-step point
  for (const p of points) {
    const q = first.get(p.attempt);
    if (!q || p.step < q.step) first.set(p.attempt, p);
  }
  const attempts = [...first.keys()].sort((a, b) => a - b);
  return attempts.slice(1).map((attempt) => {
    const p = first.get(attempt);
    const running = events.find((e) => e.to === 'running' && Number(e.attempt) === attempt);
    return { attempt, step: p.step, ts_ms: running ? Number(running.ts_ms) : p.ts_ms,
             label: `attempt ${attempt}` };
  });
}

// Pixel positions of markers on a chart whose x axis runs from step x0 (at
// `left`) to x1 (at left + width): [{...marker, x, row}] for the markers in
// range, by x. A label that would start within `minGap` px of the previous
// one in its row moves down a row (up to `rows` rows, then back to the top).
export function placeMarkers(markers, { x0, x1, left, width, minGap = 48, rows = 3 }) {
  const span = x1 - x0;
  const placed = [];
  const lastInRow = new Array(rows).fill(-Infinity);
  const sorted = [...markers].filter((m) => m.step >= x0 && m.step <= x1)
    .sort((a, b) => a.step - b.step);
  for (const m of sorted) {
    const x = span > 0 ? left + ((m.step - x0) / span) * width : left + width / 2;
    let row = lastInRow.findIndex((at) => x - at >= minGap);
    if (row < 0) row = placed.length % rows;
    lastInRow[row] = x;
    placed.push({ ...m, x, row });
  }
  return placed;
}

const newestAttempt = (points) => points.reduce((a, p) => Math.max(a, p.attempt), -Infinity);

// Each rank's step time split in the newest attempt, averaged over its last
// `window` points: [{rank, step, compute_s, comm_s, bubble_s, total_s,
// share: {compute, comm, bubble}}] by rank; ranks without a split are left out.
export function rankSplits(points, window = 20) {
  const attempt = newestAttempt(points);
  const byRank = new Map();
  for (const p of points) {
    if (p.attempt !== attempt) continue;
    const given = (v) => v !== undefined && v !== null && Number.isFinite(Number(v));
    if (![p.compute_s, p.comm_s, p.bubble_s].some(given)) continue;
    if (!byRank.has(p.rank)) byRank.set(p.rank, []);
    byRank.get(p.rank).push(p);
  }
  const mean = (list, f) => list.reduce((a, p) => a + (Number(p[f]) || 0), 0) / list.length;
  return [...byRank.entries()].sort((a, b) => a[0] - b[0]).map(([rank, list]) => {
    const recent = list.sort((a, b) => a.step - b.step).slice(-window);
    const compute = mean(recent, 'compute_s');
    const comm = mean(recent, 'comm_s');
    const bubble = mean(recent, 'bubble_s');
    const total = compute + comm + bubble;
    const share = (v) => (total > 0 ? v / total : 0);
    return { rank, step: recent[recent.length - 1].step, compute_s: compute, comm_s: comm,
             bubble_s: bubble, total_s: total,
             share: { compute: share(compute), comm: share(comm), bubble: share(bubble) } };
  });
}

// Each rank's memory in the newest attempt: its highest peak and the
// planner's prediction (newest), [{rank, peak_bytes, predicted_bytes}] by
// rank; ranks that report neither are left out.
export function rankMemory(points) {
  const attempt = newestAttempt(points);
  const byRank = new Map();
  for (const p of points) {
    if (p.attempt !== attempt) continue;
    const peak = Number(p.peak_memory_bytes);
    const predicted = Number(p.predicted_peak_memory_bytes);
    const has = (v, raw) => raw !== undefined && raw !== null && Number.isFinite(v);
    if (!has(peak, p.peak_memory_bytes) && !has(predicted, p.predicted_peak_memory_bytes)) continue;
    const m = byRank.get(p.rank) || { rank: p.rank, peak_bytes: null, predicted_bytes: null, step: -1 };
    if (has(peak, p.peak_memory_bytes)) m.peak_bytes = Math.max(m.peak_bytes ?? 0, peak);
    if (has(predicted, p.predicted_peak_memory_bytes) && p.step >= m.step) {
      m.predicted_bytes = predicted;
      m.step = p.step;
    }
    byRank.set(p.rank, m);
  }
  return [...byRank.values()].sort((a, b) => a.rank - b.rank)
    .map(({ rank, peak_bytes, predicted_bytes }) => ({ rank, peak_bytes, predicted_bytes }));
}

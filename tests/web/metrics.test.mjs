// Unit tests of web/metrics.js, the job page's history helpers (node --test).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MetricsHistory, stepSeries, downsample, recoveryMarkers, placeMarkers, rankSplits,
         rankMemory, MAX_RANK_LAG } from '../../web/metrics.js';

const pt = (step, attempt, rank, extra = {}) => ({ step, attempt, rank, ts_ms: 1000 * step, ...extra });

test('a step keeps the newest attempt, then the lowest rank', () => {
  const points = [pt(1, 1, 1, { loss: 0.9 }), pt(1, 1, 0, { loss: 1.0 }), pt(2, 1, 0, { loss: 0.8 }),
                  pt(2, 2, 1, { loss: 0.7 }), pt(3, 2, 0, {})];
  assert.deepEqual(stepSeries(points, 'loss').map((p) => [p.x, p.y, p.attempt]),
                   [[1, 1.0, 1], [2, 0.7, 2]]);
});

test('display downsampling keeps the ends, every spike and the order', () => {
  const series = Array.from({ length: 1000 }, (_, i) => ({ x: i, y: Math.sin(i / 50) }));
  series[437].y = 9;   // a spike
  series[812].y = -9;  // and a dip
  const out = downsample(series, 100);
  assert.ok(out.length <= 100, `${out.length} points`);
  assert.ok(out.length >= 50, `${out.length} points`);
  assert.equal(out[0], series[0]);
  assert.equal(out[out.length - 1], series[999]);
  assert.ok(out.includes(series[437]) && out.includes(series[812]));
  for (let i = 1; i < out.length; i++) assert.ok(out[i].x > out[i - 1].x);
  const short = series.slice(0, 50);
  assert.equal(downsample(short, 100), short, 'short series unchanged');
  assert.deepEqual(downsample(undefined, 100), []);
});

test('recovery markers sit at each later attempt\'s first step, timed by its running event', () => {
  const points = [pt(1, 1, 0), pt(30, 1, 0), pt(26, 2, 0), pt(27, 2, 1), pt(40, 3, 0)];
  const events = [{ to: 'running', attempt: 1, ts_ms: 5 }, { to: 'recovering', attempt: 1, ts_ms: 6 },
                  { to: 'running', attempt: 2, ts_ms: 7 }];
  assert.deepEqual(recoveryMarkers(points, events), [
    { attempt: 2, step: 26, ts_ms: 7, label: 'attempt 2' },
    { attempt: 3, step: 40, ts_ms: 40000, label: 'attempt 3' },  // no event seen yet
  ]);
  assert.deepEqual(recoveryMarkers([pt(1, 1, 0)], events), [], 'one attempt: no recovery');
});

test('markers are placed on the step axis; crowded labels move down a row', () => {
  const markers = [{ step: 50, attempt: 2 }, { step: 52, attempt: 3 }, { step: 200, attempt: 4 },
                   { step: 10, attempt: 5 }, { step: 101, attempt: 6 }];
  const placed = placeMarkers(markers, { x0: 0, x1: 100, left: 40, width: 500, minGap: 48 });
  assert.deepEqual(placed.map((m) => [m.attempt, m.x, m.row]),
                   [[5, 90, 0], [2, 290, 0], [3, 300, 1]], 'out-of-range markers dropped');
  const one = placeMarkers([{ step: 7 }], { x0: 7, x1: 7, left: 0, width: 100 });
  assert.equal(one[0].x, 50, 'a one-step axis puts it in the middle');
});

test('the history merges pages and polls the current attempt after its slowest rank', () => {
  const h = new MetricsHistory();
  assert.deepEqual(h.nextQuery(1), { full: true }, 'never read: the whole history');
  h.add([pt(2, 1, 0), pt(1, 1, 0), pt(1, 1, 1)]);
  h.attempt = 1;
  assert.equal(h.add([pt(2, 1, 0), pt(3, 1, 0)]), 1, 'a point already held is not new');
  assert.deepEqual(h.points.map((p) => [p.step, p.rank]), [[1, 0], [1, 1], [2, 0], [3, 0]]);
  assert.deepEqual(h.nextQuery(1), { full: false, attempt: 1, since: 1 }, 'rank 1 lags at step 1');
  h.add([pt(3 + MAX_RANK_LAG + 5, 1, 0)]);
  assert.equal(h.nextQuery(1).since, 8, 'a rank far behind is not waited for');
  assert.deepEqual(h.nextQuery(2), { full: true }, 'a new attempt: read everything again');
  h.attempt = 2;
  assert.deepEqual(h.nextQuery(2), { full: false, attempt: 2 }, 'nothing of it yet: from its start');
});

test('per-rank split of the newest attempt and its memory', () => {
  const points = [
    pt(1, 1, 0, { compute_s: 9, comm_s: 9, bubble_s: 9, peak_memory_bytes: 999 }),
    pt(5, 2, 0, { compute_s: 0.3, comm_s: 0.1, bubble_s: 0, peak_memory_bytes: 100,
                  predicted_peak_memory_bytes: 90 }),
    pt(6, 2, 0, { compute_s: 0.5, comm_s: 0.1, bubble_s: 0.2, peak_memory_bytes: 120,
                  predicted_peak_memory_bytes: 95 }),
    pt(6, 2, 1, { loss: 1 }),
  ];
  const [r0, ...rest] = rankSplits(points);
  assert.equal(rest.length, 0, 'rank 1 reports no split');
  assert.equal(r0.rank, 0);
  assert.equal(r0.step, 6);
  assert.ok(Math.abs(r0.compute_s - 0.4) < 1e-9 && Math.abs(r0.total_s - 0.6) < 1e-9);
  assert.ok(Math.abs(r0.share.compute + r0.share.comm + r0.share.bubble - 1) < 1e-9);
  assert.equal(rankSplits(points, 1)[0].compute_s, 0.5, 'a window of one: the newest step');
  assert.deepEqual(rankMemory(points), [{ rank: 0, peak_bytes: 120, predicted_bytes: 95 }]);
});

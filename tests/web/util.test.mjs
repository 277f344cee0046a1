// Unit tests of web/util.js helpers that need no browser (node --test).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { jobProgress } from '../../web/util.js';
import { linkSummary } from '../../web/pages/cluster.js';
import { baselineLines } from '../../web/plan.js';

test('train jobs count steps', () => {
  const p = jobProgress({ state: 'running', spec: { steps: 200, global_batch: 8 },
                          progress: { step: 50, eta_s: 30 } });
  assert.equal(p.unit, 'steps');
  assert.equal(p.step, 50);
  assert.equal(p.fraction, 0.25);
  assert.equal(p.eta_s, 30);
});

test('infer jobs count images from job.inference', () => {
  const job = { state: 'running', spec: { steps: 0 }, progress: null,
                inference: { images_total: 400, images_done: 100, images_per_s: 25, eta_s: 12,
                             devices: [{ rank: 0, device: 'a:0', images: 100,
                                         images_per_s: 25 }] } };
  const p = jobProgress(job);
  assert.equal(p.unit, 'images');
  assert.equal(p.step, 100);
  assert.equal(p.steps, 400);
  assert.equal(p.fraction, 0.25);
  assert.equal(p.eta_s, 12);
  assert.equal(p.images_per_s, 25);
  assert.equal(p.devices.length, 1);
});

test('an infer job without a rate has no eta; a finished one is full', () => {
  const running = jobProgress({ state: 'running', spec: {},
                                inference: { images_total: 10, images_done: 0, eta_s: null } });
  assert.equal(running.eta_s, null);
  const done = jobProgress({ state: 'succeeded', spec: {},
                             inference: { images_total: 10, images_done: 7, eta_s: 0 } });
  assert.equal(done.fraction, 1);
  assert.equal(done.eta_s, null);
});

test('node links read as pairs and kinds', () => {
  assert.equal(linkSummary([{ a: 0, b: 1, kind: 'nvlink', nvlink_count: 4 },
                            { a: 0, b: 2, kind: 'system', nvlink_count: 0 }]),
               '0–1 NVLink ×4 · 0–2 across sockets');
  assert.equal(linkSummary([]), '');
});

test('the chosen plan names its speedup over both hand-made baselines', () => {
  const lines = baselineLines([
    { name: 'even_all', description: 'an even split over all 5 devices', feasible: true,
      step_s: 0.58, speedup: 1.4213 },
    { name: 'best_group', description: 'the 2 A100s alone', feasible: true, step_s: 0.41,
      speedup: 1.0 },
  ]);
  assert.deepEqual(lines.map((l) => l.text), [
    '1.42× faster than an even split over all 5 devices (step 580 ms)',
    'as fast as the 2 A100s alone (step 410 ms)',
  ]);
  assert.ok(lines.every((l) => l.feasible));
});

test('a baseline that does not fit says why; a missing list is empty', () => {
  const [line] = baselineLines([
    { name: 'even_all', description: 'an even split over all 3 devices', feasible: false,
      reason: "doesn't fit on a:2", step_s: null, speedup: null, plan: null },
  ]);
  assert.equal(line.feasible, false);
  assert.equal(line.text, "an even split over all 3 devices does not fit: doesn't fit on a:2");
  assert.deepEqual(baselineLines(undefined), []);
  // A forced layout may be slower than a baseline.
  assert.equal(baselineLines([{ description: 'x', feasible: true, step_s: 1, speedup: 0.8 }])[0]
    .text, '0.80× the speed of x (step 1 s)');
});

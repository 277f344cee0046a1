// Unit tests of web/util.js helpers that need no browser (node --test).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { jobProgress } from '../../web/util.js';
import { linkSummary } from '../../web/pages/cluster.js';

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

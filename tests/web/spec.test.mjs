// Unit tests of web/spec.js: the submit form's values -> a job spec and the
// errors shown next to each field (node --test).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { buildSpec, formFieldOf, isModelEntrypoint } from '../../web/spec.js';

// An infer job of a registered exported model, as the form reads it.
function modelForm(overrides = {}) {
  return { name: 'colorize-1931', kind: 'infer', entrypoint: 'model:lab-unet', args: '',
           global_batch: '8', steps: '', layout: 'auto', min_devices: '1', max_devices: '0',
           priority: '0', max_attempts: '3', checkpoint_every_s: '300', dataset: '/srv/scans',
           output: '/srv/out', checkpoint: '', env: '', image_input: '', image_output: '',
           image_range_lo: '', image_range_hi: '', image_align_px: '', image_halo_px: '',
           ...overrides };
}

test('the three entrypoint kinds are accepted, others named', () => {
  for (const entrypoint of ['builtin:colorize-unet', 'cmd:train-ddp', 'model:lab-unet']) {
    const { errors } = buildSpec(modelForm({ entrypoint, kind: 'infer',
                                             checkpoint: '/srv/ckpt' }));
    assert.equal(errors.entrypoint, undefined, entrypoint);
  }
  for (const entrypoint of ['model:', 'models:x', 'shell:rm', 'model:/srv/m.pt', 'unet']) {
    const { errors } = buildSpec(modelForm({ entrypoint }));
    assert.match(errors.entrypoint, /model:<id>/, entrypoint);
  }
  assert.equal(isModelEntrypoint(' model:x'), true);
  assert.equal(isModelEntrypoint('builtin:x'), false);
  assert.equal(isModelEntrypoint(undefined), false);
});

test('image: only the stated members are sent', () => {
  const rows = [
    [{}, undefined],
    [{ image_input: 'gray' }, { input: 'gray' }],
    [{ image_output: 'scores' }, { output: 'scores' }],
    [{ image_range_lo: '0', image_range_hi: '255' }, { range: [0, 255] }],
    [{ image_range_lo: '-1', image_range_hi: '1.5' }, { range: [-1, 1.5] }],
    [{ image_align_px: '16' }, { align_px: 16 }],
    [{ image_halo_px: '0' }, { halo_px: 0 }],
    [{ image_input: 'l', image_output: 'ab', image_range_lo: '-1', image_range_hi: '1',
       image_align_px: '16', image_halo_px: '24' },
     { input: 'l', output: 'ab', range: [-1, 1], align_px: 16, halo_px: 24 }],
  ];
  for (const [values, image] of rows) {
    const { spec, errors } = buildSpec(modelForm(values));
    assert.deepEqual(errors, {}, JSON.stringify(values));
    assert.deepEqual(spec.image, image, JSON.stringify(values));
  }
});

test('image: a bad member is named on its own field', () => {
  const rows = [
    [{ image_input: 'cmyk' }, 'image_input'],
    [{ image_output: 'lab' }, 'image_output'],
    [{ image_range_lo: '0' }, 'image_range_hi'],
    [{ image_range_hi: '1' }, 'image_range_lo'],
    [{ image_range_lo: '1', image_range_hi: '0' }, 'image_range_hi'],
    [{ image_range_lo: '1', image_range_hi: '1' }, 'image_range_hi'],
    [{ image_range_lo: 'black', image_range_hi: '1' }, 'image_range_lo'],
    [{ image_range_lo: '0', image_range_hi: '2e6' }, 'image_range_hi'],
    [{ image_align_px: '0' }, 'image_align_px'],
    [{ image_align_px: '2048' }, 'image_align_px'],
    [{ image_align_px: '1.5' }, 'image_align_px'],
    [{ image_halo_px: '-1' }, 'image_halo_px'],
    [{ image_halo_px: '5000' }, 'image_halo_px'],
  ];
  for (const [values, field] of rows) {
    const { spec, errors } = buildSpec(modelForm(values));
    assert.deepEqual(Object.keys(errors), [field], JSON.stringify(values));
    assert.equal(spec.image, undefined, JSON.stringify(values));
  }
});

test('a model: job carries its weights; it infers whole on each device, trains in any layout', () => {
  const train = buildSpec(modelForm({ kind: 'train' }));
  assert.equal(train.errors.kind, undefined);
  assert.ok(train.errors.steps, 'a model: training job needs its steps');
  const trained = buildSpec(modelForm({ kind: 'train', steps: '100' }));
  assert.deepEqual(trained.errors, {});
  assert.equal(trained.spec.steps, 100);
  for (const layout of ['pipeline', 'hybrid', 'tiled']) {
    assert.ok(buildSpec(modelForm({ layout })).errors.layout, layout);
  }
  assert.equal(buildSpec(modelForm({ layout: 'data' })).errors.layout, undefined);
  for (const layout of ['pipeline', 'hybrid', 'data']) {
    const t = buildSpec(modelForm({ kind: 'train', steps: '10', layout }));
    assert.equal(t.errors.layout, undefined, layout);
    assert.equal(t.spec.layout, layout);
  }
  assert.ok(buildSpec(modelForm({ kind: 'train', steps: '10', layout: 'tiled' })).errors.layout);
  // A checkpoint left in the (hidden) field is not sent.
  const { spec, errors } = buildSpec(modelForm({ checkpoint: '/srv/ckpt' }));
  assert.deepEqual(errors, {});
  assert.equal(spec.checkpoint, undefined);
  assert.equal(spec.steps, undefined);
});

test('other entrypoints send no image and keep their checkpoint', () => {
  const image = { image_input: 'rgb', image_align_px: '16' };
  const builtin = buildSpec(modelForm({ entrypoint: 'builtin:colorize-unet',
                                        checkpoint: '/srv/ckpt', ...image }));
  assert.deepEqual(builtin.errors, {});
  assert.equal(builtin.spec.image, undefined);
  assert.equal(builtin.spec.checkpoint, '/srv/ckpt');
  const train = buildSpec(modelForm({ entrypoint: 'cmd:train-ddp', kind: 'train',
                                      layout: 'pipeline', image_align_px: 'x' }));
  assert.deepEqual(train.errors, {}, 'image fields of a hidden section are not checked');
  assert.equal(train.spec.image, undefined);
});

test('API error fields reach their form field', () => {
  const rows = [
    ['image.input', 'image_input'], ['image.output', 'image_output'],
    ['image.range', 'image_range_lo'], ['image.align_px', 'image_align_px'],
    ['image.halo_px', 'image_halo_px'], ['image', 'entrypoint'], ['kind', 'kind'],
    ['checkpoint', 'checkpoint'], ['args[2]', 'args'], ['env.RANK', 'env'], ['gpus', null],
    ['', null],
  ];
  for (const [api, field] of rows) assert.equal(formFieldOf(api), field, api);
});

// Submit page: a job spec form checked in the browser (spec.js), a plan
// preview from POST /api/v1/plans, and POST /api/v1/jobs. Errors, the
// browser's or the API's (error.field), are shown next to their field.

import { api } from '../api.js';
import { h, fill } from '../util.js';
import { buildSpec, formFieldOf, FIELDS, IMAGE_INPUTS, IMAGE_OUTPUTS, isModelEntrypoint }
  from '../spec.js';
import { planPreview } from '../plan.js';

// Remembered across visits in this tab so a half-written form survives.
let draft = null;

function field(name, label, control, help) {
  control.id = `f-${name}`;
  control.name = name;
  const ids = [help ? `f-${name}-help` : null, `f-${name}-error`].filter(Boolean).join(' ');
  control.setAttribute('aria-describedby', ids);
  return h('div', { class: 'field', 'data-field': name },
    h('label', { for: `f-${name}` }, label),
    control,
    help ? h('p', { id: `f-${name}-help`, class: 'help' }, help) : null,
    h('p', { id: `f-${name}-error`, class: 'field-error' }));
}

const input = (attrs = {}) => h('input', { type: 'text', autocomplete: 'off', ...attrs });
const number = (attrs = {}) => h('input', { type: 'text', inputmode: 'numeric', autocomplete: 'off',
                                            ...attrs });
const select = (options, value) => h('select', {},
  options.map(([v, text]) => h('option', { value: v, selected: v === value }, text)));

export function mountSubmit(main) {
  document.title = 'Submit a job · Tessera';
  const datalist = h('datalist', { id: 'entrypoint-options' });
  const form = h('form', { class: 'card submit-form', novalidate: true,
                           'aria-labelledby': 'submit-h' },
    h('h2', { id: 'submit-h' }, 'Job spec'),
    h('p', { id: 'form-error', class: 'field-error form-error', role: 'alert' }),
    h('div', { class: 'grid2' },
      field('name', 'Name', input({ required: true, placeholder: 'colorize-1890s' }),
            'Letters, digits, ".", "_" and "-".'),
      field('kind', 'Kind', select([['train', 'train'], ['infer', 'infer']], 'train'))),
    field('entrypoint', 'Entrypoint', input({ required: true, list: 'entrypoint-options',
                                              placeholder: 'builtin:colorize-unet' }),
          'builtin:<model>, an allowed cmd:<program> or an exported model:<name>.'),
    datalist,
    field('args', 'Arguments', h('textarea', { rows: 3, spellcheck: 'false' }), 'One per line.'),
    h('div', { class: 'grid2' },
      field('global_batch', 'Global batch', number({ required: true, value: '32' })),
      field('steps', 'Steps', number({ value: '1000' }), 'Required for training a builtin: or model: entrypoint.')),
    h('div', { class: 'grid2' },
      field('min_devices', 'Min devices', number({ value: '1' })),
      field('max_devices', 'Max devices', number({ value: '0' }), '0 means no limit.')),
    field('layout', 'Layout', select([['auto', 'auto (planner picks)'], ['data', 'data parallel'],
                                      ['pipeline', 'pipeline'], ['hybrid', 'hybrid'],
                                      ['tiled', 'tiled (inference)']], 'auto')),
    // Shown for model: entrypoints only; empty members come from the module.
    h('fieldset', { class: 'image-convention', id: 'image-fields', hidden: true },
      h('legend', {}, 'Image convention (exported model)'),
      h('p', { class: 'help' }, 'Leave a field empty to take it from the module ' +
                                '(its tessera.json), or to let the worker probe it.'),
      h('div', { class: 'grid2' },
        field('image_input', 'Input tensor', select([['', 'from the module'], ...IMAGE_INPUTS], '')),
        field('image_output', 'Output tensor', select([['', 'from the module'], ...IMAGE_OUTPUTS], ''))),
      h('div', { class: 'grid2' },
        field('image_range_lo', 'Black value', number({ inputmode: 'decimal', placeholder: '0' }),
              'What black is in rgb/gray tensors.'),
        field('image_range_hi', 'White value', number({ inputmode: 'decimal', placeholder: '1' }),
              'e.g. 1, or 255.')),
      h('div', { class: 'grid2' },
        field('image_align_px', 'Align (px)', number({ placeholder: 'probed' }),
              'Sides must be multiples of this (1–1024).'),
        field('image_halo_px', 'Halo (px)', number({ placeholder: 'probed' }),
              'Context a tile needs around its part (0–4096).'))),
    h('details', { class: 'more' }, h('summary', {}, 'More options'),
      h('div', { class: 'grid2' },
        field('priority', 'Priority', number({ value: '0' }), '-1000 to 1000.'),
        field('max_attempts', 'Max attempts', number({ value: '3' }))),
      field('checkpoint_every_s', 'Checkpoint every (s)', number({ value: '300' })),
      field('dataset', 'Dataset', input({ placeholder: '/data/scans' }), 'Absolute path.'),
      field('output', 'Output', input({ placeholder: '/data/out' }), 'Absolute path.'),
      field('checkpoint', 'Checkpoint', input({}), 'Absolute path (inference: weights to load).'),
      field('env', 'Environment', h('textarea', { rows: 2, spellcheck: 'false' }),
            'KEY=value, one per line.')),
    h('div', { class: 'actions' },
      h('button', { type: 'button', id: 'preview-button' }, 'Preview plan'),
      h('button', { type: 'submit', class: 'primary', id: 'submit-button' }, 'Submit job')));

  const preview = h('div', { id: 'plan-preview', 'aria-live': 'polite' },
    h('p', { class: 'muted' }, 'Fill in the form to see how the planner would place the job.'));
  fill(main,
    h('div', { class: 'page-head' }, h('h1', {}, 'Submit a job')),
    h('div', { class: 'submit-layout' },
      form,
      h('section', { class: 'card', 'aria-labelledby': 'preview-h' },
        h('h2', { id: 'preview-h' }, 'Plan preview'), preview)));

  const control = (name) => form.elements.namedItem(name);
  if (draft) for (const [k, v] of Object.entries(draft)) if (control(k)) control(k).value = v;

  // A model: entrypoint shows the image convention and has no checkpoint
  // (an exported model carries its weights); buildSpec sends neither otherwise.
  function showEntrypointFields() {
    const model = isModelEntrypoint(control('entrypoint').value);
    form.querySelector('#image-fields').hidden = !model;
    form.querySelector('[data-field="checkpoint"]').hidden = model;
  }
  showEntrypointFields();

  function values() {
    const v = {};
    for (const name of FIELDS) v[name] = control(name).value;
    return v;
  }

  function clearErrors() {
    for (const name of FIELDS) showError(name, '');
    form.querySelector('#form-error').textContent = '';
  }

  function showError(name, message) {
    const el = form.querySelector(`#f-${name}-error`);
    el.textContent = message;
    const c = control(name);
    if (message) c.setAttribute('aria-invalid', 'true');
    else c.removeAttribute('aria-invalid');
    if (message) {
      const details = c.closest('details');
      if (details) details.open = true;
    }
  }

  function showErrors(errors, focus) {
    clearErrors();
    const names = FIELDS.filter((f) => errors[f]);
    for (const f of names) showError(f, errors[f]);
    if (focus && names.length) control(names[0]).focus();
    return names.length === 0;
  }

  // An ApiError next to its field, or above the form.
  function showApiError(e, what) {
    clearErrors();
    const f = formFieldOf(e.field);
    const msg = e.field && f && e.field !== f ? `${e.field}: ${e.message}` : e.message;
    if (f) {
      showError(f, msg);
      control(f).focus();
    } else {
      form.querySelector('#form-error').textContent = `${what} failed: ${msg}`;
    }
  }

  let previewSeq = 0;
  let measuringTimer = null;
  async function runPreview({ focusErrors = false } = {}) {
    clearTimeout(measuringTimer);
    const { spec, errors } = buildSpec(values());
    if (!showErrors(errors, focusErrors)) {
      fill(preview, h('p', { class: 'muted' }, 'Fix the marked fields to see a plan.'));
      return;
    }
    const seq = ++previewSeq;
    preview.setAttribute('aria-busy', 'true');
    try {
      const set = await api.plan(spec);
      if (seq !== previewSeq) return;
      if (set && set.state === 'measuring_profile') {
        // Not an error: tesserad measures the model once; ask again when told.
        const wait = Math.max(1, Number(set.retry_after_s) || 2);
        fill(preview, h('p', { class: 'muted', id: 'preview-measuring' },
                        `${set.message || 'measuring the model profile'}; the preview follows ` +
                        'when it is ready.'));
        measuringTimer = setTimeout(() => {
          if (seq === previewSeq && preview.isConnected) runPreview();
        }, wait * 1000);
        return;
      }
      fill(preview, planPreview(set, { deviceNames }));
    } catch (e) {
      if (seq !== previewSeq) return;
      if (e.status === 501) {
        fill(preview, h('p', { class: 'muted' }, 'This tesserad has no planner wired in (501); ' +
                                                 'the job can still be submitted.'));
      } else {
        if (formFieldOf(e.field)) showApiError(e, 'Plan preview');
        fill(preview, h('p', { class: 'error-text' }, `No preview: ${e.message}`));
      }
    } finally {
      if (seq === previewSeq) preview.removeAttribute('aria-busy');
    }
  }

  let timer = null;
  form.addEventListener('input', () => {
    showEntrypointFields();
    draft = values();
    clearTimeout(timer);
    timer = setTimeout(() => {
      const { errors } = buildSpec(values());
      if (Object.keys(errors).length === 0) runPreview();
    }, 700);
  });
  form.querySelector('#preview-button').addEventListener('click', () => {
    clearTimeout(timer);
    runPreview({ focusErrors: true });
  });

  let submitting = false;
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearTimeout(timer);
    if (submitting) return;
    const { spec, errors } = buildSpec(values());
    if (!showErrors(errors, true)) return;
    submitting = true;
    const button = form.querySelector('#submit-button');
    button.disabled = true;
    button.textContent = 'Submitting…';
    try {
      const job = await api.submit(spec);
      draft = null;
      location.hash = `#/jobs/${job.id}`;
    } catch (e) {
      showApiError(e, 'Submit');
    } finally {
      submitting = false;
      button.disabled = false;
      button.textContent = 'Submit job';
    }
  });

  // The allow-list for the entrypoint field, and device names for the diagram.
  const deviceNames = new Map();
  api.entrypoints().then(({ entrypoints = [] }) => {
    fill(datalist, entrypoints.map((e) => h('option', { value: e.name },
      e.description || e.command || e.name)));
  }).catch(() => {});
  api.nodes().then(({ nodes = [] }) => {
    for (const n of nodes) for (const d of n.devices || []) {
      deviceNames.set(`${n.name}:${d.index}`, d.name);
    }
  }).catch(() => {});
  control('name').focus();
  return {
    unmount() {
      clearTimeout(timer);
    },
  };
}

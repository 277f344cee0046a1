// Draws a planner plan (scheduler/plan_json.cc) as boxes: one row per
// data-parallel replica, one box per device of each pipeline stage holding
// its layer range [begin, end), its batch share and its predicted time.

import { h, fmtBytes, fmtNumber, fmtDuration } from './util.js';

// A job's `plan` and each dry-run plan are the planner's plan JSON; a
// wrapper with the plan under "plan" (an attempt record) is accepted too.
export function unwrapPlan(p) {
  if (!p || typeof p !== 'object') return null;
  if (Array.isArray(p.replicas)) return p;
  if (p.plan && Array.isArray(p.plan.replicas)) return p.plan;
  return null;
}

function fmtSeconds(s) {
  if (!Number.isFinite(Number(s))) return '–';
  const v = Number(s);
  if (v >= 120) return fmtDuration(v);
  return v < 1 ? `${fmtNumber(v * 1000, 1)} ms` : `${fmtNumber(v, 2)} s`;
}

function pct(x) {
  if (x > 0 && x < 0.001) return '<0.1%';
  return `${Number((x * 100).toFixed(1))}%`;
}

// The chosen plan's speedup over the hand-made baselines (`plan.baselines` of the
// chosen plan, or a plan set's `baselines`; scheduler/plan_json.h): one line each,
// e.g. "1.42× faster than an even split over all 5 devices (step 580 ms)", or
// "the 2 A100s alone does not fit: ...". Pure: returns [{ name, feasible, text }].
export function baselineLines(baselines) {
  if (!Array.isArray(baselines)) return [];
  return baselines.filter((b) => b && typeof b === 'object').map((b) => {
    const desc = b.description || b.name || 'baseline';
    const speedup = Number(b.speedup);
    if (!b.feasible || b.speedup === null || !Number.isFinite(speedup)) {
      return { name: b.name, feasible: false,
               text: `${desc} does not fit${b.reason ? `: ${b.reason}` : ''}` };
    }
    const x = speedup.toFixed(2);
    const how = x === '1.00' ? `as fast as ${desc}`
      : speedup > 1 ? `${x}× faster than ${desc}` : `${x}× the speed of ${desc}`;
    return { name: b.name, feasible: true, text: `${how} (step ${fmtSeconds(b.step_s)})` };
  });
}

function baselineList(baselines) {
  const lines = baselineLines(baselines);
  if (!lines.length) return null;
  return h('ul', { class: 'plan-baselines', 'aria-label': 'compared with hand-made plans' },
    lines.map((l) => h('li', { class: l.feasible ? null : 'muted' }, l.text)));
}

// deviceNames: optional Map "node:index" -> device name.
export function planDiagram(plan, { deviceNames = new Map(), title } = {}) {
  plan = unwrapPlan(plan);
  if (!plan) return h('p', { class: 'muted' }, 'No plan yet.');
  const replicas = plan.replicas || [];
  const globalBatch = replicas.reduce((a, r) => a + (Number(r.batch) || 0), 0);
  const pred = plan.predicted || {};
  const mem = pred.peak_mem_bytes && typeof pred.peak_mem_bytes === 'object'
    ? pred.peak_mem_bytes : {};
  const heading = `${plan.layout || '?'} · dp ${plan.dp ?? '?'} × pp ${plan.pp ?? '?'}` +
    (Number(plan.pp) > 1 ? ` · ${plan.micro_batches} micro-batches (${plan.schedule})` : '');

  const rows = replicas.map((r, ri) => {
    const share = globalBatch ? Number(r.batch) / globalBatch : NaN;
    const stages = (r.stages || []).map((s, si) => {
      const layers = Array.isArray(s.layers) ? s.layers : [];
      const boxes = (s.devices || []).map((d) => h('div', {
        class: 'dev-box',
        role: 'listitem',
        'aria-label': `${d}: layers ${layers[0]} to ${layers[1] - 1}, batch ${r.batch}, ` +
          `predicted ${fmtSeconds(s.time_s)}`,
      },
      h('div', { class: 'dev-id' }, d),
      deviceNames.get(d) ? h('div', { class: 'dev-name' }, deviceNames.get(d)) : null,
      h('div', { class: 'dev-layers', title: `half-open range [${layers[0]}, ${layers[1]})` },
        layers[1] - layers[0] === 1 ? `layer ${layers[0]}` : `layers ${layers[0]}–${layers[1] - 1}`,
        layers[1] - layers[0] > 1 ? h('span', { class: 'muted' }, ` (${layers[1] - layers[0]})`)
                                  : null),
      h('div', {}, `batch ${r.batch}`, Number.isFinite(share) ? ` (${pct(share)})` : ''),
      h('div', {}, `${fmtSeconds(s.time_s)}`, Number(plan.pp) > 1 ? ' / micro-batch' : ' / step'),
      mem[d] || s.peak_mem_bytes
        ? h('div', { class: 'muted' }, `peak ${fmtBytes(mem[d] ?? s.peak_mem_bytes)}`) : null));
      return [si > 0 ? h('div', { class: 'stage-arrow', 'aria-hidden': 'true' }, '→') : null,
              h('div', { class: 'stage' }, h('div', { class: 'stage-label' }, `stage ${si}`),
                ...boxes)];
    });
    return h('div', { class: 'replica', role: 'list', 'aria-label': `replica ${ri}` },
             h('div', { class: 'replica-label' }, `replica ${ri}`),
             h('div', { class: 'stages' }, stages));
  });

  return h('div', { class: 'plan' },
    h('div', { class: 'plan-head' },
      h('strong', {}, title ? `${title}: ${heading}` : heading),
      h('span', { class: 'plan-pred' },
        `step ${fmtSeconds(pred.step_s)} · ${fmtNumber(pred.samples_per_s, 1)} samples/s` +
        (Number.isFinite(Number(pred.bubble)) ? ` · bubble ${pct(Number(pred.bubble))}` : '') +
        (Number.isFinite(Number(pred.comm)) ? ` · comm ${pct(Number(pred.comm))}` : ''))),
    plan.why ? h('p', { class: 'plan-why' }, plan.why) : null,
    baselineList(plan.baselines),
    // Pure data parallel: one box per replica, laid side by side.
    h('div', { class: replicas.every((r) => (r.stages || []).length <= 1) ? 'replicas flat'
                                                                          : 'replicas' }, rows));
}

// The dry-run answer: best plan drawn, other ranked plans summarised, and
// the reasons other layouts lost.
export function planPreview(set, opts = {}) {
  const plans = (set && set.plans) || [];
  const rejected = (set && set.rejected) || [];
  return h('div', { class: 'plan-preview' },
    plans.length ? planDiagram(plans[0], { ...opts, title: 'Best plan' })
      : h('p', { class: 'error-text' }, 'No layout fits this job on the cluster now.'),
    plans.length > 1 ? h('details', { class: 'alt-plans' },
      h('summary', {}, `${plans.length - 1} other plan${plans.length > 2 ? 's' : ''}`),
      plans.slice(1).map((p, i) => planDiagram(p, { ...opts, title: `#${i + 2}` }))) : null,
    rejected.length ? h('div', { class: 'rejected' },
      h('h4', {}, 'Why other layouts lost'),
      h('ul', {}, rejected.map((r) => h('li', {},
        h('strong', {}, r.layout), ': ', r.reason)))) : null);
}

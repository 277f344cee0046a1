// Small DOM and formatting helpers. Text always goes in as text nodes, never
// as HTML, so names and reasons from the API cannot inject markup.

// h('div', {class: 'x', onclick: fn}, 'text', child, [more, children])
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'style' && typeof v === 'object') Object.assign(el.style, v);
    else if (k === 'value') el.value = v;
    else if (k === 'checked' || k === 'selected' || k === 'disabled') el[k] = Boolean(v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// Replaces el's children.
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

export function fmtBytes(n) {
  if (n === undefined || n === null || !Number.isFinite(Number(n))) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = Number(n);
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v >= 100 || i === 0 ? Math.round(v) : Number(v.toFixed(1))} ${units[i]}`;
}

// Compute speed from TFLOPS: "312 TFLOPS", "3.1 GFLOPS" (emulated devices
// measure the CPU they run on).
export function fmtFlops(tflops) {
  const t = Number(tflops);
  if (!Number.isFinite(t) || t <= 0) return '–';
  if (t >= 1) return `${fmtNumber(t, 1)} TFLOPS`;
  if (t >= 0.001) return `${fmtNumber(t * 1000, 1)} GFLOPS`;
  return `${fmtNumber(t * 1e6, 1)} MFLOPS`;
}

export function fmtNumber(v, digits = 2) {
  if (v === undefined || v === null || !Number.isFinite(Number(v))) return '–';
  const n = Number(v);
  if (Math.abs(n) >= 1000) return Math.round(n).toLocaleString('en');
  // Small values keep two significant digits instead of rounding to 0.
  if (n !== 0 && Math.abs(n) < 10 ** -digits * 10) return Number(n.toPrecision(2)).toString();
  return Number(n.toFixed(digits)).toString();
}

export function fmtDuration(seconds) {
  if (seconds === undefined || seconds === null || !Number.isFinite(seconds)) return '–';
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  const hours = Math.floor(s / 3600);
  if (hours < 48) return `${hours}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(hours / 24)}d ${hours % 24}h`;
}

export function fmtTime(ms) {
  if (!ms) return '–';
  const d = new Date(Number(ms));
  const time = d.toLocaleTimeString('en-GB', { hour12: false });
  if (new Date().toDateString() === d.toDateString()) return time;
  return `${d.toLocaleDateString('en-GB')} ${time}`;
}

export function fmtAgo(ms, now = Date.now()) {
  if (!ms) return 'never';
  const s = (now - Number(ms)) / 1000;
  if (s < 1.5) return 'just now';
  return `${fmtDuration(s)} ago`;
}

export const JOB_STATES = ['pending', 'planned', 'starting', 'running', 'recovering',
                           'succeeded', 'failed', 'cancelled'];
export const TERMINAL_STATES = new Set(['succeeded', 'failed', 'cancelled']);

export function badge(text, kind = text) {
  return h('span', { class: `badge badge-${kind}` }, text);
}

// A labelled progress bar (0..1), or an indeterminate placeholder.
export function progressBar(fraction, label) {
  const known = Number.isFinite(fraction);
  const pct = known ? Math.max(0, Math.min(100, fraction * 100)) : 0;
  return h('div', {
    class: 'bar',
    role: 'progressbar',
    'aria-label': label,
    'aria-valuemin': 0,
    'aria-valuemax': 100,
    'aria-valuenow': known ? Math.round(pct) : undefined,
    'aria-valuetext': known ? `${Math.round(pct)}%` : 'unknown',
  }, h('div', { class: 'bar-fill', style: { width: `${pct}%` } }));
}

// Progress of a job: {fraction, step, steps, eta_s} from job.progress and
// job.spec.steps. `observed` is [{t_ms, step}] seen by this page (for ETA).
export function jobProgress(job, observed = []) {
  const inf = job.inference && typeof job.inference === 'object' ? job.inference : null;
  if (inf) {
    // Infer jobs count images, not steps: {unit: 'images', devices: [...]}.
    const total = Number(inf.images_total) || 0;
    const doneImages = job.state === 'succeeded' ? total : Number(inf.images_done) || 0;
    const eta = !TERMINAL_STATES.has(job.state) && Number.isFinite(Number(inf.eta_s)) &&
      inf.eta_s !== null ? Number(inf.eta_s) : null;
    return {
      fraction: total > 0 ? Math.min(1, doneImages / total) : NaN,
      step: doneImages, steps: total, eta_s: eta, unit: 'images',
      images_per_s: Number(inf.images_per_s) || 0, devices: inf.devices || [],
      progress: job.progress && typeof job.progress === 'object' ? job.progress : null,
    };
  }
  const p = job.progress && typeof job.progress === 'object' ? job.progress : null;
  const steps = Number(job.spec && job.spec.steps) || 0;
  const done = job.state === 'succeeded';
  let step = p && Number.isFinite(Number(p.step)) ? Number(p.step) : null;
  if (done && steps > 0) step = steps;
  const fraction = done ? 1 : (steps > 0 && step !== null ? Math.min(1, step / steps) : NaN);
  let eta = null;
  if (!TERMINAL_STATES.has(job.state) && steps > 0 && step !== null) {
    const left = Math.max(0, steps - step);
    if (p && Number.isFinite(Number(p.eta_s))) {
      eta = Number(p.eta_s);
    } else {
      // Rate seen by this page across polls, else the batch / throughput.
      const first = observed.find((o) => o.step !== null && o.step < step);
      const last = observed[observed.length - 1];
      if (first && last && last.step > first.step && last.t_ms > first.t_ms) {
        eta = left * ((last.t_ms - first.t_ms) / 1000) / (last.step - first.step);
      } else if (p && Number(p.samples_per_s) > 0 && Number(job.spec.global_batch) > 0) {
        eta = left * Number(job.spec.global_batch) / Number(p.samples_per_s);
      }
    }
  }
  return { fraction, step, steps, eta_s: eta, unit: 'steps', progress: p };
}

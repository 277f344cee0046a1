// Jobs page: the job list (GET /api/v1/jobs), filtered by state and paged
// with the API's id cursor (`after` / `next_after`).

import { api } from '../api.js';
import { h, fill, badge, fmtAgo, fmtDuration, progressBar, jobProgress, JOB_STATES }
  from '../util.js';
import { recordProgress } from '../samples.js';

const PAGE_SIZES = [10, 20, 50, 100];
// Cursors of the pages before the current one, per filter, for "Previous".
const cursorHistory = new Map();

// A waiting job's place in the queue (GET /api/v1/queue): its position (or
// held by a user limit), its user's weighted device share, and why it waits.
function queueNote(row) {
  if (!row) return null;
  const place = row.position > 0 ? `queue #${row.position}` : 'held';
  const why = row.reason ? ` · ${row.reason}` : '';
  return h('div', { class: 'muted small queue-note' },
    `${place} · ${row.user}'s share ${Number(row.user_share).toFixed(2)}${why}`);
}

function jobRow(job, now, queued) {
  const observed = recordProgress(job).filter((s) => s.attempt === job.attempt);
  const p = jobProgress(job, observed);
  const stepText = p.step !== null
    ? `${p.step}${p.steps ? ` / ${p.steps}` : ''} ${p.unit}`
    : (p.steps ? `0 / ${p.steps} ${p.unit}` : '');
  return h('tr', { 'data-job': job.id, 'data-state': job.state },
    h('td', { 'data-label': 'Job' },
      h('a', { href: `#/jobs/${job.id}` }, `#${job.id} ${job.spec ? job.spec.name : ''}`)),
    h('td', { 'data-label': 'State' }, badge(job.state),
      job.attempt > 1 ? h('span', { class: 'muted' }, ` attempt ${job.attempt}`) : null,
      job.state === 'pending' ? queueNote(queued.get(job.id)) : null),
    h('td', { 'data-label': 'Owner' }, job.owner),
    h('td', { 'data-label': 'Progress', class: 'progress-cell' },
      h('div', {}, progressBar(p.fraction, `Job ${job.id} progress`),
        h('span', { class: 'muted small' }, stepText))),
    h('td', { 'data-label': 'ETA' }, p.eta_s !== null ? fmtDuration(p.eta_s) : '–'),
    h('td', { 'data-label': 'Updated' }, fmtAgo(job.updated_ms, now)));
}

export function mountJobs(main, params) {
  document.title = 'Jobs · Tessera';
  const state = params.get('state') || '';
  const after = Number(params.get('after') || 0);
  const limit = Math.min(500, Math.max(1, Number(params.get('limit')) || 20));
  const filterKey = `${state}/${limit}`;
  const stack = cursorHistory.get(filterKey) || [];
  // Forget "previous" cursors that lie after this page (the user went back).
  while (stack.length && stack[stack.length - 1] >= after) stack.pop();
  cursorHistory.set(filterKey, stack);

  const select = h('select', { id: 'state-filter', name: 'state' },
    h('option', { value: '' }, 'All states'),
    JOB_STATES.map((s) => h('option', { value: s, selected: s === state }, s)));
  const sizes = PAGE_SIZES.includes(limit) ? PAGE_SIZES : [...PAGE_SIZES, limit].sort((a, b) => a - b);
  const sizeSelect = h('select', { id: 'page-size', name: 'limit' },
    sizes.map((n) => h('option', { value: String(n), selected: n === limit }, String(n))));
  // A new filter or page size starts again at the first page.
  const first = () => {
    const q = new URLSearchParams();
    if (select.value) q.set('state', select.value);
    if (sizeSelect.value !== '20') q.set('limit', sizeSelect.value);
    location.hash = `#/jobs${q.toString() ? `?${q}` : ''}`;
  };
  select.addEventListener('change', first);
  sizeSelect.addEventListener('change', first);
  const tbody = h('tbody', {});
  const summary = h('p', { class: 'muted', 'aria-live': 'polite' }, 'Loading jobs…');
  const prev = h('button', { type: 'button', id: 'jobs-prev', disabled: after === 0 }, '← Previous');
  const next = h('button', { type: 'button', id: 'jobs-next', disabled: true }, 'Next →');
  let nextAfter = null;
  const link = (a) => `#/jobs?${new URLSearchParams({ ...(state ? { state } : {}),
                                                       ...(limit !== 20 ? { limit: String(limit) } : {}),
                                                       ...(a ? { after: String(a) } : {}) })}`;
  prev.addEventListener('click', () => {
    const back = stack.length ? stack[stack.length - 1] : 0;
    location.hash = link(back);
  });
  next.addEventListener('click', () => {
    if (nextAfter === null) return;
    stack.push(after);
    location.hash = link(nextAfter);
  });

  fill(main,
    h('div', { class: 'page-head' }, h('h1', {}, 'Jobs'),
      h('a', { class: 'button primary', href: '#/submit' }, 'Submit a job')),
    h('div', { class: 'card' },
      h('div', { class: 'toolbar' },
        h('div', { class: 'field inline' }, h('label', { for: 'state-filter' }, 'State'), select),
        h('div', { class: 'field inline' }, h('label', { for: 'page-size' }, 'Per page'), sizeSelect),
        summary),
      h('table', { class: 'jobs responsive' },
        h('caption', { class: 'visually-hidden' }, 'Jobs, oldest first'),
        h('thead', {}, h('tr', {}, ['Job', 'State', 'Owner', 'Progress', 'ETA', 'Updated']
          .map((c) => h('th', { scope: 'col' }, c)))),
        tbody),
      h('nav', { class: 'pager', 'aria-label': 'Job pages' }, prev, next)));

  return {
    async tick() {
      const page = await api.jobs({ state, limit, after: after || undefined });
      const jobs = page.jobs || [];
      nextAfter = page.next_after ?? null;
      next.disabled = nextAfter === null;
      // Waiting jobs show their place in the queue (a tesserad without
      // GET /api/v1/queue leaves them as they were).
      const queued = new Map();
      if (jobs.some((j) => j.state === 'pending')) {
        try {
          for (const row of (await api.queue()).queue || []) {
            if (row.id !== null && row.id !== undefined) queued.set(row.id, row);
          }
        } catch (e) {
          if (e.status !== 501) throw e;
        }
      }
      const now = Date.now();
      const rows = jobs.map((j) => jobRow(j, now, queued));
      if (!rows.length) {
        rows.push(h('tr', {}, h('td', { colspan: 6, class: 'muted' },
          state ? `No ${state} jobs${after ? ' on this page' : ''}.` : 'No jobs yet.')));
      }
      // Rows are rebuilt; keep keyboard focus on the same job's link.
      const focused = tbody.contains(document.activeElement)
        ? document.activeElement.closest('tr')?.dataset.job : null;
      fill(tbody, rows);
      if (focused) tbody.querySelector(`tr[data-job="${focused}"] a`)?.focus();
      const text = `${jobs.length} job${jobs.length === 1 ? '' : 's'}` +
        (after ? ` after #${after}` : '') + (nextAfter !== null ? ' · more on the next page' : '');
      if (summary.textContent !== text) summary.textContent = text;
    },
  };
}

// Job page: state and progress (GET /api/v1/jobs/{id}), the plan diagram,
// the training history (GET .../metrics: loss and samples/s over the whole
// run with recoveries marked, each rank's step time split and peak memory),
// the event timeline (GET .../events, incremental), a rank's log tail
// (GET .../logs?rank=&tail=) and the cancel button.

import { api } from '../api.js';
import { h, fill, badge, fmtTime, fmtDuration, fmtNumber, fmtAgo, fmtBytes, progressBar,
         jobProgress, TERMINAL_STATES } from '../util.js';
import { recordProgress } from '../samples.js';
import { planDiagram, unwrapPlan } from '../plan.js';
import { LineChart } from '../chart.js';
import { MetricsHistory, stepSeries, downsample, recoveryMarkers, rankSplits,
         rankMemory } from '../metrics.js';

// Points a chart draws at most (the history may hold thousands).
const CHART_POINTS = 600;
// Pages of history one poll reads at most (5000 points each).
const PAGES_PER_POLL = 20;

// "412 ms", "2.31 s".
const fmtStepTime = (s) => (s < 1 ? `${fmtNumber(s * 1000, 0)} ms` : `${fmtNumber(s, 2)} s`);

// A later attempt reaching running is a recovery (recovering -> pending ->
// planned -> starting -> running, resumed from the last checkpoint).
const isRecovery = (e) => e.to === 'running' && Number(e.attempt) > 1;

function eventKind(e) {
  if (e.to === 'failed' || e.to === 'recovering') return 'bad';
  if (isRecovery(e) || e.to === 'succeeded') return 'good';
  if (e.to === 'cancelled') return 'warn';
  return '';
}

function eventItem(e) {
  return h('li', { class: `event ${eventKind(e)}`, 'data-to': e.to },
    h('time', { datetime: new Date(Number(e.ts_ms)).toISOString() }, fmtTime(e.ts_ms)),
    h('div', { class: 'event-body' },
      h('span', { class: 'event-change' }, e.from ? badge(e.from) : null,
        e.from ? ' → ' : '', badge(e.to)),
      e.attempt ? h('span', { class: 'muted' }, ` attempt ${e.attempt}`) : null,
      isRecovery(e) ? [' ', badge('recovered', 'succeeded')] : null,
      e.reason ? h('div', { class: 'event-reason' }, e.reason) : null));
}

// Ranks of a stored plan: [{rank, node, device}] in rank order.
function ranksOf(storedPlan) {
  if (storedPlan && Array.isArray(storedPlan.ranks)) {
    return storedPlan.ranks.map((r, i) => ({ rank: i, label: `${r.node}:${r.device_index}` }));
  }
  const plan = unwrapPlan(storedPlan);
  const out = [];
  for (const r of (plan && plan.replicas) || []) {
    for (const s of r.stages || []) for (const d of s.devices || []) {
      out.push({ rank: out.length, label: d });
    }
  }
  return out;
}

export function mountJob(main, id) {
  document.title = `Job #${id} · Tessera`;
  const title = h('h1', {}, `Job #${id}`);
  const stateEl = h('span', { id: 'job-state' });
  const cancel = h('button', { type: 'button', id: 'cancel-button', class: 'danger',
                               disabled: true }, 'Cancel job');
  const cancelMsg = h('p', { class: 'field-error', role: 'alert' });
  const overview = h('dl', { class: 'kv overview' });
  const progress = h('div', { class: 'job-progress' });
  const planBox = h('div', { id: 'job-plan' }, h('p', { class: 'muted' }, 'Loading…'));
  const lossChart = new LineChart('Loss', { color: '#dc2626' });
  const speedChart = new LineChart('Samples / s', { color: '#2563eb' });
  const historyStatus = h('p', { class: 'muted small', id: 'history-status' }, 'Loading history…');
  const recoveries = h('ul', { class: 'recoveries', id: 'recoveries', 'aria-label': 'Recoveries' });
  const splitBox = h('div', { class: 'rank-bars', id: 'rank-split' });
  const memoryBox = h('div', { class: 'rank-bars', id: 'rank-memory' });
  const events = h('ol', { class: 'timeline', id: 'events', 'aria-label': 'Events, oldest first' });
  const eventsEmpty = h('p', { class: 'muted' }, 'No events yet.');
  const rankSelect = h('select', { id: 'log-rank' }, h('option', { value: '0' }, 'rank 0'));
  const tailSelect = h('select', { id: 'log-tail' },
    // The API serves at most the last 100 lines (docs/rest-api.md).
    [20, 50, 100].map((n) => h('option', { value: String(n), selected: n === 100 }, `${n} lines`)));
  const logStatus = h('p', { class: 'muted', id: 'log-status' });
  const logPre = h('pre', { class: 'log', id: 'log', tabindex: '0', 'aria-label': 'Log tail' });

  fill(main,
    h('div', { class: 'page-head' }, title, stateEl,
      h('div', { class: 'spacer' }), cancel),
    cancelMsg,
    h('div', { class: 'job-grid' },
      h('section', { class: 'card', 'aria-labelledby': 'ov-h' },
        h('h2', { id: 'ov-h' }, 'Overview'), progress, overview),
      h('section', { class: 'card', 'aria-labelledby': 'plan-h' },
        h('h2', { id: 'plan-h' }, 'Plan'), planBox),
      h('section', { class: 'card charts', 'aria-labelledby': 'charts-h' },
        h('h2', { id: 'charts-h' }, 'Training'),
        historyStatus,
        h('div', { class: 'chart-row' }, lossChart.el, speedChart.el),
        recoveries,
        h('div', { class: 'chart-row' },
          h('div', {}, h('h3', { id: 'split-h' }, 'Step time by rank'),
            h('p', { class: 'muted small' }, 'Mean of the last 20 steps of the current attempt: ',
              h('span', { class: 'key key-compute' }, 'compute'), ' ',
              h('span', { class: 'key key-comm' }, 'communication'), ' ',
              h('span', { class: 'key key-bubble' }, 'pipeline bubble')),
            splitBox),
          h('div', {}, h('h3', { id: 'memory-h' }, 'Peak memory by rank'),
            h('p', { class: 'muted small' }, 'Against the device\'s memory; the mark is the ' +
                                             'planner\'s prediction.'),
            memoryBox))),
      h('section', { class: 'card events', 'aria-labelledby': 'ev-h' },
        h('h2', { id: 'ev-h' }, 'Events'), eventsEmpty, events),
      h('section', { class: 'card logs', 'aria-labelledby': 'log-h' },
        h('h2', { id: 'log-h' }, 'Log tail'),
        h('div', { class: 'toolbar' },
          h('div', { class: 'field inline' }, h('label', { for: 'log-rank' }, 'Rank'), rankSelect),
          h('div', { class: 'field inline' }, h('label', { for: 'log-tail' }, 'Tail'), tailSelect)),
        logStatus, logPre)));

  let job = null;
  const deviceNames = new Map();  // "node:index" -> device name, for the plan diagram
  const deviceMemory = new Map();  // "node:index" -> memory_bytes, for the memory bars
  // Read again when a plan names a device not seen yet (a node that joined
  // or came back after this page first asked).
  const loadNodes = () => api.nodes().then(({ nodes = [] }) => {
    for (const n of nodes) {
      for (const d of n.devices || []) {
        deviceNames.set(`${n.name}:${d.index}`, d.name);
        deviceMemory.set(`${n.name}:${d.index}`, Number(d.memory_bytes) || 0);
      }
    }
    planKey = '';  // redraw with names
    historyKey = '';
  }).catch(() => {});
  let nodesAskedFor = '';  // the plan the nodes were last read again for
  loadNodes();
  const history = new MetricsHistory();
  const seenEvents = [];  // every event so far: recovery times for the markers
  let historyKey = '';    // what the history part was last drawn from
  let historyError = '';
  let eventsAfter = 0;
  let planKey = '';
  let ranksKey = '';
  let logsUnavailable = false;  // 501: this tesserad serves no logs; stop asking
  let lastLogText = null;

  cancel.addEventListener('click', async () => {
    cancel.disabled = true;
    cancelMsg.textContent = '';
    try {
      job = await api.cancel(id);
      render();
    } catch (e) {
      cancelMsg.textContent = `Cancel failed: ${e.message}`;
      cancel.disabled = false;
    }
  });
  const restartLogs = () => {
    logsUnavailable = false;
    lastLogText = null;
    pollLogs();
  };
  rankSelect.addEventListener('change', restartLogs);
  tailSelect.addEventListener('change', restartLogs);

  function render() {
    const s = job.spec || {};
    title.textContent = `Job #${job.id} ${s.name || ''}`;
    document.title = `Job #${job.id} ${s.name || ''} · Tessera`;
    fill(stateEl, badge(job.state));
    cancel.disabled = TERMINAL_STATES.has(job.state);
    // The step rate for the ETA: the current attempt's history (so it is
    // known right after a reload), else what this tab saw while polling.
    const samples = recordProgress(job);
    const seen = stepSeries(history.points.filter((x) => x.attempt === job.attempt), 'step')
      .map((x) => ({ t_ms: x.ts_ms, step: x.x }));
    const p = jobProgress(job, seen.length > 1 ? seen
      : samples.filter((x) => x.attempt === job.attempt));
    const pr = p.progress || {};
    fill(progress,
      progressBar(p.fraction, `Job ${job.id} progress`),
      p.unit === 'images' ? h('p', { class: 'progress-text' },
        `${p.step} of ${p.steps} images`,
        Number.isFinite(p.fraction) ? ` · ${Math.round(p.fraction * 100)}%` : '',
        ` · ${fmtNumber(p.images_per_s, 1)} images/s`,
        p.eta_s !== null ? ` · ETA ${fmtDuration(p.eta_s)}` : '') : null,
      p.unit === 'images' && p.devices.length ? h('table', { class: 'device-rates' },
        h('thead', {}, h('tr', {}, h('th', {}, 'Rank'), h('th', {}, 'Device'),
                                   h('th', {}, 'Images'), h('th', {}, 'Images/s'))),
        h('tbody', {}, p.devices.map((d) => h('tr', {},
          h('td', {}, String(d.rank)), h('td', {}, d.device || '–'),
          h('td', {}, String(d.images)), h('td', {}, fmtNumber(d.images_per_s, 1)))))) : null,
      p.unit === 'images' ? null : h('p', { class: 'progress-text' },
        p.step !== null ? `step ${p.step}${p.steps ? ` of ${p.steps}` : ''}` : 'no progress yet',
        Number.isFinite(p.fraction) ? ` · ${Math.round(p.fraction * 100)}%` : '',
        p.eta_s !== null ? ` · ETA ${fmtDuration(p.eta_s)}` : '',
        Number.isFinite(Number(pr.loss)) ? ` · loss ${fmtNumber(pr.loss, 4)}` : '',
        Number.isFinite(Number(pr.samples_per_s)) ? ` · ${fmtNumber(pr.samples_per_s, 1)} samples/s`
                                                  : ''));
    const rows = [
      ['Owner', job.owner],
      ['Entrypoint', s.entrypoint],
      ['Arguments', (s.args || []).join(' ') || '–'],
      ['Kind', s.kind || 'train'],
      ['Global batch', s.global_batch],
      ['Devices', `${s.min_devices ?? 1}–${s.max_devices ? s.max_devices : 'any'}`],
      ['Layout', s.layout || 'auto'],
      ['Attempt', `${job.attempt}${s.max_attempts ? ` of ${s.max_attempts}` : ''}`],
      ['Created', fmtTime(job.created_ms)],
      ['Updated', `${fmtTime(job.updated_ms)} (${fmtAgo(job.updated_ms)})`],
      ['Reason', job.reason || '–'],
    ];
    fill(overview, rows.flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, String(v ?? '–'))]));

    const key = JSON.stringify(job.plan ?? null);
    if (key !== planKey) {
      planKey = key;
      fill(planBox, unwrapPlan(job.plan) ? planDiagram(job.plan, { deviceNames })
        : h('p', { class: 'muted' }, TERMINAL_STATES.has(job.state) ? 'The job was never placed.'
                                                                     : 'Not placed yet.'));
      const ranks = ranksOf(job.plan);
      if (key !== nodesAskedFor && ranks.some((r) => r.label && !deviceMemory.has(r.label))) {
        nodesAskedFor = key;  // once per plan
        loadNodes();
      }
      const rk = JSON.stringify(ranks);
      if (rk !== ranksKey && ranks.length) {
        ranksKey = rk;
        const chosen = rankSelect.value;
        fill(rankSelect, ranks.map((r) => h('option', { value: String(r.rank),
                                                        selected: String(r.rank) === chosen },
                                            `rank ${r.rank} (${r.label})`)));
      }
    }
    renderHistory();
  }

  // The training history: charts with recovery markers, per-rank bars.
  function renderHistory() {
    const points = history.points;
    const markers = recoveryMarkers(points, seenEvents);
    const key = `${points.length}:${points.length ? points[points.length - 1].step : ''}:` +
      `${markers.length}:${seenEvents.length}:${planKey}:${historyError}`;
    if (key === historyKey) return;
    historyKey = key;
    const ranks = new Set(points.map((p) => p.rank));
    fill(historyStatus, historyError ? `History unavailable: ${historyError}`
      : points.length ? `Whole run from tesserad: ${points.length} progress lines of ` +
        `${ranks.size} rank${ranks.size === 1 ? '' : 's'} (older steps thinned).`
        : 'No progress lines recorded yet.');
    lossChart.set(downsample(stepSeries(points, 'loss'), CHART_POINTS));
    speedChart.set(downsample(stepSeries(points, 'samples_per_s'), CHART_POINTS));
    lossChart.setMarkers(markers);
    speedChart.setMarkers(markers);
    fill(recoveries, markers.map((m) => h('li', { class: 'recovery-marker', 'data-attempt': m.attempt,
                                                  'data-step': m.step },
      badge('recovered', 'succeeded'), ` attempt ${m.attempt} from step ${m.step}`,
      m.ts_ms ? ` · ${fmtTime(m.ts_ms)}` : '')));

    const labels = new Map(ranksOf(job && job.plan).map((r) => [r.rank, r.label]));
    const rankName = (rank) => `rank ${rank}${labels.has(rank) ? ` (${labels.get(rank)})` : ''}`;
    const splits = rankSplits(points);
    const pct = (v) => `${Math.round(v * 100)}%`;
    fill(splitBox, splits.length ? splits.map((r) => h('div', { class: 'rank-bar', 'data-rank': r.rank },
      h('div', { class: 'rank-bar-label' }, rankName(r.rank),
        h('span', { class: 'muted' }, ` ${fmtStepTime(r.total_s)} a step`)),
      h('div', { class: 'stack', role: 'img',
                 'aria-label': `${rankName(r.rank)}: compute ${pct(r.share.compute)}, communication ` +
                   `${pct(r.share.comm)}, bubble ${pct(r.share.bubble)} of ${fmtNumber(r.total_s, 3)} s` },
        [['compute', r.share.compute, r.compute_s], ['comm', r.share.comm, r.comm_s],
         ['bubble', r.share.bubble, r.bubble_s]].map(([k, share, secs]) => h('div', {
          class: `seg seg-${k}`, style: { width: `${share * 100}%` },
          title: `${k} ${fmtNumber(secs, 3)} s (${pct(share)})` }))),
      h('div', { class: 'muted small' }, `compute ${pct(r.share.compute)} · communication ` +
        `${pct(r.share.comm)} · bubble ${pct(r.share.bubble)}`)))
      : h('p', { class: 'muted' }, 'No step time split reported yet.'));

    const memory = rankMemory(points);
    fill(memoryBox, memory.length ? memory.map((m) => {
      const device = labels.get(m.rank);
      const total = device ? deviceMemory.get(device) || 0 : 0;
      const frac = (v) => (total > 0 && v !== null ? Math.min(1, v / total) : 0);
      return h('div', { class: 'rank-bar', 'data-rank': m.rank },
        h('div', { class: 'rank-bar-label' }, rankName(m.rank)),
        h('div', { class: 'stack', role: 'img', 'aria-label': `${rankName(m.rank)}: peak ` +
                     `${fmtBytes(m.peak_bytes)}${total ? ` of ${fmtBytes(total)}` : ''}` +
                     `${m.predicted_bytes !== null ? `, predicted ${fmtBytes(m.predicted_bytes)}` : ''}` },
          h('div', { class: 'seg seg-memory', style: { width: `${frac(m.peak_bytes) * 100}%` } }),
          m.predicted_bytes !== null && total
            ? h('div', { class: 'predicted', style: { left: `${frac(m.predicted_bytes) * 100}%` } }) : null),
        h('div', { class: 'muted small' }, `${m.peak_bytes !== null ? fmtBytes(m.peak_bytes) : '–'}` +
          `${total ? ` of ${fmtBytes(total)} (${pct(frac(m.peak_bytes))})` : ''}` +
          `${m.predicted_bytes !== null ? ` · predicted ${fmtBytes(m.predicted_bytes)}` : ''}`));
    }) : h('p', { class: 'muted' }, 'No memory figures reported yet.'));
  }

  // Reads the whole history once (and again when the attempt changes), then
  // only the current attempt's new steps.
  async function pollMetrics() {
    const attempt = job.attempt;
    let q = history.nextQuery(attempt);
    try {
      if (q.full) {
        const fresh = new MetricsHistory();
        let since;
        for (let page = 0; page < PAGES_PER_POLL; page++) {
          const r = await api.metrics(id, { since, limit: 5000 });
          fresh.add(r.points);
          if (r.next_since === null || r.next_since === undefined) break;
          since = r.next_since;
        }
        history.clear();
        history.add(fresh.points);
        history.attempt = attempt;
      } else {
        let since = q.since;
        for (let page = 0; page < PAGES_PER_POLL; page++) {
          const r = await api.metrics(id, { attempt: q.attempt, since, limit: 5000 });
          history.add(r.points);
          if (r.next_since === null || r.next_since === undefined) break;
          since = r.next_since;
        }
      }
      historyError = '';
    } catch (e) {
      historyError = e.message;
    }
    if (job) renderHistory();
  }

  async function pollEvents() {
    for (let page = 0; page < 10; page++) {
      const r = await api.events(id, eventsAfter);
      const list = r.events || [];
      for (const e of list) {
        events.append(eventItem(e));
        seenEvents.push(e);
      }
      if (list.length) eventsAfter = list[list.length - 1].id;
      eventsEmpty.hidden = events.children.length > 0;
      if (r.next_after === null || r.next_after === undefined || !list.length) break;
    }
  }

  async function pollLogs() {
    if (logsUnavailable) return;
    const rank = rankSelect.value || '0';
    const tail = tailSelect.value;
    const stale = () => rank !== (rankSelect.value || '0') || tail !== tailSelect.value;
    try {
      const r = await api.logs(id, rank, tail);
      if (stale()) return;  // the reader picked another rank meanwhile
      const text = (r.lines || []).join('\n');
      logStatus.textContent = `rank ${r.rank ?? rank} · ${(r.lines || []).length} lines`;
      logPre.hidden = false;
      if (text !== lastLogText) {
        const atBottom = logPre.scrollTop + logPre.clientHeight >= logPre.scrollHeight - 4;
        lastLogText = text;
        logPre.textContent = text || '(empty)';
        if (atBottom) logPre.scrollTop = logPre.scrollHeight;
      }
    } catch (e) {
      if (stale()) return;
      if (e.status === 501) {
        logsUnavailable = true;
        logStatus.textContent = 'This tesserad does not serve logs yet (501).';
        logPre.textContent = '';
        logPre.hidden = true;
      } else if (e.status === 404) {
        logStatus.textContent = `No log for rank ${rank} yet.`;
        logPre.hidden = true;
        lastLogText = null;
      } else {
        logStatus.textContent = `Log tail unavailable: ${e.message}`;
      }
    }
  }

  return {
    async tick() {
      try {
        job = await api.job(id);
      } catch (e) {
        if (e.status === 404 || e.status === 403 || e.status === 400) {
          title.textContent = `Job #${id}`;
          fill(planBox, h('p', { class: 'error-text' }, e.message));
          fill(stateEl, badge(e.status === 404 ? 'not found' : 'unavailable', 'failed'));
          return;
        }
        throw e;
      }
      render();
      await Promise.all([pollEvents(), pollLogs(), pollMetrics()]);
    },
  };
}

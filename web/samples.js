// Progress samples collected by this tab while it polls: job id ->
// [{t_ms, step, loss, samples_per_s}], one entry per new step (or new
// attempt). They feed the ETA and the job page's charts; the API keeps only
// the latest progress, so a chart starts when the page starts watching.

const MAX_SAMPLES = 2000;
const byJob = new Map();

export function recordProgress(job) {
  const p = job && job.progress;
  if (!p || typeof p !== 'object') return samplesOf(job && job.id);
  const list = samplesOf(job.id);
  const step = Number.isFinite(Number(p.step)) ? Number(p.step) : null;
  const last = list[list.length - 1];
  if (!last || last.step !== step || last.attempt !== job.attempt) {
    list.push({ t_ms: Date.now(), step, attempt: job.attempt, loss: Number(p.loss),
                samples_per_s: Number(p.samples_per_s) });
    if (list.length > MAX_SAMPLES) list.splice(0, list.length - MAX_SAMPLES);
  }
  return list;
}

export function samplesOf(id) {
  if (id === undefined || id === null) return [];
  const key = String(id);
  if (!byJob.has(key)) byJob.set(key, []);
  return byJob.get(key);
}

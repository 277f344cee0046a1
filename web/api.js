// The REST client of the web UI: every call sends the signed-in token as
// `Authorization: Bearer` and turns error bodies
// ({"error":{"code","message","field"}}) into an ApiError.

const TOKEN_KEY = 'tessera.token';

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

export class ApiError extends Error {
  constructor(status, code, message, field) {
    super(message);
    this.name = 'ApiError';
    this.status = status;  // HTTP status; 0 when the request never got an answer
    this.code = code;      // e.g. "invalid_argument"
    this.field = field;    // e.g. "global_batch", "args[3]", "env.RANK"; undefined if none
  }
}

// Listeners told about 401 answers (the token is unknown or revoked).
const unauthenticatedListeners = new Set();
export function onUnauthenticated(fn) {
  unauthenticatedListeners.add(fn);
}

export async function request(method, path, body, { auth = token() } = {}) {
  const headers = { Accept: 'application/json' };
  if (auth) headers.Authorization = `Bearer ${auth}`;
  const init = { method, headers, cache: 'no-store' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (e) {
    throw new ApiError(0, 'unavailable', `tesserad did not answer (${e.message})`);
  }
  if (response.status === 204) return null;
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const e = (data && data.error) || {};
    const err = new ApiError(response.status, e.code || `http_${response.status}`,
                             e.message || text || response.statusText, e.field);
    if (response.status === 401 && auth === token()) {
      for (const fn of unauthenticatedListeners) fn(err);
    }
    throw err;
  }
  return data;
}

const get = (path, opts) => request('GET', path, undefined, opts);
const post = (path, body, opts) => request('POST', path, body, opts);

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}

export const api = {
  // Checks a token without storing it.
  check: (candidate) => get('/api/v1/jobs?limit=1', { auth: candidate }),
  nodes: () => get('/api/v1/nodes'),
  queue: () => get('/api/v1/queue'),
  jobs: ({ state, owner, limit, after } = {}) =>
    get(`/api/v1/jobs${query({ state, owner, limit, after })}`),
  job: (id) => get(`/api/v1/jobs/${encodeURIComponent(id)}`),
  cancel: (id) => post(`/api/v1/jobs/${encodeURIComponent(id)}/cancel`, {}),
  events: (id, after = 0) =>
    get(`/api/v1/jobs/${encodeURIComponent(id)}/events${query({ after, limit: 1000 })}`),
  logs: (id, rank, tail) =>
    get(`/api/v1/jobs/${encodeURIComponent(id)}/logs${query({ rank, tail })}`),
  // A page of the job's metrics history: {job_id, points, next_since}.
  metrics: (id, { rank, attempt, since, limit } = {}) =>
    get(`/api/v1/jobs/${encodeURIComponent(id)}/metrics${query({ rank, attempt, since, limit })}`),
  submit: (spec) => post('/api/v1/jobs', spec),
  plan: (spec) => post('/api/v1/plans', spec),
  entrypoints: () => get('/api/v1/entrypoints'),
};

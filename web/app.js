// The Tessera web UI: hash routes, sign-in, and a 1 s poller that asks the
// current page to refresh itself in place (no reloads).
//
//   #/login         sign in with an API token (kept in sessionStorage)
//   #/cluster       nodes, health and devices
//   #/jobs?state=&after=   the job list, filtered and paginated
//   #/submit        the submit form with a plan preview
//   #/jobs/{id}     one job: progress, plan, charts, events, logs, cancel

import { api, token, setToken, onUnauthenticated } from './api.js';
import { h, fill } from './util.js';
import { mountCluster } from './pages/cluster.js';
import { mountJobs } from './pages/jobs.js';
import { mountSubmit } from './pages/submit.js';
import { mountJob } from './pages/job.js';

const POLL_MS = 1000;
const main = document.getElementById('main');
const liveStatus = document.getElementById('live-status');
let current = null;  // {tick, unmount, busy} of the mounted page
let loginNotice = '';

function parseHash() {
  const raw = location.hash.replace(/^#/, '') || '/cluster';
  const [path, q = ''] = raw.split('?');
  return { parts: path.split('/').filter(Boolean), params: new URLSearchParams(q) };
}

export function navigate(hash) {
  if (location.hash === hash) route();
  else location.hash = hash;
}

function setNav(active) {
  for (const a of document.querySelectorAll('#nav a')) {
    if (a.dataset.page === active) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  document.getElementById('signed-in').hidden = !token();
}

function mountLogin() {
  setNav('login');
  document.title = 'Sign in · Tessera';
  const input = h('input', { id: 'token', name: 'token', type: 'password', required: true,
                             autocomplete: 'current-password', spellcheck: 'false',
                             'aria-describedby': 'token-help token-error' });
  const error = h('p', { id: 'token-error', class: 'field-error', role: 'alert' },
                  loginNotice);
  loginNotice = '';
  const button = h('button', { type: 'submit', class: 'primary' }, 'Sign in');
  const form = h('form', { class: 'card login', novalidate: true, 'aria-labelledby': 'login-h' },
    h('h1', { id: 'login-h' }, 'Sign in to Tessera'),
    h('div', { class: 'field' },
      h('label', { for: 'token' }, 'API token'),
      input,
      h('p', { id: 'token-help', class: 'help' },
        'An admin token is in <state_dir>/admin-token; more with `tesserad token create USER` ' +
        'on the controller. It stays in this browser tab only.'),
      error),
    button);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const candidate = input.value.trim();
    if (!candidate) {
      error.textContent = 'Enter your API token.';
      input.setAttribute('aria-invalid', 'true');
      input.focus();
      return;
    }
    button.disabled = true;
    error.textContent = '';
    try {
      await api.check(candidate);
      setToken(candidate);
      navigate('#/cluster');
    } catch (e) {
      error.textContent = e.status === 401 ? 'This token is not valid.' : e.message;
      input.setAttribute('aria-invalid', 'true');
      input.focus();
    } finally {
      button.disabled = false;
    }
  });
  fill(main, form);
  input.focus();
  return {};
}

function route() {
  // A control with the same id on the next page (a filter, a pager button)
  // gets focus back, so keyboard users keep their place.
  const focusedId = main.contains(document.activeElement) ? document.activeElement.id : '';
  if (current && current.unmount) current.unmount();
  current = null;
  const { parts, params } = parseHash();
  if (!token() && parts[0] !== 'login') {
    location.replace('#/login');
    return;
  }
  window.scrollTo(0, 0);
  let page = parts[0] || 'cluster';
  if (page === 'jobs' && parts[1]) page = 'job';
  setNav(page === 'job' ? 'jobs' : page);
  switch (page) {
    case 'login':
      current = mountLogin();
      break;
    case 'cluster':
      current = mountCluster(main);
      break;
    case 'jobs':
      current = mountJobs(main, params);
      break;
    case 'submit':
      current = mountSubmit(main);
      break;
    case 'job':
      current = mountJob(main, parts[1]);
      break;
    default:
      fill(main, h('div', { class: 'card' }, h('h1', {}, 'Not found'),
                   h('p', {}, h('a', { href: '#/cluster' }, 'Go to the cluster'))));
      current = {};
  }
  // Move focus to the new page's heading for keyboard and screen reader users,
  // unless the page already focused something.
  const again = focusedId && document.getElementById(focusedId);
  if (again && main.contains(again) && !again.disabled) {
    again.focus({ preventScroll: true });
  } else if (!main.contains(document.activeElement)) {
    // Enabled only once data is in (the Next button): retried after a poll.
    if (again && current) current.restoreFocus = focusedId;
    const heading = main.querySelector('h1');
    if (heading) {
      heading.setAttribute('tabindex', '-1');
      heading.focus({ preventScroll: true });
    }
  }
  tick();
}

async function tick() {
  const page = current;
  if (!page || !page.tick || page.busy || document.hidden) return;
  page.busy = true;  // never two polls of one page at once
  try {
    await page.tick();
    if (page === current) liveStatus.dataset.state = 'ok';
    const el = page === current && page.restoreFocus
      ? document.getElementById(page.restoreFocus) : null;
    page.restoreFocus = null;
    const lost = !main.contains(document.activeElement) || document.activeElement.tagName === 'H1';
    if (el && !el.disabled && lost) el.focus({ preventScroll: true });
  } catch (e) {
    if (page === current) {
      liveStatus.dataset.state = 'error';
      liveStatus.textContent = `Update failed: ${e.message}`;
    }
  } finally {
    page.busy = false;
  }
  if (page === current && liveStatus.dataset.state === 'ok') {
    liveStatus.textContent = `Live · updated ${new Date().toLocaleTimeString('en-GB')}`;
  }
}

onUnauthenticated(() => {
  setToken('');
  loginNotice = 'Your token was refused; sign in again.';
  navigate('#/login');
});

document.getElementById('sign-out').addEventListener('click', () => {
  setToken('');
  navigate('#/login');
});

window.addEventListener('hashchange', route);
document.addEventListener('visibilitychange', tick);
setInterval(tick, POLL_MS);
route();

// tend dashboard: the fleet, live, through the daemon's API alone.
//
// Data flow: GET /v1/status gives every instance (polled every 5 s, which
// also samples memory for the sparklines); the /v1/events SSE stream then
// keeps it current: status_changed carries an instance's whole status,
// tracked_changed means instances came or went (the list is fetched
// again), and every other event goes to the feed. The stream is read
// through fetch (sse.js), which sends the page's secret (session.js), and
// opened again from the last seq seen after a drop. One module-level `state` holds it
// all; only this module writes it, the views read it.

import {compareIds, pathId, restartTotal, setText, uptime, LIFECYCLES} from './fmt.js';
import {Table} from './table.js';
import {Details} from './details.js';
import {Feed} from './feed.js';
import {KINDS} from './vocab.js';
import {authFetch, forgetPage, pageSecret} from './session.js';
import {EventStream} from './sse.js';

const POLL_MS = 5000;
const SPARK_POINTS = 60;    // 5 minutes of 5 s samples
const FEED_HISTORY = 50;    // events before "now" shown on load

const state = {
  byId: new Map(),    // id -> status object, plus _recv (performance.now() when it arrived)
  mem: new Map(),     // id -> rss samples, oldest first
  pending: new Map(), // id -> the operator action in flight
  view: {filter: '', agents: false, lifecycle: '', sort: 'id', dir: 1},
  lastSeq: 0,         // the last event applied
  liveFrom: 0,        // events up to this seq are history: shown, not applied
  es: null,
  loggedOut: false,
};

const $ = (id) => document.getElementById(id);

// api fetches a JSON answer; an error answer throws its "error" message.
async function api(path, init = {}) {
  const r = await authFetch(path, {...init, headers: {Accept: 'application/json'}});
  if (r.status === 401) {
    loggedOut();
    throw new Error('not logged in');
  }
  let body = null;
  try { body = await r.json(); } catch { /* not JSON */ }
  if (!r.ok) throw new Error((body && body.error) || `${r.status} ${r.statusText}`);
  return body;
}

const table = new Table({
  grid: $('grid'), viewport: $('viewport'), rows: $('rows'), empty: $('empty'),
  status: (id) => state.byId.get(id),
  mem: (id) => state.mem.get(id),
  pending: (id) => state.pending.get(id),
  onSelect: (id) => details.open(id),
  onAct: act,
});

const details = new Details($('details'), {
  status: (id) => state.byId.get(id),
  pending: (id) => state.pending.get(id),
  onAct: act,
  onClose: (id) => table.focusId(id),
  api,
  onLoggedOut: loggedOut,
  onSelected: (id) => { table.selected = id; render(); },
  onFresh: (st) => {
    if (!state.byId.has(st.id)) return;
    state.byId.set(st.id, st);
    render();
  },
});

const feed = new Feed($('feed'), $('feed-pause'), (id) => {
  if (state.byId.has(id)) details.open(id);
});

// ---- rendering

let frame = 0;
function render() {
  if (!frame) frame = requestAnimationFrame(draw);
}

function draw() {
  frame = 0;
  const v = state.view;
  const all = v.filter.toLowerCase().split(/\s+/).filter(Boolean);
  const terms = all.filter((t) => !t.includes('='));
  const labels = all.filter((t) => t.includes('=')); // KEY=VALUE: a label the instance has, exactly
  const counts = {all: 0, running: 0, idle: 0, done: 0, error: 0, unknown: 0};
  const ids = [];
  for (const st of state.byId.values()) {
    if (v.agents && !st.agent) continue;
    if (labels.length) {
      const has = Object.entries(st.labels || {}).map(([k, val]) => `${k}=${val}`.toLowerCase());
      if (!labels.every((l) => has.includes(l))) continue;
    }
    if (terms.length) {
      const hay = `${st.id} ${st.state} ${st.lifecycle} ${st.status_text || ''} ${st.why || ''}`.toLowerCase();
      if (!terms.every((t) => hay.includes(t))) continue;
    }
    counts.all++;
    counts[LIFECYCLES.includes(st.lifecycle) ? st.lifecycle : 'unknown']++;
    if (!v.lifecycle || st.lifecycle === v.lifecycle) ids.push(st.id);
  }
  ids.sort(comparator());
  for (const k of ['all', 'running', 'idle', 'done', 'error']) setText($('n-' + k), counts[k]);
  const total = state.byId.size;
  setText($('count'), ids.length === total ? `${total} instance${total === 1 ? '' : 's'}`
    : `${ids.length} of ${total} shown`);
  table.update(ids);
  details.tick();
}

const SORT_KEYS = {
  lifecycle: (st) => ['error', 'running', 'idle', 'done', 'unknown'].indexOf(st.lifecycle),
  uptime: (st) => uptime(st) ?? -1,
  mem: (st) => (st.pid == null ? -1 : st.rss_bytes || 0),
  crashes: (st) => st.crash_count || 0,
  restarts: (st) => restartTotal(st.restarts),
};

function comparator() {
  const {sort, dir} = state.view;
  const key = SORT_KEYS[sort];
  return (a, b) => {
    if (key) {
      const ka = key(state.byId.get(a)), kb = key(state.byId.get(b));
      if (ka !== kb) return (ka < kb ? -1 : 1) * dir;
    }
    return compareIds(a, b) * (key ? 1 : dir);
  };
}

// ---- data

function setList(list, sample) {
  const now = performance.now();
  const next = new Map();
  for (const st of list) {
    st._recv = now;
    // An event that overtook this answer is newer: keep it.
    const seen = state.byId.get(st.id);
    next.set(st.id, seen && seen.computed_at > st.computed_at ? seen : st);
    if (sample) {
      const s = state.mem.get(st.id) || [];
      s.push(st.pid == null ? 0 : st.rss_bytes || 0);
      if (s.length > SPARK_POINTS) s.splice(0, s.length - SPARK_POINTS);
      state.mem.set(st.id, s);
    }
  }
  for (const id of state.mem.keys()) if (!next.has(id)) state.mem.delete(id);
  state.byId = next;
  if (details.id && !next.has(details.id)) details.gone();
  render();
}

async function poll() {
  if (state.loggedOut) return;
  try {
    setList(await api('/v1/status'), true);
    details.refresh();
    if (state.es && state.es.open) conn('live', 'Live');
  } catch (err) {
    if (!state.loggedOut) conn('offline', 'Daemon unreachable');
  }
}

let refetch = 0;
function refreshSoon() {
  clearTimeout(refetch);
  refetch = setTimeout(() => api('/v1/status').then((l) => setList(l, false)).catch(() => {}), 100);
}

function applyStatus(e) {
  const st = {...e, _recv: performance.now()};
  delete st.seq; delete st.ts; delete st.kind;
  state.byId.set(st.id, st);
  render();
}

function onEvent(m) {
  let e;
  try { e = JSON.parse(m.data); } catch { return; }
  if (e.seq <= state.lastSeq) return; // seen before a reconnect
  state.lastSeq = e.seq;
  const live = e.seq > state.liveFrom;
  if (live) feed.settled();
  if (e.kind === 'status_changed') {
    if (live) applyStatus(e);
    return;
  }
  if (e.kind === 'tracked_changed' && live) refreshSoon();
  feed.add(e);
}

function openEvents(since) {
  if (state.es) state.es.close();
  const es = new EventStream('/v1/events?since=' + since, {
    onopen: () => conn('live', 'Live'),
    onevent: (m) => { if (KINDS.includes(m.event)) onEvent(m); },
    onend: (status) => {
      if (state.es !== es || state.loggedOut) return;
      if (status === 401) { loggedOut(); return; }
      conn('offline', 'Reconnecting…');
      setTimeout(() => { if (state.es === es && !state.loggedOut) openEvents(state.lastSeq); }, status ? 5000 : 3000);
    },
  });
  state.es = es;
}

// lastSeq finds the newest event's seq with JSON backlog queries of one
// event: there is one after n exactly when n < the last seq.
async function lastSeq() {
  const after = async (n) => (await api(`/v1/events?since=${n}&limit=1&format=json`)).length > 0;
  if (!(await after(0))) return 0;
  let lo = 0, hi = 256;
  while (await after(hi)) { lo = hi; hi *= 4; }
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (await after(mid)) lo = mid; else hi = mid;
  }
  return hi;
}

// act runs an operator action from a button.
async function act(id, verb) {
  if (state.pending.has(id) || state.loggedOut) return;
  state.pending.set(id, verb);
  render();
  details.sync();
  try {
    await api(`/v1/programs/${pathId(id)}/${verb}`, {method: 'POST'});
    toast(`${verb[0].toUpperCase() + verb.slice(1)} ${id}: done`);
  } catch (err) {
    toast(`Could not ${verb} ${id}: ${err.message}`, true);
  } finally {
    state.pending.delete(id);
    render();
    details.sync();
  }
}

// ---- chrome

function conn(kind, text) {
  $('conn').dataset.state = kind;
  $('conn-text').textContent = text;
}

let toastTimer = 0;
function toast(msg, bad) {
  const t = $('toast');
  t.textContent = msg;
  t.className = 'toast show' + (bad ? ' bad' : '');
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { t.className = 'toast'; }, bad ? 8000 : 3000);
}

function loggedOut() {
  if (state.loggedOut) return;
  // A tab that never logged in (a new tab: the secret is per tab) goes
  // to the login page at once.
  if (!pageSecret()) {
    location.replace('/login');
    return;
  }
  state.loggedOut = true;
  if (state.es) state.es.close();
  details.stopLog();
  conn('offline', 'Logged out');
  const b = $('banner');
  b.replaceChildren('Your session has ended (sessions last 12 hours and end when the daemon restarts). Run ',
    Object.assign(document.createElement('code'), {textContent: 'tend dashboard'}), ' for a new login code and enter it on the ',
    Object.assign(document.createElement('a'), {href: '/login', textContent: 'login page'}), '.');
  b.hidden = false;
}

// logout ends this page's session (POST /v1/logout) and goes to the login
// page; the daemon clears the cookie once no other tab of the browser is
// logged in.
async function logout() {
  try { await api('/v1/logout', {method: 'POST'}); } catch { /* ended already */ }
  forgetPage();
  state.loggedOut = true;
  if (state.es) state.es.close();
  location.replace('/login');
}

function bindControls() {
  // Logging out is for a login: on the unix socket there is none.
  const out = $('logout');
  out.hidden = !pageSecret();
  out.addEventListener('click', logout);
  const filter = $('filter');
  // A link can open the dashboard on a session: /?label=session=s-42.
  const fromURL = new URLSearchParams(location.search).getAll('label').join(' ');
  if (fromURL) state.view.filter = filter.value = fromURL;
  filter.addEventListener('input', () => { state.view.filter = filter.value; render(); });
  $('agents').addEventListener('change', (e) => { state.view.agents = e.target.checked; render(); });
  $('summary').addEventListener('click', (e) => {
    const b = e.target.closest('button[data-lifecycle]');
    if (!b) return;
    state.view.lifecycle = b.dataset.lifecycle;
    for (const c of $('summary').querySelectorAll('button')) c.setAttribute('aria-pressed', String(c === b));
    render();
  });
  document.querySelector('.grid-head').addEventListener('click', (e) => {
    const b = e.target.closest('button[data-sort]');
    if (!b) return;
    const v = state.view;
    v.dir = v.sort === b.dataset.sort ? -v.dir : (b.dataset.sort === 'id' ? 1 : -1);
    v.sort = b.dataset.sort;
    for (const h of document.querySelectorAll('.grid-head [role=columnheader]')) {
      const s = h.querySelector('button[data-sort]');
      if (s && s.dataset.sort === v.sort) h.setAttribute('aria-sort', v.dir > 0 ? 'ascending' : 'descending');
      else h.removeAttribute('aria-sort');
    }
    render();
  });
  document.addEventListener('keydown', (e) => {
    const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement?.tagName);
    if (e.key === '/' && !typing) {
      e.preventDefault();
      filter.focus();
    } else if (e.key === 'Escape' && document.activeElement === filter && filter.value) {
      filter.value = '';
      state.view.filter = '';
      render();
    }
  });
}

// connect loads the fleet and opens the event stream, retrying until the
// daemon answers.
async function connect() {
  try {
    state.liveFrom = await lastSeq();
    setList(await api('/v1/status'), true);
  } catch (err) {
    if (!state.loggedOut) {
      conn('offline', 'Daemon unreachable');
      setTimeout(connect, 3000);
    }
    return;
  }
  state.lastSeq = Math.max(0, state.liveFrom - FEED_HISTORY);
  openEvents(state.lastSeq);
  setInterval(poll, POLL_MS);
}

bindControls();
conn('offline', 'Connecting…');
setInterval(render, 1000); // uptimes tick
connect();

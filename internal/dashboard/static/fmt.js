// Formatting and small DOM helpers shared by the dashboard's modules.

import {LIFECYCLES as KNOWN_LIFECYCLES, LIFECYCLE_UNKNOWN, RESTART_CAUSES} from './vocab.js';

// el builds an element: el('td', {class: 'num'}, 'text', child, ...).
export function el(tag, attrs, ...kids) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === false || v == null) continue;
    if (k === 'class') n.className = v;
    else if (k === 'text') n.textContent = v;
    else if (k.startsWith('on')) n.addEventListener(k.slice(2), v);
    else n.setAttribute(k, v === true ? '' : v);
  }
  for (const k of kids) if (k != null) n.append(k);
  return n;
}

// setText changes a node's text only when it differs, so a re-render of an
// unchanged row touches nothing (and announces nothing).
export function setText(n, s) {
  s = String(s);
  if (n.textContent !== s) n.textContent = s;
}

export function setAttr(n, k, v) {
  if (v == null || v === false) {
    if (n.hasAttribute(k)) n.removeAttribute(k);
  } else if (n.getAttribute(k) !== String(v)) {
    n.setAttribute(k, v);
  }
}

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];

export function bytes(n) {
  if (n == null || n <= 0) return '—';
  let i = 0;
  while (n >= 1024 && i < UNITS.length - 1) { n /= 1024; i++; }
  return (i === 0 || n >= 100 ? Math.round(n) : n.toFixed(1)) + ' ' + UNITS[i];
}

// duration is ms as "45s", "3m 12s", "2h 05m", "3d 4h"; precise also
// writes short spans as "350ms" and "2.5s" (for backoffs and run times,
// not for a ticking uptime).
export function duration(ms, precise) {
  if (ms == null || ms < 0) return '—';
  if (precise && ms < 1000) return Math.round(ms) + 'ms';
  if (precise && ms < 10000) return (ms / 1000).toFixed(1).replace(/\.0$/, '') + 's';
  const s = Math.floor(ms / 1000);
  if (s < 60) return s + 's';
  const m = Math.floor(s / 60);
  if (m < 60) return m + 'm ' + String(s % 60).padStart(2, '0') + 's';
  const h = Math.floor(m / 60);
  if (h < 24) return h + 'h ' + String(m % 60).padStart(2, '0') + 'm';
  return Math.floor(h / 24) + 'd ' + (h % 24) + 'h';
}

// uptime is an instance's uptime now, from its last status and the time
// since that arrived (_recv), not the browser's clock, which may differ
// from the daemon's.
export function uptime(st) {
  if (!st || st.pid == null) return null;
  return st.uptime_ms + (performance.now() - st._recv);
}

export function clock(ts) {
  if (!ts) return '';
  const d = new Date(ts);
  return d.toLocaleTimeString([], {hour12: false}) + '.' + String(d.getMilliseconds()).padStart(3, '0');
}

// ago is a timestamp as "12s ago" / "in 4s", with the full time in a title.
export function ago(ts) {
  if (!ts) return '—';
  const d = Date.parse(ts) - Date.now();
  return d > 0 ? 'in ' + duration(d) : duration(-d) + ' ago';
}

export function localTime(ts) {
  return ts ? new Date(ts).toLocaleString() : '';
}

// The causes of a status's restarts object (from the daemon's own list),
// with short labels for the table.
const CAUSE_LABELS = {clean_exit: 'clean', rss_watchdog: 'memory', wedge_restart: 'wedge', operator_restart: 'operator'};
export const CAUSES = RESTART_CAUSES.map((k) => [k, CAUSE_LABELS[k] || k]);

export function restartTotal(r) {
  return r ? CAUSES.reduce((n, [k]) => n + (r[k] || 0), 0) : 0;
}

// exitText is a last exit or exited event as "exit 1" / "SIGKILL".
export function exitText(x) {
  if (!x) return '—';
  if (x.code != null) return 'exit ' + x.code;
  if (x.signal) return x.signal;
  return 'no exit status';
}

// compareIds orders "web:2" before "web:10".
export function compareIds(a, b) {
  const [pa, ka] = splitId(a);
  const [pb, kb] = splitId(b);
  return pa < pb ? -1 : pa > pb ? 1 : ka - kb;
}

function splitId(id) {
  const i = id.lastIndexOf(':');
  return i < 0 ? [id, 0] : [id.slice(0, i), Number(id.slice(i + 1))];
}

// pathId escapes an id for a URL path like the Go client (":" stays).
export function pathId(id) {
  return encodeURIComponent(id).replace(/%3A/gi, ':');
}

export const LIFECYCLES = [...KNOWN_LIFECYCLES, LIFECYCLE_UNKNOWN];
const GLYPH = {running: '●', idle: '◐', done: '✓', error: '✕', unknown: '?'};

// badge fills n as a lifecycle badge: a glyph and the word, not colour alone.
export function badge(n, lifecycle) {
  const lc = LIFECYCLES.includes(lifecycle) ? lifecycle : LIFECYCLE_UNKNOWN;
  if (n.dataset.lc === lc) return;
  n.dataset.lc = lc;
  n.className = 'badge lc-' + lc;
  n.replaceChildren(el('span', {class: 'glyph', 'aria-hidden': 'true', text: GLYPH[lc] || '?'}), lc);
}

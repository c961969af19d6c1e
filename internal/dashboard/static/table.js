// The instance table, virtualised: only the rows in view (and a few around
// them) exist in the DOM, so 500 or 5000 instances scroll alike. Rows are
// kept by id and updated in place, so a focused button survives the
// once-a-second redraw. Keyboard: one row is in the tab order at a time
// (a roving tabindex); arrows, Page Up/Down, Home and End move between
// rows, Enter opens one.

import {el, setText, setAttr, badge, bytes, duration, uptime, CAUSES, restartTotal} from './fmt.js';

const ROW_H = 40;   // px; keep in step with .row height in style.css
const OVERSCAN = 6;
const SVG = 'http://www.w3.org/2000/svg';
const VERBS = ['start', 'stop', 'restart'];

export class Table {
  constructor(o) {
    Object.assign(this, o);
    this.ids = [];
    this.index = new Map();   // id -> position in ids
    this.els = new Map();     // id -> row element, for the rows rendered
    this.active = 0;          // the row in the tab order
    this.selected = null;     // the id shown in the details panel
    this.viewport.addEventListener('scroll', () => this.render(), {passive: true});
    new ResizeObserver(() => this.render()).observe(this.viewport);
    this.rows.addEventListener('click', (e) => this.click(e));
    this.rows.addEventListener('keydown', (e) => this.key(e));
    this.rows.addEventListener('focusin', (e) => {
      const row = e.target.closest('[role=row]');
      if (row && this.index.has(row.dataset.id)) this.setActive(this.index.get(row.dataset.id));
    });
  }

  update(ids) {
    this.ids = ids;
    this.index = new Map(ids.map((id, i) => [id, i]));
    this.active = Math.min(this.active, Math.max(0, ids.length - 1));
    this.render();
  }

  render() {
    const n = this.ids.length;
    this.rows.style.height = n * ROW_H + 'px';
    setAttr(this.grid, 'aria-rowcount', n + 1);
    this.empty.hidden = n > 0;
    const top = this.viewport.scrollTop;
    const first = Math.max(0, Math.floor(top / ROW_H) - OVERSCAN);
    const last = Math.min(n, Math.ceil((top + this.viewport.clientHeight) / ROW_H) + OVERSCAN);
    const show = [];
    for (let i = first; i < last; i++) show.push(i);
    if (n && (this.active < first || this.active >= last)) show.push(this.active); // keep focus alive
    const focused = document.activeElement;
    const keep = new Set(show.map((i) => this.ids[i]));
    for (const [id, row] of this.els) {
      if (!keep.has(id)) { row.remove(); this.els.delete(id); }
    }
    let prev = null;
    for (const i of show.sort((a, b) => a - b)) {
      const id = this.ids[i];
      let row = this.els.get(id);
      if (!row) { row = this.create(id); this.els.set(id, row); }
      row.style.transform = `translateY(${i * ROW_H}px)`;
      setAttr(row, 'aria-rowindex', i + 2);
      this.fill(row, id, i);
      // DOM order follows screen order, for screen readers.
      const want = prev ? prev.nextSibling : this.rows.firstChild;
      if (row !== want) this.rows.insertBefore(row, want);
      prev = row;
    }
    if (focused && focused !== document.activeElement && this.rows.contains(focused)) focused.focus();
  }

  create(id) {
    const btns = VERBS.map((v) => el('button', {type: 'button', class: 'btn btn-' + v, 'data-action': v,
      'data-id': id, 'aria-label': `${v[0].toUpperCase() + v.slice(1)} ${id}`}, v[0].toUpperCase() + v.slice(1)));
    const svg = document.createElementNS(SVG, 'svg');
    svg.setAttribute('class', 'spark');
    svg.setAttribute('viewBox', '0 0 60 20');
    svg.setAttribute('preserveAspectRatio', 'none');
    svg.setAttribute('aria-hidden', 'true');
    svg.append(document.createElementNS(SVG, 'polyline'));
    const cell = (cls, ...kids) => el('div', {role: 'cell', class: cls}, ...kids);
    return el('div', {role: 'row', class: 'row', 'data-id': id, tabindex: '-1'},
      cell('c-id', el('span', {class: 'id', text: id}), el('span', {class: 'tag', hidden: true, text: 'agent'})),
      cell('c-lc', el('span', {class: 'badge'})),
      cell('c-state'),
      cell('c-pid num'),
      cell('c-up num'),
      cell('c-mem', el('span', {class: 'mem-v num'}), svg),
      cell('c-crash', el('span', {class: 'n'}), el('span', {class: 'tag warn', hidden: true, text: 'degraded'})),
      cell('c-rs'),
      cell('c-why'),
      cell('c-act', ...btns));
  }

  fill(row, id, i) {
    const st = this.status(id);
    if (!st) return;
    const c = row.children;
    const alive = st.pid != null;
    setAttr(row, 'tabindex', i === this.active ? '0' : '-1');
    setAttr(row, 'aria-current', id === this.selected ? 'true' : null);
    setAttr(row, 'data-lifecycle', st.lifecycle);
    c[0].lastChild.hidden = !st.agent;
    badge(c[1].firstChild, st.lifecycle);
    setText(c[2], st.state);
    setText(c[3], alive ? st.pid : '—');
    setText(c[4], alive ? duration(uptime(st)) : '—');
    setText(c[5].firstChild, alive ? bytes(st.rss_bytes) : '—');
    spark(c[5].lastChild, this.mem(id));
    setText(c[6].firstChild, st.crash_count || 0);
    c[6].lastChild.hidden = !st.degraded;
    restarts(c[7], st.restarts);
    setText(c[8], st.why || '');
    setAttr(c[8], 'title', st.why || null);
    const busy = this.pending(id);
    const can = {start: !alive, stop: alive || st.state === 'backoff', restart: true};
    for (const b of c[9].children) {
      const v = b.dataset.action;
      setAttr(b, 'aria-disabled', busy || !can[v] ? 'true' : null);
      setAttr(b, 'tabindex', i === this.active ? null : '-1');
      setText(b, busy === v ? v[0].toUpperCase() + v.slice(1) + '…' : v[0].toUpperCase() + v.slice(1));
    }
  }

  click(e) {
    const row = e.target.closest('[role=row]');
    if (!row) return;
    const b = e.target.closest('button[data-action]');
    if (b) {
      if (b.getAttribute('aria-disabled') !== 'true') this.onAct(row.dataset.id, b.dataset.action);
      return;
    }
    this.setActive(this.index.get(row.dataset.id) ?? 0);
    this.onSelect(row.dataset.id);
  }

  key(e) {
    const row = e.target.closest('[role=row]');
    if (!row || !this.ids.length) return;
    const page = Math.max(1, Math.floor(this.viewport.clientHeight / ROW_H) - 1);
    const moves = {ArrowDown: 1, ArrowUp: -1, PageDown: page, PageUp: -page};
    let to = null;
    if (e.key in moves) to = this.active + moves[e.key];
    else if (e.key === 'Home' && e.target === row) to = 0;
    else if (e.key === 'End' && e.target === row) to = this.ids.length - 1;
    else if ((e.key === 'Enter' || e.key === ' ') && e.target === row) {
      e.preventDefault();
      this.onSelect(row.dataset.id);
      return;
    }
    if (to == null) return;
    e.preventDefault();
    this.focusIndex(Math.max(0, Math.min(this.ids.length - 1, to)));
  }

  setActive(i) {
    if (i === this.active) return;
    this.active = i;
    this.render();
  }

  // focusIndex scrolls row i into view and focuses it.
  focusIndex(i) {
    this.active = i;
    const vp = this.viewport;
    if (i * ROW_H < vp.scrollTop) vp.scrollTop = i * ROW_H;
    else if ((i + 1) * ROW_H > vp.scrollTop + vp.clientHeight) vp.scrollTop = (i + 1) * ROW_H - vp.clientHeight;
    this.render();
    this.els.get(this.ids[i])?.focus({preventScroll: true});
  }

  focusId(id) {
    if (this.index.has(id)) this.focusIndex(this.index.get(id));
  }
}

// spark draws the memory samples as a line from their lowest value up to
// at least a quarter more, so growth shows and small noise stays small.
function spark(svg, samples) {
  const line = svg.firstChild;
  const max = samples && samples.length ? Math.max(...samples) : 0;
  if (max === 0) { // nothing ever ran in the window
    setAttr(line, 'points', '');
    return;
  }
  if (samples.length === 1) samples = [samples[0], samples[0]];
  const min = Math.min(...samples);
  const span = Math.max(max - min, max * 0.25);
  const step = 60 / (samples.length - 1);
  const y = (v) => (max === min ? 10 : 18 - ((v - min) / span) * 16).toFixed(1);
  const pts = samples.map((v, i) => `${(i * step).toFixed(1)},${y(v)}`);
  setAttr(line, 'points', pts.join(' '));
  setAttr(svg, 'data-flat', max === min ? 'true' : null);
}

// restarts fills a cell with the non-zero restart causes.
function restarts(cell, r) {
  const total = restartTotal(r);
  const key = total ? CAUSES.map(([k]) => r[k] || 0).join(',') : '';
  if (cell.dataset.key === key) return;
  cell.dataset.key = key;
  if (!total) {
    cell.replaceChildren(el('span', {class: 'muted', text: '—'}));
    setAttr(cell, 'title', null);
    return;
  }
  const parts = CAUSES.filter(([k]) => r[k]).map(([k, label]) => el('span', {class: 'rs rs-' + k, text: `${label} ${r[k]}`}));
  cell.replaceChildren(...parts);
  setAttr(cell, 'title', CAUSES.map(([k, label]) => `${label}: ${r[k] || 0}`).join(', '));
}

// The details panel of one instance: its why, its live terminal for a tty
// instance (terminal.js), a protocol agent's open permission request (a
// button per option) and a box to prompt it, facts, last exit, process
// tree and a live tail of its log (GET /v1/logs/{id}?tail=200&follow=1,
// read as a stream: for a protocol agent, its transcript), with the start,
// stop and restart buttons.

import {el, setText, setAttr, badge, bytes, duration, uptime, ago, localTime, exitText, pathId, CAUSES} from './fmt.js';
import {LiveTerminal} from './terminal.js';
import {authFetch} from './session.js';

const LOG_MAX = 256 * 1024; // characters of log kept on screen
const ANSI = /\x1b\[[0-9;?]*[ -/]*[@-~]/g;
const VERBS = ['start', 'stop', 'restart'];

export class Details {
  constructor(root, o) {
    Object.assign(this, o);
    this.root = root;
    this.id = null;
    this.logCtrl = null;
    this.logText = '';
    this.logFrame = 0;
    this.q = (id) => root.querySelector('#' + id);
    this.buttons = VERBS.map((v) => el('button', {type: 'button', class: 'btn btn-' + v, 'data-action': v},
      v[0].toUpperCase() + v.slice(1)));
    this.q('d-actions').append(...this.buttons);
    this.q('d-actions').addEventListener('click', (e) => {
      const b = e.target.closest('button[data-action]');
      if (b && this.id && b.getAttribute('aria-disabled') !== 'true') this.onAct(this.id, b.dataset.action);
    });
    this.q('d-close').addEventListener('click', () => this.close());
    // Escape closes the panel, except in the terminal: there it is a key
    // for the program.
    root.addEventListener('keydown', (e) => { if (e.key === 'Escape' && !e.target.closest('.term')) this.close(); });
    this.terminal = new LiveTerminal(this.q('d-term-section'), this.q('d-term'), this.q('d-term-state'));
    this.terminal.onRetry = () => this.refresh();
    this.terminal.onLoggedOut = () => this.onLoggedOut();
    this.q('d-perm-options').addEventListener('click', (e) => {
      const b = e.target.closest('button[data-option]');
      if (b && this.id && this.st && this.st.waiting) this.answer(this.id, this.st.waiting.request_id, b.dataset.option);
    });
    this.q('d-prompt').addEventListener('submit', (e) => {
      e.preventDefault();
      if (this.id) this.prompt(this.id);
    });
    this.q('d-prompt-cancel').addEventListener('click', () => {
      if (this.id) this.post(this.id, 'cancel', {}, 'cancelled');
    });
  }

  // post sends one of a protocol agent's requests and says how it went.
  async post(id, verb, body, done) {
    const state = this.q('d-prompt-state');
    try {
      const r = await this.api(`/v1/programs/${pathId(id)}/${verb}`, {method: 'POST', body: JSON.stringify(body)});
      if (id === this.id) setText(state, done);
      this.refresh();
      return r;
    } catch (err) {
      if (id === this.id) setText(state, err.message);
      return null;
    }
  }

  async prompt(id) {
    const box = this.q('d-prompt-text');
    const text = box.value;
    if (!text.trim()) return;
    const r = await this.post(id, 'prompt', {text}, 'sent');
    if (r && id === this.id) {
      box.value = '';
      setText(this.q('d-prompt-state'), `sent (prompt ${r.prompt_id})`);
    }
  }

  answer(id, requestId, optionId) {
    this.post(id, 'permission', {request_id: requestId, option_id: optionId}, `answered ${optionId}`);
  }

  // fillProtocol shows a protocol agent's part: its open request, with a
  // button per option, and the prompt box.
  fillProtocol(st) {
    const sec = this.q('d-proto');
    sec.hidden = !st.protocol;
    if (!st.protocol) return;
    const w = st.waiting, box = this.q('d-perm');
    box.hidden = !w;
    if (!w) {
      this.q('d-perm-options').replaceChildren();
      this.permShown = null;
      return;
    }
    setText(this.q('d-perm-title'), `Permission asked: ${w.title || 'a tool call'}${w.tool_kind ? ` (${w.tool_kind})` : ''}`);
    if (this.permShown === w.request_id) return;
    this.permShown = w.request_id;
    this.q('d-perm-options').replaceChildren(...(w.options || []).map((o) =>
      el('button', {type: 'button', class: 'btn' + (o.kind.startsWith('reject') ? ' btn-stop' : ''), 'data-option': o.option_id,
        title: `${o.option_id} (${o.kind})`}, o.name || o.option_id)));
  }

  open(id) {
    const same = id === this.id;
    this.id = id;
    this.root.hidden = false;
    this.onSelected(id);
    const st = this.status(id);
    if (st) this.fill(st);
    if (!same) {
      this.follow(id);
      // Focus the title, not a button: the Enter that opened the panel
      // must not also press whatever button it lands on.
      this.q('d-title').focus();
    }
    this.refresh();
  }

  close() {
    if (!this.id) return;
    const id = this.id;
    this.id = null;
    this.stopLog();
    this.terminal.stop();
    this.root.hidden = true;
    this.onSelected(null);
    this.onClose(id);
  }

  // gone is called when the open instance was removed from the fleet.
  gone() {
    setText(this.q('d-sub'), 'removed from the fleet');
    this.stopLog();
    this.terminal.stop();
  }

  // refresh fetches the open instance's status (a single status reads its
  // process tree fresh) and hands it to the app's state.
  async refresh() {
    const id = this.id;
    if (!id) return;
    try {
      const st = await this.api(`/v1/status/${pathId(id)}`);
      if (id === this.id) this.onFresh({...st, _recv: performance.now()});
    } catch { /* the next poll tries again */ }
  }

  // tick redraws the open instance from the app's state (uptime moves).
  tick() {
    const st = this.id && this.status(this.id);
    if (st) this.fill(st);
  }

  sync() {
    if (!this.id || !this.st) return;
    const st = this.st, busy = this.pending(this.id), alive = st.pid != null;
    const can = {start: !alive, stop: alive || st.state === 'backoff', restart: true};
    for (const b of this.buttons) {
      const v = b.dataset.action;
      setAttr(b, 'aria-disabled', busy || !can[v] ? 'true' : null);
      setAttr(b, 'aria-label', `${v[0].toUpperCase() + v.slice(1)} ${this.id}`);
      setText(b, (v[0].toUpperCase() + v.slice(1)) + (busy === v ? '…' : ''));
    }
  }

  fill(st) {
    this.st = st;
    const alive = st.pid != null;
    this.root.classList.toggle('wide', !!st.tty);
    this.terminal.sync(st.id, st);
    this.fillProtocol(st);
    setText(this.q('d-title'), st.id);
    const sub = this.q('d-sub');
    let b = sub.querySelector('.badge');
    if (!b) {
      b = el('span', {class: 'badge'});
      sub.replaceChildren(b, el('span', {class: 'd-state'}));
    }
    badge(b, st.lifecycle);
    setText(sub.lastChild, `${st.state}${st.degraded ? ' · degraded' : ''}${st.agent ? ' · agent' : ''}`);
    setText(this.q('d-why'), st.why || '');
    const r = st.restarts || {};
    facts(this.q('d-facts'), [
      ['PID', alive ? st.pid : '—'],
      ['Run', st.run],
      ['Uptime', alive ? duration(uptime(st)) : '—'],
      ['Started', st.started_at ? localTime(st.started_at) : '—'],
      ['Ready', st.ready ? 'yes' : 'no'],
      st.agent && ['Turn', st.turn_active ? 'active' : 'idle'],
      st.protocol && ['Protocol', `${st.protocol}${st.session_id ? ' · session ' + st.session_id : ''}`],
      st.protocol_errors > 0 && ['Lines not ACP', st.protocol_errors],
      st.status_text && ['Status text', st.status_text],
      ['Memory', alive ? `${bytes(st.rss_bytes)}${st.max_rss ? ' of max ' + bytes(st.max_rss) : ''}` : '—'],
      st.peak_rss_bytes > 0 && ['Peak memory', bytes(st.peak_rss_bytes)],
      ['Crashes', `${st.crash_count || 0}${st.degraded ? ' (degraded)' : ''}`],
      ['Restarts', CAUSES.map(([k, label]) => `${label} ${r[k] || 0}`).join(' · ')],
      st.next_start_at && ['Next start', ago(st.next_start_at)],
      st.wedge && ['Wedged', `${st.wedge.source}: ${st.wedge.detail}`],
      ['Tracking', st.tracking || '—'],
      Object.keys(st.labels || {}).length > 0 &&
        ['Labels', Object.entries(st.labels).sort().map(([k, v]) => `${k}=${v}`).join(', ')],
    ]);
    const x = st.last_exit;
    facts(this.q('d-exit'), x ? [
      ['Exit', exitText(x)],
      ['Likely cause', x.likely_cause || '—'],
      ['When', x.at ? `${ago(x.at)} (${localTime(x.at)})` : '—'],
    ] : [['Exit', 'none yet']]);
    procs(this.q('d-procs'), st.processes || []);
    this.sync();
  }

  stopLog() {
    if (this.logCtrl) this.logCtrl.abort();
    this.logCtrl = null;
  }

  async follow(id) {
    this.stopLog();
    const ctrl = new AbortController();
    this.logCtrl = ctrl;
    this.logText = '';
    this.q('d-log').textContent = '';
    setText(this.q('d-log-state'), 'connecting…');
    try {
      const r = await authFetch(`/v1/logs/${pathId(id)}?tail=200&follow=1`, {signal: ctrl.signal});
      if (r.status === 401) { this.onLoggedOut(); return; }
      if (!r.ok) throw new Error(`${r.status}`);
      setText(this.q('d-log-state'), 'live');
      const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        const {value, done} = await reader.read();
        if (done) break;
        this.appendLog(value);
      }
    } catch {
      if (ctrl.signal.aborted) return;
    }
    if (this.logCtrl !== ctrl) return;
    setText(this.q('d-log-state'), 'reconnecting…');
    setTimeout(() => { if (this.logCtrl === ctrl) this.follow(id); }, 3000);
  }

  appendLog(s) {
    this.logText += s.replace(ANSI, '');
    if (this.logText.length > LOG_MAX) {
      const cut = this.logText.indexOf('\n', this.logText.length - LOG_MAX);
      this.logText = this.logText.slice(cut + 1);
    }
    if (this.logFrame) return;
    this.logFrame = requestAnimationFrame(() => {
      this.logFrame = 0;
      const pre = this.q('d-log');
      const atEnd = pre.scrollHeight - pre.scrollTop - pre.clientHeight < 24;
      pre.textContent = this.logText;
      if (atEnd) pre.scrollTop = pre.scrollHeight;
    });
  }
}

// facts fills a <dl> with [term, value] pairs (falsy entries are skipped).
function facts(dl, rows) {
  const kids = [];
  for (const row of rows) {
    if (!row) continue;
    kids.push(el('dt', {text: row[0]}), el('dd', {text: String(row[1])}));
  }
  dl.replaceChildren(...kids);
}

// procs fills the process table as a tree: children under their parent.
function procs(tbody, list) {
  const pids = new Set(list.map((p) => p.pid));
  const kids = new Map();
  for (const p of list) {
    const parent = pids.has(p.ppid) && p.ppid !== p.pid ? p.ppid : 0;
    if (!kids.has(parent)) kids.set(parent, []);
    kids.get(parent).push(p);
  }
  const rows = [];
  const walk = (parent, depth) => {
    for (const p of (kids.get(parent) || []).sort((a, b) => a.pid - b.pid)) {
      rows.push(el('tr', {},
        el('td', {class: 'num', text: p.pid}),
        el('td', {text: p.state}),
        el('td', {class: 'num', text: bytes(p.rss_bytes)}),
        cmdCell(p.cmd, depth)));
      walk(p.pid, depth + 1);
    }
  };
  walk(0, 0);
  if (!rows.length) rows.push(el('tr', {}, el('td', {colspan: 4, class: 'muted', text: 'No processes (not running).'})));
  tbody.replaceChildren(...rows);
}

// cmdCell is a command indented by its depth in the tree. (The indent is
// set through CSSOM: the page's own code writes no style attributes.)
function cmdCell(cmd, depth) {
  const td = el('td', {class: 'cmd', title: cmd},
    depth ? el('span', {class: 'branch', 'aria-hidden': 'true', text: '└ '}) : null, cmd);
  td.style.paddingLeft = `calc(0.5rem + ${depth * 1.1}rem)`;
  return td;
}

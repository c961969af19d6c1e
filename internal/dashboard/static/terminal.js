// The live terminal of a tty instance, in the details panel: xterm.js
// (vendored under vendor/xterm, loaded on first use) attached to
// GET /v1/attach/{id}, a WebSocket on the same origin. Binary messages
// carry the terminal's bytes both ways; a text message {"cols", "rows"}
// resizes the run's terminal to what fits the panel; the daemon's text
// messages {"error"} are shown beside the title. The connection follows
// the instance across runs by itself; when the instance ends for good
// (close 1000, reason "done" or "error") the last screen stays, and a new
// connection is made once the instance runs again.

import {setText, pathId} from './fmt.js';
import {authFetch, pageMessage} from './session.js';

// The sizes a run's terminal may have (docs/terminal.md).
const MIN_COLS = 10, MAX_COLS = 1000, MIN_ROWS = 2, MAX_ROWS = 500;
const RETRY_MS = 3000;
const HISTORY = 2000; // lines of history asked for on attach: tty_history's default
const CHUNK = 16 * 1024; // a paste goes to the daemon in pieces (it takes at most 64 KiB a message)

let xterm = null; // the promise of {Terminal, FitAddon}, once asked for

// loadXterm adds xterm.js, its fit addon and its stylesheet to the page
// (scripts of the page's own origin, as the CSP asks).
function loadXterm() {
  if (!xterm) {
    const add = (tag, attrs) => new Promise((resolve, reject) => {
      const n = Object.assign(document.createElement(tag), attrs);
      n.onload = resolve;
      n.onerror = () => reject(new Error(`could not load ${attrs.src || attrs.href}`));
      document.head.append(n);
    });
    xterm = Promise.all([
      add('link', {rel: 'stylesheet', href: '/ui/vendor/xterm/xterm.css'}),
      add('script', {src: '/ui/vendor/xterm/xterm.js'}).then(() => add('script', {src: '/ui/vendor/xterm/addon-fit.js'})),
    ]).then(() => ({Terminal: globalThis.Terminal, FitAddon: globalThis.FitAddon.FitAddon}));
  }
  return xterm;
}

export class LiveTerminal {
  // section holds the terminal (hidden for an instance without tty), box
  // is where xterm draws, state the line beside the title.
  constructor(section, box, state) {
    Object.assign(this, {section, box, state});
    this.id = null;       // the instance shown
    this.term = null;     // the xterm.js Terminal
    this.fit = null;
    this.ws = null;       // the WebSocket, while one is open or opening
    this.ended = null;    // the run the last connection ended with, for good
    this.retry = 0;       // the timer of a reconnection
    this.sent = '';       // the size last sent, "COLSxROWS"
    this.last = null;     // the instance whose last screen was asked for
    this.enc = new TextEncoder();
    new ResizeObserver(() => this.resize()).observe(box);
  }

  // sync shows instance id's terminal as its status st says: connects
  // while it runs, keeps the last screen when it does not.
  async sync(id, st) {
    const tty = !!(st && st.tty);
    this.section.hidden = !tty;
    if (id !== this.id) this.stop();
    this.id = id;
    if (!tty) return;
    if (!this.term) {
      try {
        await this.create();
      } catch (err) {
        setText(this.state, `the terminal could not load: ${err.message}`);
        return;
      }
      if (id !== this.id) return;
    }
    const alive = st.pid != null;
    if (!alive && !this.ws) {
      setText(this.state, this.ended ? `ended (${this.ended.why})` : 'not running');
      // Nothing attached yet: show the last run's screen.
      if (!this.ended && !this.last) this.showLast(id);
    }
    // A run after the one the last connection ended with: attach again.
    if (alive && !this.ws && !this.retry && (!this.ended || st.run !== this.ended.run)) this.connect(id, st.run);
  }

  async create() {
    const {Terminal, FitAddon} = await loadXterm();
    if (this.term) return;
    this.term = new Terminal({
      fontFamily: getComputedStyle(this.box).fontFamily, fontSize: 13, cursorBlink: true, scrollback: HISTORY + 1000,
      theme: {background: '#0f1319', foreground: '#d7dce3'},
    });
    this.fit = new FitAddon();
    this.term.loadAddon(this.fit);
    this.term.open(this.box);
    this.term.onData((d) => this.send(this.enc.encode(d)));
    this.term.onBinary((d) => this.send(Uint8Array.from(d, (c) => c.charCodeAt(0))));
    // A bracketed paste drops ESC and C1 controls first, as xterm and the
    // daemon's own paste do, so pasted text cannot end its paste and run
    // what follows (docs/trust.md#pasted-text). Caught before xterm.js's
    // own handler, on the way down to its textarea.
    this.box.addEventListener('paste', (ev) => {
      const text = ev.clipboardData?.getData('text/plain');
      if (!text || !this.term?.modes.bracketedPasteMode) return;
      ev.preventDefault();
      ev.stopPropagation();
      this.term.paste(text.replace(/[\x1b\x80-\x9f]/g, ''));
    }, true);
    this.resize();
  }

  // showLast draws the screen a run left (GET /v1/screen/{id}?ansi=1).
  async showLast(id) {
    this.last = id;
    try {
      const r = await authFetch(`/v1/screen/${pathId(id)}?ansi=1`);
      if (!r.ok || this.id !== id || this.ws) return;
      const scr = await r.json();
      this.term.reset();
      this.term.write((scr.ansi || scr.lines).join('\r\n'));
    } catch { /* the next status tries again */ this.last = null; }
  }

  async connect(id, run) {
    this.ended = null;
    this.sent = '';
    this.term.reset(); // the daemon sends the whole screen first
    setText(this.state, 'connecting…');
    // The run's history first, into the scrollback (docs/terminal.md): its
    // lines, then as many newlines as the screen has rows, so that they are
    // all above the screen the daemon then draws (a clear erases the screen,
    // not the scrollback). A stand-in holds the place of the WebSocket
    // meanwhile, so that no other connection starts.
    const pending = {readyState: WebSocket.CONNECTING, close() {}};
    this.ws = pending;
    try {
      const r = await authFetch(`/v1/screen/${pathId(id)}?ansi=1&history=${HISTORY}`);
      const scr = r.ok ? await r.json() : {};
      const lines = scr.history_ansi || scr.history || [];
      if (this.ws === pending && lines.length) this.term.write(lines.join('\r\n') + '\r\n'.repeat(this.term.rows));
    } catch { /* no history: the screen alone */ }
    if (this.ws !== pending) return; // stopped meanwhile
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const ws = new WebSocket(`${proto}//${location.host}/v1/attach/${pathId(id)}`);
    ws.binaryType = 'arraybuffer';
    this.ws = ws;
    ws.onopen = () => {
      // A WebSocket takes no header: the page's secret is its first
      // message (session.js), before anything else is sent.
      const proof = pageMessage();
      if (proof) ws.send(proof);
      if (this.ws !== ws) return;
      setText(this.state, 'live');
      this.resize();
    };
    ws.onmessage = (m) => {
      if (this.ws !== ws) return;
      if (typeof m.data !== 'string') {
        this.term.write(new Uint8Array(m.data));
        return;
      }
      try { setText(this.state, `live · ${JSON.parse(m.data).error}`); } catch { /* not ours */ }
    };
    ws.onclose = (e) => {
      if (this.ws !== ws) return;
      this.ws = null;
      if (e.code === 4401) { // the page's secret was refused: the session ended
        setText(this.state, 'not logged in');
        this.onLoggedOut();
        return;
      }
      if (e.code === 1000 && (e.reason === 'done' || e.reason === 'error')) {
        this.ended = {run, why: e.reason};
        setText(this.state, `ended (${e.reason})`);
        return;
      }
      // Refused (no run in place yet) or cut (the daemon restarted): try
      // again while the panel shows this instance.
      setText(this.state, 'disconnected; retrying…');
      this.retry = setTimeout(() => {
        this.retry = 0;
        if (this.id === id) this.onRetry(id);
      }, RETRY_MS);
    };
  }

  // onRetry is set by the panel: it syncs again with a fresh status.
  onRetry() {}

  // onLoggedOut is set by the panel: the session has ended.
  onLoggedOut() {}

  send(bytes) {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) return;
    for (let i = 0; i < bytes.length; i += CHUNK) this.ws.send(bytes.subarray(i, i + CHUNK));
  }

  // resize fits the terminal to its box, within the sizes a run's terminal
  // may have, and tells the daemon when that changed.
  resize() {
    if (!this.term || this.section.hidden || !this.box.clientWidth) return;
    const want = this.fit.proposeDimensions();
    if (!want || !want.cols || !want.rows) return;
    const cols = Math.min(MAX_COLS, Math.max(MIN_COLS, want.cols));
    const rows = Math.min(MAX_ROWS, Math.max(MIN_ROWS, want.rows));
    if (cols !== this.term.cols || rows !== this.term.rows) this.term.resize(cols, rows);
    const size = `${cols}x${rows}`;
    if (this.ws && this.ws.readyState === WebSocket.OPEN && size !== this.sent) {
      this.sent = size;
      this.ws.send(JSON.stringify({cols, rows}));
    }
  }

  // stop closes the connection (the run goes on) and forgets the instance.
  stop() {
    clearTimeout(this.retry);
    this.retry = 0;
    if (this.ws) {
      const ws = this.ws;
      this.ws = null;
      ws.close(1000, 'detached');
    }
    this.ended = null;
    this.last = null;
    this.id = null;
    if (this.term) this.term.reset();
  }
}

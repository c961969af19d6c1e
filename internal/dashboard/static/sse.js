// EventStream reads a Server-Sent Events stream (GET /v1/events) through
// fetch: unlike EventSource, fetch can send the page's secret header
// (session.js). It does not reconnect by itself: onend says why the
// stream ended (the HTTP status, or 0 for a dropped connection), and the
// caller opens a new one from the last seq it saw.

import {authFetch} from './session.js';

export class EventStream {
  constructor(url, {onopen, onevent, onend}) {
    this.ctrl = new AbortController();
    this.open = false;
    this.run(url, onopen, onevent, onend);
  }

  close() {
    this.open = false;
    this.ctrl.abort();
  }

  async run(url, onopen, onevent, onend) {
    let status = 0;
    try {
      const r = await authFetch(url, {signal: this.ctrl.signal, headers: {Accept: 'text/event-stream'}});
      status = r.status;
      if (r.ok) {
        this.open = true;
        onopen();
        await this.read(r.body, onevent);
        status = 0;
      }
    } catch { /* dropped, or closed */ }
    this.open = false;
    if (!this.ctrl.signal.aborted) onend(status);
  }

  // read parses the stream: "event:" and "data:" lines up to a blank line
  // make one event ({event, data}); "id:" is in the JSON too, comments
  // are skipped.
  async read(body, onevent) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    let data = [];
    let event = 'message';
    for (;;) {
      const {value, done} = await reader.read();
      if (done) return;
      buf += value;
      const lines = buf.split(/\r\n|\r|\n/);
      buf = lines.pop();
      for (const line of lines) {
        if (line === '') {
          if (data.length) onevent({event, data: data.join('\n')});
          data = [];
          event = 'message';
        } else if (line.startsWith('data:')) {
          data.push(field(line, 5));
        } else if (line.startsWith('event:')) {
          event = field(line, 6);
        }
      }
    }
  }
}

// field is a line's value after its name and colon, less one leading space.
function field(line, n) {
  return line.slice(line[n] === ' ' ? n + 1 : n);
}

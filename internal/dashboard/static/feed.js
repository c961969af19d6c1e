// The live event feed: every event but status_changed, newest first, in a
// polite live region. Pausing holds new events back (and keeps them) so
// the list can be read.

import {el, clock, localTime, bytes, duration, exitText} from './fmt.js';

const FEED_MAX = 200;

// Causes of an exit that are not a failure.
const CALM_CAUSES = new Set(['clean_exit', 'operator_stop', 'operator_restart', 'wedge_restart', 'graceful_shutdown']);

export class Feed {
  constructor(list, pause, onSelect) {
    this.list = list;
    this.held = [];
    this.paused = false;
    pause.addEventListener('change', () => {
      this.paused = pause.checked;
      if (!this.paused) {
        for (const e of this.held) this.show(e);
        this.held = [];
      }
    });
    list.addEventListener('click', (e) => {
      const b = e.target.closest('button[data-id]');
      if (b) onSelect(b.dataset.id);
    });
  }

  // settled marks the end of the history replayed on load: from now on
  // additions are news worth announcing.
  settled() {
    if (this.list.getAttribute('aria-busy') === 'true') this.list.setAttribute('aria-busy', 'false');
  }

  add(e) {
    if (this.paused) {
      this.held.push(e);
      if (this.held.length > FEED_MAX) this.held.shift();
      return;
    }
    this.show(e);
  }

  show(e) {
    const [text, sev] = describe(e);
    const li = el('li', {class: 'ev sev-' + sev},
      el('time', {datetime: e.ts, title: localTime(e.ts), text: clock(e.ts)}),
      el('span', {class: 'kind', text: e.kind.replace('_', ' ')}),
      e.id ? el('button', {type: 'button', class: 'link', 'data-id': e.id, text: e.id}) : el('span', {class: 'id muted', text: 'daemon'}),
      el('span', {class: 'msg', text}));
    this.list.prepend(li);
    while (this.list.childElementCount > FEED_MAX) this.list.lastElementChild.remove();
  }
}

// describe is an event as a short sentence and a severity (ok, info, warn, bad).
function describe(e) {
  switch (e.kind) {
    case 'spawned':
      return [`started, pid ${e.pid}, run ${e.run}`, 'ok'];
    case 'spawn_failed':
      return [`could not start: ${e.error}`, 'bad'];
    case 'exited': {
      const calm = CALM_CAUSES.has(e.likely_cause);
      let s = `${exitText(e)} (${e.likely_cause}) after ${duration(e.run_duration_ms, true)}`;
      if (e.crash_count) s += `, crash ${e.crash_count}`;
      if (e.max_rss_bytes) s += `, peak ${bytes(e.max_rss_bytes)}`;
      return [s, calm ? 'info' : 'bad'];
    }
    case 'backoff':
      return [e.ms ? `restarting in ${duration(e.ms, true)} (${e.reason})` : `restarting now (${e.reason})`,
        e.reason === 'crash' || e.reason === 'budget_exceeded' ? 'warn' : 'info'];
    case 'health_warn': {
      let s = `${e.reason.replaceAll('_', ' ')}: ${e.count}`;
      if (e.max) s += ` of ${e.max}`;
      if (e.window_ms) s += ` in ${duration(e.window_ms, true)}`;
      return [s, 'warn'];
    }
    case 'wedged':
      return [`wedged (${e.source}): ${e.detail}`, 'warn'];
    case 'rss_exceeded':
      return [`memory ${bytes(e.rss_bytes)} passed max_rss ${bytes(e.max_rss)}`, 'warn'];
    case 'gave_up':
      return [`gave up after ${e.crash_count} crashes (limit ${e.max})`, 'bad'];
    case 'tracked_changed':
    {
      const parts = [];
      if (e.added && e.added.length) parts.push(`${e.added.length} added`);
      if (e.removed && e.removed.length) parts.push(`${e.removed.length} removed`);
      return [`the fleet now has ${e.count} instances${parts.length ? ` (${parts.join(', ')})` : ''}`, 'info'];
    }
    case 'daemon':
      return [`daemon ${e.phase}${e.count != null ? ` (${e.count} runs)` : ''}`, 'info'];
  }
  const rest = Object.entries(e).filter(([k]) => !['seq', 'ts', 'kind', 'id', 'program'].includes(k));
  return [rest.map(([k, v]) => `${k}=${typeof v === 'object' ? JSON.stringify(v) : v}`).join(' '), 'info'];
}

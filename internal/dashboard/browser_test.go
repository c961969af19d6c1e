package dashboard_test

// The dashboard in a real browser: Debian's chromium, driven by chromedp,
// against the real tend binary running a small fleet. It checks what a user
// sees: logging in with a code (typed, and through tend dashboard --open),
// every instance listed, a status change arriving live, a restart button
// that restarts, and a page that talks to nothing but the daemon.

import (
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

const chromiumPath = "/usr/bin/chromium"

// fleetConfig is the fleet under test; %d is the HTTP port.
const fleetConfig = `[daemon]
http = "127.0.0.1:%d"

[defaults]
stop_grace = "2s"

[program.sleeper]
command = ["sleep", "3600"]
instances = 2
labels = { session = "s-1" }

[program.crasher]
command = ["sh", "-c", "echo starting; sleep 0.3; echo giving up >&2; exit 3"]
backoff_initial = "200ms"
backoff_max = "1s"
labels = { session = "s-2" }

[program.planner]
command = ["sh", "-c", "echo thinking about the plan; exec sleep 3600"]
agent = true
labels = { session = "s-1", role = "planner" }
`

var fleetIDs = []string{"crasher:0", "planner:0", "sleeper:0", "sleeper:1"}

// rowIDs is a JavaScript expression: the ids of the table's rows, in order.
const rowIDs = `[...document.querySelectorAll('#rows [role=row]')].map(r => r.dataset.id).join()`

func TestDashboardInBrowser(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		testutil.Missing(t, "no browser at %s (CI installs Debian's chromium package: apt-get install chromium)", chromiumPath)
	}
	if testing.Short() {
		t.Skip("builds tend and starts a browser")
	}
	d := startTend(t)
	code := d.loginCode(t)

	d.checkToken(t)

	// The old login link logs nobody in: the login page takes a code only
	// as a POSTed form field.
	ctx, requests, problems := newBrowser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(d.base+"/login?code="+url.QueryEscape(code))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the login form", `!!document.querySelector('form[action="/login"] input[name=code]')`)
	if err := chromedp.Do(ctx, chromedp.Navigate(d.base+"/")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the login form instead of the dashboard", `!!document.querySelector('input[name=code]') && !document.getElementById('rows')`)
	shots := t.TempDir()
	screenshot(t, ctx, shots, "login.png")

	// The code typed into the login form logs in and lands on the dashboard.
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(`input[name=code]`, strings.ToLower(code)+kb.Enter),
	); err != nil {
		t.Fatal(err)
	}
	for _, id := range fleetIDs {
		waitJS(t, ctx, "row of "+id, fmt.Sprintf(`!!document.querySelector('#rows [data-id=%q]')`, id))
	}
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil || loc != d.base+"/" {
		t.Errorf("after login the page is %q (%v), want %s/", loc, err, d.base)
	}

	// The filter box and the agents toggle narrow the list.
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.ID("filter"), "sleeper")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the filter to keep the sleepers", rowIDs+` === 'sleeper:0,sleeper:1'`)
	if err := chromedp.Do(ctx,
		chromedp.Evaluate[chromedp.Void](`(f => { f.value = ''; f.dispatchEvent(new Event('input')) })(document.getElementById('filter'))`),
		chromedp.Click(chromedp.ID("agents")),
	); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "agents only", rowIDs+` === 'planner:0'`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("agents"))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "every instance again", rowIDs+` === '`+strings.Join(fleetIDs, ",")+`'`)

	// KEY=VALUE in the filter box keeps the instances with that label,
	// exactly; several must all match.
	setFilter := func(v string) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(
			`(f => { f.value = %q; f.dispatchEvent(new Event('input')) })(document.getElementById('filter'))`, v))); err != nil {
			t.Fatal(err)
		}
	}
	setFilter("session=s-1")
	waitJS(t, ctx, "the label filter to keep session s-1", rowIDs+` === 'planner:0,sleeper:0,sleeper:1'`)
	setFilter("session=s-1 role=planner")
	waitJS(t, ctx, "two labels to keep the planner", rowIDs+` === 'planner:0'`)
	setFilter("session=s-")
	waitJS(t, ctx, "a label value matched exactly, not as a prefix", rowIDs+` === ''`)
	setFilter("")
	waitJS(t, ctx, "every instance after the label filter", rowIDs+` === '`+strings.Join(fleetIDs, ",")+`'`)

	// Rows work from the keyboard: arrows move, Enter opens, Escape closes.
	if err := chromedp.Do(ctx,
		chromedp.Evaluate[chromedp.Void](`document.querySelector('#rows [role=row]').focus()`),
		chromedp.KeyEvent(kb.ArrowDown),
	); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "arrow down to focus planner:0", `document.activeElement?.dataset.id === 'planner:0'`)
	if err := chromedp.Do(ctx, chromedp.KeyEvent(kb.Enter)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "Enter to open planner:0", `!document.getElementById('details').hidden && document.getElementById('d-title').textContent === 'planner:0'`)
	if err := chromedp.Do(ctx, chromedp.KeyEvent(kb.Escape)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "Escape to close the details", `document.getElementById('details').hidden && document.activeElement?.dataset.id === 'planner:0'`)

	// A change made elsewhere shows up without a reload.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](`window.sameDocument = true`)); err != nil {
		t.Fatal(err)
	}
	d.cli(t, "stop", "sleeper:0")
	waitJS(t, ctx, "sleeper:0 shown stopped", `document.querySelector('#rows [data-id="sleeper:0"] .c-state')?.textContent === 'stopped'`)
	waitJS(t, ctx, "sleeper:0 shown done", `document.querySelector('#rows [data-id="sleeper:0"] .badge')?.dataset.lc === 'done'`)
	if same, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.sameDocument === true`)); !same {
		t.Error("the page reloaded to show the change")
	}

	// The row's restart button restarts it.
	before, err := d.client.Status("sleeper:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#rows button[data-action="restart"][data-id="sleeper:0"]`))); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "restart from the page to raise sleeper:0's run", func() bool {
		st, err := d.client.Status("sleeper:0")
		return err == nil && st.Run > before.Run && st.State == program.StateRunning
	})
	waitJS(t, ctx, "sleeper:0 shown running again", `document.querySelector('#rows [data-id="sleeper:0"] .c-state')?.textContent === 'running'`)

	screenshot(t, ctx, shots, "dashboard.png")

	// The details of an instance: its process tree and a live log tail.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#rows [data-id="planner:0"] .c-id`))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "planner:0 details", `document.getElementById('d-title')?.textContent === 'planner:0' && !document.getElementById('details').hidden`)
	waitJS(t, ctx, "planner:0 log tail", `document.getElementById('d-log').textContent.includes('thinking about the plan')`)
	waitJS(t, ctx, "planner:0 process tree", `document.getElementById('d-procs').textContent.includes('sleep 3600')`)
	waitJS(t, ctx, "crasher events in the feed", `[...document.querySelectorAll('#feed .ev')].some(li => li.textContent.includes('crasher:0') && li.textContent.includes('exit 3'))`)

	waitJS(t, ctx, "planner:0's labels in its details", `document.getElementById('d-facts').textContent.includes('role=planner, session=s-1')`)

	screenshot(t, ctx, shots, "dashboard-details.png")

	// A link opens the dashboard on a session: /?label=KEY=VALUE.
	if err := chromedp.Do(ctx, chromedp.Navigate(d.base+"/?label=session=s-2")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the page opened with ?label= to show session s-2", rowIDs+` === 'crasher:0' && document.getElementById('filter').value === 'session=s-2'`)

	for _, u := range requests() {
		if p, err := url.Parse(u); err != nil || (p.Scheme != "data" && p.Host != d.addr) {
			t.Errorf("the page requested %s, outside the daemon at %s", u, d.addr)
		}
	}
	for _, p := range problems() {
		t.Errorf("page console: %s", p)
	}

	// tend dashboard --open logs a browser in through a private page that
	// POSTs the code; here the fake xdg-open tells the test which page, and
	// the test opens it as the browser would.
	if _, err := chromedp.Call(ctx, network.ClearBrowserCookies, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(d.base+"/")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "logged out", `!!document.querySelector('input[name=code]')`)
	page, open := d.openDashboard(t)
	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+page)); err != nil {
		t.Fatal(err)
	}
	for _, id := range fleetIDs {
		waitJS(t, ctx, "row of "+id+" after --open", fmt.Sprintf(`!!document.querySelector('#rows [data-id=%q]')`, id))
	}
	if out := open(); !strings.Contains(out, "Logged in.") {
		t.Errorf("tend dashboard --open said:\n%s", out)
	}
	if _, err := os.Stat(page); !os.IsNotExist(err) {
		t.Errorf("the login page %s is still there (%v)", page, err)
	}
}

package dashboard_test

import (
	"bytes"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tend-sh/tend/internal/api"
	"github.com/tend-sh/tend/internal/api/apitest"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// TestDashboardPasteCannotEndItself pastes, in a real browser, text that
// holds the end marker a one-pass removal would leave behind into a
// terminal whose program turned bracketed paste on: the program is typed
// one paste, with no ESC inside it (docs/trust.md#pasted-text).
func TestDashboardPasteCannotEndItself(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		testutil.Missing(t, "no browser at %s (CI installs Debian's chromium package: apt-get install chromium)", chromiumPath)
	}
	if testing.Short() {
		t.Skip("starts a browser")
	}
	b := apitest.NewBackend(t.TempDir())
	pid := 4242
	b.Put(program.Status{ID: "agent:0", Program: "agent", State: program.StateRunning, Lifecycle: program.LifecycleRunning, PID: &pid})
	tt := apitest.NewTerminals(b)
	tt.AddTTY("agent:0", 80, 24)
	tt.Output("agent:0", []byte("\x1b[?2004hpaste here> "))
	srv := api.New(b, &apitest.Events{}, api.Options{Version: "test", Terminals: tt})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	t.Cleanup(func() {
		srv.Close()
		<-served
	})

	ctx, _, problems := newBrowser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+l.Addr().String()+"/")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the row of agent:0", `!!document.querySelector('#rows [data-id="agent:0"]')`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#rows [data-id="agent:0"] .c-id`))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the terminal live", `document.getElementById('d-term-state').textContent === 'live' && `+termRows+`.includes('paste here>')`)

	// A paste as the browser delivers one: a ClipboardEvent on xterm.js's
	// textarea.
	paste := `(() => {
		const dt = new DataTransfer();
		dt.setData('text/plain', 'harmless \u001b[20\u001b[201~1~; touch /tmp/x\n\u009b201~ end');
		const ta = document.querySelector('#d-term .xterm-helper-textarea');
		ta.focus();
		return ta.dispatchEvent(new ClipboardEvent('paste', {clipboardData: dt, bubbles: true, cancelable: true}));
	})()`
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](paste)); err != nil {
		t.Fatal(err)
	}
	want := "\x1b[200~harmless [20[201~1~; touch /tmp/x\r201~ end\x1b[201~"
	var typed []byte
	testutil.Eventually(t, "the paste typed", func() bool {
		typed = tt.Typed("agent:0")
		return bytes.HasSuffix(typed, []byte("end\x1b[201~"))
	}, testutil.Explain(func() string { return strings.ToValidUTF8(string(typed), "?") }))
	if string(typed) != want {
		t.Errorf("the program was typed %q, want %q", typed, want)
	}
	for _, p := range problems() {
		t.Errorf("page console: %s", p)
	}
}

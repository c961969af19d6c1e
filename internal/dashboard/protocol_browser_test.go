package dashboard_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// TestDashboardProtocolAgentInBrowser: the SDK's example ACP agent under
// the real daemon; in the browser a prompt typed in the details' box is
// sent, the permission the agent asks shows with a button per option, a
// click on "Allow this change" answers it, and the answer shows in the
// log pane (the transcript); the agent is idle again.
func TestDashboardProtocolAgentInBrowser(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		testutil.Missing(t, "no browser at %s (CI installs Debian's chromium package: apt-get install chromium)", chromiumPath)
	}
	if testing.Short() {
		t.Skip("builds tend and starts a browser")
	}
	agent := filepath.Join(t.TempDir(), "agent")
	if out, err := exec.Command("go", "build", "-o", agent, "github.com/coder/acp-go-sdk/example/agent").CombinedOutput(); err != nil {
		t.Fatalf("building the SDK's example agent: %v\n%s", err, out)
	}
	conf := "[daemon]\nhttp = \"127.0.0.1:%d\"\n\n[program.coder]\ncommand = [" + fmt.Sprintf("%q", agent) + "]\nprotocol = \"acp\"\n"
	d, out := startTendWith(t, conf, []string{"coder:0"})
	if d == nil {
		t.Fatalf("tend up ended:\n%s", out)
	}
	testutil.Eventually(t, "coder:0 ready", func() bool {
		st, err := d.client.Status("coder:0")
		return err == nil && st.Ready && st.SessionID != ""
	})
	code := d.loginCode(t)
	ctx, _, problems := newBrowser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(d.base+"/login")); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.SendKeys(`input[name=code]`, strings.ToLower(code)+kb.Enter)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the row of coder:0", `!!document.querySelector('#rows [data-id="coder:0"]')`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#rows [data-id="coder:0"] .c-id`))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the prompt box", `!document.getElementById('d-proto').hidden`)
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("d-prompt-text"), "fix the build"),
		chromedp.Click(chromedp.ID("d-prompt-send")),
	); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "a button per option of the permission request",
		`[...document.querySelectorAll('#d-perm-options button')].map(b => b.textContent).join('|') === 'Allow this change|Skip this change' && !document.getElementById('d-perm').hidden`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#d-perm-options button[data-option="allow"]`))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the answer in the transcript", `document.getElementById('d-log').textContent.includes('Perfect!') && document.getElementById('d-log').textContent.includes('> fix the build')`)
	waitJS(t, ctx, "the request gone", `document.getElementById('d-perm').hidden`)
	testutil.Eventually(t, "coder:0 idle again", func() bool {
		st, err := d.client.Status("coder:0")
		return err == nil && st.Lifecycle == program.LifecycleIdle && st.Waiting == nil
	})
	evs, err := d.client.Events(0)
	if err != nil {
		t.Fatal(err)
	}
	answered := false
	for _, e := range evs {
		if p, ok := e.Data.(*program.Permission); ok && p.Phase == program.PhaseAnswered && p.By == program.ByOperator && p.OptionID == "allow" {
			answered = true
		}
	}
	if !answered {
		t.Errorf("no permission answered allow by the operator in the events")
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("the page had problems: %v", p)
	}
}

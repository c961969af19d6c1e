package supervisor

import (
	"fmt"
	"testing"

	"github.com/tend-sh/tend/internal/program"
)

// Programs added one by one after the fleet's start (over the API) keep
// no trace of their starts once those are carried out: nobody waits for
// them, and a platform adds thousands.
func TestStartsAddedLaterAreNotKept(t *testing.T) {
	h := newHarness(t)
	for i := range 50 {
		name := fmt.Sprintf("p%d", i)
		if _, err := h.mgr.Add(spec(name, "sleep", "60")); err != nil {
			t.Fatal(err)
		}
		h.waitFor(name+" running", func() bool { return h.status(name+":0").State == program.StateRunning })
	}
	h.mgr.mu.Lock()
	n := len(h.mgr.starting)
	h.mgr.mu.Unlock()
	if n > 1 {
		t.Errorf("%d start replies kept after 50 programs were added and started, want at most the last one", n)
	}
}

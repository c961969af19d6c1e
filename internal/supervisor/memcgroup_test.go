package supervisor

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/cgroup"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// TestCgroupMemoryWatchdogDrainsPastMaxRSS: with cgroups but no memory
// controller (this machine's), max_rss reads the run's process tree, as
// without cgroups, and drains a run that passes it; the run's group holds
// it, and the tree forgets the run once it has ended.
func TestCgroupMemoryWatchdogDrainsPastMaxRSS(t *testing.T) {
	dir := testutil.CgroupDir(t)
	tr, why, err := cgroup.Setup(dir, "memwatch")
	if err != nil || tr == nil {
		t.Skipf("no cgroups here: %v %s", err, why)
	}
	t.Cleanup(func() { tr.Close() })
	h := newHealthHarness(t)
	h.mgr.deps.Cgroups = tr
	s := fakeSpec("hog", "alloc")
	s.MaxRSS, s.RSSBackoff = 48<<20, time.Hour
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the run in its group", func() bool {
		st := h.status("hog:0")
		b, _ := os.ReadFile(filepath.Join(tr.Path(), "hog-0", "cgroup.procs"))
		return st.PID != nil && strings.Contains("\n"+string(b), "\n"+strconv.Itoa(*st.PID)+"\n")
	})
	h.waitFor("the drain", func() bool { return len(h.matching(program.KindExited, "hog:0")) == 1 })
	r := h.matching(program.KindRSSExceeded, "hog:0")
	if len(r) != 1 || data[program.RSSExceeded](r[0]).RSSBytes <= 48<<20 {
		t.Fatalf("rss_exceeded: %+v", r)
	}
	if x := data[program.Exited](h.matching(program.KindExited, "hog:0")[0]); x.LikelyCause != program.CauseRSSWatchdog {
		t.Errorf("exited: %+v", x)
	}
}

package spawn

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/limits"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/reaper"
)

// Runs get the descriptor limit tend was started with, not the one it
// raised for a big fleet (docs/trust.md#limits). The limit is process-wide, so the test
// runs in a re-executed copy of this binary.
func TestRunsGetTheLimitTendWasStartedWith(t *testing.T) {
	if os.Getenv("TEND_LIMITS_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestRunsGetTheLimitTendWasStartedWith$", "-test.count=1")
		cmd.Env = append(os.Environ(), "TEND_LIMITS_CHILD=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "PASS") {
			t.Fatalf("child: %v\n%s", err, out)
		}
		if strings.Contains(string(out), "SKIP") {
			t.Skipf("child skipped:\n%s", out)
		}
		return
	}
	var lim unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_NOFILE, &lim)
	if lim.Max < 2048 {
		t.Skipf("hard limit %d too low to tell the limits apart", lim.Max)
	}
	// tend started with a soft limit of 1024 (a login shell's), and raises
	// it for its fleet.
	started := unix.Rlimit{Cur: 1024, Max: lim.Max}
	if err := unix.Prlimit(0, unix.RLIMIT_NOFILE, &started, nil); err != nil {
		t.Fatal(err)
	}
	r := reaper.New()
	if err := r.Start(false); err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	res, err := limits.Raise(lim.Max, r)
	if err != nil || !res.Changed {
		t.Fatalf("Raise: %+v %v", res, err)
	}
	file := filepath.Join(t.TempDir(), "ulimit")
	exited := make(chan reaper.Status, 1)
	// The limit is set on the run just after its exec (nothing can run in
	// syscall.ForkExec's child before it): its very first instructions see
	// the raised one, which this run lets pass before it looks.
	spec := &program.Spec{Name: "u", Shell: "sleep 0.2; ulimit -Sn > " + file, Cwd: "/"}
	out := NewOutput(nil, "u:0", program.Logs{MaxSize: 1 << 20, MaxFiles: 1})
	defer out.Close()
	if _, err := Start(r, Request{Spec: spec, Env: os.Environ(), Out: out, Owner: func(s reaper.Status) { exited <- s }}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		t.Fatal("the run did not end")
	}
	b, _ := os.ReadFile(file)
	if got := strings.TrimSpace(string(b)); got != "1024" {
		t.Fatalf("the run's soft limit is %q; tend was started with 1024 (and raised its own to %d)", got, res.After.Cur)
	}
}

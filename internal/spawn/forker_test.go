package spawn

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/reaper"
	"github.com/tend-sh/tend/internal/testutil"
)

// A run is forked from the forker thread's small table, not the daemon's:
// with ten thousand runs the daemon holds twenty thousand descriptors, and
// every exec would copy and close them all. The kernel sizes a process's
// descriptor table from the one it was forked from and exec keeps that size
// (FDSize in /proc/PID/status), which shows where the fork happened.
func TestRunsForkFromASmallTable(t *testing.T) {
	StartForker() // as the daemon does first thing
	var held []*os.File
	defer func() {
		for _, f := range held {
			f.Close()
		}
	}()
	for range 3000 {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, f)
	}
	r := reaper.New()
	if err := r.Start(false); err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	exited := make(chan reaper.Status, 1)
	spec := &program.Spec{Name: "s", Command: []string{"sleep", "30"}, Cwd: "/"}
	out := NewOutput(nil, "s:0", program.Logs{MaxSize: 1 << 20, MaxFiles: 1}) // output discarded
	defer out.Close()
	pid, err := Start(r, Request{Spec: spec, Env: os.Environ(), Out: out, Owner: func(s reaper.Status) { exited <- s }})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		r.Signal(pid, syscall.SIGKILL, true)
		<-exited
	}()
	var size int
	testutil.Eventually(t, "the run to sleep", func() bool {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "FDSize:"); ok && strings.Contains(string(b), "State:\tS") {
				size, _ = strconv.Atoi(strings.TrimSpace(v))
			}
		}
		return size != 0
	})
	if size >= 3000 {
		t.Fatalf("the run's descriptor table has room for %d: it was forked from the daemon's (3000+ open), not the forker's", size)
	}
}

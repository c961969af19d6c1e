package supervisor

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"

	"github.com/tend-sh/tend/internal/proctree"
	"github.com/tend-sh/tend/internal/program"
)

// Without cgroups (docs/containment.md#without-cgroups), a stop or restart reaches what left
// the run's process group with setsid, through a fresh sample of its tree.

// withArgs lists the live processes whose command line is exactly argv.
func withArgs(argv ...string) []int {
	want := []byte(fmtArgv(argv))
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && bytes.Equal(b, want) && alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

func fmtArgv(argv []string) string {
	var b bytes.Buffer
	for _, a := range argv {
		b.WriteString(a)
		b.WriteByte(0)
	}
	return b.String()
}

func TestTreeModeStopAndRestartEndSetsidEscapees(t *testing.T) {
	h := newHarness(t)
	h.mgr.deps.Tree = proctree.New()
	mark := fmt.Sprintf("%d.%d", 1000+os.Getpid()%1000, 7)
	s := spec("escaper", "/bin/sh", "-c", "setsid sh -c 'exec sleep "+mark+"' & exec sleep 100000")
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	escapees := func() []int { return withArgs("sleep", mark) }
	t.Cleanup(func() { // should the test fail: end them by pid
		for _, pid := range escapees() {
			killPid(pid)
		}
	})
	h.waitFor("the escapee", func() bool { return len(escapees()) == 1 })
	prev := escapees()[0]
	for i := 0; i < 50; i++ {
		outs, _ := h.mgr.Restart(context.Background(), "escaper", program.ActOptions{Wait: true})
		if len(outs) != 1 || !outs[0].OK {
			t.Fatalf("restart %d: %+v", i, outs)
		}
		// The old run's escapee got stop_signal; the new run makes its own
		// (wait for it: a run stopped before it forked has nothing to leave).
		h.waitFor(fmt.Sprintf("restart %d to leave exactly the new run's escapee", i), func() bool {
			e := escapees()
			return len(e) == 1 && e[0] != prev
		})
		prev = escapees()[0]
	}
	outs, _ := h.mgr.Stop(context.Background(), "escaper", program.ActOptions{Wait: true})
	if len(outs) != 1 || !outs[0].OK {
		t.Fatalf("stop: %+v", outs)
	}
	h.waitFor("no escapee after the stop", func() bool { return len(escapees()) == 0 })
}

func killPid(pid int) { _ = syscall.Kill(pid, syscall.SIGKILL) }

// A small run started by a large daemon reports its own peak, not the
// daemon's: Linux hands a child forked with CLONE_VM the forking process's
// high-water mark through exec (docs/events.md, max_rss_bytes).
func TestMaxRSSIsTheRunsNotTheDaemons(t *testing.T) {
	ballast := make([]byte, 128<<20) // the "daemon" (this test binary) grows to 128 MB resident
	for i := range ballast {
		if i%4096 == 0 {
			ballast[i] = 1
		}
	}
	h := newHarness(t)
	small := spec("small", "/bin/sleep", "0.2")
	small.Restart = program.RestartNever
	// Held for 2.5 s, so that the memory watchdog (max_rss) samples it
	// where the reaped figure cannot be told from this process's own (the
	// race detector's shadow memory makes the test binary larger still).
	big := spec("big", "python3", "-c", "import time; b = bytearray(400 << 20); b[::4096] = b'x' * len(b[::4096]); time.sleep(2.5)")
	big.Restart, big.MaxRSS = program.RestartNever, 8<<30
	for _, s := range []program.Spec{small, big} {
		if _, err := h.mgr.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	h.waitFor("both ended", func() bool {
		return len(h.matching(program.KindExited, "small:0")) == 1 && len(h.matching(program.KindExited, "big:0")) == 1
	})
	if got := data[program.Exited](h.matching(program.KindExited, "small:0")[0]).MaxRSSBytes; got >= 64<<20 {
		t.Errorf("sleep's max_rss_bytes = %d: the daemon's peak, not the run's", got)
	}
	if got := data[program.Exited](h.matching(program.KindExited, "big:0")[0]).MaxRSSBytes; got < 400<<20 {
		t.Errorf("a run that touched 400 MB reports max_rss_bytes = %d", got)
	}
	runtime.KeepAlive(ballast)
}

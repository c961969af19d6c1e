//go:build soak

package soak

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/program"
)

// The disk soak (docs/daemon.md#when-the-disk-fills): the state directory
// on a 2 MiB tmpfs that a filler fills and empties at random moments,
// operator stops and starts all along (some refused: those are not
// decisions), and the daemon SIGKILLed at random moments and started
// again. Then, with room again, the invariants:
//
//   - no instance doubled: every live process of the fleet is the run of
//     exactly one instance, as its status says;
//
//   - no decided stop forgotten: an instance whose last accepted operator
//     command was a stop is stopped;
//
//   - seq strictly increasing in the audit log, and every jump in it
//     covered by a degraded_storage event naming exactly the seqs lost;
//
//   - every run accounted: no process of the fleet lives outside tend's
//     statuses.
//
//     go test -tags soak -count=1 ./bench/soak -run TestDiskSoak -soak.disk=20s
var diskSoakDuration = flag.Duration("soak.disk", 20*time.Second, "how long TestDiskSoak's faults go on")

const diskFleetConfig = `[daemon]
state_dir = "state"

[defaults]
backoff_initial = "50ms"
backoff_max = "300ms"
stop_grace = "2s"

[program.keep]
command = ["sleep", "100004"]
instances = 12

[program.crash]
shell = "sleep 0.$(($$ % 5)); exit 1"
instances = 4
max_crashes = 1000000
`

func TestDiskSoak(t *testing.T) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Skipf("cannot become a child subreaper: %v", err)
	}
	defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	if os.Geteuid() != 0 {
		t.Skip("a disk to fill is a tmpfs mounted by root")
	}
	r := newRig(t)
	state := filepath.Join(r.dir, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", state, "tmpfs", 0, "size=2m,mode=0700"); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	defer func() {
		syscall.Unmount(state, syscall.MNT_DETACH)
		if t.Failed() || *soakKeep {
			t.Logf("work dir kept: %s (its state dir was a tmpfs, now gone; the daemons' logs stay)", r.dir)
			return
		}
		os.RemoveAll(r.dir)
	}()
	if err := os.WriteFile(r.conf, []byte(diskFleetConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.reapLoop(ctx)
	defer r.killLeftovers()
	seed := *soakSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	rng := rand.New(rand.NewPCG(seed, seed^0xd15c))
	t.Logf("work dir %s, seed %d, duration %s", r.dir, seed, *diskSoakDuration)

	d := r.startDaemon(1)
	defer func() { r.stopDaemon(d) }()
	if !waitFor(upWait, func() bool { _, err := r.client.Status("keep:11"); return err == nil }) {
		t.Fatalf("the daemon did not serve:\n%s", tail(d.log))
	}
	filler := filepath.Join(state, "fill")
	decided := map[string]string{} // keep:K -> "stop" or "start", the last accepted
	var kills, fills, refused, accepted int
	full := false
	end := time.Now().Add(*diskSoakDuration)
	for n := 2; time.Now().Before(end); {
		switch x := rng.IntN(10); {
		case x < 2: // the disk fills, or empties
			if full {
				os.Remove(filler)
			} else {
				fillFile(filler)
				fills++
			}
			full = !full
		case x < 3: // the daemon is killed, and started again
			syscall.Kill(d.pid, syscall.SIGKILL)
			<-d.done
			kills++
			time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
			d = r.startDaemon(n)
			n++
			if !waitFor(upWait, func() bool { _, err := r.client.Status("keep:0"); return err == nil }) {
				t.Fatalf("daemon %d did not serve:\n%s", n-1, tail(d.log))
			}
		default: // an operator's stop or start of one instance
			id := fmt.Sprintf("keep:%d", rng.IntN(12))
			verb := "stop"
			if rng.IntN(2) == 0 {
				verb = "start"
			}
			out, err := r.tendCmd("-c", r.conf, verb, "--no-wait", id)
			switch {
			case err == nil:
				decided[id] = verb
				accepted++
			case strings.Contains(out, "no space left"):
				refused++ // not journaled, so not decided
			default:
				// The daemon may have died mid-request: whether it was
				// journaled is unknown, so it is not checked.
				delete(decided, id)
			}
		}
		time.Sleep(time.Duration(50+rng.IntN(200)) * time.Millisecond)
	}
	os.Remove(filler)
	// One more kill with room again, so the last daemon starts from disk.
	syscall.Kill(d.pid, syscall.SIGKILL)
	<-d.done
	d = r.startDaemon(99)
	if !waitFor(upWait, func() bool { _, err := r.client.Status("keep:0"); return err == nil }) {
		t.Fatalf("the last daemon did not serve:\n%s", tail(d.log))
	}
	time.Sleep(settle)
	t.Logf("%d daemon kills, %d fills, %d operator commands accepted, %d refused for want of space", kills, fills, accepted, refused)

	// No decided stop forgotten; no instance doubled; every run accounted.
	list, err := r.client.List(false)
	if err != nil {
		t.Fatal(err)
	}
	byPID := map[int]string{}
	for _, st := range list {
		switch decided[st.ID] {
		case "stop":
			if st.State != program.StateStopped && st.State != program.StateStopping {
				t.Errorf("%s was stopped by the operator (accepted) and is %s", st.ID, st.State)
			}
		case "start":
			if st.State != program.StateRunning {
				t.Errorf("%s was started by the operator (accepted) and is %s", st.ID, st.State)
			}
		}
		if st.PID != nil {
			if other, ok := byPID[*st.PID]; ok {
				t.Errorf("pid %d is the run of %s and of %s", *st.PID, other, st.ID)
			}
			byPID[*st.PID] = st.ID
		}
	}
	for _, p := range descendants(os.Getpid(), allProcs()) {
		if p.state == 'Z' || !strings.Contains(cmdline(p.pid), "100004") {
			continue
		}
		if _, ok := byPID[p.pid]; !ok {
			t.Errorf("pid %d (%s) lives outside tend: a run not accounted for, or an instance doubled", p.pid, cmdline(p.pid))
		}
	}

	// seq strictly increasing, every jump a marked gap.
	evs, err := r.readAudit()
	if err != nil {
		t.Fatal(err)
	}
	type gapRange struct{ from, to uint64 }
	var gaps []gapRange
	for _, e := range evs {
		if dp, ok := e.Data.(*program.DaemonPhase); ok && dp.Phase == program.PhaseDegradedStorage && dp.LostFrom > 0 {
			gaps = append(gaps, gapRange{dp.LostFrom, dp.LostTo})
		}
	}
	for i := 1; i < len(evs); i++ {
		prev, cur := evs[i-1].Seq, evs[i].Seq
		if cur <= prev {
			t.Errorf("seq %d after %d", cur, prev)
			continue
		}
		for s := prev + 1; s < cur; {
			j := slices.IndexFunc(gaps, func(g gapRange) bool { return g.from <= s && s <= g.to })
			if j < 0 {
				t.Errorf("seq %d is missing from the audit log, and no degraded_storage event names it", s)
				break
			}
			s = gaps[j].to + 1
		}
	}
	t.Logf("%d events in the audit log, %d gaps marked", len(evs), len(gaps))

	if _, err := r.tendCmd("-c", r.conf, "down"); err != nil {
		t.Errorf("tend down: %v", err)
	}
	<-d.done
}

// fillFile writes path until its file system is full.
func fillFile(path string) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				return
			}
			for { // the last page may take a few bytes more
				if _, err := f.Write(buf[:1]); err != nil {
					return
				}
			}
		}
	}
}

// tail is the end of a daemon's log, for a failure's message.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

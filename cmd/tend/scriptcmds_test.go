package main

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// Commands of the scripts that look at processes and at the event log, for
// what the verbs' output alone cannot show. Each talks to the daemon of the
// script's tend.toml (state_dir .tend in $WORK).

// scriptTB lets a script command wait with testutil.Eventually: its
// failure is the script's.
type scriptTB struct {
	testing.TB // nil: only Helper and Fatalf are called
	ts         *testscript.TestScript
}

func (scriptTB) Helper() {}

func (s scriptTB) Fatalf(format string, args ...any) { s.ts.Fatalf(format, args...) }

// scriptClient is a client of the daemon of the tend.toml in the script's
// current directory.
func scriptClient(ts *testscript.TestScript) *client.Client {
	return client.New(ts.MkAbs(".tend/tend.sock"))
}

// pidCmd runs `pid ID VAR`: $VAR is the pid of ID's run.
func pidCmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: pid ID VAR")
	}
	st, err := scriptClient(ts).Status(args[0])
	ts.Check(err)
	if st.PID == nil {
		ts.Fatalf("%s has no run (state %s)", args[0], st.State)
	}
	ts.Setenv(args[1], strconv.Itoa(*st.PID))
}

// procsCmd runs `procs ID N VAR`: waits (60 s at most) until ID's run has at
// least N processes, then sets $VAR to their pids, separated by spaces.
func procsCmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: procs ID N VAR")
	}
	n, err := strconv.Atoi(args[1])
	ts.Check(err)
	c := scriptClient(ts)
	var st program.Status
	testutil.Eventually(scriptTB{ts: ts}, fmt.Sprintf("%s to have %d processes", args[0], n), func() bool {
		st, err = c.Status(args[0])
		return err == nil && len(st.Processes) >= n
	}, testutil.Within(60*time.Second), testutil.Explain(func() string { return fmt.Sprintf("%+v %v", st.Processes, err) }))
	var pids []string
	for _, p := range st.Processes {
		pids = append(pids, strconv.Itoa(p.PID))
		ts.Logf("%s: pid %d %s", args[0], p.PID, p.Cmd)
	}
	ts.Setenv(args[2], strings.Join(pids, " "))
}

// aliveCmd runs `alive PID...`: every pid is a live process (not a zombie);
// `! alive PID...`: none is.
func aliveCmd(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) == 0 {
		ts.Fatalf("usage: alive PID...")
	}
	for _, a := range strings.Fields(strings.Join(args, " ")) {
		pid, err := strconv.Atoi(a)
		ts.Check(err)
		if a := testutil.Alive(pid); a == neg {
			ts.Fatalf("pid %d: alive %v, want %v (%s)", pid, a, !a, cmdline(pid))
		}
	}
}

// oneDownCmd runs `onedown NAME MIN`: in the daemon's whole event log, from
// an instance of NAME's exited to that instance's next spawned, no other
// instance of NAME exits (at most one was ever down at once), and at least
// MIN instances of NAME exited (so the check saw a roll, not nothing).
func oneDownCmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: onedown NAME MIN")
	}
	min, err := strconv.Atoi(args[1])
	ts.Check(err)
	evs, err := scriptClient(ts).Events(0)
	ts.Check(err)
	if msg := overlap(evs, args[0], min); msg != "" {
		ts.Fatalf("%s", msg)
	}
}

// overlap is what is wrong with the exits of name's instances in evs: two
// down at once, or fewer than min exits; "" if nothing.
func overlap(evs []program.Event, name string, min int) string {
	down := map[string]uint64{} // instance → seq of its exit
	exits := 0
	for _, e := range evs {
		if e.Program != name {
			continue
		}
		switch e.Kind {
		case program.KindExited:
			exits++
			for id, seq := range down {
				if id != e.ID {
					return fmt.Sprintf("%s exited (#%d) while %s was down since its exit #%d", e.ID, e.Seq, id, seq)
				}
			}
			down[e.ID] = e.Seq
		case program.KindSpawned:
			delete(down, e.ID)
		}
	}
	if exits < min {
		return fmt.Sprintf("%d exits of %s instances, want at least %d", exits, name, min)
	}
	return ""
}

// TestOverlap: onedown's check fails on a roll that let two instances down
// at once, and on one that restarted too few.
func TestOverlap(t *testing.T) {
	ev := func(seq uint64, kind, id string) program.Event {
		return program.Event{Seq: seq, Kind: kind, ID: id, Program: "r"}
	}
	rolled := []program.Event{
		ev(1, program.KindExited, "r:0"), ev(2, program.KindSpawned, "r:0"),
		ev(3, program.KindExited, "r:1"), ev(4, program.KindSpawned, "r:1"),
		ev(5, program.KindExited, "x:0"), // another program's exit does not count
	}
	rolled[4].Program = "x"
	if msg := overlap(rolled, "r", 2); msg != "" {
		t.Errorf("a good roll: %s", msg)
	}
	if msg := overlap(rolled, "r", 3); msg == "" {
		t.Error("two exits passed for three")
	}
	both := []program.Event{
		ev(1, program.KindExited, "r:0"), ev(2, program.KindExited, "r:1"),
		ev(3, program.KindSpawned, "r:0"), ev(4, program.KindSpawned, "r:1"),
	}
	if msg := overlap(both, "r", 2); !strings.Contains(msg, "r:1 exited (#2) while r:0 was down") {
		t.Errorf("two down at once: %q", msg)
	}
}

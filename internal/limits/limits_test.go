package limits

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/reaper"
)

// The tests re-execute the test binary as the process under test (the
// settings are process-wide): LIMITS_HELPER names what it does.
func TestMain(m *testing.M) {
	switch os.Getenv("LIMITS_HELPER") {
	case "":
		os.Exit(m.Run())
	case "exec-with-limit":
		// Start again as a process that was started with 1024:4096: an
		// exec keeps the limits, and Go raises the soft one again.
		lim := unix.Rlimit{Cur: 1024, Max: 4096}
		must(unix.Setrlimit(unix.RLIMIT_NOFILE, &lim))
		os.Setenv("LIMITS_HELPER", os.Getenv("LIMITS_THEN"))
		must(syscall.Exec("/proc/self/exe", os.Args, os.Environ()))
	case "cloexec", "cloexec-proc":
		mark := CloseOnExecInherited
		if os.Getenv("LIMITS_HELPER") == "cloexec-proc" {
			mark = cloexecFromProc
		}
		must(mark())
		out, err := exec.Command("/bin/sh", "-c", "if [ -e /proc/self/fd/3 ]; then echo leaked; else echo closed; fi").Output()
		must(err)
		fmt.Print(string(out))
	case "raise":
		var need uint64
		fmt.Sscan(os.Getenv("LIMITS_NEED"), &need)
		r := reaper.New()
		must(r.Start(false))
		res, err := Raise(need, r)
		must(err)
		r.Stop() // os/exec waits for its own child below
		lim, apply := ForRuns()
		out, err := exec.Command("/bin/sh", "-c", "echo $(ulimit -Sn):$(ulimit -Hn)").Output()
		must(err)
		json.NewEncoder(os.Stdout).Encode(map[string]any{"result": res, "runs": lim, "apply": apply, "child": strings.TrimSpace(string(out))})
	}
	os.Exit(0)
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func helper(t *testing.T, env ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd.ExtraFiles = []*os.File{w} // fd 3, inherited without close-on-exec
	out, err := cmd.Output()
	w.Close()
	if err != nil {
		t.Fatalf("helper %v: %v", env, err)
	}
	return string(out)
}

func TestInheritedDescriptorsDoNotReachChildren(t *testing.T) {
	for _, mode := range []string{"cloexec", "cloexec-proc"} {
		if got := helper(t, "LIMITS_HELPER="+mode); got != "closed\n" {
			t.Errorf("%s: fd 3 in a child: %q", mode, got)
		}
	}
}

type raised struct {
	Result Result
	Runs   unix.Rlimit
	Apply  bool
	Child  string
}

func raise(t *testing.T, need uint64) raised {
	t.Helper()
	out := helper(t, "LIMITS_HELPER=exec-with-limit", "LIMITS_THEN=raise", fmt.Sprintf("LIMITS_NEED=%d", need))
	var r raised
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	return r
}

// TestRaiseLeavesGoAloneWhenTheFleetFits: started with 1024:4096, Go has
// raised the soft limit to 4095; a fleet that fits changes nothing, and a
// run still starts with 1024 (Go puts it back in children).
func TestRaiseLeavesGoAloneWhenTheFleetFits(t *testing.T) {
	r := raise(t, Need(100))
	if r.Result.Changed || r.Apply || r.Result.After.Cur != 4095 || r.Result.Short() {
		t.Errorf("raise for 100 instances: %+v", r)
	}
	if r.Child != "1024:4096" {
		t.Errorf("a child's limits: %s, want 1024:4096", r.Child)
	}
}

// TestRaiseKeepsTheOriginalForRuns: a fleet that needs the hard limit
// itself, or more (as root with CAP_SYS_RESOURCE), gets it, and ForRuns has
// the limit tend was started with (not the one Go raised it to), for the
// spawn path to apply: a child started with plain ForkExec now inherits
// the raised one.
func TestRaiseKeepsTheOriginalForRuns(t *testing.T) {
	needs := []uint64{4096}
	if canRaiseHard() {
		needs = append(needs, Need(5000))
	}
	for _, need := range needs {
		r := raise(t, need)
		if !r.Result.Changed || r.Result.After.Cur < need || r.Result.After.Max < need || r.Result.Short() {
			t.Errorf("raise for %d: %+v", need, r.Result)
		}
		if !r.Apply || r.Runs != (unix.Rlimit{Cur: 1024, Max: 4096}) {
			t.Errorf("need %d: ForRuns = %+v %v, want 1024:4096 to apply", need, r.Runs, r.Apply)
		}
		if r.Child == "1024:4096" {
			t.Errorf("need %d: Go restored the original limit itself: the spawn path would not need to", need)
		}
	}
}

// TestAFleetThatCannotFitChangesNothing: without CAP_SYS_RESOURCE (or not
// root) a fleet over the hard limit leaves the limit, and Go's restore in
// children, as they were, and the advice says how to make room.
func TestAFleetThatCannotFitChangesNothing(t *testing.T) {
	if canRaiseHard() {
		t.Skip("this process may raise the hard limit")
	}
	r := raise(t, Need(5000))
	if r.Result.Changed || r.Apply || !r.Result.Short() || !strings.Contains(r.Result.Advice(), "ulimit -n 5064") || r.Child != "1024:4096" {
		t.Errorf("raise for 5000 instances: %+v %q", r, r.Result.Advice())
	}
}

// canRaiseHard reports whether this process may raise a hard limit.
func canRaiseHard() bool {
	b, _ := os.ReadFile("/proc/self/status")
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			var caps uint64
			fmt.Sscanf(strings.TrimSpace(v), "%x", &caps)
			return caps&(1<<unix.CAP_SYS_RESOURCE) != 0
		}
	}
	return false
}

func TestAdviceIsOneLineWithTheFigures(t *testing.T) {
	r := Result{Need: Need(10000), After: unix.Rlimit{Cur: 4096, Max: 4096}}
	a := r.Advice()
	for _, want := range []string{"10064", "4096"} {
		if !strings.Contains(a, want) {
			t.Errorf("advice %q lacks %s", a, want)
		}
	}
	if strings.Contains(a, "\n") {
		t.Errorf("advice on several lines: %q", a)
	}
	if (Result{Need: 100, After: unix.Rlimit{Cur: 4096}}).Advice() != "" {
		t.Error("advice for a fleet that fits")
	}
}

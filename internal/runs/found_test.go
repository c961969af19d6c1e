package runs

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// Leader picks the process whose parent is not in the set; of several,
// the oldest (then the lower pid).
func TestLeader(t *testing.T) {
	for _, c := range []struct {
		name  string
		procs []Proc
		want  int
	}{
		{"none", nil, 0},
		{"one", []Proc{{PID: 7, PPID: 1, StartTicks: 5}}, 7},
		{"a shell and its child", []Proc{{PID: 9, PPID: 8, StartTicks: 6}, {PID: 8, PPID: 1, StartTicks: 5}}, 8},
		{"a child that detached is younger", []Proc{{PID: 20, PPID: 1, StartTicks: 9}, {PID: 8, PPID: 1, StartTicks: 5}, {PID: 9, PPID: 8, StartTicks: 6}}, 8},
		{"the same tick", []Proc{{PID: 12, PPID: 1, StartTicks: 5}, {PID: 11, PPID: 1, StartTicks: 5}}, 11},
	} {
		got, ok := Leader(c.procs)
		if ok != (c.want != 0) || got.PID != c.want {
			t.Errorf("%s: %+v %v, want pid %d", c.name, got, ok, c.want)
		}
	}
}

// ReadProc reads a process's parent and start time, the command's parens
// and spaces notwithstanding; StartedAt puts the start near the wall time;
// Holders finds the processes that hold a file open.
func TestReadProcAndHolders(t *testing.T) {
	if _, err := parseStat(1, []byte("1 (a) b) c) S 0 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 77 0")); err != nil {
		t.Fatal(err)
	}
	p, err := parseStat(1, []byte("1 (a) b) c) S 42 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 77 0"))
	if err != nil || p.PPID != 42 || p.StartTicks != 77 {
		t.Fatalf("%+v %v", p, err)
	}
	path := t.TempDir() + "/held"
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "100")
	cmd.Stdout = f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	me, err := ReadProc(cmd.Process.Pid)
	if err != nil || me.PPID != os.Getpid() {
		t.Fatalf("%+v %v", me, err)
	}
	if at := StartedAt(me.StartTicks); time.Since(at) > time.Minute || time.Until(at) > time.Second {
		t.Errorf("started at %v, now %v", at, time.Now())
	}
	h := Holders(map[string]bool{path: true})
	if len(h[path]) != 1 || h[path][0] != cmd.Process.Pid {
		t.Errorf("holders %v, want [%d]", h, cmd.Process.Pid)
	}
}

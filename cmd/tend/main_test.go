package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/tend-sh/tend/internal/cli"
	"github.com/tend-sh/tend/internal/roles"
	"github.com/tend-sh/tend/internal/testutil"
	"github.com/tend-sh/tend/internal/whole"
)

// The scripts in testdata/script drive the real tend binary (this test
// binary, re-executed as "tend") against a real daemon started with
// `tend up &`: every verb, exit status and message a user sees.
func TestMain(m *testing.M) {
	roles.Be()
	testscript.Main(m, map[string]func(){
		"tend":           func() { os.Exit(cli.Main(context.Background(), whole.Parts, os.Args[1:], os.Stdout, os.Stderr)) },
		"tend-daemon":    func() { os.Exit(cli.Main(context.Background(), whole.Parts, os.Args[1:], os.Stdout, os.Stderr)) },
		"tend-flip":      flipMain,
		"tend-hog":       hogMain,
		"tend-beat":      beatMain,
		"tend-acp-agent": acpAgentMain,
		// Another user's processes serving tend's sockets (trust_test.go).
		"tend-fake-keeper": fakeKeeperMain,
		"tend-fake-daemon": fakeDaemonMain,
	})
}

func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			// A race-enabled binary sleeps 1 s at exit by default; every
			// tend command in a script is one.
			env.Setenv("GORACE", "atexit_sleep_ms=10")
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){"exitcode": exitCode, "termpid1": termPID1, "pid1up": pid1Up, "pid1wait": pid1Wait,
			"pid": pidCmd, "procs": procsCmd, "alive": aliveCmd, "onedown": oneDownCmd, "gone": goneCmd},
		Condition: func(cond string) (bool, error) {
			if cond == "pidns" { // a new PID namespace can be made (root, unshare installed)
				return exec.Command("unshare", "--pid", "--fork", "--mount-proc", "true").Run() == nil, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
	})
}

// exitCode runs `exitcode N tend ARGS...` and checks that tend exits with N
// (docs/cli.md's statuses); stdout and stderr are kept for stdout/stderr checks.
func exitCode(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exitcode N tend ARGS...")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exitcode: %v", err)
	}
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		got = ee.ExitCode()
	case err != nil:
		ts.Fatalf("exitcode: %v", err)
	}
	if got != want {
		ts.Fatalf("%s exited %d, want %d", args[1], got, want)
	}
}

// pid1Ups are the `tend up` started by pid1up, by name, while they run.
var pid1Ups sync.Map

// pid1Up runs `pid1up NAME CONFIG`: tend up as PID 1 of a new PID namespace,
// its output in NAME.out. Not a testscript background command: unshare
// blocks SIGINT while it waits for its child, so a script that fails would
// wait for it forever. This one is killed with its whole process group
// (unshare and tend) when the script ends, however it ends.
func pid1Up(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: pid1up NAME CONFIG")
	}
	tend, err := exec.LookPath("tend")
	ts.Check(err)
	out, err := os.Create(ts.MkAbs(args[0] + ".out"))
	ts.Check(err)
	cmd := exec.Command("unshare", "--pid", "--fork", "--mount-proc", "--kill-child", tend, "up", "-c", args[1])
	cmd.Dir, cmd.Stdout, cmd.Stderr = ts.MkAbs("."), out, out
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=10", "PATH="+ts.Getenv("PATH"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	ts.Check(cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); out.Close() }()
	pid1Ups.Store(ts.MkAbs(args[0]), done) // keyed by path: scripts run in parallel
	ts.Defer(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	})
}

// pid1Wait runs `pid1wait NAME`: waits (60 s at most) for a pid1up to end.
func pid1Wait(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: pid1wait NAME")
	}
	v, ok := pid1Ups.Load(ts.MkAbs(args[0]))
	if !ok {
		ts.Fatalf("no pid1up named %s", args[0])
	}
	done := v.(chan error)
	select {
	case err := <-done:
		done <- err // for the deferred cleanup
		if err != nil {
			ts.Fatalf("%s: %v", args[0], err)
		}
	case <-time.After(60 * time.Second):
		ts.Fatalf("%s did not end within 60s", args[0])
	}
}

// termPID1 sends SIGTERM to the tend up this script started as PID 1 of a
// new namespace: the process whose innermost pid is 1 and whose command line
// names this script's config file (an absolute path unique to the script).
func termPID1(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: termpid1 CONFIG")
	}
	conf := ts.MkAbs(args[0])
	pid := 0
	testutil.Eventually(scriptTB{ts: ts}, "a tend up as PID 1 with "+conf, func() bool { pid = findPID1(conf); return pid > 0 }, testutil.Every(50*time.Millisecond))
	ts.Check(syscall.Kill(pid, syscall.SIGTERM))
}

// findPID1 is the pid, seen from here, of a tend up that is PID 1 of its
// namespace and runs conf; 0 if none.
func findPID1(conf string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		status, _ := os.ReadFile("/proc/" + e.Name() + "/status")
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		args := strings.Split(string(cmdline), "\x00")
		if !slices.Contains(args, "up") {
			continue
		}
		for _, line := range strings.Split(string(status), "\n") {
			if f := strings.Fields(line); len(f) > 2 && f[0] == "NSpid:" && f[len(f)-1] == "1" && usesConfig(args, conf, e.Name()) {
				return pid
			}
		}
	}
	return 0
}

// usesConfig reports whether a tend command line's -c names conf (relative
// to the process's own working directory).
func usesConfig(args []string, conf, pid string) bool {
	cwd, _ := os.Readlink("/proc/" + pid + "/cwd")
	for i, a := range args {
		if a == "-c" && i+1 < len(args) {
			p := args[i+1]
			if !filepath.IsAbs(p) {
				p = filepath.Join(cwd, p)
			}
			return p == conf
		}
	}
	return false
}

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
	"syscall"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/tend-sh/tend/internal/cli"
)

// The scripts in testdata/script drive the real tend binary (this test
// binary, re-executed as "tend") against a real daemon started with
// `tend up &`: every verb, exit status and message a user sees.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"tend": func() { os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr)) },
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
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){"exitcode": exitCode, "termpid1": termPID1},
		Condition: func(cond string) (bool, error) {
			if cond == "pidns" { // a new PID namespace can be made (root, unshare installed)
				return exec.Command("unshare", "--pid", "--fork", "--mount-proc", "true").Run() == nil, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
	})
}

// exitCode runs `exitcode N tend ARGS...` and checks that tend exits with N
// (SPEC 8's statuses); stdout and stderr are kept for stdout/stderr checks.
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

// termPID1 sends SIGTERM to the tend up this script started as PID 1 of a
// new namespace: the process whose innermost pid is 1 and whose command line
// names this script's config file (an absolute path unique to the script).
func termPID1(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: termpid1 CONFIG")
	}
	conf := ts.MkAbs(args[0])
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
				ts.Check(syscall.Kill(pid, syscall.SIGTERM))
				return
			}
		}
	}
	ts.Fatalf("no tend up as PID 1 with %s", conf)
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

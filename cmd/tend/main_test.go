package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
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
		Cmds:                map[string]func(ts *testscript.TestScript, neg bool, args []string){"exitcode": exitCode},
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

package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tend-sh/tend/internal/program"
)

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestSocketDiscovery(t *testing.T) {
	t.Setenv("TEND_SOCKET", "")
	t.Setenv("TEND_CONFIG", "")
	dir := shortDir(t)
	writeFile(t, filepath.Join(dir, "conf", "tend.toml"), "[daemon]\nstate_dir = \"../st\"\n")
	writeFile(t, filepath.Join(dir, "tend.toml"), "[daemon]\nstate_dir = \"st\"\n")
	writeFile(t, filepath.Join(dir, "other.toml"), "[daemon]\nstate_dir = \"nowhere\"\n")
	d := startDaemonAt(t, filepath.Join(dir, "st", "tend.sock"))
	d.fleet()
	t.Chdir(dir)
	ok := func(args ...string) {
		t.Helper()
		if r := run(t, args...); r.code != 0 || !strings.Contains(r.stdout, "web:0\n") {
			t.Errorf("tend %q: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
	}
	noDaemon := func(args ...string) {
		t.Helper()
		run(t, args...).wantErr(t, 4, "no tend daemon reachable")
	}
	ok("start", "web", "--no-wait", "-c", "conf/tend.toml")     // -c FILE: its state dir
	ok("start", "web", "--no-wait")                             // ./tend.toml
	ok("start", "web", "--no-wait", "--socket", "st/tend.sock") // --socket
	noDaemon("ps", "-c", "other.toml")
	ok("start", "web", "--no-wait", "-c", "other.toml", "--socket", "st/tend.sock") // --socket wins over -c

	t.Setenv("TEND_SOCKET", filepath.Join(dir, "st", "tend.sock"))
	ok("start", "web", "--no-wait")    // $TEND_SOCKET wins over ./tend.toml
	noDaemon("ps", "-c", "other.toml") // -c wins over $TEND_SOCKET
	t.Setenv("TEND_CONFIG", "other.toml")
	ok("start", "web", "--no-wait") // $TEND_SOCKET wins over $TEND_CONFIG
	t.Setenv("TEND_SOCKET", "")
	noDaemon("ps") // $TEND_CONFIG wins over ./tend.toml
	t.Setenv("TEND_CONFIG", "conf/tend.toml")
	ok("start", "web", "--no-wait")
	t.Setenv("TEND_CONFIG", "")

	// The nearest tend.toml upwards, from a subdirectory.
	sub := filepath.Join(dir, "project", "sub", "dir")
	if err := os.MkdirAll(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Chdir(sub)
	ok("start", "web", "--no-wait")
	// A nearer one wins, even when it names another daemon.
	writeFile(t, filepath.Join(dir, "project", "tend.toml"), "[daemon]\nstate_dir = \"st\"\n")
	run(t, "ps").wantErr(t, 4, "no tend daemon reachable at "+filepath.Join(dir, "project", "st", "tend.sock"))

	// A -c that cannot be loaded is a config error.
	t.Chdir(dir)
	r := run(t, "ps", "-c", "missing.toml")
	if r.code != 2 || !strings.HasPrefix(r.stderr, "missing.toml: ") {
		t.Errorf("ps -c missing.toml: exit %d, stderr %q", r.code, r.stderr)
	}

	// Nothing anywhere: exit 4, saying where it looked.
	bare := shortDir(t)
	t.Chdir(bare)
	run(t, "ps").wantErr(t, 4, "no tend.toml in "+bare+" or any parent, and none of --socket, -c, $TEND_SOCKET, $TEND_CONFIG given")
}

// TestUpErrors: what the daemon's start returns is said as the CLI says
// errors: config problems as their own lines (exit 2), a held state
// directory as it is, anything else after "up: " (exit 1). The real
// daemon's are in cmd/tend's badconfig script.
func TestUpErrors(t *testing.T) {
	for _, c := range []struct {
		err    error
		code   int
		stderr string
	}{
		{nil, 0, ""},
		{fmt.Errorf("%w: tend.toml:2: program.w.comand: unknown key", program.ErrBadConfig), 2, "bad config: tend.toml:2: program.w.comand: unknown key\n"},
		{fmt.Errorf("%w for /s (pid 7)", program.ErrAlreadyRunning), 1, "tend: a tend daemon is already running for /s (pid 7)\n"},
		{errors.New("listening: no room"), 1, "tend: up: listening: no room\n"},
	} {
		var got UpRequest
		daemon := func(_ context.Context, r UpRequest) error { got = r; return c.err }
		var out, errb bytes.Buffer
		code := Main(t.Context(), Parts{Daemon: daemon}, []string{"up", "-c", "x.toml", "--json"}, &out, &errb)
		if code != c.code || errb.String() != c.stderr {
			t.Errorf("daemon returning %v: exit %d, stderr %q; want %d, %q", c.err, code, errb.String(), c.code, c.stderr)
		}
		if got.ConfigPath != "x.toml" || !got.JSON || got.Stderr != &errb || got.Version == "" {
			t.Errorf("the daemon was asked %+v", got)
		}
	}
}

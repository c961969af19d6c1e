package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	dir := shortDir(t)
	writeFile(t, filepath.Join(dir, "conf", "tend.toml"), "[daemon]\nstate_dir = \"../st\"\n")
	writeFile(t, filepath.Join(dir, "tend.toml"), "[daemon]\nstate_dir = \"st\"\n")
	d := startDaemonAt(t, filepath.Join(dir, "st", "tend.sock"))
	d.fleet()
	t.Chdir(dir)
	ok := func(args ...string) {
		t.Helper()
		if r := run(t, args...); r.code != 0 || !strings.Contains(r.stdout, "web:0\n") {
			t.Errorf("tend %q: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
	}
	ok("start", "web", "-c", "conf/tend.toml")     // -c FILE: its state dir
	ok("start", "web")                             // ./tend.toml
	ok("start", "web", "--socket", "st/tend.sock") // --socket
	t.Setenv("TEND_SOCKET", filepath.Join(dir, "st", "tend.sock"))
	ok("start", "web", "-c", "missing.toml") // $TEND_SOCKET wins over -c
	ok("start", "web", "--socket", d.sock)   // --socket wins over $TEND_SOCKET
	t.Setenv("TEND_SOCKET", "")

	// A -c that cannot be loaded is a config error.
	r := run(t, "ps", "-c", "missing.toml")
	if r.code != 2 || !strings.HasPrefix(r.stderr, "missing.toml: ") {
		t.Errorf("ps -c missing.toml: exit %d, stderr %q", r.code, r.stderr)
	}

	// With no config at all: .tend/tend.sock.
	bare := shortDir(t)
	startDaemonAt(t, filepath.Join(bare, ".tend", "tend.sock")).fleet()
	t.Chdir(bare)
	ok("start", "web")
	os.Remove(filepath.Join(bare, ".tend", "tend.sock"))
	run(t, "ps").wantErr(t, 4, "no tend daemon reachable at .tend/tend.sock")
}

func TestUpBadConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tend.toml")
	writeFile(t, path, "[program.web]\ncommand = [\"true\"]\ninstances = -1\nbogus = 1\n")
	r := run(t, "up", "-c", path)
	if r.code != 2 {
		t.Errorf("up with a bad config: exit %d, stderr %q", r.code, r.stderr)
	}
	// The problems are printed as they are: file:line: key: what is wrong.
	for _, line := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		if !strings.HasPrefix(line, path+":") {
			t.Errorf("stderr line %q is not file:line: key: message", line)
		}
	}
	if !strings.Contains(r.stderr, "bogus") {
		t.Errorf("stderr %q does not name the unknown key", r.stderr)
	}
}

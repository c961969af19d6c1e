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

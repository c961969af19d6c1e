package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// becomeSubreaper makes this process the one runs of a killed daemon are
// reparented to, so it can reap them (by pid) once they end.
func becomeSubreaper(t *testing.T) {
	t.Helper()
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Skipf("cannot become a subreaper: %v", err)
	}
	t.Cleanup(func() { unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) })
}

// startUpLogged is startUp with tend up's stderr kept, for reading.
func startUpLogged(t *testing.T, tend, conf string) (*exec.Cmd, func() string) {
	t.Helper()
	log := filepath.Join(t.TempDir(), "stderr")
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := startUpWith(t, tend, conf, func(cmd *exec.Cmd) { cmd.Stderr = f })
	return cmd, func() string { b, _ := os.ReadFile(log); return string(b) }
}

// killUp SIGKILLs a daemon and marks its runs (pids) as this process's to reap.
func killUp(t *testing.T, up interface{ Wait() error }, pid int, runs map[string]int) {
	t.Helper()
	syscall.Kill(pid, syscall.SIGKILL)
	up.Wait()
	for id, p := range runs {
		if !testutil.Alive(p) {
			t.Fatalf("%s (pid %d) died with the daemon", id, p)
		}
		orphaned(t, p)
	}
}

// unixHTTP is a plain HTTP client over the daemon's socket, for requests
// the client package does not make (scale, a DELETE given up on).
func unixHTTP(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
}

func scale(t *testing.T, sock, name string, n int) {
	t.Helper()
	resp, err := unixHTTP(sock).Post("http://tend/v1/programs/"+name+"/scale", "application/json", strings.NewReader(`{"instances":`+itoa(n)+`}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("scale %s %d: %s", name, n, resp.Status)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// kept reads the names in programs.json.
func keptNames(t *testing.T, stateDir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(stateDir, "programs.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var list []struct{ Name string }
	if err := json.Unmarshal(b, &list); err != nil {
		t.Fatalf("programs.json: %v\n%s", err, b)
	}
	var out []string
	for _, p := range list {
		out = append(out, p.Name)
	}
	return out
}

func programNames(t *testing.T, c *client.Client) []string {
	t.Helper()
	list, err := c.List(false)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, st := range list {
		if len(out) == 0 || out[len(out)-1] != st.Program {
			out = append(out, st.Program)
		}
	}
	return out
}

func cmdline(pid int) string {
	b, _ := os.ReadFile("/proc/" + itoa(pid) + "/cmdline")
	return strings.ReplaceAll(string(b), "\x00", " ")
}

// TestAnAddedProgramIsKept: a program added over the API survives a daemon
// SIGKILL (its run adopted, neither stopped as a stray nor started twice),
// keeps its scaled instance count, survives a reload, is replaced by a
// config program of the same name, and tend rm forgets it, also when the
// client gives up waiting for the stop.
func TestAnAddedProgramIsKept(t *testing.T) {
	dir := t.TempDir()
	tend := tendBinary(t)
	becomeSubreaper(t)
	conf := filepath.Join(dir, "tend.toml")
	state := filepath.Join(dir, ".tend")
	sock := filepath.Join(state, "tend.sock")
	write(t, conf, "[program.base]\ncommand = [\"sleep\", \"1000\"]\n")
	c := client.New(sock)

	up := startUp(t, tend, conf)
	waitRunning(t, c, "base:0")
	if _, err := c.Add(map[string]any{"name": "viaapi", "command": []string{"sleep", "200000"}}); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, c, "viaapi:0")
	scale(t, sock, "viaapi", 2)
	waitRunning(t, c, "viaapi:1")
	before := pids(t, c, "base:0", "viaapi:0", "viaapi:1")
	killUp(t, up, up.Process.Pid, before)

	up = startUp(t, tend, conf)
	waitRunning(t, c, "base:0", "viaapi:0", "viaapi:1")
	after := pids(t, c, "base:0", "viaapi:0", "viaapi:1")
	for id, pid := range after {
		if before[id] != pid {
			t.Errorf("%s: pid %d before the SIGKILL, %d after: not adopted", id, before[id], pid)
		}
		if !testutil.Alive(pid) {
			t.Errorf("%s (pid %d) was stopped", id, pid)
		}
	}
	noSecondRun := func(when string) {
		t.Helper()
		evs, err := c.Events(0)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.Kind == program.KindSpawned && e.Program == "viaapi" && e.Data.(*program.Spawned).Run > 1 {
				t.Errorf("%s: viaapi started again: %s", when, e.JSON)
			}
			if e.Kind == program.KindExited && e.Program == "viaapi" {
				t.Errorf("%s: a viaapi run ended: %s", when, e.JSON)
			}
		}
	}
	noSecondRun("after the SIGKILL")

	// A reload keeps it, untouched.
	if _, err := c.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := pids(t, c, "viaapi:0", "viaapi:1"); got["viaapi:0"] != before["viaapi:0"] || got["viaapi:1"] != before["viaapi:1"] {
		t.Errorf("after a reload: %v, before %v", got, before)
	}
	noSecondRun("after a reload")

	// A program of the same name in the config replaces it, for good.
	write(t, conf, "[program.base]\ncommand = [\"sleep\", \"1000\"]\n[program.viaapi]\ncommand = [\"sleep\", \"300000\"]\n")
	if _, err := c.Reload(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the config's viaapi to run", func() bool {
		st, err := c.Status("viaapi:0")
		return err == nil && st.State == program.StateRunning && st.PID != nil && strings.Contains(cmdline(*st.PID), "300000")
	})
	if _, err := c.Status("viaapi:1"); err == nil {
		t.Error("viaapi:1 still there: the config's program has one instance")
	}
	if got := keptNames(t, state); len(got) != 0 {
		t.Errorf("programs.json after the config took viaapi over: %v", got)
	}

	// tend rm forgets, also when the client stops waiting for the stop.
	if _, err := c.Add(map[string]any{"name": "gone", "command": []string{"sleep", "200001"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Add(map[string]any{"name": "slow", "shell": "trap '' TERM; echo trapped; while :; do sleep 1; done", "stop_grace": "5s"}); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, c, "gone:0", "slow:0")
	testutil.Eventually(t, "slow to ignore SIGTERM", func() bool {
		b, _ := os.ReadFile(filepath.Join(state, "logs", "slow-0.log"))
		return strings.Contains(string(b), "trapped")
	})
	if got := keptNames(t, state); strings.Join(got, ",") != "gone,slow" {
		t.Errorf("programs.json: %v", got)
	}
	if err := c.Remove("gone", program.RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	req, _ := http.NewRequestWithContext(ctx, "DELETE", "http://tend/v1/programs/slow", nil)
	if resp, err := unixHTTP(sock).Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("the DELETE of a program ignoring SIGTERM answered at once: %s", resp.Status)
	}
	cancel()
	testutil.Eventually(t, "slow to be gone from the list", func() bool {
		return strings.Join(programNames(t, c), ",") == "base,viaapi"
	})
	if got := keptNames(t, state); len(got) != 0 {
		t.Errorf("programs.json after tend rm: %v", got)
	}

	// And after a restart nothing removed comes back.
	if err := c.Shutdown(); err != nil {
		t.Fatal(err)
	}
	up.Wait()
	up = startUp(t, tend, conf)
	waitRunning(t, c, "base:0", "viaapi:0")
	if got := strings.Join(programNames(t, c), ","); got != "base,viaapi" {
		t.Errorf("programs after a restart: %s", got)
	}
	downAndGone(t, c, up, after)
}

// TestAnAddedProgramThatNoLongerParsesIsLeftAlone: a kept body that does
// not parse at start (a key renamed in a later tend) is reported in one
// line and kept aside: not started, its run left alone (not stopped, not
// duplicated), until tend add replaces it, which takes the run over.
func TestAnAddedProgramThatNoLongerParsesIsLeftAlone(t *testing.T) {
	dir := t.TempDir()
	tend := tendBinary(t)
	becomeSubreaper(t)
	conf := filepath.Join(dir, "tend.toml")
	state := filepath.Join(dir, ".tend")
	write(t, conf, "[program.base]\ncommand = [\"sleep\", \"1000\"]\n")
	c := client.New(filepath.Join(state, "tend.sock"))

	up := startUp(t, tend, conf)
	waitRunning(t, c, "base:0")
	body := map[string]any{"name": "old", "command": []string{"sleep", "200002"}}
	if _, err := c.Add(body); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, c, "old:0")
	before := pids(t, c, "base:0", "old:0")
	killUp(t, up, up.Process.Pid, before)

	b, err := os.ReadFile(filepath.Join(state, "programs.json"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(state, "programs.json"), strings.Replace(string(b), `"command":`, `"komand":`, 1))
	up, stderr := startUpLogged(t, tend, conf)
	waitRunning(t, c, "base:0")
	testutil.Eventually(t, "the report of old", func() bool { return strings.Contains(stderr(), "program old (added over the API) no longer parses") })
	for line := range strings.Lines(stderr()) {
		if strings.Contains(line, "program old") && !strings.Contains(line, "komand") {
			t.Errorf("the report does not say what is wrong: %s", line)
		}
	}
	if got := strings.Join(programNames(t, c), ","); got != "base" {
		t.Errorf("programs: %s", got)
	}
	if got := keptNames(t, state); len(got) != 1 || got[0] != "old" {
		t.Errorf("programs.json: %v", got)
	}
	time.Sleep(time.Second) // what a stray gets before it is stopped
	if !testutil.Alive(before["old:0"]) {
		t.Fatal("the run of the program kept aside was stopped")
	}
	if n := countCmdline("sleep 200002"); n != 1 {
		t.Errorf("%d copies of old:0 running", n)
	}

	// tend add of a body that parses takes the program, and its run, back.
	if _, err := c.Add(body); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, c, "old:0")
	if got := pids(t, c, "old:0")["old:0"]; got != before["old:0"] {
		t.Errorf("old:0 is pid %d, its run was %d: not adopted", got, before["old:0"])
	}
	if n := countCmdline("sleep 200002"); n != 1 {
		t.Errorf("%d copies of old:0 running", n)
	}
	downAndGone(t, c, up, before)
}

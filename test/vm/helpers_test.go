//go:build vmtest

package vm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/statedir"
)

// Where the guest keeps things. The payload's run.sh installs tend and
// the unit; the tests write the config and own the state directory.
const (
	configPath = "/etc/tend/tend.toml"
	stateDir   = "/var/lib/tend"
	unitName   = "tend.service"
	dropInDir  = "/etc/systemd/system/tend.service.d"
	tendBin    = "/usr/local/bin/tend"
	payloadDir = "/run/tend-vm/payload" // the payload disk, mounted read-only
	cgroupRoot = "/sys/fs/cgroup"
	sliceGroup = "/system.slice"     // tend.service's slice, where its runs' scope goes too
	triggerDir = "/run/tend-vm-test" // files the helper programs wait for
)

// cmdBound bounds every command a test runs: systemctl stop may take up to
// the unit's TimeoutStopSec (90s), and TCG is slow.
const cmdBound = 3 * time.Minute

// run runs a command to its end and returns its combined output.
func run(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cmdBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("%s %s: still running after %v", name, strings.Join(args, " "), cmdBound)
	}
	return out.String(), err
}

// mustRun runs a command that has to succeed.
func mustRun(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := run(name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

// tend runs the CLI against the fleet of configPath (TEND_CONFIG, set in
// TestMain).
func tend(t *testing.T, args ...string) string {
	t.Helper()
	return mustRun(t, tendBin, args...)
}

// waitFor polls cond until it holds, or fails the test after d with the
// last thing cond said.
func waitFor(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v (last: %s)", what, d, detail)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// unitProps reads properties of tend.service from systemd.
func unitProps(t *testing.T, names ...string) map[string]string {
	t.Helper()
	return propsOf(t, unitName, names...)
}

// propsOf reads properties of a unit from systemd.
func propsOf(t *testing.T, unit string, names ...string) map[string]string {
	t.Helper()
	args := []string{"show", unit}
	for _, n := range names {
		args = append(args, "-p", n)
	}
	props := map[string]string{}
	for line := range strings.SplitSeq(mustRun(t, "systemctl", args...), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			props[k] = v
		}
	}
	return props
}

func unitProp(t *testing.T, name string) string {
	t.Helper()
	return unitProps(t, name)[name]
}

func mainPID(t *testing.T) int {
	t.Helper()
	n, _ := strconv.Atoi(unitProp(t, "MainPID"))
	return n
}

// status is `tend status ID --json`: one instance's status object.
func status(t *testing.T, id string) map[string]any {
	t.Helper()
	var st map[string]any
	if err := json.Unmarshal([]byte(tend(t, "status", id, "--json")), &st); err != nil {
		t.Fatalf("tend status %s --json: %v", id, err)
	}
	return st
}

// num reads a JSON number field (0 when missing or null).
func num(m map[string]any, key string) int64 {
	f, _ := m[key].(float64)
	return int64(f)
}

func str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

// waitRunning waits until id is running (and ready) and returns its status.
func waitRunning(t *testing.T, id string) map[string]any {
	t.Helper()
	var st map[string]any
	waitFor(t, 2*time.Minute, id+" running", func() (bool, string) {
		st = status(t, id)
		return str(st, "state") == "running" && st["ready"] == true && num(st, "pid") > 0,
			fmt.Sprintf("state %s, why %q", str(st, "state"), str(st, "why"))
	})
	return st
}

// event is one event as `tend events --json` and the audit log give it.
type event map[string]any

func (e event) kind() string { return str(e, "kind") }
func (e event) id() string   { return str(e, "id") }
func (e event) seq() int64   { return num(e, "seq") }

func (e event) String() string {
	b, _ := json.Marshal(map[string]any(e))
	return string(b)
}

// events is every event after seq, from the daemon.
func events(t *testing.T, since int64) []event {
	t.Helper()
	var evs []event
	if err := json.Unmarshal([]byte(tend(t, "events", "--json", "--since", strconv.FormatInt(since, 10))), &evs); err != nil {
		t.Fatalf("tend events --json: %v", err)
	}
	return evs
}

// lastSeq is the seq of the daemon's latest event.
func lastSeq(t *testing.T) int64 {
	t.Helper()
	evs := events(t, 0)
	if len(evs) == 0 {
		return 0
	}
	return evs[len(evs)-1].seq()
}

// waitEvent waits for the first event of kind for id after seq.
func waitEvent(t *testing.T, since int64, kind, id string, d time.Duration) event {
	t.Helper()
	var found event
	waitFor(t, d, fmt.Sprintf("a %s event for %s", kind, id), func() (bool, string) {
		evs := events(t, since)
		for _, e := range evs {
			if e.kind() == kind && e.id() == id {
				found = e
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events since %d", len(evs), since)
	})
	return found
}

// auditEvents reads the audit log directly: what the daemon wrote, also
// once it has stopped.
func auditEvents(t *testing.T) []event {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(stateDir, "audit", "events-*.jsonl"))
	var evs []event
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for line := range bytes.SplitSeq(b, []byte("\n")) {
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			var e event
			if err := json.Unmarshal(line, &e); err != nil {
				t.Fatalf("%s: %v: %s", f, err, line)
			}
			evs = append(evs, e)
		}
	}
	slices.SortFunc(evs, func(a, b event) int { return int(a.seq() - b.seq()) })
	return evs
}

// scopeName is the scope tend asks systemd for, to hold its runs' groups:
// tend-ID.scope, ID naming the state directory.
var scopeName = "tend-" + statedir.ID(stateDir) + ".scope"

// cgroupOf is the cgroup v2 path of pid ("/system.slice/...").
func cgroupOf(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatalf("cgroup of pid %d: %v", pid, err)
	}
	for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p
		}
	}
	t.Fatalf("pid %d has no cgroup v2 line in %q", pid, b)
	return ""
}

// cgFile reads a file of a cgroup, trimmed.
func cgFile(t *testing.T, group, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(cgroupRoot, group, name))
	if err != nil {
		t.Fatalf("%v", err)
	}
	return strings.TrimSpace(string(b))
}

func cgInt(t *testing.T, group, name string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(cgFile(t, group, name), 10, 64)
	if err != nil {
		t.Fatalf("%s/%s: %v", group, name, err)
	}
	return n
}

// cgProcs lists the pids of a cgroup and every group below it.
func cgProcs(group string) []int {
	var pids []int
	_ = filepath.WalkDir(filepath.Join(cgroupRoot, group), func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		for f := range strings.FieldsSeq(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				pids = append(pids, n)
			}
		}
		return nil
	})
	return pids
}

// procStart is a process's start time (field 22 of /proc/PID/stat), to
// tell the same process from a reused pid; "" when it is gone.
func procStart(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// The command name (field 2) may hold spaces: count after its ')'.
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// alive reports whether pid is a live process (not a zombie).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && len(b) > i+2 && b[i+2] != 'Z'
}

// touch makes a trigger file a helper program waits for.
func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// journal is tend.service's journal since the unit's start in this test.
func journal(t *testing.T, since time.Time) string {
	t.Helper()
	out, _ := run("journalctl", "-u", unitName, "--no-pager", "-o", "short-monotonic",
		"--since", "@"+strconv.FormatInt(since.Unix(), 10))
	return out
}

// managerLines keeps systemd's own lines of a journal (not tend's).
func managerLines(j string) string {
	var b strings.Builder
	for line := range strings.SplitSeq(j, "\n") {
		if strings.Contains(line, " systemd[1]: ") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

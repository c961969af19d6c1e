//go:build vmtest

package vm

// What the container tests share: the image, built once per test binary
// with podman from test/vm/container/Containerfile (a FROM scratch image:
// the static tend, busybox-static and a stand-in python3; the project's
// Dockerfile needs registry images the guest cannot pull), and podman.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	image        = "localhost/tend-vm:test"
	containerDir = payloadDir + "/container" // the Containerfile, its tend.toml, the python3 stand-in
	busyboxBin   = "/bin/busybox"            // Debian's busybox-static, in the guest image
	tendPort     = 7070                      // deploy/kubernetes/tend.yaml's http port
)

var (
	imageOnce sync.Once
	imageErr  error
)

// tendImage builds the image once for every test that needs it.
func tendImage(t *testing.T) string {
	t.Helper()
	imageOnce.Do(func() {
		ctx, err := os.MkdirTemp("", "tend-image-")
		if err != nil {
			imageErr = err
			return
		}
		defer os.RemoveAll(ctx)
		for _, c := range [][2]string{
			{filepath.Join(containerDir, "Containerfile"), "Containerfile"},
			{filepath.Join(containerDir, "tend.toml"), "tend.toml"},
			{filepath.Join(containerDir, "python3"), "python3"},
			{filepath.Join(containerDir, "curl"), "curl"},
			{tendBin, "tend"},
			{busyboxBin, "busybox"},
		} {
			if out, err := run("cp", "-p", c[0], filepath.Join(ctx, c[1])); err != nil {
				imageErr = fmt.Errorf("%v: %s", err, out)
				return
			}
		}
		for _, x := range []string{"python3", "curl", "tend", "busybox"} {
			if err := os.Chmod(filepath.Join(ctx, x), 0o755); err != nil {
				imageErr = err
				return
			}
		}
		start := time.Now()
		out, err := run("podman", "build", "--pull=never", "-t", image, "-f", filepath.Join(ctx, "Containerfile"), ctx)
		if err != nil {
			imageErr = fmt.Errorf("podman build: %v\n%s", err, out)
			return
		}
		fmt.Printf("podman build %s in %v\n", image, time.Since(start).Round(100*time.Millisecond))
	})
	if imageErr != nil {
		t.Fatal(imageErr)
	}
	return image
}

// podman runs podman and fails the test if it fails.
func podman(t *testing.T, args ...string) string {
	t.Helper()
	return strings.TrimSpace(mustRun(t, "podman", args...))
}

// container is one podman container a test started; its cleanup removes it.
type container struct {
	name  string
	state string // the host directory mounted as the container's /var/lib/tend
}

// startContainer runs the image detached with config as /etc/tend/tend.toml
// and a host directory as /var/lib/tend (so the audit log is readable
// after the container ends), with podman flags extra. The guest's test
// binary is mounted where it is here, so helper() programs run inside.
func startContainer(t *testing.T, name, config string, extra ...string) *container {
	t.Helper()
	tendImage(t)
	dir := t.TempDir()
	etc, state := filepath.Join(dir, "etc"), filepath.Join(dir, "state")
	for _, d := range []string{etc, state} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(etc, "tend.toml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _ = run("podman", "rm", "-f", "-t", "0", name)
	args := []string{"run", "-d", "--name", name,
		"-v", etc + ":/etc/tend:ro", "-v", state + ":/var/lib/tend",
		"-v", filepath.Dir(self(t)) + ":" + filepath.Dir(self(t)) + ":ro"}
	args = append(args, extra...)
	podman(t, append(args, image)...)
	c := &container{name: name, state: state}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := run("podman", "logs", name)
			t.Logf("podman logs %s:\n%s", name, tail(out, 60))
			out, _ = run("podman", "ps", "-a")
			t.Logf("podman ps -a:\n%s", out)
		}
		if out, err := run("podman", "rm", "-f", "-t", "0", name); err != nil {
			t.Logf("podman rm %s: %v\n%s", name, err, out)
		}
	})
	return c
}

// exec runs a command in the container.
func (c *container) exec(t *testing.T, args ...string) string {
	t.Helper()
	return podman(t, append([]string{"exec", c.name}, args...)...)
}

// tend runs tend's CLI inside the container, against its fleet.
func (c *container) tend(t *testing.T, args ...string) string {
	t.Helper()
	return c.exec(t, append([]string{"tend", "-c", "/etc/tend/tend.toml"}, args...)...)
}

// status is `tend status ID --json` inside the container.
func (c *container) status(t *testing.T, id string) map[string]any {
	t.Helper()
	var st map[string]any
	if err := json.Unmarshal([]byte(c.tend(t, "status", id, "--json")), &st); err != nil {
		t.Fatalf("tend status %s --json in %s: %v", id, c.name, err)
	}
	return st
}

// waitRunning waits until id runs (and is ready) inside the container.
func (c *container) waitRunning(t *testing.T, id string) map[string]any {
	t.Helper()
	var st map[string]any
	waitFor(t, 2*time.Minute, id+" running in "+c.name, func() (bool, string) {
		st = c.status(t, id)
		return str(st, "state") == "running" && st["ready"] == true && num(st, "pid") > 0,
			fmt.Sprintf("state %s, why %q", str(st, "state"), str(st, "why"))
	})
	return st
}

// audit is the fleet's audit log, read from the host side of its state
// directory: what tend wrote, also once the container has ended.
func (c *container) audit(t *testing.T) []event {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(c.state, "audit", "events-*.jsonl"))
	var evs []event
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for line := range bytes.SplitSeq(b, []byte("\n")) {
			var e event
			if len(line) > 0 && json.Unmarshal(line, &e) == nil {
				evs = append(evs, e)
			}
		}
	}
	return evs
}

// inspect reads one field of `podman inspect` (a Go template).
func inspect(t *testing.T, name, format string) string {
	t.Helper()
	return podman(t, "inspect", "--format", format, name)
}

// ip is the container's address on podman's network: where a kubelet's
// httpGet probe connects (the pod's IP, the container's port).
func ip(t *testing.T, name string) string {
	t.Helper()
	out := inspect(t, name, "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}")
	addr, _, _ := strings.Cut(out, " ")
	if addr == "" {
		t.Fatalf("%s has no address on a podman network", name)
	}
	return addr
}

// probe is an httpGet probe: the status code and body of GET path.
func probe(addr, path string) (int, string) {
	cl := http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Get("http://" + addr + ":" + strconv.Itoa(tendPort) + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// waitProbe waits until GET path answers code.
func waitProbe(t *testing.T, addr, path string, code int) string {
	t.Helper()
	var body string
	waitFor(t, 2*time.Minute, fmt.Sprintf("GET %s answering %d", path, code), func() (bool, string) {
		got, b := probe(addr, path)
		body = b
		return got == code, fmt.Sprintf("%d %s", got, b)
	})
	return body
}

// procs is the container's processes as its /proc shows them: pid, ppid,
// state and command line, one line each ("PID PPID STATE ARGS").
func (c *container) procs(t *testing.T) []string {
	t.Helper()
	out := c.exec(t, "sh", "-c", `for d in /proc/[0-9]*; do
		s=$(cat $d/stat 2>/dev/null) || continue
		s=${s##*) }
		set -- $s
		echo "${d#/proc/} $2 $1 $(tr '\0' ' ' <$d/cmdline 2>/dev/null)"
	done`)
	return strings.Split(out, "\n")
}

// zombies is every zombie in the container.
func (c *container) zombies(t *testing.T) []string {
	t.Helper()
	var z []string
	for _, p := range c.procs(t) {
		if f := strings.Fields(p); len(f) >= 3 && f[2] == "Z" {
			z = append(z, p)
		}
	}
	return z
}

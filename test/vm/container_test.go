//go:build vmtest

package vm

// tend as PID 1 of a real container (podman with crun, pure cgroup v2):
// `tend up` and `tend init` reap orphans there, `podman stop` drains the
// fleet, the runtime's SIGKILL leaves nothing to adopt, `podman logs`
// carries forward_output, /readyz and /healthz answer the probes, and the
// container's memory limit and tend's own limits agree.

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// podConfig is the fleet of the container tests: tend's API on the pod's
// port as deploy/kubernetes/tend.yaml has it, its lines on stdout.
const podConfig = `[daemon]
state_dir = "/var/lib/tend"
http = "0.0.0.0:7070"
forward_output = true

[defaults]
stop_grace = "3s"
`

func TestContainerUpIsPID1(t *testing.T) {
	config := podConfig + `
[program.talker]
shell = "echo hello from $TEND_ID; exec sleep 2147483647"
instances = 2

# A double fork once /tmp/orphan-go exists: the inner sh leaves its sleep
# behind and exits, so the sleep is an orphan, reparented to PID 1 (tend),
# which must reap it.
[program.orphaner]
shell = "while [ ! -e /tmp/orphan-go ]; do sleep 0.2; done; sh -c 'sleep 30 & exit 0'; echo orphan left; exec sleep 2147483647"

# Ready only once /tmp/gate exists: /readyz is 503 until then.
[program.gate]
shell = "while [ ! -e /tmp/gate ]; do sleep 0.2; done; tend notify --ready; exec sleep 2147483647"
ready = "notify"
start_timeout = "10m"
` + helper(t, "stubborn", "stubborn", nil)
	c := startContainer(t, "tend-up", config)

	// tend up is PID 1, its runs below it.
	if cmd := c.exec(t, "cat", "/proc/1/cmdline"); !strings.HasPrefix(cmd, "/usr/local/bin/tend\x00up") {
		t.Errorf("PID 1 of the container is %q, want tend up", cmd)
	}
	addr := ip(t, c.name)
	waitProbe(t, addr, "/healthz", 200)
	// Not ready while gate has not sent READY=1, all else running.
	for _, id := range []string{"talker:0", "talker:1", "orphaner:0", "stubborn:0"} {
		c.waitRunning(t, id)
	}
	if code, body := probe(addr, "/readyz"); code != 503 {
		t.Errorf("GET /readyz with gate:0 not ready = %d %s, want 503", code, body)
	} else {
		t.Logf("GET /readyz before gate is ready: 503 %s", body)
	}
	if code, _ := probe(addr, "/healthz"); code != 200 {
		t.Errorf("GET /healthz with an instance not ready = %d, want 200 (liveness is the daemon's)", code)
	}
	c.exec(t, "touch", "/tmp/gate")
	waitProbe(t, addr, "/readyz", 200)

	// The orphan: seen with PID 1 as its parent, then gone without a zombie.
	c.exec(t, "touch", "/tmp/orphan-go")
	var orphan string
	waitFor(t, time.Minute, "the orphaned sleep 30 under PID 1", func() (bool, string) {
		for _, p := range c.procs(t) {
			if strings.HasSuffix(p, " sleep 30 ") || strings.HasSuffix(p, " sleep 30") {
				orphan = p
				return strings.Fields(p)[1] == "1", p
			}
		}
		return false, "no sleep 12 (yet)"
	})
	t.Logf("orphan: %s", orphan)
	opid := strings.Fields(orphan)[0]
	waitFor(t, 2*time.Minute, "the orphan reaped", func() (bool, string) {
		for _, p := range c.procs(t) {
			if strings.Fields(p)[0] == opid {
				return false, p
			}
		}
		return true, ""
	})
	if z := c.zombies(t); len(z) > 0 {
		t.Errorf("zombies in the container: %v", z)
	}

	// podman logs carries forward_output: the runs' lines, as NAME:K | line.
	logs := podman(t, "logs", c.name)
	for _, want := range []string{"talker:0 | hello from talker:0", "talker:1 | hello from talker:1", "orphaner:0 | orphan left"} {
		if !strings.Contains(logs, want) {
			t.Errorf("podman logs has no %q:\n%s", want, tail(logs, 30))
		}
	}

	// podman stop: SIGTERM to tend, which stops the fleet (SIGKILL to the
	// stubborn one after its stop_grace) and exits 0 before the runtime's
	// own SIGKILL at -t.
	start := time.Now()
	podman(t, "stop", "-t", "60", c.name)
	took := time.Since(start)
	if code := inspect(t, c.name, "{{.State.ExitCode}}"); code != "0" {
		t.Errorf("tend's exit status after podman stop = %s, want 0", code)
	}
	t.Logf("podman stop -t 60 took %v", took.Round(100*time.Millisecond))
	evs := c.audit(t)
	stopped := map[string]event{}
	var phases []string
	for _, e := range evs {
		switch e.kind() {
		case "exited":
			stopped[e.id()] = e
		case "daemon":
			phases = append(phases, str(e, "phase"))
		}
	}
	for _, id := range []string{"talker:0", "talker:1", "orphaner:0", "gate:0", "stubborn:0"} {
		e, ok := stopped[id]
		if !ok {
			t.Errorf("no exited event for %s in the audit log", id)
			continue
		}
		if c := str(e, "likely_cause"); c != "operator_stop" {
			t.Errorf("%s exited %v, want likely_cause operator_stop", id, e)
		}
	}
	if s := str(stopped["stubborn:0"], "signal"); s != "SIGKILL" {
		t.Errorf("stubborn:0 (ignores SIGTERM) exited by %q, want tend's SIGKILL after stop_grace", s)
	}
	if len(phases) == 0 || phases[len(phases)-1] != "stopped" {
		t.Errorf("the daemon's phases = %v, want stopped last", phases)
	}
}

// A stop timeout shorter than the fleet's drain: the runtime SIGKILLs tend
// (PID 1), the kernel kills the whole container with it; the next start of
// the same container (same state directory) adopts nothing and starts
// every instance afresh.
func TestContainerKilledByRuntime(t *testing.T) {
	config := podConfig + sleeper("worker", 2) + helper(t, "stubborn", "stubborn", nil, `stop_grace = "60s"`)
	c := startContainer(t, "tend-killed", config)
	before := map[string]int64{}
	for _, id := range []string{"worker:0", "worker:1", "stubborn:0"} {
		before[id] = num(c.waitRunning(t, id), "pid")
	}

	podman(t, "stop", "-t", "2", c.name)
	if code := inspect(t, c.name, "{{.State.ExitCode}}"); code != "137" {
		t.Errorf("exit status after podman stop -t 2 with a 60s drain = %s, want 137 (the runtime's SIGKILL)", code)
	}
	seq := int64(0)
	for _, e := range c.audit(t) {
		seq = max(seq, e.seq())
	}

	podman(t, "start", c.name)
	for id, old := range before {
		st := c.waitRunning(t, id)
		if r := num(st, "run"); r < 2 {
			t.Errorf("%s after the restart is run %d (pid %d, was %d), want a new run", id, r, num(st, "pid"), old)
		}
	}
	for _, e := range c.audit(t) {
		if e.seq() > seq && e.kind() == "daemon" && str(e, "phase") == "adopted" && num(e, "count") != 0 {
			t.Errorf("the restarted tend adopted runs of the killed container: %v", e)
		}
	}
	var spawned []string
	for _, e := range c.audit(t) {
		if e.seq() > seq && e.kind() == "spawned" {
			spawned = append(spawned, e.id())
		}
	}
	if len(spawned) < 3 {
		t.Errorf("spawned after the restart: %v, want worker:0, worker:1 and stubborn:0", spawned)
	}
}

// tend init as PID 1: the command's status comes back, an orphan of it is
// reaped.
func TestContainerInitIsPID1(t *testing.T) {
	tendImage(t)
	name := "tend-init"
	_, _ = run("podman", "rm", "-f", "-t", "0", name)
	t.Cleanup(func() { _, _ = run("podman", "rm", "-f", "-t", "0", name) })
	script := `sh -c 'sleep 2 & exit 0'
echo "pid1: $(tr '\0' ' ' </proc/1/cmdline)"
sleep 5
for d in /proc/[0-9]*; do
	grep -q '^State:.Z' $d/status 2>/dev/null && echo "zombie""-left: ${d#/proc/} $(cat $d/comm)"
done
exit 7`
	out, err := run("podman", "run", "--name", name, "--entrypoint", "/usr/local/bin/tend", image, "init", "--", "sh", "-c", script)
	t.Logf("podman run … tend init -- sh -c …: %v\n%s", err, out)
	if code := inspect(t, name, "{{.State.ExitCode}}"); code != "7" {
		t.Errorf("exit status of tend init -- sh exiting 7 = %s, want 7", code)
	}
	if !strings.Contains(out, "pid1: /usr/local/bin/tend init -- sh") {
		t.Errorf("PID 1 is not tend init:\n%s", out)
	}
	if strings.Contains(out, "zombie-left:") {
		t.Errorf("tend init left a zombie:\n%s", out)
	}
}

// The container's memory limit above tend's limits for its runs: a run
// past its own max_rss is drained and counted by tend, and the container
// (tend, the other runs) goes on. The container's /sys/fs/cgroup is
// read-only (as a kubelet mounts it for an unprivileged container), so
// memory_max cannot be enforced there and tend says so at load; max_rss
// works by the runs' process trees.
func TestContainerMemoryLimit(t *testing.T) {
	trigger := "/tmp/hog-go"
	config := podConfig + sleeper("worker", 1) +
		helper(t, "hog", "alloc", map[string]string{"TEND_VM_TRIGGER": trigger, "TEND_VM_ALLOC_MIB": "128"},
			`max_rss = "64MiB"`, `rss_backoff = "1s"`)
	c := startContainer(t, "tend-mem", config, "--memory", "256m", "--memory-swap", "256m")
	worker := num(c.waitRunning(t, "worker:0"), "pid")
	st := c.waitRunning(t, "hog:0")
	t.Logf("hog:0 tracking %q, rss_bytes %d", str(st, "tracking"), num(st, "rss_bytes"))
	c.exec(t, "touch", trigger)

	var ex event
	waitFor(t, 2*time.Minute, "hog:0 drained past its max_rss", func() (bool, string) {
		for _, e := range c.audit(t) {
			if e.kind() == "exited" && e.id() == "hog:0" {
				ex = e
				return true, ""
			}
		}
		return false, "no exited event for hog:0"
	})
	t.Logf("exited: %v", ex)
	if lc := str(ex, "likely_cause"); lc != "rss_watchdog" {
		t.Errorf("hog:0 likely_cause = %q, want rss_watchdog (its max_rss, before the container's limit)", lc)
	}
	if n := num(ex, "crash_count"); n != 0 {
		t.Errorf("hog:0 crash_count = %d, want 0", n)
	}
	st = c.waitRunning(t, "hog:0")
	restarts, _ := st["restarts"].(map[string]any)
	if num(restarts, "rss_watchdog") < 1 || num(restarts, "crash") != 0 {
		t.Errorf("hog:0 restarts = %v, want rss_watchdog counted, no crash", restarts)
	}
	// The container lives: not OOM-killed, tend and the worker as they were.
	if s := inspect(t, c.name, "{{.State.Running}} {{.State.OOMKilled}}"); s != "true false" {
		t.Errorf("container running, OOM killed = %s, want true false", s)
	}
	if p := num(c.status(t, "worker:0"), "pid"); p != worker {
		t.Errorf("worker:0 pid %d, was %d: the limit reached past hog:0", p, worker)
	}
	if cmd := c.exec(t, "cat", "/proc/1/cmdline"); !strings.HasPrefix(cmd, "/usr/local/bin/tend") {
		t.Errorf("PID 1 is now %q", cmd)
	}
	if lim := inspect(t, c.name, "{{.HostConfig.Memory}}"); lim != strconv.Itoa(256*mib) {
		t.Errorf("the container's memory limit is %s, want %d", lim, 256*mib)
	}
	if k := c.exec(t, "cat", "/sys/fs/cgroup/memory.events"); !strings.Contains(k, "oom_kill 0") {
		t.Errorf("the container's memory.events shows the kernel's OOM killer at work:\n%s", k)
	}
}

// memory_max needs a cgroup tend can write: in a container with a
// read-only /sys/fs/cgroup (podman's default, and a kubelet's for an
// unprivileged container) tend refuses the config with a clear line, and
// exits non-zero, rather than run without the limit.
func TestContainerMemoryMaxRefused(t *testing.T) {
	config := podConfig + sleeper("worker", 1) + "memory_max = \"64MiB\"\n"
	c := startContainer(t, "tend-memmax", config)
	var state string
	waitFor(t, 2*time.Minute, "tend refusing memory_max", func() (bool, string) {
		state = inspect(t, c.name, "{{.State.Status}} {{.State.ExitCode}}")
		return strings.HasPrefix(state, "exited"), state
	})
	if state == "exited 0" {
		t.Errorf("tend with memory_max and a read-only cgroup exited 0")
	}
	if logs := podman(t, "logs", c.name); !strings.Contains(logs, "memory_max: cannot be enforced here") {
		t.Errorf("podman logs does not say why:\n%s", tail(logs, 10))
	}
}

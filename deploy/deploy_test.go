package deploy

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/config"
	"github.com/tend-sh/tend/internal/metrics"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// tool runs a command with a deadline and returns its combined output.
func tool(t *testing.T, dir, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// unitSettings reads a systemd unit's Key=Value lines (the last one of a
// key wins, as for most of systemd's settings).
func unitSettings(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	kv := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '[' {
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			kv[k] = v
		}
	}
	return kv
}

// tendStopBudget is how long tend itself may take to stop a fleet whose
// largest stop_grace and turn_grace are given (internal/daemon: the bound,
// at least 10s, plus 30s for the kernel).
func tendStopBudget(stopGrace, turnGrace time.Duration) time.Duration {
	return max(stopGrace+turnGrace, 10*time.Second) + 30*time.Second
}

// The unit passes `systemd-analyze verify` without a word (it exits 0 on
// unknown keys and bad values, so any output fails the test).
func TestSystemdUnitVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		testutil.Missing(t, "systemd-analyze not installed (Debian package systemd; .ci/run installs it)")
	}
	b, err := os.ReadFile("systemd/tend.service")
	if err != nil {
		t.Fatal(err)
	}
	// verify wants the binaries to exist: this test binary stands in for
	// /usr/local/bin/tend.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	unit := filepath.Join(t.TempDir(), "tend.service")
	if err := os.WriteFile(unit, bytes.ReplaceAll(b, []byte("/usr/local/bin/tend"), []byte(self)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := tool(t, "", analyze, "verify", "--man=no", unit)
	if err != nil || strings.TrimSpace(out) != "" {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

func TestSystemdUnitSettings(t *testing.T) {
	kv := unitSettings(t, "systemd/tend.service")
	// KillMode=process: a crashed tend's runs live on for the next one to
	// adopt, and systemctl stop goes through tend's own shutdown. A run's
	// OOM kill must not stop the unit. Nothing may keep a tend that exited
	// 2 from restarting: Go exits 2 after the watchdog's SIGABRT.
	for k, want := range map[string]string{
		"Type": "notify", "Delegate": "yes", "KillMode": "process", "NotifyAccess": "main",
		"Restart": "on-failure", "OOMPolicy": "continue", "RestartPreventExitStatus": "",
	} {
		if kv[k] != want {
			t.Errorf("%s=%q, want %q", k, kv[k], want)
		}
	}
	for _, k := range []string{"WatchdogSec", "LimitNOFILE", "ExecReload"} {
		if kv[k] == "" {
			t.Errorf("%s is not set", k)
		}
	}
	if !strings.Contains(kv["ExecStart"], " up ") || !strings.Contains(kv["ExecReload"], " reload ") {
		t.Errorf("ExecStart=%q ExecReload=%q", kv["ExecStart"], kv["ExecReload"])
	}
	// Stopping is SIGTERM to tend, not a command that could race it.
	if kv["ExecStop"] != "" || (kv["KillSignal"] != "" && kv["KillSignal"] != "SIGTERM") {
		t.Errorf("ExecStop=%q KillSignal=%q: tend's shutdown starts on SIGTERM", kv["ExecStop"], kv["KillSignal"])
	}
	// The upgrade path is tend upgrade, named in the unit's comments.
	if b, _ := os.ReadFile("systemd/tend.service"); !bytes.Contains(b, []byte("tend upgrade")) {
		t.Error("the unit's comments do not say that tend upgrade replaces the binary")
	}
	// systemd's SIGKILL must not cut tend's own stop short with the
	// default graces (stop_grace and turn_grace from internal/config).
	cfg := loadConfig(t, "[program.x]\ncommand = [\"true\"]\n")
	stop, err := time.ParseDuration(kv["TimeoutStopSec"])
	if err != nil {
		t.Fatalf("TimeoutStopSec=%q: %v", kv["TimeoutStopSec"], err)
	}
	if need := tendStopBudget(cfg.Programs[0].StopGrace, cfg.Programs[0].TurnGrace); stop < need {
		t.Errorf("TimeoutStopSec=%s, tend may take %s to stop a default fleet", stop, need)
	}
}

// loadConfig loads TOML text as tend would from a file.
func loadConfig(t *testing.T, text string) *program.Config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tend.toml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	return cfg
}

func graces(cfg *program.Config) (stop, turn time.Duration) {
	for _, p := range cfg.Programs {
		stop, turn = max(stop, p.StopGrace), max(turn, p.TurnGrace)
	}
	return stop, turn
}

// configMapTOML returns the tend.toml block of the ConfigMap: the lines
// after "tend.toml: |", less their indentation.
func configMapTOML(t *testing.T, yaml string) string {
	t.Helper()
	_, rest, ok := strings.Cut(yaml, "tend.toml: |\n")
	if !ok {
		t.Fatal("no tend.toml in the ConfigMap")
	}
	var out []string
	for _, line := range strings.Split(rest, "\n") {
		if line != "" && !strings.HasPrefix(line, "    ") {
			break
		}
		out = append(out, strings.TrimPrefix(line, "    "))
	}
	return strings.Join(out, "\n")
}

func TestKubernetesExample(t *testing.T) {
	b, err := os.ReadFile("kubernetes/tend.yaml")
	if err != nil {
		t.Fatal(err)
	}
	yaml := string(b)
	cfg := loadConfig(t, configMapTOML(t, yaml))
	if !cfg.Daemon.ForwardOutput {
		t.Error("forward_output is off: kubectl logs would not show the fleet")
	}
	m := regexp.MustCompile(`terminationGracePeriodSeconds: (\d+)`).FindStringSubmatch(yaml)
	if m == nil {
		t.Fatal("no terminationGracePeriodSeconds")
	}
	n, _ := strconv.Atoi(m[1])
	stop, turn := graces(cfg)
	// The kubelet's SIGKILL must come after tend's own (turns, then
	// stop_grace, then SIGKILL), with a little room.
	if grace := time.Duration(n) * time.Second; grace < stop+turn+10*time.Second {
		t.Errorf("terminationGracePeriodSeconds %d: the largest stop_grace %s plus turn_grace %s need more", n, stop, turn)
	}
	// The container's memory limit must hold every instance at its max_rss
	// (and tend): a run past its own max_rss is then drained by tend, not
	// the whole pod OOM-killed by the kernel (test/vm's
	// TestContainerMemoryLimit shows it in a real container).
	lim := regexp.MustCompile(`limits: \{memory: (\d+)Gi\}`).FindStringSubmatch(yaml)
	if lim == nil {
		t.Fatal("no resources.limits.memory in Gi")
	}
	gi, _ := strconv.ParseInt(lim[1], 10, 64)
	var sum int64
	for _, p := range cfg.Programs {
		if p.MaxRSS == 0 {
			t.Errorf("program %s has no max_rss: only the pod's limit would stop it, with the whole pod", p.Name)
		}
		sum += int64(p.Instances) * p.MaxRSS
	}
	if sum >= gi<<30 {
		t.Errorf("instances × max_rss = %d bytes, not under the container's limit %dGi", sum, gi)
	}
	for probe, path := range map[string]string{"livenessProbe": "/healthz", "readinessProbe": "/readyz"} {
		re := regexp.MustCompile(probe + `:\s*\n\s*httpGet: \{path: (\S+),`)
		if m := re.FindStringSubmatch(yaml); m == nil || m[1] != path {
			t.Errorf("%s: %v, want httpGet on %s", probe, m, path)
		}
	}
}

func TestDockerExample(t *testing.T) {
	b, err := os.ReadFile("docker/tend.toml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg := loadConfig(t, string(b)); !cfg.Daemon.ForwardOutput {
		t.Error("forward_output is off: docker logs would not show the fleet")
	}
	df, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(df), "deploy/docker:/etc/tend") {
		t.Error("the Dockerfile's example does not use deploy/docker/tend.toml")
	}
}

func TestPrometheusRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		testutil.Missing(t, "promtool not installed (Debian package prometheus; .ci/run installs it)")
	}
	for _, args := range [][]string{
		{"check", "rules", "tend-rules.yaml"},
		{"test", "rules", "tend-rules.test.yaml"},
	} {
		if out, err := tool(t, "prometheus", promtool, args...); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// Every tend series a rule selects, with the label values it names, is one
// tend exports: a renamed metric or cause would leave an alert that can
// never fire, which promtool cannot see.
func TestPrometheusRulesUseTendsMetrics(t *testing.T) {
	rules, err := os.ReadFile("prometheus/tend-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	scrape := scrapeTend(t)
	selector := regexp.MustCompile(`(tend_[a-z_]+)(\{[^}]*\})?`)
	pair := regexp.MustCompile(`(\w+)="([^"]*)"`)
	found := 0
	for _, m := range selector.FindAllStringSubmatch(string(rules), -1) {
		name, sel := m[1], m[2]
		found++
		ok := false
		for _, line := range scrape {
			if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
				continue
			}
			ok = true
			for _, p := range pair.FindAllStringSubmatch(sel, -1) {
				if !strings.Contains(line, p[1]+`="`+p[2]+`"`) {
					ok = false
				}
			}
			if ok {
				break
			}
		}
		if !ok {
			t.Errorf("the rules select %s%s, which tend does not export", name, sel)
		}
	}
	if found < 5 {
		t.Fatalf("only %d tend selectors found in the rules", found)
	}
}

// scrapeTend returns the sample lines of a scrape of tend's metrics over a
// fleet with an instance in each interesting state.
func scrapeTend(t *testing.T) []string {
	t.Helper()
	now := program.Time{Time: time.Now()}
	code := 1
	m := metrics.New(metrics.Source{
		Statuses: func() []program.Status {
			return []program.Status{
				{ID: "w:0", Program: "w", State: program.StateRunning, StartedAt: now},
				{ID: "w:1", Program: "w", State: program.StateFatal, Degraded: true, CrashCount: 5,
					LastExit: &program.LastExit{Code: &code, At: now, LikelyCause: program.CauseSpawnFailed}},
			}
		},
		OrphansReaped: func() uint64 { return 0 }, EventsPublished: func() uint64 { return 0 },
		SubscribersCut:   func() uint64 { return 0 },
		StateWriteErrors: func() map[string]uint64 { return map[string]uint64{"intent.json.log": 1} },
	})
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(body), "\n") {
		if l != "" && l[0] != '#' {
			lines = append(lines, l)
		}
	}
	return lines
}

package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

func mustLoad(t *testing.T, name, content string) *program.Config {
	t.Helper()
	path := testutil.WriteFile(t, name, content)
	cfg, err := Load(path)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return cfg
}

const fullExample = `
[daemon]
state_dir = "state"
http = "127.0.0.1:7070"
subreaper = false
audit_retention = "48h"
audit_max_size = "64MiB"
cgroup = "off"
forward_output = true
api_add = "unix"

[program.worker]
command = ["python3", "worker.py", "--queue", "default"]
cwd = "work"
env = { QUEUE = "default", EMPTY = "" }
env_file = "worker.env"
instances = 3
agent = true
turn_idle_after = "20s"
turn_grace = "10m"
user = "nobody"
group = "nogroup"
tty = true
tty_size = "80x24"
tty_history = 500
protocol = ""
permission = "deny"
labels = { session = "s-42", owner = "ana" }
restart = "on-failure"
autostart = false
ready = "notify"
start_timeout = "45s"
stop_signal = "INT"
stop_grace = "3s"
backoff_initial = "500ms"
backoff_max = "2m"
backoff_jitter = 0.25
clean_exit_codes = [0, 3]
fatal_exit_codes = [78]
stable_run_reset = "10m"
max_crashes = 7
hard_max_crashes = 20
clean_restart_budget = 4
clean_restart_window = "2m"
clean_restart_backoff = "5s"
rss_exit_code = 42
max_rss = "2GiB"
memory_max = "4GiB"
rss_backoff = "1m"
rss_loop_budget = 6
rss_loop_window = "1h"
watchdog = "30s"
idle_output_timeout = "10m"
wedge_checks = 2
wedge_startup_grace = "1m"
wedge_restart_grace = "15s"
wedge_loop_budget = 5
wedge_loop_window = "2h"

[program.worker.probe]
exec = ["./healthcheck", "--quick"]
interval = "5s"
timeout = "1s"
failure_threshold = 4

[program.worker.logs]
max_size = "10MB"
max_files = 9
`

func TestFullExample(t *testing.T) {
	path := testutil.WriteFile(t, "tend.toml", fullExample)
	dir := filepath.Dir(path)
	envFile := "# the worker's secrets\nQUEUE=ignored\nexport TOKEN='a b'\nMODE=fast # inline comment\n"
	if err := os.WriteFile(filepath.Join(dir, "worker.env"), []byte(envFile), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	wantDaemon := program.Daemon{
		StateDir: filepath.Join(dir, "state"), HTTP: "127.0.0.1:7070",
		Subreaper: false, AuditRetention: 48 * time.Hour, AuditMaxSize: 64 << 20,
		Cgroup: program.CgroupOff, ForwardOutput: true, APIAdd: program.APIAddUnix,
	}
	if cfg.File != path || cfg.Daemon != wantDaemon {
		t.Errorf("file %q daemon %+v, want %q %+v", cfg.File, cfg.Daemon, path, wantDaemon)
	}
	want := program.Spec{
		Name:    "worker",
		Command: []string{"python3", "worker.py", "--queue", "default"},
		Cwd:     filepath.Join(dir, "work"),
		Env:     map[string]string{"QUEUE": "default", "EMPTY": "", "TOKEN": "a b", "MODE": "fast"},
		EnvFile: filepath.Join(dir, "worker.env"),

		Instances: 3, Agent: true, TurnIdleAfter: 20 * time.Second, TurnGrace: 10 * time.Minute,
		User: "nobody", Group: "nogroup",
		Tty: true, TtyCols: 80, TtyRows: 24, TtyHistory: 500, Permission: program.PermissionDeny,
		Labels:  map[string]string{"session": "s-42", "owner": "ana"},
		Restart: program.RestartOnFailure, Autostart: false, Ready: program.ReadyNotify, StartTimeout: 45 * time.Second,
		StopSignal: syscall.SIGINT, StopGrace: 3 * time.Second,

		BackoffInitial: 500 * time.Millisecond, BackoffMax: 2 * time.Minute, BackoffJitter: 0.25,
		CleanExitCodes: []int{0, 3}, FatalExitCodes: []int{78}, StableRunReset: 10 * time.Minute,
		MaxCrashes: 7, HardMaxCrashes: 20,
		CleanRestartBudget: 4, CleanRestartWindow: 2 * time.Minute, CleanRestartBackoff: 5 * time.Second,

		RSSExitCode: 42, MaxRSS: 2 << 30, MemoryMax: 4 << 30, RSSBackoff: time.Minute, RSSLoopBudget: 6, RSSLoopWindow: time.Hour,

		Watchdog: 30 * time.Second, IdleOutputTimeout: 10 * time.Minute, WedgeChecks: 2,
		WedgeStartupGrace: time.Minute, WedgeRestartGrace: 15 * time.Second,
		WedgeLoopBudget: 5, WedgeLoopWindow: 2 * time.Hour,

		Probe: &program.Probe{Exec: []string{"./healthcheck", "--quick"}, Interval: 5 * time.Second,
			Timeout: time.Second, FailureThreshold: 4},
		Logs: program.Logs{MaxSize: 10_000_000, MaxFiles: 9},
	}
	if len(cfg.Programs) != 1 {
		t.Fatalf("got %d programs, want 1", len(cfg.Programs))
	}
	if got := cfg.Programs[0]; !reflect.DeepEqual(got, want) {
		t.Errorf("program\n got %+v\nwant %+v", got, want)
	}
}

// TestFullExampleSetsEveryKey keeps the full example honest: a key added to
// the schema must be added to it (and so to the assertions above). shell is
// command's alternative, checked in TestDefaultsApplied.
func TestFullExampleSetsEveryKey(t *testing.T) {
	for _, k := range programKeys {
		if !strings.Contains(fullExample, "\n"+k+" = ") && k != "probe" && k != "logs" && k != "shell" {
			t.Errorf("the full example does not set %s", k)
		}
	}
}

func TestDefaultsApplied(t *testing.T) {
	path := testutil.WriteFile(t, "tend.toml", "[program.web]\nshell = \"exec ./server\"\n")
	dir := filepath.Dir(path)
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	wantDaemon := program.Daemon{StateDir: filepath.Join(dir, ".tend"), Subreaper: true, AuditRetention: 336 * time.Hour,
		AuditMaxSize: 1 << 30, Cgroup: program.CgroupAuto, APIAdd: program.APIAddAny}
	if cfg.Daemon != wantDaemon {
		t.Errorf("daemon %+v, want %+v", cfg.Daemon, wantDaemon)
	}
	want := program.Spec{
		Name: "web", Shell: "exec ./server", Cwd: dir,
		Instances: 1, TurnIdleAfter: 10 * time.Second, TtyCols: 120, TtyRows: 40, TtyHistory: 2000, Permission: program.PermissionAsk,
		Restart: "always", Autostart: true, Ready: "spawn", StartTimeout: 30 * time.Second,
		StopSignal: syscall.SIGTERM, StopGrace: 10 * time.Second,
		BackoffInitial: time.Second, BackoffMax: time.Minute, BackoffJitter: 0.1,
		CleanExitCodes: []int{0}, FatalExitCodes: []int{}, StableRunReset: 5 * time.Minute,
		MaxCrashes: 5, HardMaxCrashes: 0,
		CleanRestartBudget: 10, CleanRestartWindow: time.Minute, CleanRestartBackoff: time.Second,
		RSSExitCode: 12, MaxRSS: 0, RSSBackoff: 30 * time.Second, RSSLoopBudget: 3, RSSLoopWindow: 10 * time.Minute,
		WedgeChecks: 1, WedgeRestartGrace: 10 * time.Second, WedgeLoopBudget: 3, WedgeLoopWindow: 30 * time.Minute,
		Logs: program.Logs{MaxSize: 50 << 20, MaxFiles: 5},
	}
	if got := cfg.Programs[0]; !reflect.DeepEqual(got, want) {
		t.Errorf("program\n got %+v\nwant %+v", got, want)
	}
	if got := cfg.Programs[0].Argv(); !reflect.DeepEqual(got, []string{"/bin/sh", "-c", "exec ./server"}) {
		t.Errorf("argv %q", got)
	}
}

func TestDefaultsInheritance(t *testing.T) {
	cfg := mustLoad(t, "tend.toml", `
[defaults]
command = ["./default-worker"]
stop_grace = "2s"
env = { A = "1" }
max_rss = 1048576
[defaults.probe]
interval = "7s"
[defaults.logs]
max_files = 2

[program.inherits]
instances = 2

[program.overrides]
shell = "./other"
stop_grace = "0s"
env = { B = "2" }
[program.overrides.probe]
http = "http://127.0.0.1:8080/healthz"
[program.overrides.logs]
max_size = "1MiB"
`)
	in, over := cfg.Programs[0], cfg.Programs[1]
	if in.Name != "inherits" || over.Name != "overrides" {
		t.Fatalf("programs %q, %q", in.Name, over.Name)
	}
	if !reflect.DeepEqual(in.Command, []string{"./default-worker"}) || in.Shell != "" {
		t.Errorf("inherits: command %q shell %q", in.Command, in.Shell)
	}
	if in.StopGrace != 2*time.Second || in.Env["A"] != "1" || in.MaxRSS != 1<<20 || in.Instances != 2 {
		t.Errorf("inherits: %+v", in)
	}
	if in.Probe != nil {
		t.Errorf("inherits: a [defaults.probe] with only timings gave it a probe: %+v", in.Probe)
	}
	if in.Logs != (program.Logs{MaxSize: 50 << 20, MaxFiles: 2}) {
		t.Errorf("inherits: logs %+v", in.Logs)
	}
	// shell replaces the default command as a pair: not "both set".
	if over.Command != nil || over.Shell != "./other" {
		t.Errorf("overrides: command %q shell %q", over.Command, over.Shell)
	}
	if over.StopGrace != 0 || !reflect.DeepEqual(over.Env, map[string]string{"B": "2"}) {
		t.Errorf("overrides: stop_grace %v env %v", over.StopGrace, over.Env)
	}
	wantProbe := program.Probe{HTTP: "http://127.0.0.1:8080/healthz", Interval: 7 * time.Second, Timeout: 2 * time.Second, FailureThreshold: 3}
	if over.Probe == nil || !reflect.DeepEqual(*over.Probe, wantProbe) {
		t.Errorf("overrides: probe %+v", over.Probe)
	}
	if over.Logs != (program.Logs{MaxSize: 1 << 20, MaxFiles: 2}) {
		t.Errorf("overrides: logs %+v", over.Logs)
	}
}

func TestDefaultProbeWithCommandAppliesToEveryProgram(t *testing.T) {
	cfg := mustLoad(t, "tend.toml", `
[defaults.probe]
exec = ["true"]
[program.a]
command = ["a"]
`)
	if p := cfg.Programs[0].Probe; p == nil || !reflect.DeepEqual(p.Exec, []string{"true"}) {
		t.Errorf("probe %+v", p)
	}
}

func TestProgramsKeepFileOrder(t *testing.T) {
	cfg := mustLoad(t, "tend.toml", `
[program.zeta]
command = ["z"]
[program.alpha]
command = ["a"]
[program]
mid.command = ["m"]
[program.beta]
command = ["b"]
`)
	var names []string
	for _, p := range cfg.Programs {
		names = append(names, p.Name)
	}
	if want := []string{"zeta", "alpha", "mid", "beta"}; !reflect.DeepEqual(names, want) {
		t.Errorf("order %q, want %q", names, want)
	}
}

func TestPaths(t *testing.T) {
	path := testutil.WriteFile(t, "tend.toml", `
[daemon]
state_dir = "/var/lib/tend/../tend"
[program.rel]
command = ["a"]
cwd = "sub/../other/"
[program.abs]
command = ["a"]
cwd = "/srv/app"
[program.missing]
command = ["a"]
cwd = "does/not/exist"
`)
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(path)
	if cfg.Daemon.StateDir != "/var/lib/tend" {
		t.Errorf("state_dir %q", cfg.Daemon.StateDir)
	}
	for i, want := range []string{filepath.Join(dir, "other"), "/srv/app", filepath.Join(dir, "does/not/exist")} {
		if got := cfg.Programs[i].Cwd; got != want {
			t.Errorf("%s: cwd %q, want %q", cfg.Programs[i].Name, got, want)
		}
	}
}

func TestRelativeConfigPath(t *testing.T) {
	path := testutil.WriteFile(t, "tend.toml", "[program.a]\ncommand = [\"a\"]\n")
	t.Chdir(filepath.Dir(path))
	cfg, err := Load("tend.toml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.File != path || cfg.Programs[0].Cwd != filepath.Dir(path) {
		t.Errorf("file %q cwd %q, want %q", cfg.File, cfg.Programs[0].Cwd, path)
	}
}

func TestEmptyConfig(t *testing.T) {
	cfg := mustLoad(t, "tend.toml", "# nothing yet\n")
	if len(cfg.Programs) != 0 || !cfg.Daemon.Subreaper {
		t.Errorf("%+v", cfg)
	}
}

func TestLoadMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.toml")
	_, err := Load(path)
	if err == nil {
		t.Fatal("no error")
	}
	if !errors.Is(err, program.ErrBadConfig) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("error %v does not match ErrBadConfig and ErrNotExist", err)
	}
	if want := path + ": cannot read config: no such file or directory"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

func TestParseSize(t *testing.T) {
	good := map[string]int64{
		"0": 0, "1024": 1024, "100B": 100, "10KB": 10_000, "10MB": 10_000_000, "2GB": 2e9, "1TB": 1e12,
		"100KiB": 100 << 10, "512MiB": 512 << 20, "2GiB": 2 << 30, "1TiB": 1 << 40,
		"512mib": 512 << 20, " 4 KiB ": 4 << 10, "1.5GiB": 3 << 29, "0.5KB": 500,
	}
	for in, want := range good {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "-5MiB", "MiB", "12M", "2G", "ten", "1.2.3KB", "1e3", "99999999999TiB", "9223372036854775808"} {
		if got, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) = %d, want an error", in, got)
		}
	}
}

// TestReferenceDocumentsEveryKey keeps docs/config.md in step with the schema.
func TestReferenceDocumentsEveryKey(t *testing.T) {
	doc, err := os.ReadFile("../../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, keys := range [][]string{programKeys, probeKeys, logsKeys, daemonKeys} {
		for _, k := range keys {
			if !strings.Contains(string(doc), "| `"+k+"` |") && k != "probe" && k != "logs" {
				t.Errorf("docs/config.md has no row for %s", k)
			}
		}
	}
}

func TestAllIsNotAProgramName(t *testing.T) {
	_, err := ParseTOML("/x/tend.toml", []byte("[program.all]\ncommand = [\"true\"]\n"))
	if err == nil || !strings.Contains(err.Error(), "tend.toml:1: program.all") || !strings.Contains(err.Error(), `"all" cannot name a program`) {
		t.Fatalf("program named all: %v", err)
	}
	if _, err := ParseProgramJSON([]byte(`{"name":"all","command":["true"]}`), "/"); err == nil {
		t.Fatal("a program named all was accepted over the API")
	}
}

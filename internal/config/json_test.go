package config

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

func TestParseProgramJSON(t *testing.T) {
	base := t.TempDir()
	spec, err := ParseProgramJSON([]byte(`{
		"name": "planner", "command": ["python3", "plan.py"], "cwd": "sub",
		"instances": 0, "agent": true, "restart": "never", "stop_grace": "3s",
		"max_rss": 1048576, "backoff_jitter": 0, "user": null,
		"env": {"A": "b"},
		"probe": {"http": "http://127.0.0.1:9/healthz", "interval": "1s"},
		"logs": {"max_size": "1MiB"}
	}`), base)
	if err != nil {
		t.Fatal(err)
	}
	want := defaultSpec()
	want.Name, want.Command, want.Cwd = "planner", []string{"python3", "plan.py"}, filepath.Join(base, "sub")
	want.Instances, want.Agent, want.Restart, want.StopGrace = 0, true, "never", 3*time.Second
	want.MaxRSS, want.BackoffJitter, want.Env = 1<<20, 0, map[string]string{"A": "b"}
	want.Probe = &program.Probe{HTTP: "http://127.0.0.1:9/healthz", Interval: time.Second, Timeout: 2 * time.Second, FailureThreshold: 3}
	want.Logs.MaxSize = 1 << 20
	if !reflect.DeepEqual(spec, want) {
		t.Errorf("\n got %+v\nwant %+v", spec, want)
	}
}

func TestParseProgramJSONWithFileDefaults(t *testing.T) {
	path := testutil.WriteFile(t, "tend.toml", "[defaults]\nstop_grace = \"1s\"\nagent = true\n")
	_, defaults, err := LoadWithDefaults(path)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := defaults.ParseProgramJSON([]byte(`{"name": "a", "shell": "./a", "agent": false}`), filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if spec.StopGrace != time.Second || spec.Agent || spec.Cwd != filepath.Dir(path) {
		t.Errorf("spec %+v", spec)
	}
}

func TestParseProgramJSONErrors(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"unknown field", `{"name": "a", "command": ["a"], "stop_grase": "1s"}`, `stop_grase: unknown key (did you mean "stop_grace"?)`},
		{"unknown nested field", `{"name": "a", "command": ["a"], "logs": {"max": 1}}`, `logs.max: unknown key`},
		{"bad type", `{"name": "a", "command": ["a"], "instances": "2"}`, "instances: must be an integer, not a string"},
		{"float for int", `{"name": "a", "command": ["a"], "instances": 1.5}`, "instances: must be an integer, not a float"},
		{"object for string", `{"name": "a", "shell": {"x": 1}}`, "shell: must be a string, not an object"},
		{"bad duration", `{"name": "a", "command": ["a"], "stop_grace": "10 sec"}`, `stop_grace: invalid duration "10 sec"`},
		{"duration as number", `{"name": "a", "command": ["a"], "stop_grace": 10}`, `stop_grace: must be a duration string like "10s", not an integer`},
		{"no name", `{"command": ["a"]}`, "name: missing"},
		{"bad name", `{"name": "A B", "command": ["a"]}`, `name: invalid program name "A B"`},
		{"no command", `{"name": "a"}`, "command: missing: set command"},
		{"not an object", `["a"]`, "the body must be a JSON object"},
		{"invalid JSON", `{"name": `, "invalid JSON"},
		{"trailing data", `{"name": "a", "shell": "a"} {}`, "invalid JSON: unexpected data after the object"},
		{"too many instances", `{"name": "a", "shell": "a", "instances": -1}`, "instances: must be between 0 and 10000, got -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseProgramJSON([]byte(tc.body), t.TempDir())
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, program.ErrInvalid) || errors.Is(err, program.ErrBadConfig) {
				t.Errorf("%v: want ErrInvalid only", err)
			}
			var es Errors
			if !errors.As(err, &es) {
				t.Fatalf("%v is not Errors", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestParseProgramJSONReportsEveryProblem(t *testing.T) {
	_, err := ParseProgramJSON([]byte(`{"name": "a", "shell": "", "restart": "x", "wedge_checks": 0}`), "/")
	want := "shell: must not be empty\nrestart: must be one of always, on-failure, never, got \"x\"\nwedge_checks: must be at least 1, got 0"
	if err == nil || err.Error() != want {
		t.Errorf("got\n%v\nwant\n%s", err, want)
	}
}

// A program added over the API may have a terminal; its size is checked as
// in a file, with [defaults] under it.
func TestParseProgramJSONTerminal(t *testing.T) {
	path := testutil.WriteFile(t, "tend.toml", "[defaults]\ntty_size = \"100x30\"\n")
	_, defaults, err := LoadWithDefaults(path)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := defaults.ParseProgramJSON([]byte(`{"name": "a", "command": ["bash"], "tty": true}`), filepath.Dir(path))
	if err != nil || !spec.Tty || spec.TtyCols != 100 || spec.TtyRows != 30 {
		t.Errorf("spec %+v, %v", spec, err)
	}
	spec, err = defaults.ParseProgramJSON([]byte(`{"name": "a", "command": ["bash"], "tty": true, "tty_size": "80x24"}`), filepath.Dir(path))
	if err != nil || spec.TtyCols != 80 || spec.TtyRows != 24 {
		t.Errorf("spec %+v, %v", spec, err)
	}
	_, err = ParseProgramJSON([]byte(`{"name": "a", "command": ["bash"], "tty": true, "tty_size": "5x5"}`), t.TempDir())
	if !errors.Is(err, program.ErrInvalid) || !strings.Contains(err.Error(), "tty_size: terminal size 5x5 is out of range") {
		t.Errorf("error %v", err)
	}
}

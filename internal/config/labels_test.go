package config

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

func TestLabelsMergeWithDefaults(t *testing.T) {
	cfg := mustLoad(t, "tend.toml", `
[defaults]
labels = { fleet = "prod", owner = "ops" }

[program.a]
command = ["true"]
labels = { owner = "ana", role = "planner" }

[program.b]
command = ["true"]

[program.c]
command = ["true"]

[program.c.labels]
session = "s-42"
`)
	want := []map[string]string{
		{"fleet": "prod", "owner": "ana", "role": "planner"}, // the program's own win
		{"fleet": "prod", "owner": "ops"},
		{"fleet": "prod", "owner": "ops", "session": "s-42"},
	}
	for i, p := range cfg.Programs {
		if !maps.Equal(p.Labels, want[i]) {
			t.Errorf("program %s: labels %v, want %v", p.Name, p.Labels, want[i])
		}
	}
	none := mustLoad(t, "tend.toml", "[program.a]\ncommand = [\"true\"]\n")
	if none.Programs[0].Labels != nil {
		t.Errorf("no labels: %v, want nil", none.Programs[0].Labels)
	}
}

// Every bad label is a config error on its own line, naming the label.
func TestLabelErrors(t *testing.T) {
	long := strings.Repeat("x", 257)
	var many strings.Builder
	for i := range program.MaxLabels + 1 {
		fmt.Fprintf(&many, "k%d = \"v\"\n", i)
	}
	for _, tc := range []struct {
		name, toml string
		want       []string
	}{
		{"bad key", "[program.a]\ncommand = [\"true\"]\nlabels = { Session = \"x\" }\n",
			[]string{`tend.toml:3: program.a.labels.Session: label key "Session"`}},
		{"long value", "[program.a]\ncommand = [\"true\"]\n\n[program.a.labels]\nok = \"y\"\ntoo = \"" + long + "\"\n",
			[]string{"tend.toml:6: program.a.labels.too: label value: 257 characters, the most a label value may have is 256"}},
		{"not a string", "[program.a]\ncommand = [\"true\"]\nlabels = { n = 3 }\n",
			[]string{"tend.toml:3: program.a.labels.n: must be a string, not an integer"}},
		{"not a table", "[program.a]\ncommand = [\"true\"]\nlabels = \"session=x\"\n",
			[]string{"tend.toml:3: program.a.labels: must be a table of strings"}},
		{"control character", "[program.a]\ncommand = [\"true\"]\nlabels = { k = \"a\\nb\" }\n",
			[]string{"tend.toml:3: program.a.labels.k: label value: contains the control character U+000A"}},
		{"in defaults", "[defaults]\nlabels = { \"a b\" = \"x\" }\n[program.a]\ncommand = [\"true\"]\n",
			[]string{`tend.toml:2: defaults.labels.a b: label key "a b"`}},
		{"too many", "[program.a]\ncommand = [\"true\"]\n[program.a.labels]\n" + many.String(),
			[]string{"tend.toml:3: program.a.labels: 65 labels, the most a program may have is 64"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(testutil.WriteFile(t, "tend.toml", tc.toml))
			if err == nil || !errors.Is(err, program.ErrBadConfig) {
				t.Fatalf("Load: %v, want a config error", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%v\nwants %q", err, w)
				}
			}
		})
	}
}

func TestRemoveOnExitOverTheAPI(t *testing.T) {
	spec, err := ParseProgramJSON([]byte(`{"name":"r","command":["true"],"remove_on_exit":true,"labels":{"session":"s-1"}}`), "/")
	if err != nil {
		t.Fatal(err)
	}
	if !spec.RemoveOnExit || spec.Restart != program.RestartNever || spec.Labels["session"] != "s-1" {
		t.Errorf("spec: remove_on_exit %v, restart %q, labels %v; want true, never, session=s-1", spec.RemoveOnExit, spec.Restart, spec.Labels)
	}
	// [defaults] restart does not apply: remove_on_exit without restart means never.
	d := mustDefaults(t, "[defaults]\nrestart = \"always\"\n")
	spec, err = d.ParseProgramJSON([]byte(`{"name":"r","command":["true"],"remove_on_exit":true}`), "/")
	if err != nil || spec.Restart != program.RestartNever {
		t.Errorf("with [defaults] restart: %q, %v; want never", spec.Restart, err)
	}
	spec, err = ParseProgramJSON([]byte(`{"name":"r","command":["true"],"remove_on_exit":true,"restart":"on-failure"}`), "/")
	if err != nil || spec.Restart != program.RestartOnFailure {
		t.Errorf("with restart on-failure: %q, %v", spec.Restart, err)
	}
	_, err = ParseProgramJSON([]byte(`{"name":"r","command":["true"],"remove_on_exit":true,"restart":"always"}`), "/")
	if err == nil || !errors.Is(err, program.ErrInvalid) || !strings.Contains(err.Error(), "restart: \"always\" with remove_on_exit would never end") {
		t.Errorf("remove_on_exit with restart always: %v", err)
	}
	_, err = ParseProgramJSON([]byte(`{"name":"r","command":["true"],"labels":{"Bad":"x"}}`), "/")
	if err == nil || !errors.Is(err, program.ErrInvalid) || !strings.Contains(err.Error(), `labels.Bad: label key "Bad"`) {
		t.Errorf("a bad label over the API: %v", err)
	}
	// A config file has no remove_on_exit: it would come back at every reload.
	_, err = Load(testutil.WriteFile(t, "tend.toml", "[program.a]\ncommand = [\"true\"]\nremove_on_exit = true\n"))
	if err == nil || !strings.Contains(err.Error(), "tend.toml:3: program.a.remove_on_exit: unknown key") {
		t.Errorf("remove_on_exit in a file: %v", err)
	}
}

func mustDefaults(t *testing.T, toml string) *Defaults {
	t.Helper()
	_, d, err := LoadWithDefaults(testutil.WriteFile(t, "tend.toml", toml))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

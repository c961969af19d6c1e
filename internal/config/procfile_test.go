package config

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/tend-sh/tend/internal/testutil"
)

func TestProcfile(t *testing.T) {
	path := testutil.WriteFile(t, "Procfile", "# the fleet\nweb: bundle exec rails s -p $PORT\n\n  worker:   python3 w.py --queue default  \r\nclock.v2: ./clock\n")
	dir := filepath.Dir(path)
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.File != path || cfg.Daemon.StateDir != filepath.Join(dir, ".tend") || !cfg.Daemon.Subreaper {
		t.Errorf("config %+v", cfg)
	}
	want := []struct{ name, shell string }{
		{"web", "bundle exec rails s -p $PORT"},
		{"worker", "python3 w.py --queue default"},
		{"clock.v2", "./clock"},
	}
	if len(cfg.Programs) != len(want) {
		t.Fatalf("got %d programs: %+v", len(cfg.Programs), cfg.Programs)
	}
	for i, w := range want {
		got := cfg.Programs[i]
		spec := defaultSpec()
		spec.Name, spec.Shell, spec.Cwd = w.name, w.shell, dir
		if !reflect.DeepEqual(got, spec) {
			t.Errorf("program %d\n got %+v\nwant %+v", i, got, spec)
		}
	}
}

func TestProcfileVariantsLoadAsProcfiles(t *testing.T) {
	for _, name := range []string{"Procfile.dev", "fleet.procfile"} {
		cfg := mustLoad(t, name, "web: ./server\n")
		if len(cfg.Programs) != 1 || cfg.Programs[0].Shell != "./server" {
			t.Errorf("%s: %+v", name, cfg.Programs)
		}
	}
}

func TestProcfileErrors(t *testing.T) {
	path := testutil.WriteFile(t, "Procfile", "web: ./server\nno colon here\nWeb: ./x\nweb: ./again\nidle:\n")
	cfg, err := Load(path)
	if cfg != nil {
		t.Error("got a config along with the error")
	}
	checkErr(t, err, path, 2, "", `expected "name: command"`)
	checkErr(t, err, path, 3, "Web", `invalid program name "Web"`)
	checkErr(t, err, path, 4, "web", `program "web" is defined twice (first on line 1)`)
	checkErr(t, err, path, 5, "idle", "empty command")
}

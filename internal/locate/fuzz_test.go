package locate_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tend-sh/tend/internal/config"
	"github.com/tend-sh/tend/internal/locate"
)

// FuzzStateDir checks the parser against package config, the daemon's own
// reading: on every document the daemon would run (config.ParseTOML
// accepts it), StateDir gives the daemon's state_dir. On the rest nothing
// is asked but not to panic.
func FuzzStateDir(f *testing.F) {
	for _, doc := range locate.StateDirDocs {
		f.Add([]byte(doc))
	}
	for _, p := range []string{"../../examples/tend.toml", "../../deploy/docker/tend.toml"} {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	for _, doc := range []string{
		"[daemon]\nstate_dir = \"a\"\n[daemon]\nstate_dir = \"b\"\n",
		"[[daemon]]\n", "daemon = 1\n", "x = [\n[\"daemon\"]\n]\n[daemon]\nstate_dir = 'y'\n",
		"a = \"\"\"\\\n\"\"\"\n[daemon]\nstate_dir = \"z\"\n",
		"t = {daemon = {state_dir = \"no\"}}\n",
		"[daemon]\nstate_dir = ''\n",
		"['daemon' . \"x\"]\n[daemon]\n\"state_dir\"='q'\r\n",
	} {
		f.Add([]byte(doc))
	}
	dir := f.TempDir()
	path := filepath.Join(dir, "tend.toml")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		got, gerr := locate.StateDir(path)
		if cfg, err := config.ParseTOML(path, data); err == nil && (gerr != nil || got != cfg.Daemon.StateDir) {
			t.Fatalf("%q: StateDir %q, %v; the daemon's %q", data, got, gerr, cfg.Daemon.StateDir)
		}
	})
}

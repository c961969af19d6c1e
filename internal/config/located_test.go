package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/tend-sh/tend/internal/program"
)

// Problems found after loading name their line like any config error; a
// key inherited from [defaults] is blamed there, once.
func TestLocate(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tend.toml")
	data := `[daemon]
cgroup = "/sys/fs/cgroup/x"

[defaults]
memory_max = "1GiB"

[program.w]
command = ["true"]

[program.x]
command = ["true"]
memory_max = "2GiB"

[program.y]
command = ["true"]
`
	if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	err = Locate(cfg, []Problem{
		{Program: "w", Key: "memory_max", Msg: "cannot be enforced here"},
		{Program: "x", Key: "memory_max", Msg: "cannot be enforced here"},
		{Program: "y", Key: "memory_max", Msg: "cannot be enforced here"},
		{Key: "cgroup", Msg: "does not exist"},
	})
	want := cfg.File + ":2: daemon.cgroup: does not exist\n" +
		cfg.File + ":5: defaults.memory_max: cannot be enforced here\n" +
		cfg.File + ":12: program.x.memory_max: cannot be enforced here"
	if err == nil || err.Error() != want || !errors.Is(err, program.ErrBadConfig) {
		t.Errorf("Locate:\n%v\nwant\n%s", err, want)
	}
	if err := Locate(cfg, nil); err != nil {
		t.Errorf("Locate of no problems: %v", err)
	}

	// An API body: the key alone, an invalid request.
	err = Locate(nil, []Problem{{Program: "z", Key: "memory_max", Msg: "cannot be enforced here"}})
	if err == nil || err.Error() != "memory_max: cannot be enforced here" || !errors.Is(err, program.ErrInvalid) {
		t.Errorf("Locate of an API body: %v", err)
	}

	// The file gone since: no line, the key still named.
	os.Remove(file)
	err = Locate(cfg, []Problem{{Program: "x", Key: "memory_max", Msg: "m"}})
	if err == nil || err.Error() != cfg.File+": program.x.memory_max: m" {
		t.Errorf("Locate without the file: %v", err)
	}
}

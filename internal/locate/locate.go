// Package locate finds where a config file puts the daemon's state
// directory, and so its socket, without loading the config: every CLI verb
// but up finds its daemon this way. Decoding a 10,000-program tend.toml
// into programs takes some 11 ms and 10 MB of garbage, which each `tend ps`
// would pay; reading its statements with the TOML parser, building
// nothing, takes a few milliseconds, and stops where the [daemon] table
// ends (parse.go); a file in which no key can spell daemon is not parsed at
// all. So a config that puts [daemon] first, or has none, costs about the
// same with 10 programs as with 10,000.
//
// The answer is the daemon's own (package config's, which links far more
// than a client should): a fuzz test here checks that the two agree on
// every document the config decoder accepts. A file with mistakes
// elsewhere still finds its daemon, whose reload then reports them.
package locate

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tend-sh/tend/internal/program"
)

// DefaultStateDir is the state directory of a config that names none,
// relative to the config file's directory.
const DefaultStateDir = ".tend"

// Socket is the name of the daemon's unix socket in its state directory.
const Socket = "tend.sock"

// Error is a config file that does not say where its daemon is: it cannot
// be read, is not TOML, or has a daemon that is not a table. It prints as
// "file:line: key: what is wrong" (the parts known) and matches
// program.ErrBadConfig.
type Error struct {
	File string
	Line int    // 0 when unknown
	Key  string // "" when none
	Msg  string
	Err  error // the cause (a read error), or nil
}

func (e *Error) Error() string { return Message(e.File, e.Line, e.Key, e.Msg) }

// Message is how every config problem prints, here and in package config:
// "file:line: key: msg", leaving out the parts not known (a line of 0, an
// empty file or key).
func Message(file string, line int, key, msg string) string {
	var b strings.Builder
	if file != "" {
		b.WriteString(file)
		if line > 0 {
			b.WriteString(":" + strconv.Itoa(line))
		}
		b.WriteString(": ")
	}
	if key != "" {
		b.WriteString(key + ": ")
	}
	b.WriteString(msg)
	return b.String()
}

// Unwrap makes the error match program.ErrBadConfig, and its cause.
func (e *Error) Unwrap() []error {
	if e.Err != nil {
		return []error{program.ErrBadConfig, e.Err}
	}
	return []error{program.ErrBadConfig}
}

// StateDir is the absolute, clean state directory of the daemon that runs
// the config file at path: its [daemon] state_dir, resolved against the
// file's directory, else DefaultStateDir beside the file (always so for a
// Procfile). A state_dir that is not a string, or is empty, is the default
// too: the daemon refuses such a file, and a client looking for it says
// there is none.
func StateDir(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		return "", &Error{File: path, Msg: err.Error(), Err: err}
	}
	sd := ""
	if !IsProcfile(abs) {
		if sd, err = parse(path, data); err != nil {
			return "", err
		}
	}
	return resolve(filepath.Dir(abs), sd), nil
}

// resolve makes a state_dir absolute against dir, the default when empty.
func resolve(dir, sd string) string {
	if sd == "" {
		sd = DefaultStateDir
	}
	if !filepath.IsAbs(sd) {
		sd = filepath.Join(dir, sd)
	}
	return filepath.Clean(sd)
}

// IsProcfile reports whether path names a Procfile (Procfile,
// Procfile.NAME, NAME.procfile), as package config tells the two formats
// apart.
func IsProcfile(path string) bool {
	base := filepath.Base(path)
	return base == "Procfile" || strings.HasPrefix(base, "Procfile.") || strings.HasSuffix(base, ".procfile")
}

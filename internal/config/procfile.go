package config

import (
	"fmt"
	"strings"

	"github.com/tend-sh/tend/internal/program"
)

// ParseProcfile decodes a Procfile: one "name: command" per line, blank lines
// and # comments skipped. Each line becomes a program with every key at its
// default, its command run by /bin/sh -c as Procfile commands are shell lines
// by convention.
func ParseProcfile(file string, data []byte) (*program.Config, error) {
	abs, dir := locate(file)
	c := &collector{file: file}
	cfg := &program.Config{File: abs, Daemon: defaultDaemon()}
	cfg.Daemon.StateDir = resolve(dir, cfg.Daemon.StateDir)
	firstOn := make(map[string]int)
	for i, raw := range strings.Split(string(data), "\n") {
		n := i + 1
		line := strings.TrimSpace(raw)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, command, found := strings.Cut(line, ":")
		name, command = strings.TrimSpace(name), strings.TrimSpace(command)
		problem := func(key, msg string) { c.addError(&Error{File: file, Line: n, Key: key, Msg: msg}) }
		switch {
		case !found:
			problem("", `expected "name: command"`)
		case !program.ValidName(name):
			problem(name, badName(name))
		case firstOn[name] > 0:
			problem(name, fmt.Sprintf("program %q is defined twice (first on line %d)", name, firstOn[name]))
		case command == "":
			problem(name, "empty command")
		case strings.ContainsRune(command, 0):
			problem(name, "command contains a NUL byte")
		default:
			firstOn[name] = n
			s := defaultSpec()
			s.Name, s.Shell, s.Cwd = name, command, resolve(dir, defaultCwd)
			cfg.Programs = append(cfg.Programs, s)
		}
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	return cfg, nil
}

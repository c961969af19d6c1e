package config

import (
	"fmt"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/tend-sh/tend/internal/program"
)

// programDecoder turns the layers of one program into a program.Spec.
type programDecoder struct {
	*collector
	baseDir      string // relative cwd resolves against it
	minInstances int    // 1 in a file; 0 over the API ("none")
}

// decode builds the Spec for the program at path (its own table's path, for
// messages about missing keys). isProgram is false for [defaults] checked on
// its own, which need not say what to run; when it is true, v[0] is the
// program's own table.
func (d *programDecoder) decode(name string, path []string, v view, isProgram bool) program.Spec {
	s := defaultSpec()
	s.Name = name
	d.command(path, v, &s, isProgram)
	d.environment(v, &s)
	d.setLabels(v, &s.Labels)
	d.terminal(v, &s)
	d.protocol(v, &s)
	d.lifecycle(v, &s)
	d.crashes(v, &s)
	d.memoryAndWedges(v, &s)
	s.Probe = d.probe(v, isProgram && v[0].table["probe"] != nil)
	d.logs(v, &s.Logs)
	return s
}

// command reads command or shell: exactly one, inherited as a pair.
func (d *programDecoder) command(path []string, v view, s *program.Spec, isProgram bool) {
	own := v.owner("command", "shell")
	hasCommand, hasShell := own.has("command"), own.has("shell")
	switch {
	case hasCommand && hasShell:
		d.add(own.blame("shell"), "set either command or shell, not both")
		return
	case !hasCommand && !hasShell:
		if isProgram {
			d.add(join(path, "command"), `missing: set command (an argv array like ["./worker"]) or shell (a string run by /bin/sh -c)`)
		}
		return
	}
	d.setArgv(own, "command", &s.Command)
	if p, ok := d.setString(own, "shell", &s.Shell); ok && strings.TrimSpace(s.Shell) == "" {
		d.add(p, "must not be empty")
	} else if ok && strings.ContainsRune(s.Shell, 0) {
		d.add(p, "contains a NUL byte")
	}
}

// environment reads where and as whom the program runs.
func (d *programDecoder) environment(v view, s *program.Spec) {
	if p, ok := d.setString(v, "cwd", &s.Cwd); ok && strings.ContainsRune(s.Cwd, 0) {
		d.add(p, "contains a NUL byte")
	}
	if s.Cwd == "" {
		s.Cwd = defaultCwd
	}
	s.Cwd = resolve(d.baseDir, s.Cwd)
	d.setEnv(v, "env", &s.Env)
	d.envFile(v, s)
	d.setInt(v, "instances", &s.Instances, d.minInstances, program.MaxInstances)
	d.setBool(v, "agent", &s.Agent)
	d.setDuration(v, "turn_idle_after", &s.TurnIdleAfter, positive)
	d.setDuration(v, "turn_grace", &s.TurnGrace, orZero)
	userPath, _ := d.setString(v, "user", &s.User)
	groupPath, _ := d.setString(v, "group", &s.Group)
	if s.User != "" {
		if msg := checkUser(s.User); msg != "" {
			d.add(userPath, msg)
		}
	}
	if s.Group != "" {
		if msg := checkGroup(s.Group, s.User); msg != "" {
			d.add(groupPath, msg)
		}
	}
}

// envFile reads env_file and puts its variables under env's: the file is
// read now, so a missing or malformed one stops the load (docs/operations.md#env_file), and a
// reload reads it again.
func (d *programDecoder) envFile(v view, s *program.Spec) {
	p, ok := d.setString(v, "env_file", &s.EnvFile)
	if !ok || s.EnvFile == "" {
		s.EnvFile = ""
		return
	}
	s.EnvFile = resolve(d.baseDir, s.EnvFile)
	data, err := os.ReadFile(s.EnvFile)
	if err != nil {
		d.add(p, fmt.Sprintf("cannot read %s: %v", s.EnvFile, unwrapPathError(err)))
		return
	}
	vars, err := ParseEnvFile(s.EnvFile, data)
	if err != nil {
		d.add(p, err.Error())
		return
	}
	for k, val := range s.Env {
		vars[k] = val // env applies after env_file
	}
	s.Env = vars
}

// checkUser says what is wrong with running as user name: as root any
// account of this machine will do; otherwise only tend's own user, since
// nothing else can be switched to.
func checkUser(name string) string {
	u, err := user.Lookup(name)
	if err != nil {
		if u, err = user.LookupId(name); err != nil {
			return fmt.Sprintf("no user %q on this machine", name)
		}
	}
	if uid := os.Geteuid(); uid != 0 && u.Uid != strconv.Itoa(uid) {
		return fmt.Sprintf("running a program as user %q needs tend to run as root (it runs as uid %d; only its own user can be named)", name, uid)
	}
	return ""
}

// checkGroup says what is wrong with running as group name. As root a
// group alone would keep root's user and supplementary groups, which is
// not what anyone means by it, so it needs a user beside it; as another
// user only its own primary group can be named.
func checkGroup(name, userName string) string {
	g, err := user.LookupGroup(name)
	if err != nil {
		if g, err = user.LookupGroupId(name); err != nil {
			return fmt.Sprintf("no group %q on this machine", name)
		}
	}
	if os.Geteuid() == 0 {
		if userName == "" {
			return "group without user: set user too (as root, a group alone would keep root's user)"
		}
		return ""
	}
	if gid := os.Getegid(); g.Gid != strconv.Itoa(gid) {
		return fmt.Sprintf("running a program as group %q needs tend to run as root (it runs as gid %d; only its own group can be named)", name, gid)
	}
	return ""
}

// resolve makes p absolute against base.
func resolve(base, p string) string {
	if !filepath.IsAbs(p) {
		p = filepath.Join(base, p)
	}
	return filepath.Clean(p)
}

// lifecycle reads restart policy, readiness and stopping.
func (d *programDecoder) lifecycle(v view, s *program.Spec) {
	d.setEnum(v, "restart", &s.Restart, program.RestartAlways, program.RestartOnFailure, program.RestartNever)
	d.setBool(v, "autostart", &s.Autostart)
	d.setEnum(v, "ready", &s.Ready, program.ReadySpawn, program.ReadyNotify)
	d.setDuration(v, "start_timeout", &s.StartTimeout, positive)
	d.setSignal(v, "stop_signal", &s.StopSignal)
	d.setDuration(v, "stop_grace", &s.StopGrace, orZero)
}

// crashes reads the crash backoff and the clean-exit budget (docs/restarts.md#the-four-rows, rows 3, 4).
func (d *programDecoder) crashes(v view, s *program.Spec) {
	d.setDuration(v, "backoff_initial", &s.BackoffInitial, orZero)
	d.setDuration(v, "backoff_max", &s.BackoffMax, orZero)
	if s.BackoffInitial > s.BackoffMax {
		d.add(v.blame("backoff_initial", "backoff_max"),
			fmt.Sprintf("backoff_initial (%s) must not exceed backoff_max (%s)", s.BackoffInitial, s.BackoffMax))
	}
	d.setFloat(v, "backoff_jitter", &s.BackoffJitter, 0, 1)
	d.setCodes(v, "clean_exit_codes", &s.CleanExitCodes)
	d.setCodes(v, "fatal_exit_codes", &s.FatalExitCodes)
	for _, code := range s.FatalExitCodes {
		if slices.Contains(s.CleanExitCodes, code) {
			d.add(v.blame("fatal_exit_codes", "clean_exit_codes"),
				fmt.Sprintf("exit code %d is in both clean_exit_codes and fatal_exit_codes", code))
		}
	}
	d.setDuration(v, "stable_run_reset", &s.StableRunReset, orZero)
	d.setInt(v, "max_crashes", &s.MaxCrashes, 1, maxInt)
	d.setInt(v, "hard_max_crashes", &s.HardMaxCrashes, 0, maxInt)
	d.setInt(v, "clean_restart_budget", &s.CleanRestartBudget, 0, maxInt)
	d.setDuration(v, "clean_restart_window", &s.CleanRestartWindow, positive)
	d.setDuration(v, "clean_restart_backoff", &s.CleanRestartBackoff, orZero)
}

// memoryAndWedges reads the RSS watchdog and the wedge detection (rows 1, 2).
func (d *programDecoder) memoryAndWedges(v view, s *program.Spec) {
	d.setInt(v, "rss_exit_code", &s.RSSExitCode, 0, 255)
	d.setSize(v, "max_rss", &s.MaxRSS, 0)
	d.setSize(v, "memory_max", &s.MemoryMax, 0)
	d.setDuration(v, "rss_backoff", &s.RSSBackoff, orZero)
	d.setInt(v, "rss_loop_budget", &s.RSSLoopBudget, 0, maxInt)
	d.setDuration(v, "rss_loop_window", &s.RSSLoopWindow, positive)

	d.setDuration(v, "watchdog", &s.Watchdog, orZero)
	d.setDuration(v, "idle_output_timeout", &s.IdleOutputTimeout, orZero)
	d.setInt(v, "wedge_checks", &s.WedgeChecks, 1, maxInt)
	d.setDuration(v, "wedge_startup_grace", &s.WedgeStartupGrace, orZero)
	d.setDuration(v, "wedge_restart_grace", &s.WedgeRestartGrace, orZero)
	d.setInt(v, "wedge_loop_budget", &s.WedgeLoopBudget, 0, maxInt)
	d.setDuration(v, "wedge_loop_window", &s.WedgeLoopWindow, positive)
}

// sub is the view of a nested table (probe, logs) across the layers, its
// keys inherited one by one. A layer whose key is not a table is reported.
func (d *programDecoder) sub(v view, key string, known []string) view {
	var out view
	for _, l := range v {
		val, ok := l.table[key]
		if !ok {
			continue
		}
		path := join(l.path, key)
		table, isTable := val.(map[string]any)
		if !isTable {
			d.wrongType(path, "a table", val)
			continue
		}
		d.unknownKeys(path, table, known)
		out = append(out, layer{table: table, path: path})
	}
	return out
}

// probe reads the liveness probe. A program has one when its own table has
// [probe], or when [defaults.probe] says what to run; a [defaults.probe]
// with only timings just sets those for the programs that have a probe.
func (d *programDecoder) probe(v view, ownProbe bool) *program.Probe {
	pv := d.sub(v, "probe", probeKeys)
	if len(pv) == 0 {
		return nil
	}
	p := defaultProbe()
	own := pv.owner("exec", "http")
	hasExec, hasHTTP := own.has("exec"), own.has("http")
	switch {
	case hasExec && hasHTTP:
		d.add(own.blame("http"), "set either exec or http, not both")
	case !hasExec && !hasHTTP:
		if ownProbe {
			d.add(join(pv[0].path, "exec"), `missing: set exec (an argv array) or http (an "http://" URL)`)
		}
	case hasExec:
		d.setArgv(own, "exec", &p.Exec)
	default:
		if path, ok := d.setString(own, "http", &p.HTTP); ok && !isHTTPURL(p.HTTP) {
			d.add(path, fmt.Sprintf(`must be an http:// URL like "http://127.0.0.1:8080/healthz", got %q`, p.HTTP))
		}
	}
	d.setDuration(pv, "interval", &p.Interval, positive)
	d.setDuration(pv, "timeout", &p.Timeout, positive)
	d.setInt(pv, "failure_threshold", &p.FailureThreshold, 1, maxInt)
	if !hasExec && !hasHTTP {
		return nil
	}
	return &p
}

func isHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Scheme == "http" && u.Host != ""
}

func (d *programDecoder) logs(v view, l *program.Logs) {
	lv := d.sub(v, "logs", logsKeys)
	d.setSize(lv, "max_size", &l.MaxSize, program.MinLogSize)
	d.setInt(lv, "max_files", &l.MaxFiles, 1, maxInt)
}

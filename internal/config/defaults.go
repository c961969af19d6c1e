package config

import (
	"syscall"
	"time"

	find "github.com/tend-sh/tend/internal/locate"
	"github.com/tend-sh/tend/internal/program"
)

// The defaults of docs/config.md, in one place. A key a program and
// [defaults] both omit takes its value from here.

const (
	defaultStateDir       = find.DefaultStateDir // where clients look for the daemon too
	defaultAuditRetention = 336 * time.Hour
	defaultAuditMaxSize   = 1 << 30
	defaultCwd            = "."

	minAuditSize = 1 << 20 // a day of a quiet fleet's events must fit
)

func defaultDaemon() program.Daemon {
	return program.Daemon{
		StateDir:       defaultStateDir,
		Subreaper:      true,
		AuditRetention: defaultAuditRetention,
		AuditMaxSize:   defaultAuditMaxSize,
		Cgroup:         program.CgroupAuto,
		APIAdd:         program.APIAddAny,
	}
}

// defaultSpec is a program with every key at its documented default (docs/config.md); Name, Command
// and Shell are the caller's to set, Cwd still needs resolving.
func defaultSpec() program.Spec {
	return program.Spec{
		Cwd:           defaultCwd,
		Instances:     1,
		TurnIdleAfter: 10 * time.Second,
		TtyCols:       defaultTTYCols,
		TtyRows:       defaultTTYRows,
		TtyHistory:    defaultTTYHistory,
		Permission:    program.PermissionAsk,

		Restart:      program.RestartAlways,
		Autostart:    true,
		Ready:        program.ReadySpawn,
		StartTimeout: 30 * time.Second,

		StopSignal: syscall.SIGTERM,
		StopGrace:  10 * time.Second,

		BackoffInitial: time.Second,
		BackoffMax:     60 * time.Second,
		BackoffJitter:  0.1,
		CleanExitCodes: []int{0},
		FatalExitCodes: []int{},
		StableRunReset: 5 * time.Minute,
		MaxCrashes:     5,
		HardMaxCrashes: 0,

		CleanRestartBudget:  10,
		CleanRestartWindow:  60 * time.Second,
		CleanRestartBackoff: time.Second,

		RSSExitCode:   12,
		RSSBackoff:    30 * time.Second,
		RSSLoopBudget: 3,
		RSSLoopWindow: 10 * time.Minute,

		WedgeChecks:       1,
		WedgeRestartGrace: 10 * time.Second,
		WedgeLoopBudget:   3,
		WedgeLoopWindow:   30 * time.Minute,

		Logs: program.Logs{MaxSize: program.DefaultLogSize, MaxFiles: 5},
	}
}

func defaultProbe() program.Probe {
	return program.Probe{Interval: 10 * time.Second, Timeout: 2 * time.Second, FailureThreshold: 3}
}

// programKeys are the keys of a [program.NAME] table (and of [defaults]).
var programKeys = []string{
	"command", "shell", "cwd", "env", "env_file", "instances", "agent", "turn_idle_after", "turn_grace",
	"user", "group",
	"restart", "autostart", "ready", "start_timeout", "stop_signal", "stop_grace",
	"backoff_initial", "backoff_max", "backoff_jitter", "clean_exit_codes", "fatal_exit_codes",
	"stable_run_reset", "max_crashes", "hard_max_crashes",
	"clean_restart_budget", "clean_restart_window", "clean_restart_backoff",
	"rss_exit_code", "max_rss", "memory_max", "rss_backoff", "rss_loop_budget", "rss_loop_window",
	"watchdog", "idle_output_timeout", "wedge_checks", "wedge_startup_grace",
	"wedge_restart_grace", "wedge_loop_budget", "wedge_loop_window",
	"probe", "logs",
	"labels",
	"tty", "tty_size", "tty_history",
	"protocol", "permission",
}

var (
	probeKeys  = []string{"exec", "http", "interval", "timeout", "failure_threshold"}
	logsKeys   = []string{"max_size", "max_files"}
	daemonKeys = []string{"state_dir", "http", "tls_cert", "tls_key", "subreaper", "audit_retention",
		"audit_max_size", "cgroup", "forward_output", "api_add"}
	topKeys = []string{"daemon", "defaults", "program"}
)

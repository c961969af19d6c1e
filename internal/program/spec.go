// Package program is tend's vocabulary: the program Spec, instance ids, run
// exits and their causes, events and the status object. Every other package
// speaks in these types; this one imports only the standard library.
package program

import (
	"syscall"
	"time"
)

// NamePattern is the pattern every program name must match (docs/README.md#words):
// ^[a-z0-9][a-z0-9_.-]{0,62}$. It is matched by hand: compiling it as a
// regexp at init took a third of a millisecond of every tend exec, CLI
// verbs included (name_test.go checks it against the regexp).
var NamePattern namePattern

type namePattern struct{}

// MatchString reports whether s matches the pattern.
func (namePattern) MatchString(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case i > 0 && (c == '_' || c == '.' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// String is the pattern as a regular expression.
func (namePattern) String() string { return `^[a-z0-9][a-z0-9_.-]{0,62}$` }

// ValidName reports whether name can name a program: it matches NamePattern
// and is not "all", which as an id means every instance.
func ValidName(name string) bool { return name != "all" && NamePattern.MatchString(name) }

// MaxInstances bounds a program's instances, and so the fleet's records
// kept per instance: wherever a count of instances is read (the config, the
// API, the state kept across daemons), this is its limit.
const MaxInstances = 10000

// Restart policies (docs/config.md, docs/restarts.md#restart-policies).
const (
	RestartAlways    = "always"     // every end of a run restarts
	RestartOnFailure = "on-failure" // clean exits end the instance as exited
	RestartNever     = "never"      // nothing restarts
)

// Readiness modes.
const (
	ReadySpawn  = "spawn"  // running as soon as the process is exec'd
	ReadyNotify = "notify" // running only after READY=1 on the notify socket
)

// Protocols a program's stdio may speak (docs/protocol.md).
const (
	ProtocolNone = ""    // stdout is output, stdin is /dev/null
	ProtocolACP  = "acp" // the Agent Client Protocol: tend is the client
)

// Permission policies of a protocol agent (docs/protocol.md#permissions).
const (
	PermissionAsk   = "ask"   // each request waits for the operator
	PermissionAllow = "allow" // answered at once with the first allow option
	PermissionDeny  = "deny"  // answered at once with the first reject option
)

// Spec is one program, fully defaulted and validated: the config package
// produces it, nothing downstream needs to know about defaults. Durations of
// zero mean "off" where the field says so.
type Spec struct {
	Name    string            // matches NamePattern
	Command []string          // argv; exactly one of Command and Shell is set
	Shell   string            // run as /bin/sh -c Shell
	Cwd     string            // absolute (config resolves it against the config file's folder)
	Env     map[string]string // added to tend's own environment, after EnvFile's
	EnvFile string            // absolute path of a KEY=VALUE file read at load; "" = none (its values are already in Env)

	Instances     int           // >= 1 (0 is allowed over the API only as "none")
	Agent         bool          // an AI agent: status reports turns
	TurnIdleAfter time.Duration // silence after which an agent is idle; default 10s
	TurnGrace     time.Duration // an operator stop or restart waits this long for an agent's turn to end; default 0 (no wait)
	User, Group   string        // run as this account (tend must be root)
	// Tty runs each run in a pseudo-terminal tend holds (docs/terminal.md),
	// TtyCols x TtyRows until a client resizes it (default 120x40).
	Tty              bool
	TtyCols, TtyRows int
	TtyHistory       int               // lines kept above the screen (default 2000; 0 keeps none)
	Labels           map[string]string // KEY = "VALUE" pairs to select by (-l, ?label=); nil = none; read-only once made
	// Protocol is what tend speaks on the run's stdin and stdout:
	// ProtocolNone (the default, nothing) or ProtocolACP, the Agent Client
	// Protocol (docs/protocol.md); never with Tty, and it makes the program
	// an agent. Permission is how a protocol agent's permission requests are
	// answered: PermissionAsk (put to the operator, the default),
	// PermissionAllow or PermissionDeny (at once, by that policy).
	Protocol   string
	Permission string

	// RemoveOnExit: the program is removed (with its logs, cgroup and
	// records) once every instance has ended and will not restart. Set
	// only over the API (tend run --rm), never from a config file.
	RemoveOnExit bool

	Restart      string        // RestartAlways | RestartOnFailure | RestartNever
	Autostart    bool          // start with the daemon (default true)
	Ready        string        // ReadySpawn | ReadyNotify
	StartTimeout time.Duration // with ReadyNotify; default 30s

	StopSignal syscall.Signal // default SIGTERM; sent to the run's process group
	StopGrace  time.Duration  // then SIGKILL; default 10s

	BackoffInitial time.Duration // crash backoff base; default 1s
	BackoffMax     time.Duration // crash backoff cap; default 60s
	BackoffJitter  float64       // 0..1; default 0.1
	CleanExitCodes []int         // default [0]
	FatalExitCodes []int         // default none
	StableRunReset time.Duration // a crash after a longer run resets crash_count to 1; default 5m
	MaxCrashes     int           // soft budget (degraded); default 5
	HardMaxCrashes int           // 0 = never give up; default 0

	CleanRestartBudget  int           // default 10
	CleanRestartWindow  time.Duration // default 60s
	CleanRestartBackoff time.Duration // default 1s

	RSSExitCode   int           // default 12
	MaxRSS        int64         // bytes; 0 = no memory watchdog
	MemoryMax     int64         // bytes; the run's cgroup memory.max (docs/containment.md#memory); 0 = no limit
	RSSBackoff    time.Duration // default 30s
	RSSLoopBudget int           // default 3
	RSSLoopWindow time.Duration // default 10m

	Watchdog          time.Duration // 0 = off; WATCHDOG=1 required this often
	IdleOutputTimeout time.Duration // 0 = off
	WedgeChecks       int           // default 1
	WedgeStartupGrace time.Duration // default 0
	WedgeRestartGrace time.Duration // default 10s
	WedgeLoopBudget   int           // default 3
	WedgeLoopWindow   time.Duration // default 30m

	Probe *Probe // nil = no liveness probe
	Logs  Logs
}

// Probe is a liveness probe, like a Kubernetes liveness probe.
type Probe struct {
	Exec             []string      // argv; exactly one of Exec and HTTP is set
	HTTP             string        // URL answered with 2xx/3xx when healthy
	Interval         time.Duration // default 10s
	Timeout          time.Duration // default 2s
	FailureThreshold int           // default 3
}

// Logs configures the captured-output files of each instance.
type Logs struct {
	MaxSize  int64 // bytes per file, at which it rotates; default DefaultLogSize, at least MinLogSize
	MaxFiles int   // rotated files kept; default 5
}

// Bounds of Logs.MaxSize.
const (
	MinLogSize     = 4 << 10  // smaller files would rotate every few lines
	DefaultLogSize = 50 << 20 // when none is given
)

// Argv is the argument vector a run executes.
func (s *Spec) Argv() []string {
	if s.Shell != "" {
		return []string{"/bin/sh", "-c", s.Shell}
	}
	return s.Command
}

// IsCleanCode reports whether code counts as a clean exit (row 3 of docs/restarts.md#the-four-rows).
func (s *Spec) IsCleanCode(code int) bool { return contains(s.CleanExitCodes, code) }

// IsFatalCode reports whether code means "do not restart".
func (s *Spec) IsFatalCode(code int) bool { return contains(s.FatalExitCodes, code) }

func contains(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// Cgroup modes of [daemon] cgroup besides a directory (docs/containment.md#the-cgroup-setting).
const (
	CgroupAuto = "auto" // use cgroup v2 where tend may create groups below its own
	CgroupOff  = "off"  // never: process groups and trees only
)

// Daemon is the [daemon] table. It is comparable: a reload compares it whole.
type Daemon struct {
	StateDir       string        // absolute; default ".tend" beside the config file
	HTTP           string        // TCP listen address for the dashboard and API; "" = none
	TLSCert        string        // absolute path of a PEM certificate for HTTP; set with TLSKey or not at all
	TLSKey         string        // absolute path of its PEM private key
	Subreaper      bool          // PR_SET_CHILD_SUBREAPER; default true
	AuditRetention time.Duration // default 336h
	AuditMaxSize   int64         // bytes the audit directory may hold; the oldest files go first; default 1GiB
	Cgroup         string        // CgroupAuto (default), CgroupOff, or an absolute directory in a cgroup2 mount
	ForwardOutput  bool          // also print every captured line on tend's stdout as "NAME:K | line"; default false
	APIAdd         string        // who may add programs: APIAddAny (default) or APIAddUnix (not over TCP, token or not)
}

// Values of Daemon.APIAdd ([daemon] api_add).
const (
	APIAddAny  = "any"
	APIAddUnix = "unix"
)

// Config is a whole loaded configuration.
type Config struct {
	File     string // the file it came from, for messages
	Daemon   Daemon
	Programs []Spec // in file order
}

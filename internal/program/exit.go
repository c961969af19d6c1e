package program

import (
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Likely causes of a run's end (docs/restarts.md#likely-causes).
const (
	CauseWedgeRestart    = "wedge_restart"
	CauseOperatorRestart = "operator_restart"
	CauseOperatorStop    = "operator_stop"
	CauseRSSWatchdog     = "rss_watchdog"
	CauseCleanExit       = "clean_exit"
	CauseRuntimeError    = "runtime_error"
	CauseGraceful        = "graceful_shutdown"
	CauseOOMOrKill       = "oom_or_external_kill"
	CauseSpawnFailed     = "spawn_failed"
	CauseStartTimeout    = "start_timeout"
	CauseOOMKill         = "oom_kill"         // the kernel's OOM killer ended it (known from its cgroup)
	CauseDaemonResources = "daemon_resources" // the daemon could not start it (EMFILE, ENOMEM, ...): not the program's fault
	CauseUnknown         = "unknown"
)

// Exit is how one run ended, as the reaper saw it. Code and signal stay apart;
// a run that never launched has SpawnErr set and neither of them.
type Exit struct {
	PID       int
	Code      int            // valid when Signaled is false and SpawnErr is nil
	Signal    syscall.Signal // valid when Signaled is true
	Signaled  bool
	SpawnErr  error // the run never launched (ENOENT, EACCES, bad cwd)
	Unknown   bool  // the run ended but its status could not be read (adopted from an earlier daemon)
	OOMKilled bool  // its cgroup's memory.events oom_kill rose during the run
	MaxRSS    int64 // peak resident set in bytes, from the reaped rusage
	StartedAt time.Time
	EndedAt   time.Time
}

// Duration is how long the run lasted.
func (e Exit) Duration() time.Duration { return e.EndedAt.Sub(e.StartedAt) }

// CodePtr is the exit code for JSON: nil when the run was signalled or never ran.
func (e Exit) CodePtr() *int {
	if e.Signaled || e.SpawnErr != nil || e.Unknown {
		return nil
	}
	c := e.Code
	return &c
}

// SignalPtr is the signal name for JSON ("SIGKILL"), nil when not signalled.
func (e Exit) SignalPtr() *string {
	if !e.Signaled {
		return nil
	}
	n := SignalName(e.Signal)
	return &n
}

// signalNames are Linux's signal numbers by their kill(1) names.
var signalNames = [...]string{
	1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT",
	7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL", 10: "SIGUSR1", 11: "SIGSEGV", 12: "SIGUSR2",
	13: "SIGPIPE", 14: "SIGALRM", 15: "SIGTERM", 16: "SIGSTKFLT", 17: "SIGCHLD",
	18: "SIGCONT", 19: "SIGSTOP", 20: "SIGTSTP", 21: "SIGTTIN", 22: "SIGTTOU",
	23: "SIGURG", 24: "SIGXCPU", 25: "SIGXFSZ", 26: "SIGVTALRM", 27: "SIGPROF",
	28: "SIGWINCH", 29: "SIGIO", 30: "SIGPWR", 31: "SIGSYS",
}

// SignalName is the kill(1) name of sig with the SIG prefix ("SIGTERM");
// real-time signals are "SIGRTMIN+N".
func SignalName(sig syscall.Signal) string {
	if n := int(sig); n > 0 && n < len(signalNames) {
		return signalNames[n]
	}
	if sig >= 34 && sig <= 64 {
		return "SIGRTMIN+" + strconv.Itoa(int(sig)-34)
	}
	return "SIG" + strconv.Itoa(int(sig))
}

// ParseSignal accepts "TERM", "SIGTERM", "term" or a number from 1 to 64.
func ParseSignal(s string) (syscall.Signal, bool) {
	u := strings.ToUpper(strings.TrimSpace(s))
	if n, err := strconv.Atoi(u); err == nil {
		return syscall.Signal(n), n > 0 && n <= 64
	}
	if !strings.HasPrefix(u, "SIG") {
		u = "SIG" + u
	}
	for n, name := range signalNames {
		if name != "" && name == u {
			return syscall.Signal(n), true
		}
	}
	return 0, false
}

package config

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/tend-sh/tend/internal/program"
)

// checkResult asserts the contract every parse keeps: either a config whose
// programs are fully valid, or only *Error problems matching sentinel.
func checkResult(t *testing.T, cfg *program.Config, err error, sentinel error, needLine bool) {
	t.Helper()
	if err != nil {
		checkProblems(t, err, sentinel, needLine)
		if cfg != nil {
			t.Fatal("a config along with an error")
		}
		return
	}
	if cfg == nil || !filepath.IsAbs(cfg.File) || !filepath.IsAbs(cfg.Daemon.StateDir) {
		t.Fatalf("bad config %+v", cfg)
	}
	seen := map[string]bool{}
	for i := range cfg.Programs {
		if seen[cfg.Programs[i].Name] {
			t.Fatalf("program %q twice", cfg.Programs[i].Name)
		}
		seen[cfg.Programs[i].Name] = true
		checkSpec(t, &cfg.Programs[i], 1)
	}
}

func checkProblems(t *testing.T, err error, sentinel error, needLine bool) {
	t.Helper()
	var es Errors
	if !errors.As(err, &es) || len(es) == 0 || !errors.Is(err, sentinel) {
		t.Fatalf("error %v (%T) is not a non-empty Errors matching %v", err, err, sentinel)
	}
	for _, e := range es {
		if e == nil || e.Msg == "" || (needLine && e.Line <= 0) {
			t.Fatalf("bad problem %#v in %v", e, err)
		}
	}
}

// checkSpec asserts the invariants downstream packages rely on.
func checkSpec(t *testing.T, s *program.Spec, minInstances int) {
	t.Helper()
	ok := program.NamePattern.MatchString(s.Name) &&
		(len(s.Command) > 0) != (s.Shell != "") &&
		(len(s.Command) == 0 || s.Command[0] != "") &&
		filepath.IsAbs(s.Cwd) &&
		s.Instances >= minInstances && s.Instances <= program.MaxInstances &&
		(s.Restart == program.RestartAlways || s.Restart == program.RestartOnFailure || s.Restart == program.RestartNever) &&
		(s.Ready == program.ReadySpawn || s.Ready == program.ReadyNotify) &&
		s.StopSignal > 0 && s.StopGrace >= 0 && s.TurnIdleAfter > 0 && s.StartTimeout > 0 &&
		s.BackoffInitial >= 0 && s.BackoffInitial <= s.BackoffMax &&
		s.BackoffJitter >= 0 && s.BackoffJitter <= 1 &&
		s.MaxCrashes >= 1 && s.HardMaxCrashes >= 0 && s.CleanRestartBudget >= 0 &&
		s.CleanRestartWindow > 0 && s.RSSExitCode >= 0 && s.RSSExitCode <= 255 && s.MaxRSS >= 0 &&
		s.RSSLoopBudget >= 0 && s.RSSLoopWindow > 0 && s.Watchdog >= 0 && s.IdleOutputTimeout >= 0 &&
		s.WedgeChecks >= 1 && s.WedgeLoopBudget >= 0 && s.WedgeLoopWindow > 0 &&
		s.Logs.MaxSize >= program.MinLogSize && s.Logs.MaxFiles >= 1
	if p := s.Probe; p != nil {
		ok = ok && (len(p.Exec) > 0) != (p.HTTP != "") && p.Interval > 0 && p.Timeout > 0 && p.FailureThreshold >= 1
	}
	for _, c := range append(append([]int{}, s.CleanExitCodes...), s.FatalExitCodes...) {
		ok = ok && c >= 0 && c <= 255
	}
	for _, c := range s.FatalExitCodes {
		ok = ok && !s.IsCleanCode(c)
	}
	if !ok {
		t.Fatalf("invalid spec accepted: %+v", s)
	}
}

func FuzzParseTOML(f *testing.F) {
	f.Add([]byte(fullExample))
	for _, tc := range badInputs {
		f.Add([]byte(tc.doc))
	}
	f.Add([]byte("[defaults]\nshell = \"x\"\n[defaults.probe]\nhttp = \"http://h/\"\n[program.a]\n[program.b]\ncommand = [\"b\"]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseTOML("/fuzz/tend.toml", data)
		checkResult(t, cfg, err, program.ErrBadConfig, true)
	})
}

func FuzzParseProcfile(f *testing.F) {
	f.Add([]byte("web: ./server\n# comment\n\nworker: python3 w.py\r\n"))
	f.Add([]byte("web: ./server\nno colon\nWeb: x\nweb: y\nidle:\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseProcfile("/fuzz/Procfile", data)
		checkResult(t, cfg, err, program.ErrBadConfig, true)
	})
}

func FuzzParseProgramJSON(f *testing.F) {
	f.Add([]byte(`{"name": "a", "command": ["a"], "probe": {"exec": ["c"]}, "logs": {"max_size": 4096}, "env": {"A": "1"}}`))
	f.Add([]byte(`{"name": "a", "shell": "x", "stop_grace": "1s", "max_rss": "1GiB", "instances": 0}`))
	f.Add([]byte(`{"name": "a", "command": ["a"], "stop_grase": "1s", "instances": "2"}`))
	f.Add([]byte(`[1, null, {"a": 1e400}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		spec, err := ParseProgramJSON(data, "/base")
		if err != nil {
			checkProblems(t, err, program.ErrInvalid, false)
			if errors.Is(err, program.ErrBadConfig) {
				t.Fatalf("API error %v matches ErrBadConfig", err)
			}
			return
		}
		checkSpec(t, &spec, 0)
	})
}

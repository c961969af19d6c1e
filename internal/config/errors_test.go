package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// wantLine is the line of doc marked with "# want".
func wantLine(t *testing.T, doc string) int {
	t.Helper()
	for i, l := range strings.Split(doc, "\n") {
		if strings.Contains(l, "# want") {
			return i + 1
		}
	}
	t.Fatal("no # want marker in the document")
	return 0
}

// checkErr asserts err is a config error list holding "file:line: key: ..."
// containing msg.
func checkErr(t *testing.T, err error, file string, line int, key, msg string) {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	var es Errors
	if !errors.As(err, &es) || !errors.Is(err, program.ErrBadConfig) {
		t.Fatalf("error %v (%T) is not Errors matching ErrBadConfig", err, err)
	}
	prefix := fmt.Sprintf("%s:%d: %s: ", file, line, key)
	if key == "" {
		prefix = fmt.Sprintf("%s:%d: ", file, line)
	}
	for _, e := range es {
		if s := e.Error(); strings.HasPrefix(s, prefix) && strings.Contains(s, msg) {
			return
		}
	}
	t.Errorf("no error %q...%q in:\n%v", prefix, msg, err)
}

const head = "[program.x]\ncommand = [\"./x\"]\n"

var badInputs = []struct {
	name, doc, key, msg string
}{
	{"unknown program key", head + "stop_grase = \"1s\" # want\n", "program.x.stop_grase", `unknown key (did you mean "stop_grace"?)`},
	{"unknown daemon key", "[daemon]\nsocket = \"x\" # want\n", "daemon.socket", "unknown key"},
	{"unknown top-level key", "programs = 1 # want\n", "programs", `unknown key (did you mean "program"?)`},
	{"unknown probe key", head + "[program.x.probe] \nexec = [\"c\"]\nperiod = \"1s\" # want\n", "program.x.probe.period", "unknown key"},
	{"unknown logs key", head + "logs = { max_age = \"1h\" } # want\n", "program.x.logs.max_age", "unknown key"},
	{"unknown defaults key", "[defaults]\nrestarts = \"never\" # want\n", "defaults.restarts", "unknown key"},
	{"int as string", head + "instances = \"2\" # want\n", "program.x.instances", "must be an integer, not a string"},
	{"duration as int", head + "stop_grace = 10 # want\n", "program.x.stop_grace", `must be a duration string like "10s", not an integer`},
	{"bool as string", head + "agent = \"yes\" # want\n", "program.x.agent", "must be true or false, not a string"},
	{"tty as string", head + "tty = \"on\" # want\n", "program.x.tty", "must be true or false, not a string"},
	{"tty_size too small", head + "tty = true\ntty_size = \"9x24\" # want\n", "program.x.tty_size", "terminal size 9x24 is out of range: columns 10 to 1000, rows 2 to 500"},
	{"tty_size too tall", head + "tty_size = \"80x501\" # want\n", "program.x.tty_size", "out of range"},
	{"tty_size not a size", head + "tty_size = \"80 by 24\" # want\n", "program.x.tty_size", `terminal size "80 by 24" is not COLSxROWS`},
	{"tty_size as int", head + "tty_size = 80 # want\n", "program.x.tty_size", "must be a string, not an integer"},
	{"tty_history negative", head + "tty_history = -1 # want\n", "program.x.tty_history", "must be between 0 and 100000, got -1"},
	{"tty_history too many", head + "tty_history = 100001 # want\n", "program.x.tty_history", "100000"},
	{"tty_history as string", head + "tty_history = \"2000\" # want\n", "program.x.tty_history", "must be an integer"},
	{"tty_size in defaults", "[defaults]\ntty_size = \"2000x40\" # want\n" + head, "defaults.tty_size", "out of range"},
	{"string as int", head + "user = 5 # want\n", "program.x.user", "must be a string, not an integer"},
	{"probe not a table", head + "probe = \"curl\" # want\n", "program.x.probe", "must be a table, not a string"},
	{"missing value", head + "stop_grace = # want\n", "program.x.stop_grace", "start of value"},
	{"unterminated string", head + "cwd = \"abc # want\n", "program.x.cwd", "string"},
	{"bad table header", head + "[program.y # want\n", "program.y", "to close table name"},
	{"bad duration", head + "stop_grace = \"10 seconds\" # want\n", "program.x.stop_grace", `invalid duration "10 seconds"`},
	{"negative duration", head + "backoff_max = \"-1s\" # want\n", "program.x.backoff_max", `must not be negative, got "-1s"`},
	{"zero timeout", head + "start_timeout = \"0s\" # want\n", "program.x.start_timeout", "must be greater than zero"},
	{"empty positive duration", head + "clean_restart_window = \"\" # want\n", "program.x.clean_restart_window", "invalid duration"},
	{"bad size unit", head + "max_rss = \"2G\" # want\n", "program.x.max_rss", `unknown unit "G"`},
	{"negative size", head + "max_rss = -1 # want\n", "program.x.max_rss", "must not be negative"},
	{"garbage size", head + "max_rss = \"lots\" # want\n", "program.x.max_rss", `invalid size "lots"`},
	{"small log file", head + "[program.x.logs]\nmax_size = 100 # want\n", "program.x.logs.max_size", "must be at least 4KiB"},
	{"zero log files", head + "[program.x.logs]\nmax_files = 0 # want\n", "program.x.logs.max_files", "must be at least 1, got 0"},
	{"bad name", "[program.Web] # want\ncommand = [\"w\"]\n", "program.Web", `invalid program name "Web"`},
	{"long name", "[program." + strings.Repeat("a", 64) + "] # want\ncommand = [\"w\"]\n", "program." + strings.Repeat("a", 64), "at most 63"},
	{"duplicate program", head + "\n[program.x] # want\nshell = \"y\"\n", "program.x", `program "x" is defined twice (first on line 1)`},
	{"duplicate key", head + "command = [\"y\"] # want\n", "program.x.command", "defined twice (first on line 2)"},
	{"table extended by dotted key", head + "[program]\nx.cwd = \"/\" # want\n", "program.x", "already defined on line 1; program.x.cwd cannot add to it here"},
	{"array of tables", "[[program.x]] # want\ncommand = [\"x\"]\n", "program.x", "must be a table like [program.x], not an array"},
	{"program not a table", "program = 1 # want\n", "program", "must be a table of programs"},
	{"command and shell", head + "shell = \"./x\" # want\n", "program.x.shell", "set either command or shell, not both"},
	{"no command", "[program.x] # want\ninstances = 2\n", "program.x.command", "missing: set command"},
	{"empty command", "[program.x]\ncommand = [] # want\n", "program.x.command", "must not be empty"},
	{"empty argv0", "[program.x]\ncommand = [\"\", \"a\"] # want\n", "program.x.command", "element 0"},
	{"command string", "[program.x]\ncommand = \"./x --y\" # want\n", "program.x.command", "must be an array of strings"},
	{"command number", "[program.x]\ncommand = [\"./x\", 1] # want\n", "program.x.command", "element 1 must be a string, not an integer"},
	{"empty shell", "[program.x]\nshell = \" \" # want\n", "program.x.shell", "must not be empty"},
	{"bad restart", head + "restart = \"sometimes\" # want\n", "program.x.restart", `must be one of always, on-failure, never, got "sometimes"`},
	{"bad ready", head + "ready = \"socket\" # want\n", "program.x.ready", "must be one of spawn, notify"},
	{"bad signal", head + "stop_signal = \"FOO\" # want\n", "program.x.stop_signal", `unknown signal "FOO"`},
	{"bad signal number", head + "stop_signal = 99 # want\n", "program.x.stop_signal", `unknown signal "99"`},
	{"jitter high", head + "backoff_jitter = 1.5 # want\n", "program.x.backoff_jitter", "must be between 0 and 1, got 1.5"},
	{"jitter negative", head + "backoff_jitter = -0.1 # want\n", "program.x.backoff_jitter", "must be between 0 and 1"},
	{"jitter nan", head + "backoff_jitter = nan # want\n", "program.x.backoff_jitter", "must be between 0 and 1"},
	{"zero instances", head + "instances = 0 # want\n", "program.x.instances", "must be between 1 and 10000, got 0"},
	{"too many instances", head + "instances = 10001 # want\n", "program.x.instances", "must be between 1 and 10000"},
	{"zero max_crashes", head + "max_crashes = 0 # want\n", "program.x.max_crashes", "must be at least 1, got 0"},
	{"negative hard_max_crashes", head + "hard_max_crashes = -1 # want\n", "program.x.hard_max_crashes", "must be at least 0"},
	{"negative clean budget", head + "clean_restart_budget = -1 # want\n", "program.x.clean_restart_budget", "must be at least 0"},
	{"negative rss budget", head + "rss_loop_budget = -2 # want\n", "program.x.rss_loop_budget", "must be at least 0"},
	{"negative wedge budget", head + "wedge_loop_budget = -1 # want\n", "program.x.wedge_loop_budget", "must be at least 0"},
	{"zero wedge checks", head + "wedge_checks = 0 # want\n", "program.x.wedge_checks", "must be at least 1"},
	{"backoff order", head + "backoff_initial = \"2m\" # want\nbackoff_max = \"1m\"\n", "program.x.backoff_initial", "must not exceed backoff_max (1m0s)"},
	{"backoff order vs default", head + "backoff_initial = \"2m\" # want\n", "program.x.backoff_initial", "must not exceed backoff_max"},
	{"clean code range", head + "clean_exit_codes = [0, 256] # want\n", "program.x.clean_exit_codes", "exit code 256 is outside 0..255"},
	{"fatal code negative", head + "fatal_exit_codes = [-1] # want\n", "program.x.fatal_exit_codes", "exit code -1 is outside"},
	{"code not int", head + "fatal_exit_codes = [\"1\"] # want\n", "program.x.fatal_exit_codes", "must be integers"},
	{"clean and fatal", head + "fatal_exit_codes = [0, 3] # want\n", "program.x.fatal_exit_codes", "exit code 0 is in both"},
	{"rss code range", head + "rss_exit_code = 300 # want\n", "program.x.rss_exit_code", "must be between 0 and 255"},
	{"probe both", head + "[program.x.probe]\nexec = [\"c\"]\nhttp = \"http://h/\" # want\n", "program.x.probe.http", "set either exec or http"},
	{"probe neither", head + "[program.x.probe] # want\ninterval = \"1s\"\n", "program.x.probe.exec", "missing: set exec"},
	{"probe url", head + "[program.x.probe]\nhttp = \"https://h/\" # want\n", "program.x.probe.http", "must be an http:// URL"},
	{"probe interval", head + "[program.x.probe]\nexec = [\"c\"]\ninterval = \"0s\" # want\n", "program.x.probe.interval", "must be greater than zero"},
	{"probe timeout", head + "[program.x.probe]\nexec = [\"c\"]\ntimeout = \"-1s\" # want\n", "program.x.probe.timeout", "must not be negative"},
	{"probe threshold", head + "[program.x.probe]\nexec = [\"c\"]\nfailure_threshold = 0 # want\n", "program.x.probe.failure_threshold", "must be at least 1"},
	{"env name", head + "env = { \"A=B\" = \"x\" } # want\n", "program.x.env", `invalid variable name "A=B"`},
	{"env value", head + "[program.x.env]\nA = \"1\"\nB = 2 # want\n", "program.x.env.B", "must be a string, not an integer"},
	{"env not table", head + "env = [\"A=1\"] # want\n", "program.x.env", "must be a table of strings"},
	{"daemon http", "[daemon]\nhttp = \"7070\" # want\n", "daemon.http", "must be host:port"},
	{"daemon retention", "[daemon]\naudit_retention = \"0s\" # want\n", "daemon.audit_retention", "must be greater than zero"},
	{"daemon state_dir", "[daemon]\nstate_dir = \"\" # want\n", "daemon.state_dir", "must be a directory path"},
	{"daemon subreaper", "[daemon]\nsubreaper = 1 # want\n", "daemon.subreaper", "must be true or false"},
	{"daemon cgroup", "[daemon]\ncgroup = \"sys/fs/cgroup\" # want\n", "daemon.cgroup", `must be "auto", "off" or an absolute directory`},
	{"daemon audit size", "[daemon]\naudit_max_size = \"10KiB\" # want\n", "daemon.audit_max_size", "must be at least 1MiB"},
	{"tls key alone", "[daemon]\nhttp = \"127.0.0.1:1\"\ntls_key = \"k.pem\" # want\n", "daemon.tls_key", "set tls_cert and tls_key together"},
	{"tls without http", "[daemon]\ntls_cert = \"c.pem\" # want\ntls_key = \"k.pem\"\n", "daemon.tls_cert", "needs http"},
	{"forward_output", "[daemon]\nforward_output = \"yes\" # want\n", "daemon.forward_output", "must be true or false"},
	{"api_add", "[daemon]\napi_add = \"tcp\" # want\n", "daemon.api_add", `must be "any" or "unix"`},
	{"turn_grace", head + "turn_grace = \"-1s\" # want\n", "program.x.turn_grace", "must not be negative"},
	{"protocol", head + "protocol = \"mcp\" # want\n", "program.x.protocol", `must be "" or "acp", got "mcp"`},
	{"protocol with tty", head + "tty = true\nprotocol = \"acp\" # want\n", "program.x.protocol", "cannot be set with tty = true"},
	{"permission", head + "protocol = \"acp\"\npermission = \"maybe\" # want\n", "program.x.permission", "must be one of ask, allow, deny"},
	{"memory_max", head + "memory_max = \"1G\" # want\n", "program.x.memory_max", `unknown unit "G"`},
	{"missing env_file", head + "env_file = \"/nonexistent/.env\" # want\n", "program.x.env_file", "cannot read /nonexistent/.env: no such file or directory"},
	{"group alone as root", head + "group = \"root\" # want\n", "program.x.group", "group without user"},
	{"no such user", head + "user = \"no-such-user-here\" # want\n", "program.x.user", `no user "no-such-user-here"`},
	{"defaults value", "[defaults]\nstop_grace = \"soon\" # want\n" + head, "defaults.stop_grace", `invalid duration "soon"`},
	{"dotted key", "[program]\nx.command = [\"x\"]\nx.stop_signal = \"NOPE\" # want\n", "program.x.stop_signal", "unknown signal"},
	{"inline table", "[program]\nx = { command = [\"x\"], ready = \"later\" } # want\n", "program.x.ready", "must be one of spawn, notify"},
}

func TestBadInputs(t *testing.T) {
	for _, tc := range badInputs {
		t.Run(tc.name, func(t *testing.T) {
			path := testutil.WriteFile(t, "tend.toml", tc.doc)
			cfg, err := Load(path)
			if cfg != nil {
				t.Errorf("got a config along with the error")
			}
			checkErr(t, err, path, wantLine(t, tc.doc), tc.key, tc.msg)
		})
	}
}

// A program that inherits a bad [defaults] value reports it once, at the
// [defaults] line, not once per program.
func TestDefaultsProblemReportedOnce(t *testing.T) {
	path := testutil.WriteFile(t, "tend.toml", "[defaults]\nstop_grace = \"soon\"\n[program.a]\ncommand = [\"a\"]\n[program.b]\ncommand = [\"b\"]\n")
	_, err := Load(path)
	var es Errors
	if !errors.As(err, &es) || len(es) != 1 {
		t.Fatalf("want one error, got %v", err)
	}
	checkErr(t, err, path, 2, "defaults.stop_grace", "invalid duration")
}

func TestMultipleErrorsReportedTogether(t *testing.T) {
	doc := `[daemon]
http = "nope"

[program.a]
command = ["a"]
stop_grace = "-1s"
restart = "sometimes"
bogus = true

[program.b]
instances = 0
[program.b.probe]
http = "ftp://x"
`
	path := testutil.WriteFile(t, "tend.toml", doc)
	_, err := Load(path)
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("error %v is not Errors", err)
	}
	want := []string{
		path + `:2: daemon.http: must be host:port like "127.0.0.1:7070" (or "" for none), got "nope"`,
		path + `:6: program.a.stop_grace: must not be negative, got "-1s"`,
		path + `:7: program.a.restart: must be one of always, on-failure, never, got "sometimes"`,
		path + `:8: program.a.bogus: unknown key`,
		path + `:10: program.b.command: missing: set command (an argv array like ["./worker"]) or shell (a string run by /bin/sh -c)`,
		path + `:11: program.b.instances: must be between 1 and 10000, got 0`,
		path + `:13: program.b.probe.http: must be an http:// URL like "http://127.0.0.1:8080/healthz", got "ftp://x"`,
	}
	if got := err.Error(); got != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
	for _, e := range es {
		if !errors.Is(e, program.ErrBadConfig) {
			t.Errorf("%v does not match ErrBadConfig", e)
		}
	}
}

func TestErrorFormat(t *testing.T) {
	for _, tc := range []struct {
		e    Error
		want string
	}{
		{Error{File: "t.toml", Line: 3, Key: "program.a.cwd", Msg: "bad"}, "t.toml:3: program.a.cwd: bad"},
		{Error{File: "t.toml", Key: "program.a.cwd", Msg: "bad"}, "t.toml: program.a.cwd: bad"},
		{Error{File: "t.toml", Line: 2, Msg: "bad"}, "t.toml:2: bad"},
		{Error{Key: "stop_grace", Msg: "bad"}, "stop_grace: bad"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("%q, want %q", got, tc.want)
		}
	}
}

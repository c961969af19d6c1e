package cli

import (
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/notify"
	"github.com/tend-sh/tend/internal/program"
)

// ttyDaemon is a fake daemon whose planner:0 and shell:0, shell:1 are tty
// instances (the echo program of apitest.Terminals) and web:0, web:1 not.
func ttyDaemon(t *testing.T) *fakeDaemon {
	t.Helper()
	d := startDaemon(t)
	d.fleet()
	for k := range 2 {
		d.b.Put(program.Status{ID: program.InstanceID("shell", k), Program: "shell", Instance: k})
		d.tt.AddTTY(program.InstanceID("shell", k), 20, 4)
	}
	d.tt.AddTTY("planner:0", 20, 4)
	return d
}

func TestScreenVerb(t *testing.T) {
	d := ttyDaemon(t)
	d.tt.Output("planner:0", []byte("\x1b[1mbold\x1b[0m  \r\nsecond"))
	d.tend(t, "screen", "planner:0").want(t, 0, "> bold\nsecond\n\n\n")
	d.tend(t, "screen", "planner").want(t, 0, "> bold\nsecond\n\n\n")

	r := d.tend(t, "screen", "planner:0", "--ansi")
	if r.code != 0 || strings.Count(r.stdout, "\n") != 4 || !strings.Contains(r.stdout, "\x1b[1mbold") {
		t.Errorf("screen --ansi: exit %d %q", r.code, r.stdout)
	}
	r = d.tend(t, "screen", "planner:0", "--json")
	var scr program.Screen
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &scr) != nil || scr.Lines[1] != "second" || scr.Cols != 20 || !scr.Running {
		t.Errorf("screen --json: exit %d %q", r.code, r.stdout)
	}

	// An ended run: its last screen.
	d.tt.End("planner:0", program.StateExited, program.LifecycleDone, "exited 0", "")
	d.tend(t, "screen", "planner:0").want(t, 0, "> bold\nsecond\n\n\n")

	d.tend(t, "screen", "web:0").wantErr(t, 1, "web:0 is not a terminal program (tty = false)")
	d.tend(t, "screen", "nosuch:0").wantErr(t, 3, "nosuch:0")
	d.tend(t, "screen", "shell").wantErr(t, 2, "shell names 2 instances")
	d.tend(t, "screen").wantErr(t, 2, "accepts 1 arg")
	run(t, "--socket", filepath.Join(shortDir(t), "none.sock"), "screen", "planner:0").wantErr(t, 4, "no tend daemon")
}

func TestScreenVerbHistory(t *testing.T) {
	d := ttyDaemon(t)
	d.tt.Output("planner:0", []byte("one\r\n\x1b[32mtwo\x1b[0m\r\nthree\r\nfour\r\nfive\r\nsix"))
	// 4 rows: "> one", "two" scrolled off, as tmux capture-pane -p -S -N prints them.
	d.tend(t, "screen", "planner:0", "--history", "1").want(t, 0, "two\nthree\nfour\nfive\nsix\n")
	d.tend(t, "screen", "planner:0", "--history", "50").want(t, 0, "> one\ntwo\nthree\nfour\nfive\nsix\n")
	r := d.tend(t, "screen", "planner:0", "--history", "5", "--ansi")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "> one\x1b[0m\n") && !strings.HasPrefix(r.stdout, "> one\n") || !strings.Contains(r.stdout, "\x1b[32mtwo") {
		t.Errorf("screen --history 5 --ansi: exit %d %q", r.code, r.stdout)
	}
	r = d.tend(t, "screen", "planner:0", "--history", "5", "--json")
	var scr program.Screen
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &scr) != nil || strings.Join(scr.History, "|") != "> one|two" {
		t.Errorf("screen --history 5 --json: exit %d %q", r.code, r.stdout)
	}
	d.tend(t, "screen", "planner:0", "--history", "-1").wantErr(t, 2, "--history")
}

func TestSendVerb(t *testing.T) {
	d := ttyDaemon(t)
	d.tend(t, "send", "planner:0", "fix", "the", "bug", "--enter").want(t, 0, "")
	d.tend(t, "send", "planner:0", "--keys", "C-c,Up", "--keys", "Enter").want(t, 0, "")
	if got := string(d.tt.Typed("planner:0")); got != "fix the bug\r\x03\x1b[A\r" {
		t.Errorf("typed %q", got)
	}
	d.tend(t, "send", "shell", "--enter").want(t, 0, "")
	for _, id := range []string{"shell:0", "shell:1"} {
		if got := string(d.tt.Typed(id)); got != "\r" {
			t.Errorf("%s typed %q", id, got)
		}
	}

	d.tend(t, "send", "planner:0").wantErr(t, 2, "nothing to type")
	d.tend(t, "send", "planner:0", "--keys", "a,,b").wantErr(t, 2, "an empty key")
	d.tend(t, "send", "planner:0", "--keys", strings.Repeat("k", program.MaxInput/2+1)+","+strings.Repeat("k", program.MaxInput/2)).wantErr(t, 2, "64 KiB")
	d.tend(t, "send", "planner:0", strings.Repeat("x", program.MaxInput+1)).wantErr(t, 2, "64 KiB")
	d.tend(t, "send", "web:0", "x").wantErr(t, 1, "web:0 is not a terminal program (tty = false)")
	d.tend(t, "send", "nosuch", "x").wantErr(t, 3, "nosuch")
	d.tt.End("shell:1", program.StateBackoff, program.LifecycleError, "backing off 1s after crash 1 of 5: exit 1 (runtime_error)", "")
	d.tend(t, "send", "shell:1", "x").wantErr(t, 1, "backing off 1s")
	if got := string(d.tt.Typed("planner:0")); got != "fix the bug\r\x03\x1b[A\r" {
		t.Errorf("bad sends typed: %q", got)
	}

	// Items that are no key names are typed as written, as tmux's
	// send-keys types them; a comma alone is the comma key.
	d.tend(t, "send", "shell:0", "--keys", "Escape,:set nu,Enter", "--keys", ",", "--keys", "Hyper-x").want(t, 0, "")
	if got := string(d.tt.Typed("shell:0")); got != "\r\x1b:set nu\r,Hyper-x" {
		t.Errorf("keys as text typed %q", got)
	}
}

// listenNotify binds a datagram socket at addr (a path or @name) and
// returns a function that waits for the next datagram.
func listenNotify(t *testing.T, addr string) func() string {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return func() string {
		t.Helper()
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 4096)
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		return string(buf[:n])
	}
}

func TestNotifyVerb(t *testing.T) {
	path := filepath.Join(shortDir(t), "notify.sock")
	next := listenNotify(t, path)
	t.Setenv("NOTIFY_SOCKET", path)
	run(t, "notify", "--ready", "--status", "reading the issue", "--turn", "active", "--watchdog").want(t, 0, "")
	if got, want := next(), "READY=1\nSTATUS=reading the issue\nX_TEND_TURN=active\nWATCHDOG=1\n"; got != want {
		t.Errorf("datagram %q, want %q", got, want)
	}
	run(t, "notify", "--turn", "idle").want(t, 0, "")
	if got := next(); got != "X_TEND_TURN=idle\n" {
		t.Errorf("datagram %q", got)
	}

	// An abstract socket, as tend uses where a path would be too long.
	abstract := "@tend-cli-test-" + filepath.Base(shortDir(t))
	next = listenNotify(t, abstract)
	t.Setenv("NOTIFY_SOCKET", abstract)
	run(t, "notify", "--ready").want(t, 0, "")
	if got := next(); got != "READY=1\n" {
		t.Errorf("datagram to %s: %q", abstract, got)
	}

	run(t, "notify").wantErr(t, 2, "nothing to send")
	run(t, "notify", "--turn", "busy").wantErr(t, 2, `--turn "busy"`)
	run(t, "notify", "--status", "two\nlines").wantErr(t, 2, "one line")
	run(t, "notify", "extra").wantErr(t, 2, "unknown command")
	t.Setenv("NOTIFY_SOCKET", "")
	run(t, "notify", "--ready").wantErr(t, 1, "NOTIFY_SOCKET is not set")
	t.Setenv("NOTIFY_SOCKET", "vsock:2:1234")
	run(t, "notify", "--ready").wantErr(t, 1, "NOTIFY_SOCKET")
	t.Setenv("NOTIFY_SOCKET", filepath.Join(shortDir(t), "gone.sock"))
	run(t, "notify", "--ready").wantErr(t, 1, "NOTIFY_SOCKET=")
}

// TestNotifyReachesTheDaemonsSocket: what tend notify sends is what the
// daemon's own notify socket reads.
func TestNotifyReachesTheDaemonsSocket(t *testing.T) {
	path := filepath.Join(shortDir(t), "n.sock")
	got := make(chan notify.Message, 4)
	s, err := notify.Listen(path, func(m notify.Message) { got <- m })
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t.Setenv("NOTIFY_SOCKET", path)
	run(t, "notify", "--ready", "--status", "working", "--turn", "active", "--watchdog").want(t, 0, "")
	select {
	case m := <-got:
		if !m.Ready || m.Status == nil || *m.Status != "working" || m.Turn == nil || !*m.Turn || !m.Watchdog {
			t.Errorf("the daemon read %+v", m)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no message reached the socket")
	}
}

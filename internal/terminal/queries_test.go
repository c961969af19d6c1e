package terminal

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/terminal/vt"
)

// The answers to a program's queries, against tmux 3.3a: a probe (this
// test binary as a child) sends each query on its terminal and reads what
// comes back within a timeout, under tmux and under our Terminal.

// queries are what programs ask their terminal.
var queries = []struct{ name, q string }{
	{"DA1", "\x1b[c"}, {"DA1 0", "\x1b[0c"}, {"DA2", "\x1b[>c"}, {"DA2 0", "\x1b[>0c"}, {"DA3", "\x1b[=c"},
	{"DSR 5", "\x1b[5n"}, {"DSR 6", "\x1b[3;7H\x1b[6n"}, {"DECXCPR", "\x1b[?6n"},
	{"CSI 14 t", "\x1b[14t"}, {"CSI 16 t", "\x1b[16t"}, {"CSI 18 t", "\x1b[18t"}, {"CSI 19 t", "\x1b[19t"},
	{"XTVERSION", "\x1b[>q"}, {"OSC 10", "\x1b]10;?\x07"}, {"OSC 11", "\x1b]11;?\x1b\\"}, {"OSC 12", "\x1b]12;?\x07"},
	{"OSC 4", "\x1b]4;1;?\x07"}, {"DECRQM 2004", "\x1b[?2004$p"}, {"DECRQM 2026", "\x1b[?2026$p"},
	{"kitty keyboard", "\x1b[?u"}, {"XTGETTCAP", "\x1bP+q544e\x1b\\"},
}

// probeQueries is the probe: raw mode, each query, its answer (or none
// within the timeout), one line each into the file out.
func probeQueries(out string) {
	var b strings.Builder
	defer func() { _ = os.WriteFile(out, []byte(b.String()), 0o600) }()
	tio, err := unix.IoctlGetTermios(0, unix.TCGETS)
	if err != nil {
		fmt.Fprintf(&b, "error %v\n", err)
		return
	}
	raw := *tio
	raw.Lflag &^= unix.ECHO | unix.ICANON | unix.ISIG | unix.IEXTEN
	raw.Iflag &^= unix.ICRNL | unix.IXON
	raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
	_ = unix.IoctlSetTermios(0, unix.TCSETS, &raw)
	defer func() { _ = unix.IoctlSetTermios(0, unix.TCSETS, tio) }()
	for _, q := range queries {
		_, _ = os.Stdout.WriteString(q.q)
		var got []byte
		buf := make([]byte, 256)
		for {
			fds := []unix.PollFd{{Fd: 0, Events: unix.POLLIN}}
			n, err := unix.Poll(fds, 500)
			if err == unix.EINTR {
				continue
			}
			if n <= 0 {
				break
			}
			m, _ := unix.Read(0, buf)
			if m <= 0 {
				break
			}
			got = append(got, buf[:m]...)
		}
		fmt.Fprintf(&b, "%s: %q\n", q.name, got)
	}
}

func TestQueryAnswersMatchTmux(t *testing.T) {
	m := newTmux(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	size := vt.Size{Cols: 100, Rows: 30}
	dir := t.TempDir()

	// Under tmux.
	tmuxOut := filepath.Join(dir, "tmux")
	m.start("q", size, fmt.Sprintf("TEND_TERMINAL_CHILD=probe TEND_PROBE_OUT=%s %s -test.run=^$; exec sleep 3600", tmuxOut, exe))
	// Under our terminal.
	ourOut := filepath.Join(dir, "ours")
	t.Setenv("TEND_PROBE_OUT", ourOut)
	startChild(t, "probe", Options{Size: size})

	read := func(file string) string {
		deadline := time.Now().Add(60 * time.Second)
		for {
			if b, err := os.ReadFile(file); err == nil && strings.Count(string(b), "\n") >= len(queries) {
				return string(b)
			}
			if time.Now().After(deadline) {
				t.Fatalf("the probe wrote no %s", file)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	want, got := read(tmuxOut), read(ourOut)
	if d := diffScreens(want, got); d != "" {
		t.Fatalf("answers differ (tmux, ours):\n%s", d)
	}
	for _, must := range []string{`CSI 18 t: "\x1b[8;100;30t"`, `OSC 11: ""`} {
		if !strings.Contains(got, must) {
			t.Errorf("no %s in:\n%s", must, got)
		}
	}
}

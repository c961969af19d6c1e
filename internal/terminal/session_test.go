package terminal

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/logfile"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/terminal/vt"
)

// A Session alone, without an instance or a keeper: its runs' terminals
// are fed by hand (no log), its clients read on goroutines of their own.
// The supervisor's tests (tty_test.go, ttysize_test.go) drive it through
// real runs, a keeper and the log.

// sessionRun opens a run's terminal in s, as the instance does before a
// fork, and puts it in place as run pid's.
func sessionRun(t *testing.T, s *Session, pid int) *Terminal {
	t.Helper()
	term, slave, err := s.Open(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Started(term, slave, pid, nil) {
		t.Fatal("Started refused a run's terminal")
	}
	t.Cleanup(func() { term.Close() })
	return term
}

// reader reads an attached client until it ends.
type reader struct {
	mu   sync.Mutex
	buf  []byte
	err  error
	done chan struct{}
}

func readClient(a program.Attach) *reader {
	r := &reader{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for {
			b, err := a.Next(context.Background())
			r.mu.Lock()
			r.buf, r.err = append(r.buf, b...), err
			r.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return r
}

func (r *reader) text() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return string(r.buf)
}

// The size policy (docs/terminal.md#the-window-size): the latest client
// that sizes the terminal wins; when it detaches, the latest of the
// others; with none, tty_size again. 0x0 and a read-only client change
// nothing; a size out of range is refused.
func TestSessionSizeFollowsTheLatestClient(t *testing.T) {
	var mu sync.Mutex
	counts := []int{}
	s := NewSession(SessionConfig{ID: "w:0", Size: vt.Size{Cols: 60, Rows: 8}, Clients: func(n int) {
		mu.Lock()
		counts = append(counts, n)
		mu.Unlock()
	}})
	if _, err := s.Attach(false); !errors.Is(err, program.ErrNotRunning) {
		t.Fatalf("attach before any run: %v", err)
	}
	term := sessionRun(t, s, 1)
	want := func(what string, cols, rows int) {
		t.Helper()
		if got := term.Size(); got != (vt.Size{Cols: cols, Rows: rows}) {
			t.Errorf("%s: terminal %v, want %dx%d", what, got, cols, rows)
		}
		if st := s.Status(); st.Cols != cols || st.Rows != rows {
			t.Errorf("%s: status %+v", what, st)
		}
	}
	want("tty_size", 60, 8)
	a, err := s.Attach(false)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Resize(70, 20); err != nil {
		t.Fatal(err)
	}
	want("a's size", 70, 20)
	if err := a.Resize(5, 5); !errors.Is(err, program.ErrInvalid) {
		t.Errorf("5x5: %v", err)
	}
	b, err := s.Attach(false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Resize(0, 0); err != nil {
		t.Fatal(err)
	}
	ro, err := s.Attach(true)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := ro.Resize(100, 30); err != nil {
		t.Fatal(err)
	}
	want("no size and a watcher's", 70, 20)
	if err := ro.Write([]byte("x")); !errors.Is(err, ErrReadOnly) {
		t.Errorf("read-only write: %v", err)
	}
	if err := b.Resize(80, 12); err != nil {
		t.Fatal(err)
	}
	want("b's size", 80, 12)
	if err := a.Resize(75, 9); err != nil {
		t.Fatal(err)
	}
	want("a's again", 75, 9)
	a.Close()
	want("the latest of the others", 80, 12)
	b.Close()
	want("tty_size again", 60, 8)
	if st := s.Status(); st.Clients != 1 {
		t.Errorf("clients %d", st.Clients)
	}
	mu.Lock()
	if got := counts[len(counts)-1]; got != 1 || len(counts) != 5 {
		t.Errorf("the instance was told the clients %v", counts)
	}
	mu.Unlock()
}

// A client follows the instance from run to run: the notice between runs,
// the next run's screen, and its end when the instance comes to rest. The
// last screen stays readable.
func TestSessionClientsFollowTheRuns(t *testing.T) {
	s := NewSession(SessionConfig{ID: "f:0", Size: vt.Size{Cols: 40, Rows: 5}})
	first := sessionRun(t, s, 1)
	first.Feed([]byte("first run"))
	a, err := s.Attach(true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	r := readClient(a)
	waitFor(t, "the first screen", func() bool { return strings.Contains(r.text(), "first run") })
	if err := s.Send(program.Input{Text: strings.Repeat("x", program.MaxInput+1)}); !errors.Is(err, program.ErrTooLarge) {
		t.Errorf("too much text: %v", err)
	}

	drained := false
	if !s.End(time.Now(), func() { drained = true }) || !drained {
		t.Fatalf("End: drained %v", drained)
	}
	if err := s.Send(program.Input{Text: "x"}); !errors.Is(err, program.ErrNotRunning) {
		t.Errorf("send between runs: %v", err)
	}
	s.Notice("[tend] f:0 exited: exit 1 (runtime_error); next run now")
	waitFor(t, "the notice", func() bool { return strings.Contains(r.text(), "[tend] f:0 exited") })
	scr, err := s.Screen(false, 0)
	if err != nil || scr.Running || !strings.Contains(strings.Join(scr.Lines, "\n"), "first run") {
		t.Errorf("the ended run's screen: %+v, %v", scr, err)
	}

	second := sessionRun(t, s, 2)
	second.Feed([]byte("second run"))
	waitFor(t, "the second run", func() bool {
		txt := r.text()
		i := strings.Index(txt, "[tend] f:0 exited")
		return i >= 0 && strings.Contains(txt[i:], "second run")
	})
	s.End(time.Now(), nil)
	s.Rest(program.LifecycleError)
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the client was not let go at rest")
	}
	if !errors.Is(r.err, io.EOF) || a.End() != program.LifecycleError {
		t.Errorf("end: %v, %q", r.err, a.End())
	}
	if _, err := s.Attach(false); !errors.Is(err, program.ErrNotRunning) {
		t.Errorf("attach at rest: %v", err)
	}
	scr, err = s.Screen(false, 0)
	if err != nil || !strings.Contains(strings.Join(scr.Lines, "\n"), "second run") {
		t.Errorf("the last screen: %+v, %v", scr, err)
	}
}

// A run adopted without its master has no terminal: screen, input and
// attach say why, with the instance's id.
func TestSessionLostRun(t *testing.T) {
	s := NewSession(SessionConfig{ID: "l:0"})
	s.Lost(7, "the terminal of this run was lost")
	if s.Running() {
		t.Error("a lost run's terminal is running")
	}
	for what, err := range map[string]error{
		"send":   s.Send(program.Input{Text: "x"}),
		"attach": func() error { _, err := s.Attach(false); return err }(),
		"screen": func() error { _, err := s.Screen(false, 0); return err }(),
	} {
		if !errors.Is(err, program.ErrNotRunning) || !strings.Contains(err.Error(), "l:0: the terminal of this run was lost") {
			t.Errorf("%s: %v", what, err)
		}
	}
	if s.End(time.Now(), func() { t.Error("drained without a terminal") }) {
		t.Error("End of a run without a terminal")
	}
}

// tailOf is a log whose tail since any time is b, written at at.
func tailOf(b string, at time.Time, asked *time.Time) SessionLog {
	return SessionLog{Tail: func(since time.Time, max int) ([]byte, time.Time, *logfile.Cursor) {
		*asked = since
		return []byte(b), at, nil
	}}
}

// A run that ended before this daemon: its last screen is rebuilt from
// its log's tail, from when it started, when it is first asked for.
func TestSessionRebuildsAnEndedRunsScreen(t *testing.T) {
	var asked time.Time
	at := time.Date(2026, 12, 3, 1, 2, 3, 0, time.UTC)
	s := NewSession(SessionConfig{ID: "e:0", Size: vt.Size{Cols: 30, Rows: 4}, Log: tailOf("\x1b[2J\x1b[Hwritten before\r\n", at, &asked)})
	started := time.Date(2026, 12, 3, 1, 0, 0, 500_700_000, time.UTC)
	s.EndedBefore(started)
	if !asked.IsZero() {
		t.Error("the log was read before anyone asked for the screen")
	}
	scr, err := s.Screen(false, 0)
	if err != nil || scr.Running || scr.Lines[0] != "written before" || scr.Cols != 30 || !scr.ChangedAt.Equal(at) {
		t.Fatalf("the rebuilt screen: %+v, %v", scr, err)
	}
	if !asked.Equal(started.Truncate(time.Millisecond)) {
		t.Errorf("the tail was read since %v", asked)
	}
}

// An adopted run's master: the screen replayed from the log's tail, then
// what the program writes; DupCurrent hands a copy on (tend upgrade).
func TestSessionAdoptsARun(t *testing.T) {
	m, slave, err := openPair()
	if err != nil {
		t.Fatal(err)
	}
	defer slave.Close()
	var asked time.Time
	s := NewSession(SessionConfig{ID: "a:0", Size: vt.Size{Cols: 30, Rows: 4}, Log: tailOf("drawn before\r\n", time.Now(), &asked)})
	if err := s.Adopt(m, 9, time.Now()); err != nil {
		t.Fatal(err)
	}
	defer s.End(time.Now(), nil)
	scr, err := s.Screen(false, 0)
	if err != nil || !scr.Running || scr.Lines[0] != "drawn before" {
		t.Fatalf("the adopted screen: %+v, %v", scr, err)
	}
	fd, ok := s.DupCurrent()
	if !ok {
		t.Fatal("no master to hand on")
	}
	unix.Close(fd)
	if err := s.Send(program.Input{Text: "typed", Enter: true}); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 64)
	n, err := slave.Read(got)
	if err != nil || !strings.Contains(string(got[:n]), "typed") {
		t.Errorf("the program read %q, %v", got[:n], err)
	}
}

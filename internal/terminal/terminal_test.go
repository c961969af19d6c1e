package terminal

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/terminal/vt"
)

// The test binary is its own child program (as os/exec's tests do):
// TEND_TERMINAL_CHILD picks what it does.
func TestMain(m *testing.M) {
	if mode := os.Getenv("TEND_TERMINAL_CHILD"); mode != "" {
		child(mode)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func child(mode string) {
	size := func() string {
		ws, err := unix.IoctlGetWinsize(0, unix.TIOCGWINSZ)
		if err != nil {
			return err.Error()
		}
		return fmt.Sprintf("%dx%d", ws.Col, ws.Row)
	}
	switch mode {
	case "echo":
		// Its own session, the terminal its controlling one.
		sid, _ := unix.Getsid(0)
		tty, err := os.Open("/dev/tty")
		fmt.Printf("ready size=%s leader=%v ctty=%v\n", size(), sid == os.Getpid(), err == nil)
		if tty != nil {
			tty.Close()
		}
		winch := make(chan os.Signal, 1)
		signal.Notify(winch, syscall.SIGWINCH)
		go func() {
			for range winch {
				fmt.Printf("winch size=%s\n", size())
			}
		}()
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			fmt.Printf("got %q\n", in.Text())
		}
	case "flood":
		line := strings.Repeat("flood ", 12) + "\n"
		w := bufio.NewWriterSize(os.Stdout, 64<<10)
		for i := range (8 << 20) / len(line) {
			fmt.Fprintf(w, "%07d %s", i, line)
		}
		fmt.Fprintf(w, "\x1b[2J\x1b[HEND OF FLOOD\n")
		w.Flush()
		time.Sleep(200 * time.Millisecond)
	case "exit":
		fmt.Print("bye\n")
	case "probe":
		probeQueries(os.Getenv("TEND_PROBE_OUT"))
	}
}

// startChild runs the test binary as a child in a new Terminal.
// out, when given, gets what the child writes, as the screen does.
func startChild(t *testing.T, mode string, opts Options, out ...func([]byte)) (*Terminal, *exec.Cmd) {
	t.Helper()
	term, slave, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	var o func([]byte)
	if len(out) > 0 {
		o = out[0]
	}
	pump(term, o)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "TEND_TERMINAL_CHILD="+mode)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = SysProcAttr()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		term.Close()
	})
	return term, cmd
}

// waitFor polls until cond holds. The deadline is generous: a flood under
// -race on a loaded machine takes its time.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func screenHas(t *testing.T, term *Terminal, want string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%q on the screen", want), func() bool { return strings.Contains(term.Text(), want) })
}

func TestTerminalChild(t *testing.T) {
	term, _ := startChild(t, "echo", Options{Size: vt.Size{Cols: 90, Rows: 20}})
	screenHas(t, term, "ready size=90x20 leader=true ctty=true")
	if err := term.Send(vt.Input{Text: "hello", Enter: true}); err != nil {
		t.Fatal(err)
	}
	screenHas(t, term, `got "hello"`)

	if err := term.Resize(vt.Size{Cols: 100, Rows: 30}); err != nil {
		t.Fatal(err)
	}
	screenHas(t, term, "winch size=100x30")
	if term.Size() != (vt.Size{Cols: 100, Rows: 30}) {
		t.Fatalf("size %v", term.Size())
	}
	if err := term.Resize(vt.Size{}); err != nil || term.Size() != (vt.Size{Cols: 100, Rows: 30}) {
		t.Fatalf("a 0x0 resize: %v, size %v", err, term.Size())
	}
	if err := term.Resize(vt.Size{Cols: 5, Rows: 30}); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Fatalf("an out-of-range resize: %v", err)
	}
}

func TestTerminalEnds(t *testing.T) {
	term, cmd := startChild(t, "exit", Options{})
	select {
	case <-term.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("Done not closed after the child exited")
	}
	_ = cmd.Wait()
	if !strings.Contains(term.Text(), "bye") {
		t.Fatalf("the last output was lost: %q", term.Text())
	}
	if err := term.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(term.Text(), "bye") {
		t.Fatal("the screen is gone after Close")
	}
	if err := term.Write([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Write after Close: %v", err)
	}
	if err := term.Resize(vt.Size{Cols: 50, Rows: 10}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Resize after Close: %v", err)
	}
}

// drain reads a client into s until it shows want, and returns s.
func drain(t *testing.T, c *Client, s *vt.Screen, want string) *vt.Screen {
	t.Helper()
	if err := drainErr(c, s, want); err != nil {
		t.Fatal(err)
	}
	return s
}

// drainErr is drain for a goroutine other than the test's, which must not
// call t.Fatal.
func drainErr(c *Client, s *vt.Screen, want string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for !strings.Contains(s.Text(), want) {
		b, err := c.Next(ctx)
		if err != nil {
			return fmt.Errorf("waiting for %q from the client: %v; it shows\n%s", want, err, s.Text())
		}
		s.Feed(b)
	}
	return nil
}

func TestClientsSeeTheScreenAndFollow(t *testing.T) {
	size := vt.Size{Cols: 80, Rows: 10}
	term, _ := startChild(t, "echo", Options{Size: size})
	screenHas(t, term, "ready")
	c := NewClient(0)
	term.Attach(c)
	if term.Clients() != 1 {
		t.Fatalf("%d clients", term.Clients())
	}
	s := drain(t, c, vt.NewScreen(size), "ready") // drawn at once, before any new output
	if err := term.Send(vt.Input{Text: "one", Enter: true}); err != nil {
		t.Fatal(err)
	}
	drain(t, c, s, `got "one"`)
	if s.Text() != term.Text() {
		t.Fatalf("the client shows\n%s\nthe terminal\n%s", s.Text(), term.Text())
	}

	// The run ends; the client sees a notice, then the next run's screen.
	term.Notice("[tend] echo:0 exited: exit 1 (runtime_error), crash 1 of 5; next run in 2s")
	drain(t, c, s, "[tend] echo:0 exited")
	next, _ := startChild(t, "echo", Options{Size: size})
	screenHas(t, next, "ready")
	term.MoveClients(next)
	if term.Clients() != 0 || next.Clients() != 1 {
		t.Fatalf("clients %d and %d after the move", term.Clients(), next.Clients())
	}
	b, err := c.Next(context.Background()) // the next run's screen, drawn over the old one
	if err != nil {
		t.Fatal(err)
	}
	s.Feed(b)
	if strings.Contains(s.Text(), "[tend]") || strings.Contains(s.Text(), "one") {
		t.Fatalf("the next run's screen is not a fresh one:\n%s", s.Text())
	}

	c.Close()
	if next.Clients() != 0 {
		t.Fatal("a closed client is still attached")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		if _, err := c.Next(ctx); err != nil {
			if err != io.EOF {
				t.Fatalf("Next after Close: %v", err)
			}
			break
		}
	}
}

func TestSlowClientGetsARedraw(t *testing.T) {
	size := vt.Size{Cols: 80, Rows: 24}
	var out atomic.Int64
	term, _ := startChild(t, "flood", Options{Size: size}, func(p []byte) { out.Add(int64(len(p))) })
	slow := NewClient(16 << 10) // never read until the flood is over
	term.Attach(slow)
	fast := NewClient(0)
	term.Attach(fast)
	drained := make(chan error, 1)
	go func() { drained <- drainErr(fast, vt.NewScreen(size), "END OF FLOOD") }() // a client that keeps up sees every byte
	screenHas(t, term, "END OF FLOOD")
	if err := <-drained; err != nil {
		t.Fatal(err)
	}
	if out.Load() < 8<<20 {
		t.Fatalf("Output got %d bytes, the child wrote over 8 MiB", out.Load())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := slow.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("\x1b[?2026h")) || len(b) > 64<<10 {
		t.Fatalf("the slow client got %d bytes starting %q, not a redraw", len(b), b[:min(len(b), 20)])
	}
	s := vt.NewScreen(size)
	s.Feed(b)
	if s.Text() != term.Text() {
		t.Fatalf("the slow client's redraw shows\n%s\nthe terminal\n%s", s.Text(), term.Text())
	}
}

func TestAdoptRefusesABadSize(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	fd, _ := unix.FcntlInt(r.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	r.Close()
	if _, err := Adopt(fd, Options{Size: vt.Size{Cols: 2000, Rows: 10}}); err == nil {
		t.Fatal("Adopt took a size out of range")
	}
}

// Adopt with a replay shows the screen the program drew before, as of
// ReplayAt, and does not answer the queries in it.
func TestAdoptReplaysTheScreen(t *testing.T) {
	m, slave, err := openPair()
	if err != nil {
		t.Fatal(err)
	}
	defer slave.Close()
	at := time.Date(2026, 12, 3, 1, 2, 3, 0, time.UTC)
	term, err := Adopt(m, Options{Size: vt.Size{Cols: 20, Rows: 3}, Replay: []byte("\x1b[2J\x1b[Hdrawn before\r\n\x1b[6n> "), ReplayAt: at})
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	pump(term, nil)
	if got := term.Text(); got != "drawn before\n>\n\n" {
		t.Errorf("screen %q", got)
	}
	if !term.ChangedAt().Equal(at) {
		t.Errorf("changed at %v, want %v", term.ChangedAt(), at)
	}
	// Nothing was answered: the program's input is empty.
	if n, _ := unix.IoctlGetInt(int(slave.Fd()), unix.TIOCINQ); n != 0 {
		t.Errorf("%d bytes answered to a replayed query", n)
	}
	// What the program writes now goes on from there.
	slave.WriteString("more")
	screenHas(t, term, "> more")
	if !term.ChangedAt().After(at) {
		t.Error("changed_at did not move")
	}
	dup, err := term.Dup()
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(dup)
}

// openPair opens a pty and returns its master (for Adopt) and slave.
func openPair() (int, *os.File, error) {
	term, slave, err := Open(Options{})
	if err != nil {
		return -1, nil, err
	}
	fd, err := term.Dup()
	if err != nil {
		return -1, nil, err
	}
	return fd, slave, nil
}

package terminal

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/terminal/vt"
)

// Options configure a Terminal. All are optional.
type Options struct {
	Size vt.Size // the size until a client resizes it; zero = vt.DefaultSize

	// History is how many lines that scroll off the top of the screen are
	// kept (tty_history); 0 keeps none.
	History int

	// ClientBuffer bounds the bytes an attached client may have waiting;
	// past it the client is sent a fresh screen instead. 0 = 1 MiB.
	ClientBuffer int

	Clock func() time.Time // ChangedAt's clock; nil = time.Now

	// Replay, for Adopt, is what the program wrote before (the tail of its
	// log), fed to the screen before Feed is first called so that the
	// screen is not blank until the program draws again; the screen's
	// answers to it are not sent. ReplayAt is when the last of it was written: the
	// screen's ChangedAt, rather than now.
	Replay   []byte
	ReplayAt time.Time
}

// ErrClosed is the error of input and resizing once the terminal is closed.
var ErrClosed = errors.New("terminal closed")

// Terminal is a run's pseudo-terminal seen from tend's end: the master
// (for input, resizes and the screen's answers to the program's queries),
// the screen that what the program wrote draws, and the clients attached
// to it. It does not read the master: the terminal keeper does, always,
// into the run's log (package keeper), and whoever follows that log hands
// the bytes to Feed (docs/terminal.md#the-keeper).
type Terminal struct {
	fd    int // the master in the daemon's table; -1 once closed (guarded by mu)
	opts  Options
	done  chan struct{}
	ended atomic.Bool  // the program's side hung up (or Close): done is closed
	chgAt atomic.Int64 // screen.ChangedAt in unix nanos, for readers that must not wait
	wmu   sync.Mutex   // one input write at a time
	ends  sync.Once    // closes done

	mu      sync.Mutex // guards what follows, and the screen; taken by Feed
	scr     *vt.Screen
	clients map[*Client]struct{}
}

// Open makes a pseudo-terminal of opts.Size.
// It returns the terminal and the slave end, in blocking mode, for the
// child's stdin, stdout and stderr: start the child with SysProcAttr, then
// close the slave (the terminal sees the program's end hang up only once
// every copy of the slave is closed).
func Open(opts Options) (*Terminal, *os.File, error) {
	m, slave, err := pty.Open()
	if errors.Is(err, unix.ENOSPC) {
		// Every pair the kernel allows is taken (docs/terminal.md#how-many).
		return nil, nil, fmt.Errorf("opening a pseudo-terminal: %w: the machine's limit (kernel.pty.max) is reached; raise it with sysctl", err)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("opening a pseudo-terminal: %w", err)
	}
	// The master's own descriptor: os.File.Fd puts a file back in blocking
	// mode each time it is called, and the reader needs it non-blocking.
	fd, err := unix.FcntlInt(m.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	m.Close()
	if err != nil {
		slave.Close()
		return nil, nil, fmt.Errorf("opening a pseudo-terminal: %w", err)
	}
	_ = slave.Fd() // blocking mode, for the child
	t, err := Adopt(fd, opts)
	if err != nil {
		slave.Close()
		return nil, nil, err
	}
	return t, slave, nil
}

// Adopt makes a Terminal of a master descriptor tend already holds (one a
// keeper process handed back) and sets the size. The Terminal owns fd from
// now on, also on error. The screen starts blank but for opts.Replay.
func Adopt(fd int, opts Options) (*Terminal, error) {
	if opts.Size == (vt.Size{}) {
		opts.Size = vt.DefaultSize
	}
	if opts.ClientBuffer <= 0 {
		opts.ClientBuffer = 1 << 20
	}
	if err := opts.Size.Valid(); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("terminal: %w", err)
	}
	if err := setWinsize(fd, opts.Size); err != nil {
		unix.Close(fd)
		return nil, err
	}
	t := &Terminal{fd: fd, opts: opts, done: make(chan struct{}), clients: map[*Client]struct{}{}}
	t.scr = vt.NewScreen(opts.Size)
	t.scr.SetHistory(opts.History)
	if opts.Clock != nil {
		t.scr.SetClock(opts.Clock)
	}
	if len(opts.Replay) > 0 {
		t.scr.Replay(opts.Replay, opts.ReplayAt)
		t.opts.Replay = nil // not kept: the screen holds what it drew
	}
	t.chgAt.Store(t.scr.ChangedAt().UnixNano())
	return t, nil
}

// SysProcAttr returns the process attributes that give a child the
// terminal: a new session (Setsid) whose controlling terminal (Setctty) is
// its stdin, which must be the slave.
func SysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
}

// Dup returns a copy of the master, close-on-exec, for the caller to hand
// on (to a keeper process) and close; the Terminal keeps its own.
func (t *Terminal) Dup() (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.fd < 0 {
		return -1, ErrClosed
	}
	return unix.FcntlInt(uintptr(t.fd), unix.F_DUPFD_CLOEXEC, 0)
}

// Ended reports whether the program's side of the terminal has hung up
// (every copy of the slave is closed) or the terminal was closed.
func (t *Terminal) Ended() bool { return t.ended.Load() }

// Feed hands the terminal what the program wrote (in order, each byte
// once): the screen draws it, the attached clients get it, and the
// screen's answers to the program's queries are typed back into the
// master (best effort: a program that reads no input gets none).
func (t *Terminal) Feed(p []byte) {
	if len(p) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.scr.Feed(p)
	replies := t.scr.TakeReplies(nil)
	t.chgAt.Store(t.scr.ChangedAt().UnixNano())
	for c := range t.clients {
		c.push(p)
	}
	if len(replies) > 0 && t.fd >= 0 {
		_, _ = unix.Write(t.fd, replies) // non-blocking: never waits for the program
	}
}

// Hangup says the program's side hung up (every copy of the slave is
// closed): Done is closed.
func (t *Terminal) Hangup() { t.end() }

// end marks the program's end as gone.
func (t *Terminal) end() {
	t.ends.Do(func() {
		t.ended.Store(true)
		close(t.done)
	})
}

// Done is closed when every copy of the slave is closed (the program and
// whatever it left behind are gone from the terminal: Hangup) or on Close.
func (t *Terminal) Done() <-chan struct{} { return t.done }

// Close closes the master. The screen stays readable, and attached
// clients stay attached (to be moved to the next run's terminal, or
// closed).
func (t *Terminal) Close() error {
	t.end()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.fd < 0 {
		return nil
	}
	err := unix.Close(t.fd)
	t.fd = -1
	return err
}

// setWinsize sets the terminal's size; the kernel sends SIGWINCH to the
// program's foreground process group when it changes.
func setWinsize(fd int, s vt.Size) error {
	ws := &unix.Winsize{Row: uint16(s.Rows), Col: uint16(s.Cols)}
	if err := unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, ws); err != nil {
		return fmt.Errorf("terminal: setting the size: %w", err)
	}
	return nil
}

// Resize sets the terminal's size (the program gets SIGWINCH) and the
// screen's. A zero size (a client whose terminal reports none) leaves the
// size as it is; one out of range is an error. Whoever resizes last wins.
func (t *Terminal) Resize(s vt.Size) error {
	if s.Cols == 0 && s.Rows == 0 {
		return nil
	}
	if err := s.Valid(); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.fd < 0 {
		return ErrClosed
	}
	if s == t.scr.Size() {
		return nil
	}
	if err := setWinsize(t.fd, s); err != nil {
		return err
	}
	t.scr.Resize(s)
	t.chgAt.Store(t.scr.ChangedAt().UnixNano())
	return nil
}

// inputTimeout is how long input waits for a program that does not read.
const inputTimeout = 5 * time.Second

// ErrInputStalled is Write's error when the program has not read its
// input for a while and the terminal's input buffer is full.
var ErrInputStalled = errors.New("the program is not reading its terminal input")

// Write types p into the terminal as it is. It waits while the program's
// input is full, up to a few seconds in all (ErrInputStalled); what was
// typed by then stays typed.
func (t *Terminal) Write(p []byte) error {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	deadline := time.Now().Add(inputTimeout)
	for len(p) > 0 {
		t.mu.Lock()
		fd := t.fd
		if fd < 0 {
			t.mu.Unlock()
			return ErrClosed
		}
		n, err := unix.Write(fd, p)
		t.mu.Unlock()
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			left := time.Until(deadline)
			if left <= 0 {
				return ErrInputStalled
			}
			// Wait for room without holding mu (Feed needs it), on
			// a copy of fd that Close cannot pull from under the poll.
			if err := waitWritable(t, min(left, 100*time.Millisecond)); err != nil {
				return err
			}
			continue
		case err != nil:
			return fmt.Errorf("terminal input: %w", err)
		}
		p = p[n:]
	}
	return nil
}

// waitWritable waits up to d for room in the terminal's input.
func waitWritable(t *Terminal, d time.Duration) error {
	t.mu.Lock()
	if t.fd < 0 {
		t.mu.Unlock()
		return ErrClosed
	}
	fd, err := unix.FcntlInt(uintptr(t.fd), unix.F_DUPFD_CLOEXEC, 0)
	t.mu.Unlock()
	if err != nil {
		return fmt.Errorf("terminal input: %w", err)
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
	_, err = unix.Poll(fds, int(d/time.Millisecond)+1)
	if err != nil && err != unix.EINTR {
		return fmt.Errorf("terminal input: %w", err)
	}
	return nil
}

// Send types in: text (as a bracketed paste when the program turned that
// on), named keys (arrows in the program's cursor key mode), Enter. It
// does not bound in: the cap is checked where input enters tend.
func (t *Terminal) Send(in vt.Input) error {
	t.mu.Lock()
	paste, app := t.scr.BracketedPaste(), t.scr.AppCursor()
	t.mu.Unlock()
	return t.Write(in.Encode(paste, app))
}

// View calls fn with the screen, under the terminal's lock: fn must be
// quick and must not keep s.
func (t *Terminal) View(fn func(s *vt.Screen)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fn(t.scr)
}

// Text is the screen's Text.
func (t *Terminal) Text() (text string) {
	t.View(func(s *vt.Screen) { text = s.Text() })
	return text
}

// ANSI is the screen's ANSI.
func (t *Terminal) ANSI() (text string) {
	t.View(func(s *vt.Screen) { text = s.ANSI() })
	return text
}

// Snapshot is the screen's Snapshot.
func (t *Terminal) Snapshot() (snap vt.Snapshot) {
	t.View(func(s *vt.Screen) { snap = s.Snapshot() })
	return snap
}

// Size is the terminal's size now.
func (t *Terminal) Size() (size vt.Size) {
	t.View(func(s *vt.Screen) { size = s.Size() })
	return size
}

// ChangedAt is when the screen's content last changed (see
// vt.Screen.ChangedAt). It does not wait for the reader.
func (t *Terminal) ChangedAt() time.Time { return time.Unix(0, t.chgAt.Load()) }

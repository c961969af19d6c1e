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

	"github.com/tend-sh/tend/internal/epoll"
	"github.com/tend-sh/tend/internal/terminal/vt"
)

// Options configure a Terminal. All are optional.
type Options struct {
	Size vt.Size // the size until a client resizes it; zero = vt.DefaultSize

	// History is how many lines that scroll off the top of the screen are
	// kept (tty_history); 0 keeps none.
	History int

	// Output, when set, gets every byte the program writes, in order, on
	// the goroutine that reads the terminal, after the screen has taken
	// it. p is valid only during the call. It must not block; it returns
	// false to stop reading (the program then blocks on a full terminal,
	// as under any reader that is behind) until Resume.
	Output func(p []byte) (more bool)

	// ClientBuffer bounds the bytes an attached client may have waiting;
	// past it the client is sent a fresh screen instead. 0 = 1 MiB.
	ClientBuffer int

	Clock func() time.Time // ChangedAt's clock; nil = time.Now

	// Replay, for Adopt, is what the program wrote before (the tail of its
	// log), fed to the screen before reading starts so that the screen is
	// not blank until the program draws again; the screen's answers to it
	// are not sent. ReplayAt is when the last of it was written: the
	// screen's ChangedAt, rather than now.
	Replay   []byte
	ReplayAt time.Time
}

// ErrClosed is the error of input and resizing once the terminal is closed.
var ErrClosed = errors.New("terminal closed")

// Terminal is a run's pseudo-terminal seen from tend's end: the master,
// read whenever the program writes, the screen those bytes draw, and the
// clients attached to it.
type Terminal struct {
	fd    int // the master in the daemon's table; -1 once closed (guarded by mu)
	opts  Options
	watch *epoll.Watch // reads a copy of the master on an epoll loop; set before its first call
	done  chan struct{}
	ended atomic.Bool  // the program's side hung up (or Close): done is closed
	chgAt atomic.Int64 // screen.ChangedAt in unix nanos, for readers that must not wait
	wmu   sync.Mutex   // one input write at a time
	ends  sync.Once    // closes done

	mu      sync.Mutex // guards what follows, and the screen; taken by the reading handler
	scr     *vt.Screen
	clients map[*Client]struct{}
	paused  bool // Output asked to stop reading
}

// Open makes a pseudo-terminal of opts.Size and starts reading its master.
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
// keeper process handed back), sets the size and starts reading it. The
// Terminal owns fd from now on, also on error. The screen starts blank:
// what the program drew before is not known until it draws again.
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
	loops, err := epoll.Shared()
	if err == nil {
		_, err = loops.Add(fd, t.readable, epoll.KeepOriginal(), epoll.OnWatch(func(w *epoll.Watch) { t.watch = w }))
	}
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("terminal: reading the master: %w", err)
	}
	return t, nil
}

// SysProcAttr returns the process attributes that give a child the
// terminal: a new session (Setsid) whose controlling terminal (Setctty) is
// its stdin, which must be the slave.
func SysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
}

// Fd is the master's descriptor, for a keeper to hold a copy of so the
// terminal outlives the daemon. The Terminal still owns it.
func (t *Terminal) Fd() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.fd
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

// readChunk is what one handler call reads at most: the loop serves other
// descriptors between two chunks of a flood.
const readChunk = 16 << 10

var chunks = sync.Pool{New: func() any { b := make([]byte, readChunk); return &b }}

// readable is the epoll handler: one read's worth into the screen, the
// clients and Output. It returns false when the program's end hung up.
func (t *Terminal) readable(fd int) bool {
	bp := chunks.Get().(*[]byte)
	defer chunks.Put(bp)
	for {
		n, err := unix.Read(fd, *bp)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return true
		case err != nil || n == 0: // EIO: no slave is open any more
			t.end()
			return false
		}
		t.take(fd, (*bp)[:n])
		return true
	}
}

// take feeds what the program wrote to the screen, the clients and Output.
// On the loop's thread, with fd the loop's copy of the master.
func (t *Terminal) take(fd int, p []byte) {
	t.mu.Lock()
	t.scr.Feed(p)
	replies := t.scr.TakeReplies(nil)
	t.chgAt.Store(t.scr.ChangedAt().UnixNano())
	for c := range t.clients {
		c.push(p)
	}
	t.mu.Unlock()
	if len(replies) > 0 {
		_, _ = unix.Write(fd, replies) // best effort: a program that reads no input gets none
	}
	if t.opts.Output != nil && !t.opts.Output(p) {
		t.mu.Lock()
		t.paused = true
		t.mu.Unlock()
		_ = t.watch.PauseLocked()
	}
}

// Pause stops reading until Resume, after a read under way has been
// handed on: what the program writes meanwhile waits in the terminal, and
// the program blocks once that is full. (An upgrade of the daemon pauses
// its terminals while it hands them over.)
func (t *Terminal) Pause() error {
	t.mu.Lock()
	t.paused = true
	t.mu.Unlock()
	if t.watch == nil {
		return nil
	}
	return t.watch.PauseLocked()
}

// Resume reads on after Output returned false, or after Pause. It may come before the
// pause that Output's false asks for has taken effect (the handler is
// still in flight): the watch's Resume runs on the loop after the handler,
// so it undoes that pause too; a Resume with nothing paused does nothing.
func (t *Terminal) Resume() {
	t.mu.Lock()
	t.paused = false
	t.mu.Unlock()
	if t.watch != nil {
		_ = t.watch.Resume()
	}
}

// end marks the program's end as gone.
func (t *Terminal) end() {
	t.ends.Do(func() {
		t.ended.Store(true)
		close(t.done)
	})
}

// Done is closed when every copy of the slave is closed (the program and
// whatever it left behind are gone from the terminal) or on Close.
func (t *Terminal) Done() <-chan struct{} { return t.done }

// Close reads what the program wrote and is still in the terminal, stops
// reading and closes the master. The screen stays readable, and attached
// clients stay attached (to be moved to the next run's terminal, or
// closed).
func (t *Terminal) Close() error {
	if w := t.watch; w != nil {
		_ = w.Do(func(fd int) { // ErrClosed: the handler saw the end
			for range 64 { // at most 1 MiB more: the rest of a flood is not waited for
				if !t.readable(fd) || t.ended.Load() {
					return
				}
				if n, _ := unix.IoctlGetInt(fd, unix.TIOCINQ); n == 0 {
					return
				}
			}
		})
		_ = w.Close()
	}
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
			// Wait for room without holding mu (the reader needs it), on
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

package notify

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"golang.org/x/sys/unix"
)

// wait is the generous deadline for anything that should happen at once.
const wait = 10 * time.Second

// listen starts a socket whose handler feeds a channel, closed with the test.
func listen(t *testing.T, path string, opt Options) (*Socket, <-chan Message) {
	t.Helper()
	ch := make(chan Message, 1024)
	s, err := ListenOptions(path, func(m Message) { ch <- m }, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, ch
}

func sockPath(t *testing.T) string { return filepath.Join(t.TempDir(), "notify.sock") }

// next returns the next message the handler got.
func next(t *testing.T, ch <-chan Message) Message {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(wait):
		t.Fatal("no message reached the handler")
		return Message{}
	}
}

// dial connects a datagram client to s, as sd_notify clients do.
func dial(t *testing.T, s *Socket) *net.UnixConn {
	t.Helper()
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: s.Addr(), Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// send writes one datagram with ancillary data. WriteMsgUnix refuses a
// connected datagram socket, so this goes through sendmsg directly.
func send(t *testing.T, c *net.UnixConn, b []byte, oob []byte) {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	err = raw.Write(func(fd uintptr) bool {
		serr = unix.Sendmsg(int(fd), b, oob, nil, 0)
		return serr != unix.EAGAIN
	})
	if err = errors.Join(err, serr); err != nil {
		t.Fatalf("send %d bytes: %v", len(b), err)
	}
}

func TestGoSystemdSdNotify(t *testing.T) {
	s, ch := listen(t, sockPath(t), Options{})
	t.Setenv("NOTIFY_SOCKET", s.Addr())
	tests := []struct {
		state string
		want  Message
	}{
		{daemon.SdNotifyReady, Message{Ready: true}},
		{daemon.SdNotifyWatchdog, Message{Watchdog: true}},
		{"WATCHDOG=trigger", Message{WatchdogTrigger: true}},
		{"X_TEND_TURN=active", Message{Turn: ptr(true)}},
		{"X_TEND_TURN=idle", Message{Turn: ptr(false)}},
		{"EXTEND_TIMEOUT_USEC=5000000", Message{ExtendTimeoutUSec: ptr(uint64(5000000))}},
		{"WATCHDOG_USEC=30000000", Message{WatchdogUSec: ptr(uint64(30000000))}},
		{daemon.SdNotifyReloading + "\n" + daemon.SdNotifyMonotonicUsec(), Message{Reloading: true}},
		{daemon.SdNotifyStopping + "\nSTATUS=draining", Message{Stopping: true, Status: ptr("draining")}},
	}
	for _, tt := range tests {
		sent, err := daemon.SdNotify(false, tt.state)
		if !sent || err != nil {
			t.Fatalf("SdNotify(%q) = %v, %v", tt.state, sent, err)
		}
		got := next(t, ch)
		if got.SenderPID != os.Getpid() {
			t.Errorf("%q: SenderPID = %d, want %d", tt.state, got.SenderPID, os.Getpid())
		}
		got.SenderPID = 0
		if got.String() != tt.want.String() {
			t.Errorf("SdNotify(%q): handler got %q, want %q", tt.state, got, tt.want)
		}
	}
	if s.Received() != uint64(len(tests)) || s.Dropped() != 0 {
		t.Errorf("Received %d, Dropped %d; want %d, 0", s.Received(), s.Dropped(), len(tests))
	}
}

// A path past sun_path's limit is refused: there is no abstract fallback
// (an abstract name has no permissions), and no file is left behind.
func TestPathTooLong(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, strings.Repeat("x", maxPathLen+1-len(dir)-1))
	if len(path) != maxPathLen+1 {
		t.Fatalf("path is %d bytes", len(path))
	}
	s, err := Listen(path, func(Message) {})
	if err == nil {
		s.Close()
		t.Fatalf("Listen bound a %d-byte path as %q", len(path), s.Addr())
	}
	if !errors.Is(err, ErrPathTooLong) || !strings.Contains(err.Error(), path) {
		t.Errorf("error %v does not wrap ErrPathTooLong and name the path", err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused path left a file: %v", err)
	}
}

func TestPathLimit(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, strings.Repeat("y", maxPathLen-len(dir)-1))
	s, _ := listen(t, path, Options{})
	if s.Addr() != path {
		t.Fatalf("a %d-byte path became %q", len(path), s.Addr())
	}
}

// garbage returns at least 64 KiB of datagrams that must all be dropped,
// each with the reason the test expects.
func garbage() (out [][]byte, reasons []string) {
	r := rand.New(rand.NewPCG(1, 2))
	total := 0
	add := func(reason string, b []byte) {
		out, reasons = append(out, b), append(reasons, reason)
		total += len(b)
	}
	for _, b := range []string{
		"", "\n\n", "READY", "=1", "READY=2", "WATCHDOG_USEC=abc", "READY=1\x00",
		"STATUS=\xff", "READY=2\nno equals sign here\nMAINPID=0",
	} {
		add(DropMalformed, []byte(b))
	}
	add(DropOversized, []byte("READY=1\n"+strings.Repeat("S", MaxDatagram)))       // its first line is good
	add(DropOversized, []byte("STATUS="+strings.Repeat("x", MaxDatagram+1-7)))     // exactly MaxDatagram+1
	add(DropOversized, []byte("READY=1\nSTATUS="+strings.Repeat("y", 60000)+"\n")) // far oversized
	for total < 64<<10 {
		b := make([]byte, 1+r.IntN(600))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		b[r.IntN(len(b))] = 0 // a NUL voids the whole datagram
		add(DropMalformed, b)
		lines := make([]string, 1+r.IntN(20))
		for i := range lines {
			lines[i] = fmt.Sprintf("KEY_%d value %d", i, r.IntN(1000)) // lines without '='
		}
		add(DropMalformed, []byte(strings.Join(lines, "\n")))
		lines = lines[:0]
		for i := range 1 + r.IntN(20) {
			lines = append(lines, fmt.Sprintf("X_KEY_%d=\xff%d", i, r.IntN(1000))) // no line valid UTF-8
		}
		add(DropMalformed, []byte(strings.Join(lines, "\n")))
	}
	return out, reasons
}

func TestGarbageIsDroppedAndCounted(t *testing.T) {
	var got []error // owned by the epoll loop until the sentinel arrives
	s, ch := listen(t, sockPath(t), Options{OnDrop: func(err error) { got = append(got, err) }})
	c := dial(t, s)
	junk, want := garbage()
	for _, b := range junk {
		send(t, c, b, nil)
	}
	send(t, c, []byte("READY=1\nSTATUS=after the garbage"), nil)
	m := next(t, ch)
	if !m.Ready || m.Status == nil || *m.Status != "after the garbage" {
		t.Fatalf("first message to reach the handler: %q", m)
	}
	if got, want := s.Dropped(), uint64(len(junk)); got != want {
		t.Errorf("Dropped() = %d, want %d", got, want)
	}
	if got, want := s.Received(), uint64(len(junk)+1); got != want {
		t.Errorf("Received() = %d, want %d", got, want)
	}
	if len(got) != len(junk) {
		t.Fatalf("OnDrop called %d times, want %d", len(got), len(junk))
	}
	for i, err := range got {
		if DropReason(err) != want[i] {
			t.Errorf("datagram %d (%q): reason %q (%v), want %q", i, clip(junk[i]), DropReason(err), err, want[i])
		}
	}
	select {
	case m := <-ch:
		t.Fatalf("garbage reached the handler: %q", m)
	default:
	}
}

// A datagram with a bad field among good ones reaches the handler with the
// good ones and is not counted as dropped.
func TestBadFieldDoesNotVoidTheDatagram(t *testing.T) {
	var drops []error // owned by the epoll loop until the message arrives
	s, ch := listen(t, sockPath(t), Options{OnDrop: func(err error) { drops = append(drops, err) }})
	c := dial(t, s)
	send(t, c, []byte("READY=2\nMAINPID=abc\nSTATUS=half good\nWATCHDOG_USEC=5000000\ngarbage"), nil)
	m := next(t, ch)
	if m.Ready || m.MainPID != nil || m.Status == nil || *m.Status != "half good" || m.WatchdogUSec == nil || *m.WatchdogUSec != 5000000 {
		t.Fatalf("got %q, want STATUS=half good and WATCHDOG_USEC=5000000 only", m)
	}
	if s.Dropped() != 0 || len(drops) != 0 {
		t.Fatalf("Dropped() = %d, OnDrop %v; want nothing dropped", s.Dropped(), drops)
	}
}

func TestMessagesInOrder(t *testing.T) {
	s, ch := listen(t, sockPath(t), Options{})
	c := dial(t, s)
	const n = 500
	go func() {
		for i := range n {
			c.Write([]byte(fmt.Sprintf("STATUS=%d", i)))
		}
	}()
	for i := range n {
		if m := next(t, ch); *m.Status != fmt.Sprint(i) {
			t.Fatalf("message %d has STATUS=%s", i, *m.Status)
		}
	}
}

// pipeWriteEnds passes n copies of a pipe's write end with data and returns
// the read end; it sees EOF only once the server has closed every copy.
func sendWithPipe(t *testing.T, c *net.UnixConn, data string, n int) *os.File {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	fds := make([]int, n)
	for i := range fds {
		fds[i] = int(w.Fd())
	}
	send(t, c, []byte(data), unix.UnixRights(fds...))
	w.Close() // like sd_notify_barrier: only the server's copies remain
	return r
}

func assertEOF(t *testing.T, r *os.File) {
	t.Helper()
	r.SetReadDeadline(time.Now().Add(wait))
	n, err := r.Read(make([]byte, 1))
	if n != 0 || err != io.EOF {
		t.Fatalf("read end: n=%d err=%v, want EOF (passed descriptors left open)", n, err)
	}
}

// sd_notify_barrier: BARRIER=1 with a pipe's write end, then wait for POLLHUP.
func TestBarrierClosesPassedPipe(t *testing.T) {
	s, ch := listen(t, sockPath(t), Options{})
	c := dial(t, s)
	r := sendWithPipe(t, c, "BARRIER=1", 1)
	assertEOF(t, r)
	if m := next(t, ch); !m.Barrier {
		t.Fatalf("got %q, want BARRIER=1", m)
	}
}

func TestPassedDescriptorsAlwaysClosed(t *testing.T) {
	s, ch := listen(t, sockPath(t), Options{})
	c := dial(t, s)
	tests := []struct {
		name, data string
		fds        int
	}{
		{"dropped datagram", "READY=2", 3},
		{"unknown keys", "FDSTORE=1\nFDNAME=x", 1},
		{"as many as the kernel allows", "FDSTORE=1", scmMaxFD},
		{"empty datagram", "", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertEOF(t, sendWithPipe(t, c, tt.data, tt.fds))
		})
	}
	send(t, c, []byte("READY=1"), nil)
	// The two FDSTORE datagrams are valid and carry no field tend knows.
	for i, want := range []Message{{}, {}, {Ready: true}} {
		if m := next(t, ch); m.String() != want.String() {
			t.Fatalf("message %d: got %q, want %q", i, m, want)
		}
	}
	if s.Dropped() != 2 {
		t.Fatalf("Dropped() = %d, want 2", s.Dropped())
	}
}

func TestMode(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	for _, tt := range []struct {
		mode, want fs.FileMode
	}{{0, 0o600}, {0o666, 0o666}, {0o660, 0o660}} {
		s, _ := listen(t, sockPath(t), Options{Mode: tt.mode})
		fi, err := os.Lstat(s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != tt.want {
			t.Errorf("Mode %o: file is %v, want a socket with %o", tt.mode, fi.Mode(), tt.want)
		}
	}
}

func TestStaleSocketReplaced(t *testing.T) {
	path := sockPath(t)
	// A crashed daemon leaves its socket file behind (closing a UnixConn does
	// not unlink).
	old, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	old.Close()
	s, ch := listen(t, path, Options{})
	send(t, dial(t, s), []byte("READY=1"), nil)
	if m := next(t, ch); !m.Ready {
		t.Fatalf("got %q", m)
	}
}

func TestRefusesToReplaceOtherFiles(t *testing.T) {
	path := sockPath(t)
	if err := os.WriteFile(path, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(path, func(Message) {}); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("Listen over a regular file: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "precious" {
		t.Fatal("the file was clobbered")
	}
}

func TestRelativePathBecomesAbsolute(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	s, _ := listen(t, "rel.sock", Options{})
	if want := filepath.Join(dir, "rel.sock"); s.Addr() != want {
		t.Fatalf("Addr() = %q, want %q (sd_notify needs an absolute path)", s.Addr(), want)
	}
}

func TestNilHandler(t *testing.T) {
	if _, err := Listen(sockPath(t), nil); err == nil {
		t.Fatal("Listen accepted a nil handler")
	}
}

func TestClose(t *testing.T) {
	path := sockPath(t)
	calls := make(chan struct{}, 10)
	s, err := Listen(path, func(Message) { calls <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: s.Addr(), Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("socket file still there: %v", err)
	}
	if _, err := c.Write([]byte("READY=1")); err == nil {
		t.Error("a write to a closed socket succeeded")
	}
	if len(calls) != 0 {
		t.Error("handler called after Close")
	}
}

// Each socket's messages go to its own handler, and a thousand idle sockets
// cost one parked goroutine each.
func TestManySockets(t *testing.T) {
	const n = 1000
	dir := t.TempDir()
	got := make(chan [2]int, n)
	socks := make([]*Socket, n)
	for i := range socks {
		s, err := Listen(filepath.Join(dir, fmt.Sprintf("%d.sock", i)), func(m Message) {
			var k int
			fmt.Sscan(*m.Status, &k)
			got <- [2]int{i, k}
		})
		if err != nil {
			t.Fatal(err)
		}
		socks[i] = s
		defer s.Close()
	}
	for i, s := range socks {
		c := dial(t, s)
		send(t, c, []byte(fmt.Sprintf("READY=1\nSTATUS=%d", i)), nil)
		c.Close()
	}
	for range n {
		select {
		case p := <-got:
			if p[0] != p[1] {
				t.Fatalf("socket %d's handler got socket %d's message", p[0], p[1])
			}
		case <-time.After(wait):
			t.Fatal("a message did not arrive")
		}
	}
}

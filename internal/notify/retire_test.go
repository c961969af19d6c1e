package notify

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// status sends STATUS=text as one datagram.
func status(t *testing.T, c *net.UnixConn, text string) {
	t.Helper()
	send(t, c, []byte("STATUS="+text), nil)
}

// What the ended run sent and nobody read is discarded; what comes after
// the Retire is delivered, in order.
func TestRetireDiscardsWhatWasQueued(t *testing.T) {
	s, ch := listen(t, sockPath(t), Options{})
	c := dial(t, s)
	if err := s.Pause(); err != nil { // the loop reads nothing: both stay queued
		t.Fatal(err)
	}
	status(t, c, "old 1")
	send(t, c, []byte("READY=1"), nil)
	if !s.Retire() {
		t.Fatal("Retire refused")
	}
	status(t, c, "new 1")
	status(t, c, "new 2")
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"new 1", "new 2"} {
		if m := next(t, ch); m.Status == nil || *m.Status != want || m.Ready {
			t.Fatalf("got %+v, want STATUS=%s", m, want)
		}
	}
	if n := s.Discarded(); n != 2 {
		t.Errorf("Discarded = %d, want 2", n)
	}
	if n, d := s.Received(), s.Dropped(); n != 2 || d != 0 {
		t.Errorf("Received %d, Dropped %d; want 2, 0 (the marker is neither)", n, d)
	}
	// Twice in a row, nothing queued: the next message is delivered.
	for range 2 {
		if !s.Retire() {
			t.Fatal("Retire refused")
		}
	}
	status(t, c, "newer")
	if m := next(t, ch); m.Status == nil || *m.Status != "newer" {
		t.Fatalf("got %+v, want STATUS=newer", m)
	}
}

// A message the handler has not got by the time Retire returns never
// reaches it: whatever the loop was doing, it either delivered it before,
// or discards it.
func TestRetireRacesTheLoop(t *testing.T) {
	var after atomic.Bool
	late := make(chan string, 1)
	got := make(chan int, 4096)
	s, err := Listen(sockPath(t), func(m Message) {
		if m.Status == nil {
			return
		}
		time.Sleep(50 * time.Microsecond) // a handler that takes its time widens the race
		i, _ := strconv.Atoi(*m.Status)
		if i < 1000 && after.Load() {
			select {
			case late <- *m.Status:
			default:
			}
		}
		got <- i
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := dial(t, s)
	for round := range 100 {
		for i := range 8 { // fewer than the queue holds (max_dgram_qlen, 10 by default)
			status(t, c, strconv.Itoa(i))
		}
		if !s.Retire() {
			t.Fatal("Retire refused")
		}
		after.Store(true)
		status(t, c, strconv.Itoa(1000+round))
		deadline := time.After(wait)
	wait:
		for {
			select {
			case i := <-got:
				if i == 1000+round {
					break wait
				}
				if i >= 1000 {
					t.Fatalf("round %d: got %d", round, i)
				}
			case <-deadline:
				t.Fatalf("round %d: the message sent after Retire did not arrive", round)
			}
		}
		select {
		case m := <-late:
			t.Fatalf("round %d: STATUS=%s, sent before Retire, reached the handler after it returned", round, m)
		default:
		}
		after.Store(false)
	}
}

// A socket whose queue is full cannot take the marker: Retire says so
// and the caller opens another.
func TestRetireFullQueue(t *testing.T) {
	s, _ := listen(t, sockPath(t), Options{})
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	c := dial(t, s)
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		var serr error
		if err := raw.Control(func(fd uintptr) {
			serr = unix.Sendmsg(int(fd), []byte("STATUS=filling"), nil, nil, unix.MSG_DONTWAIT)
		}); err != nil {
			t.Fatal(err)
		}
		if errors.Is(serr, unix.EAGAIN) {
			break
		}
		if serr != nil || i > 100000 {
			t.Fatalf("filling the queue: %v after %d", serr, i)
		}
	}
	if s.Retire() {
		t.Fatal("Retire took a marker into a full queue")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s.Retire() {
		t.Fatal("Retire of a closed socket succeeded")
	}
}

// A datagram shaped like a marker but without the socket's nonce is a
// malformed message: it neither ends a stale stretch nor reaches the
// handler.
func TestForgedMarker(t *testing.T) {
	s, ch := listen(t, sockPath(t), Options{})
	c := dial(t, s)
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	status(t, c, "old")
	if !s.Retire() {
		t.Fatal("Retire refused")
	}
	// Sent after the marker, so not stale: dropped for its NUL.
	send(t, c, make([]byte, markerLen), nil)
	status(t, c, "new")
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if m := next(t, ch); m.Status == nil || *m.Status != "new" {
		t.Fatalf("got %+v, want STATUS=new", m)
	}
	if d, x := s.Dropped(), s.Discarded(); d != 1 || x != 1 {
		t.Errorf("Dropped %d, Discarded %d; want 1 and 1", d, x)
	}
	// And one sent while a stretch is stale does not end it.
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	status(t, c, "old 2")
	forged := make([]byte, markerLen)
	copy(forged[1:], fmt.Sprint(time.Now().UnixNano()))
	send(t, c, forged, nil)
	status(t, c, "old 3")
	if !s.Retire() {
		t.Fatal("Retire refused")
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	status(t, c, "new 2")
	if m := next(t, ch); m.Status == nil || *m.Status != "new 2" {
		t.Fatalf("got %+v, want STATUS=new 2", m)
	}
	if d, x := s.Dropped(), s.Discarded(); d != 1 || x != 4 {
		t.Errorf("Dropped %d, Discarded %d; want 1 and 4", d, x)
	}
}

// Package testutil holds what tend's tests share: waiting for a condition
// with a generous deadline, and a few small helpers (a fresh state
// directory, whether a process is alive). Tests never assert speed: they wait for what a
// user would notice, on a machine other tests keep busy, and fail only when
// it does not come at all.
package testutil

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Deadline is how long Eventually waits unless told otherwise: long enough
// for a loaded two-core machine running the race detector.
const Deadline = 30 * time.Second

// Poll is how often Eventually checks its condition unless told otherwise.
const Poll = 10 * time.Millisecond

// An Option changes how Eventually waits.
type Option func(*options)

type options struct {
	deadline time.Duration
	poll     time.Duration
	explain  func() string
}

// Within sets how long to wait before failing.
func Within(d time.Duration) Option { return func(o *options) { o.deadline = d } }

// Every sets how often the condition is checked.
func Every(d time.Duration) Option { return func(o *options) { o.poll = d } }

// Explain adds what f returns (an event log, a process list) to the failure,
// so a test that times out says what it saw.
func Explain(f func() string) Option { return func(o *options) { o.explain = f } }

// Eventually checks cond until it holds, and fails t (from the test's own
// goroutine) naming what it waited for when it has not held by the
// deadline. The last check starts after the deadline, so a test process
// that was not scheduled for a while never fails a condition that holds.
func Eventually(t testing.TB, what string, cond func() bool, opts ...Option) {
	t.Helper()
	o := options{deadline: Deadline, poll: Poll}
	for _, opt := range opts {
		opt(&o)
	}
	deadline := time.Now().Add(o.deadline)
	for {
		expired := time.Now().After(deadline)
		if cond() {
			return
		}
		if expired {
			break
		}
		time.Sleep(o.poll)
	}
	if o.explain != nil {
		t.Fatalf("timed out after %s waiting for %s\n%s", o.deadline, what, o.explain())
	}
	t.Fatalf("timed out after %s waiting for %s", o.deadline, what)
}

// Alive reports whether pid exists and is not a zombie.
func Alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z'
}

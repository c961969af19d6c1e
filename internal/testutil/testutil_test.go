package testutil

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// fatalTB records a Fatalf and ends the goroutine as testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls Eventually on a fatalTB in a goroutine of its own and returns
// its failure message ("" when the condition held).
func run(cond func() bool, opts ...Option) string {
	f := &fatalTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Eventually(f, "the thing", cond, opts...)
	}()
	<-done
	return f.msg
}

func TestEventuallyWaitsForTheCondition(t *testing.T) {
	start := time.Now()
	if msg := run(func() bool { return time.Since(start) > 50*time.Millisecond }); msg != "" {
		t.Fatalf("failed: %s", msg)
	}
	if time.Since(start) < 50*time.Millisecond {
		t.Fatal("returned before the condition held")
	}
}

func TestEventuallyFailsNamingWhatAndWhy(t *testing.T) {
	n := 0
	msg := run(func() bool { n++; return false }, Within(30*time.Millisecond), Every(time.Millisecond), Explain(func() string { return "events: none" }))
	if !strings.Contains(msg, "waiting for the thing") || !strings.Contains(msg, "events: none") || !strings.Contains(msg, "30ms") {
		t.Errorf("message %q", msg)
	}
	if n < 2 {
		t.Errorf("condition checked %d times", n)
	}
}

// A check that starts after the deadline decides: a test descheduled past
// its deadline does not fail a condition that holds by then.
func TestEventuallyChecksOnceMoreAfterTheDeadline(t *testing.T) {
	start := time.Now()
	msg := run(func() bool {
		if time.Since(start) < 20*time.Millisecond {
			time.Sleep(40 * time.Millisecond) // past the deadline
			return false
		}
		return true
	}, Within(10*time.Millisecond))
	if msg != "" {
		t.Fatalf("failed although the condition held at the last check: %s", msg)
	}
}

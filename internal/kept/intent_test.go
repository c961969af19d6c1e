package kept

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/restart"
	"github.com/tend-sh/tend/internal/testutil"
)

// A full record of an instance: every field set, the windows as full as
// the default budgets let them get.
func fullIntent(id string, now time.Time) Intent {
	code := 1
	times := func(n int) []int64 {
		out := make([]int64, n)
		for i := range out {
			out[i] = now.Add(-time.Duration(i) * time.Second).UnixMilli()
		}
		return out
	}
	return Intent{
		ID: id, Spec: "0123456789abcdef", State: program.StateBackoff, Runs: 123456,
		History: &restart.Kept{
			CrashCount: 42, Degraded: true, ResourceFails: 3,
			Restarts: program.Restarts{Crash: 100000, CleanExit: 100000, RSSWatchdog: 1000, WedgeRestart: 1000, OperatorRestart: 1000},
			Clean:    times(11), RSS: times(4), Wedge: times(4),
		},
		LastExit:  &program.LastExit{Code: &code, LikelyCause: program.CauseRuntimeError, At: program.Time{Time: now}},
		Backoff:   &program.Backoff{MS: 60000, CrashCount: 42, Reason: program.ReasonCrash},
		NextStart: now.Add(time.Minute),
	}
}

// The intent record of 10,000 instances stays bounded: one line each in
// intent.json, the journal a snapshot of the same after a compaction, and
// both a few MiB.
func TestIntentRecordSizeAt10000Instances(t *testing.T) {
	d := testutil.StateDir(t)
	k := OpenIntents(d, nil)
	now := time.Now()
	for i := range program.MaxInstances {
		k.Put(fullIntent(fmt.Sprintf("worker-%d:%d", i/10, i%10), now))
	}
	n := 3
	k.Put(Intent{ID: "worker-1", Instances: &n, Configured: 1})
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{IntentFile, IntentFile + ".log"} {
		fi, err := os.Stat(d.Join(name))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d bytes for %d instances (%d a line)", name, fi.Size(), program.MaxInstances, fi.Size()/int64(program.MaxInstances))
		if fi.Size() > 16<<20 {
			t.Errorf("%s is %d bytes", name, fi.Size())
		}
	}
	l, err := LoadIntents(d, now)
	if err != nil || l.Problem != "" || len(l.Records) != program.MaxInstances+1 {
		t.Fatalf("load: %d records, %q, %v", len(l.Records), l.Problem, err)
	}
	if r := l.Records["worker-3:4"]; !r.NextStart.Equal(now.Add(time.Minute)) || r.History.CrashCount != 42 || len(r.History.Clean) != 11 {
		t.Errorf("read back: %+v", r)
	}
}

// A damaged intent record (garbage, or cut short) is set aside, never
// written over, and what can be recovered is: every record from the
// journal when there is one, else those on the intact lines; one problem
// line names the file and says which. Freeze keeps the record as it is;
// Discard removes it.
func TestIntentRecordDamagedFrozenDiscarded(t *testing.T) {
	now := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name    string
		damage  func(b []byte) []byte
		journal bool
		want    []string // the records restored
	}{
		{"garbage", func([]byte) []byte { return []byte("\x00\x01 not json") }, true, []string{"a:0", "b:0", "c"}},
		{"truncated", func(b []byte) []byte { return b[:len(b)/2] }, true, []string{"a:0", "b:0", "c"}},
		{"empty", func([]byte) []byte { return nil }, true, []string{"a:0", "b:0", "c"}},
		{"garbage, no journal", func([]byte) []byte { return []byte("\x00\x01 not json") }, false, nil},
		{"last line torn, no journal", func(b []byte) []byte { return b[:len(b)-10] }, false, []string{"a:0", "b:0"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := testutil.StateDir(t)
			k := OpenIntents(d, nil)
			k.Put(fullIntent("a:0", now))
			k.Put(fullIntent("b:0", now))
			n := 3
			k.Put(Intent{ID: "c", Instances: &n, Configured: 1})
			k.Close()
			b, _ := os.ReadFile(d.Join(IntentFile))
			os.WriteFile(d.Join(IntentFile), c.damage(b), 0o600)
			if !c.journal {
				os.Remove(d.Join(IntentFile + ".log"))
			}
			l, err := LoadIntents(d, now)
			if err != nil || !strings.Contains(l.Problem, d.Join(IntentFile)) || strings.Contains(l.Problem, "\n") {
				t.Fatalf("damaged: %+v %v", l, err)
			}
			var got []string
			for id := range l.Records {
				got = append(got, id)
			}
			slices.Sort(got)
			if !slices.Equal(got, c.want) {
				t.Errorf("restored %v, want %v (%s)", got, c.want, l.Problem)
			}
			if r, ok := l.Records["a:0"]; ok && (r.History == nil || r.History.CrashCount != 42 || !r.NextStart.Equal(now.Add(time.Minute))) {
				t.Errorf("a:0 restored as %+v", r)
			}
			if c.journal && !strings.Contains(l.Problem, "restored from intent.json.log") {
				t.Errorf("the line does not say the journal was used: %s", l.Problem)
			}
			if _, err := d.Lstat(IntentFile + ".corrupt-20261203T090000Z"); err != nil {
				t.Errorf("not set aside: %v", err)
			}
		})
	}
	d := testutil.StateDir(t)
	k := OpenIntents(d, nil)
	k.Put(fullIntent("a:0", now))
	k.Freeze()
	k.Put(Intent{ID: "a:0", State: program.StateStopped})
	k.Delete("a:0")
	k.Sync()
	if l, _ := LoadIntents(d, now); l.Records["a:0"].State != program.StateBackoff {
		t.Errorf("frozen, the record changed: %+v", l.Records)
	}
	if err := k.Discard(); err != nil {
		t.Fatal(err)
	}
	if l, _ := LoadIntents(d, now); l.Records != nil {
		t.Errorf("discarded, the record is still there: %+v", l.Records)
	}
}

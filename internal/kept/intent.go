package kept

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/restart"
	"github.com/tend-sh/tend/internal/statedir"
)

// IntentFile is the file in the state dir keeping the intent record (with
// its journal, IntentFile + ".log").
const IntentFile = "intent.json"

// Intent is one record of the intent record: an instance's (ID "NAME:K")
// or a program's scale (ID "NAME"). What the next daemon after an unclean
// stop restores: the operator's decisions (a stop, a scale) and the
// policy's (fatal, exited, a backoff and its deadline, the counters and
// budgets), so that a crash of the daemon changes nothing either decided.
type Intent struct {
	ID string `json:"id"`

	// A program's record: the count tend scale set, and the count the
	// program's config said then. A config whose count has changed since
	// wins: the operator's later decision.
	Instances  *int `json:"instances,omitempty"`
	Configured int  `json:"configured,omitempty"`

	// An instance's record.
	Spec    string `json:"spec,omitempty"`    // SpecDigest of the spec it ran under
	State   string `json:"state,omitempty"`   // program.State*
	Stopped bool   `json:"stopped,omitempty"` // by the operator (its run may still have been stopping)
	Runs    int    `json:"runs,omitempty"`    // runs spawned so far
	// History is the restart accounting: crash_count, degraded, restarts
	// and the windowed budgets' end times.
	History  *restart.Kept     `json:"history,omitempty"`
	LastExit *program.LastExit `json:"last_exit,omitempty"`
	// Backoff and NextStart: the instance was in backoff until then (the
	// status's next_start_at, kept to the nanosecond).
	Backoff   *program.Backoff `json:"backoff,omitempty"`
	NextStart time.Time        `json:"next_start,omitzero"`
	// Retiring: tend itself was stopping the run for good (a reload that
	// replaces or removes its program, tend rm, a scale down), so its end
	// is that stop's, never a crash, also when a daemon killed meanwhile
	// leaves it to the next one (docs/daemon.md#damaged-records).
	Retiring bool `json:"retiring,omitempty"`
	// Session is a protocol agent's session (docs/protocol.md#resume):
	// the next run continues it with session/load; Turn the prompt whose
	// turn was under way, ended by the next daemon.
	Session string `json:"session,omitempty"`
	Turn    string `json:"turn,omitempty"`
}

// IsProgram says whether r is a program's record (else an instance's).
func (r Intent) IsProgram() bool { return !strings.Contains(r.ID, ":") }

// valid reports whether r names an instance or a program at all.
func (r Intent) valid() bool {
	if r.IsProgram() {
		return program.ValidName(r.ID) && r.Instances != nil && *r.Instances >= 0 && *r.Instances <= program.MaxInstances
	}
	_, _, ok := program.SplitID(r.ID)
	return ok
}

var intentSchema = statedir.Schema[Intent]{
	Key:      func(r Intent) string { return r.ID },
	KeyField: "id",
	Valid:    Intent.valid,
	Durable:  true, // an operator's decisions survive a power cut too
}

// SpecDigest names a program's spec apart from its instance count (which
// tend scale changes): an intent record made under another spec tells
// the operator's decisions, which stand, from the policy's, which the new
// spec decides afresh.
func SpecDigest(s *program.Spec) string {
	c := *s
	c.Instances = 0
	b, err := json.Marshal(&c)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// Intents is the intent record of one daemon: intent.json in the state
// dir, a statedir.Table (a journal appended to at each change, compacted
// into the file at most once a second). An instance's changes reach it
// through Put, which costs its loop a map store: the journal line is
// written by the table's writer goroutine, and what changes faster than
// the writer writes coalesces into the last. Sync writes what waits at
// once: an operator's decision is on disk before the API answers it, so
// a daemon killed the instant after `tend stop` still knows.
//
// At 10,000 instances the file holds 10,000 lines of at most a few
// hundred bytes each (the windows hold only the ends inside their spans):
// a few MiB, and the journal that plus a second's changes
// (TestIntentRecordSizeAt10000Instances measures it).
//
// The methods are safe for concurrent use, and do nothing on a nil
// *Intents (no state directory: nothing is kept).
type Intents struct {
	t      *statedir.Table[Intent]
	frozen atomic.Bool // a clean stop or an upgrade is under way: the record stands as it is
}

// IntentLoad is what LoadIntents found.
type IntentLoad struct {
	Records map[string]Intent // by ID; nil when there was none
	// Problem is one line when the record was damaged: what was set
	// aside, and what was recovered from where.
	Problem string
}

// LoadIntents reads the intent record an earlier daemon left. A missing
// record is none (the earlier daemon stopped cleanly, or there was
// none). A damaged one is set aside (intent.json.corrupt-<UTC stamp>),
// never written over, and what can be recovered is restored, as a
// database replays its log over a damaged page: intent.json.log begins
// with a snapshot of every record and holds every change since, so with
// it nothing is lost but a torn last line; without it, the records on
// the snapshot's intact lines (each names one instance or one program's
// scale, and stands on its own). Only the records that cannot be read at
// all start from the config, and the one Problem line says which case
// it was (docs/daemon.md#damaged-records). The error is returned only
// when a damaged file cannot be set aside.
func LoadIntents(dir *statedir.Dir, now time.Time) (IntentLoad, error) {
	l, err := statedir.LoadTable(dir, IntentFile, intentSchema, now)
	if err != nil {
		return IntentLoad{}, err
	}
	var out IntentLoad
	if len(l.Records) > 0 {
		out.Records = make(map[string]Intent, len(l.Records))
		for _, r := range l.Records {
			out.Records[r.ID] = r
		}
	}
	if len(l.Problems) > 0 {
		how := fmt.Sprintf("%d records restored; the decisions of any other instance start from the config", len(l.Records))
		if l.Damaged && l.Applied > 0 {
			how = fmt.Sprintf("%d records restored from %s, which holds every decision", len(l.Records), IntentFile+".log")
		}
		out.Problem = strings.Join(l.Problems, "; ") + ": " + how // each problem names its file
	}
	return out, nil
}

// OpenIntents starts keeping the intent record in dir, beginning with
// recs (those nobody claims are written back as they are, for a later
// claim).
func OpenIntents(dir *statedir.Dir, recs []Intent) *Intents {
	return &Intents{t: statedir.OpenTable(dir, IntentFile, intentSchema, recs)}
}

// Put records r; see Intents.
func (k *Intents) Put(r Intent) {
	if k == nil || k.frozen.Load() {
		return
	}
	k.t.Put(r)
}

// Delete forgets the record of id (an instance or a program gone).
func (k *Intents) Delete(id string) {
	if k == nil || k.frozen.Load() {
		return
	}
	k.t.Delete(id)
}

// Get returns the record of id.
func (k *Intents) Get(id string) (Intent, bool) {
	if k == nil {
		return Intent{}, false
	}
	return k.t.Get(id)
}

// Sync writes every record put so far to the journal and flushes it to
// disk, or says why it could not.
func (k *Intents) Sync() error {
	if k == nil {
		return nil
	}
	return k.t.Sync()
}

// Commit records rs as one decision, durably (written and flushed to
// disk) before it returns nil: an operator's decision or a policy's
// verdict, which the daemon acts on or announces only then
// (docs/daemon.md#when-the-disk-fills). The error (wrapping
// program.ErrNotKept) means nothing of rs was recorded. While the record
// is frozen (a clean stop, an upgrade) it records nothing and returns nil.
func (k *Intents) Commit(rs ...Intent) error {
	if k == nil || k.frozen.Load() || len(rs) == 0 {
		return nil
	}
	if err := k.t.Commit(rs...); err != nil {
		return fmt.Errorf("%w: %s: %w", program.ErrNotKept, IntentFile, err)
	}
	return nil
}

// Write writes every record put so far to the journal, without the flush:
// what must survive a kill of the daemon, at the pace of a loop.
func (k *Intents) Write() {
	if k != nil {
		_ = k.t.Write() // what it cannot write stays pending; the health reports it
	}
}

// Freeze keeps the record as it is from now on: Put and Delete do
// nothing. A clean stop freezes it before it stops the instances (their
// stops are not the operator's: a daemon killed in the middle restores
// the fleet as it was), and so does an upgrade before it hands over.
// Thaw undoes it (an upgrade that could not exec).
func (k *Intents) Freeze() {
	if k != nil {
		k.frozen.Store(true)
		_ = k.t.Sync() // what it cannot write is the health's to report
	}
}

// Thaw lets changes in again after Freeze.
func (k *Intents) Thaw() {
	if k != nil {
		k.frozen.Store(false)
	}
}

// Close writes the last state and stops the writer.
func (k *Intents) Close() error {
	if k == nil {
		return nil
	}
	return k.t.Close()
}

// Discard removes the record: the daemon stopped cleanly, and the next
// one starts afresh from the config.
func (k *Intents) Discard() error {
	if k == nil {
		return nil
	}
	return k.t.Discard()
}

// Package runs keeps state_dir/runs.json: every run in place, by instance,
// with what names its process for good (pid and start time). A daemon that
// dies leaves its runs running; the next one reads this file and adopts the
// ones that are still the recorded processes instead of starting duplicates.
//
// The file is a statedir.Table: every change is in its journal
// (runs.json.log) before the call returns, so a daemon killed the instant
// after a spawn has still recorded the run and the next one adopts it
// instead of starting a second copy; runs.json itself is rewritten at most
// once a second. No record is ever lost: a runs.json that does not parse
// is set aside (runs.json.corrupt-<UTC stamp>), never overwritten, with
// what can be read of it still loaded, the journal applied either way, and
// File starts from what was loaded, so records no instance has claimed yet
// are written back. A record whose process is gone or was replaced is
// simply not adopted. A live run with no record at all (runs.json and its
// journal lost) is found by what else names it, its cgroup or the output
// FIFOs it holds (found.go).
//
// Every file is opened through the state directory's descriptor, never
// following a symlink (statedir).
package runs

import (
	"time"

	"github.com/tend-sh/tend/internal/statedir"
)

// FileName is the file in the state directory.
const FileName = "runs.json"

// Record is one run in place.
type Record struct {
	ID         string    `json:"id"`
	PID        int       `json:"pid"`
	StartTicks uint64    `json:"start_ticks"` // /proc/PID/stat field 22
	Run        int       `json:"run"`         // the instance's run number
	StartedAt  time.Time `json:"started_at"`
}

// valid reports whether r can name a run at all.
func (r Record) valid() bool { return r.ID != "" && r.PID > 0 }

// schema keys the records by instance id.
var schema = statedir.Schema[Record]{
	Key:      func(r Record) string { return r.ID },
	KeyField: "id",
	Valid:    Record.valid,
}

// File is the runs.json of one daemon.
type File struct {
	t *statedir.Table[Record]
}

// Loaded is what Load found.
type Loaded = statedir.TableLoad[Record]

// Load reads the records an earlier daemon left: runs.json, then its
// journal on top (statedir.LoadTable).
func Load(dir *statedir.Dir, now time.Time) (Loaded, error) {
	return statedir.LoadTable(dir, FileName, schema, now)
}

// Parse reads a runs.json. A file that is not one JSON array of records
// gives the records of its lines that parse on their own (the file is
// written one record a line) together with the error.
func Parse(b []byte) ([]Record, error) {
	list, err := statedir.UnmarshalLines[Record](b)
	var out []Record
	for _, r := range list {
		if r.valid() {
			out = append(out, r)
		}
	}
	return out, err
}

// Format is runs.json's form: a JSON array, one record a line, so that a
// damaged file still gives every line that is intact.
func Format(list []Record) []byte { return statedir.MarshalLines(list) }

// Open starts recording in dir, beginning with recs (every record loaded:
// those no instance claims are written back as they are). It writes
// runs.json and the journal's snapshot at once.
func Open(dir *statedir.Dir, recs []Record) *File {
	return &File{t: statedir.OpenTable(dir, FileName, schema, recs)}
}

// Set records the run of an instance, replacing its previous one. It is in
// the journal when Set returns.
func (f *File) Set(r Record) { f.t.Set(r) }

// Delete records that an instance has no run in place.
func (f *File) Delete(id string) { f.t.Delete(id) }

// DeleteRun is Delete only while the instance's record is still the run of
// pid: for a run that ended outside any instance (a stray), so a newer run
// of the same id stays recorded.
func (f *File) DeleteRun(id string, pid int) {
	f.t.DeleteIf(id, func(r Record) bool { return r.PID == pid })
}

// Records returns the records in place, sorted by id.
func (f *File) Records() []Record { return f.t.Records() }

// Close writes the last state and stops the writer. It is idempotent.
func (f *File) Close() error { return f.t.Close() }

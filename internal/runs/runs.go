// Package runs keeps state_dir/runs.json: every run in place, by instance,
// with what names its process for good (pid and start time). A daemon that
// dies leaves its runs running; the next one reads this file and adopts the
// ones that are still the recorded processes instead of starting duplicates.
//
// Every change is appended at once to runs.json.log as one JSON line (one
// write(2), no fsync: it only has to survive the daemon, not the machine),
// so a daemon killed the instant after a spawn has still recorded the run
// and the next one adopts it instead of starting a second copy. runs.json
// itself, the whole set, is rewritten at most once a second and renamed into
// place (never torn), and then the journal starts over from a snapshot of
// the whole set: a crash loop across a thousand instances costs a thousand
// small appends a second, not a thousand rewrites.
//
// No record is ever lost (SPEC 10): either file alone holds every record
// (the journal begins with the snapshot), Load applies the journal even when
// runs.json cannot be read, a runs.json that does not parse is renamed aside
// (runs.json.corrupt-<UTC stamp>) rather than overwritten, with what can be
// read of it (one record a line) still loaded, and File starts from what
// was loaded, so records no instance has claimed yet are written back.
// A record whose process is gone or was replaced is simply not adopted.
//
// Every file is opened through the state directory's descriptor, never
// following a symlink (statedir).
package runs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tend-sh/tend/internal/statedir"
)

// Names of the files in the state directory.
const (
	FileName    = "runs.json"
	journalName = FileName + ".log"
	// corruptPrefix starts the name a runs.json that does not parse is
	// renamed to, followed by a UTC stamp.
	corruptPrefix = FileName + ".corrupt-"
)

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

// compactEvery is how often, at most, runs.json is rewritten from the journal.
const compactEvery = time.Second

// entry is one journal line: a record set, or with Gone, an instance's run
// ended.
type entry struct {
	Record
	Gone bool `json:"gone,omitempty"`
}

// File is the runs.json of one daemon.
type File struct {
	dir     *statedir.Dir
	dirty   chan struct{} // a change waits to be compacted; capacity 1
	closing chan struct{} // closed by Close: the writer stops waiting
	done    chan struct{} // closed when the writer has returned
	once    sync.Once     // Close

	mu      sync.Mutex        // guards recs and journal
	recs    map[string]Record // by instance id
	journal *os.File          // runs.json.log, appended to on every change; nil if it cannot be opened
}

// Loaded is what Load found.
type Loaded struct {
	Records []Record // sorted by id
	// Problems are one line each: a runs.json set aside, a journal that
	// could not be read. Records may still hold what could be read.
	Problems []string
}

// Load reads the records an earlier daemon left: runs.json, then its
// journal on top. Missing files are no records; a torn journal line (a
// daemon killed mid-write) is skipped. A runs.json that cannot be read or
// parsed whole is renamed aside, and the records on its lines that do parse
// are kept; the journal is applied either way. The error is returned only
// when a bad runs.json cannot be set aside: writing over it would lose it.
func Load(dir *statedir.Dir, now time.Time) (Loaded, error) {
	var out Loaded
	recs := map[string]Record{}
	b, err := dir.ReadFile(FileName)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		aside, rerr := setAside(dir, now)
		if rerr != nil {
			return out, fmt.Errorf("runs.json: %v, and it cannot be set aside: %w", err, rerr)
		}
		out.Problems = append(out.Problems, fmt.Sprintf("%s cannot be read (%v); set aside as %s, adopting what %s holds", dir.Join(FileName), cause(err), aside, journalName))
	default:
		list, perr := Parse(b)
		for _, r := range list {
			recs[r.ID] = r
		}
		if perr != nil {
			aside, rerr := setAside(dir, now)
			if rerr != nil {
				return out, fmt.Errorf("runs.json: %v, and it cannot be set aside: %w", perr, rerr)
			}
			out.Problems = append(out.Problems, fmt.Sprintf("%s is corrupt (%v); set aside as %s, %d records read from it, then %s applied", dir.Join(FileName), perr, aside, len(list), journalName))
		}
	}
	j, err := dir.ReadFile(journalName)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		out.Problems = append(out.Problems, fmt.Sprintf("%s cannot be read (%v); it is started over", dir.Join(journalName), cause(err)))
	default:
		applyJournal(recs, j)
	}
	if len(recs) > 0 {
		out.Records = sorted(recs)
	}
	return out, nil
}

// Parse reads a runs.json. A file that is not one JSON array of records
// gives the records of its lines that parse on their own (the file is
// written one record a line) together with the error.
func Parse(b []byte) ([]Record, error) {
	var list []Record
	err := json.Unmarshal(b, &list)
	if err == nil {
		list = slices.DeleteFunc(list, func(r Record) bool { return !r.valid() })
		return list, nil
	}
	list = nil
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		line = bytes.TrimSuffix(bytes.TrimSpace(line), []byte(","))
		var r Record
		if len(line) > 0 && line[0] == '{' && json.Unmarshal(line, &r) == nil && r.valid() {
			list = append(list, r)
		}
	}
	return list, err
}

// applyJournal applies journal lines to recs; lines that do not parse (a
// torn last one) are skipped.
func applyJournal(recs map[string]Record, j []byte) {
	for line := range bytes.SplitSeq(j, []byte("\n")) {
		var e entry
		if json.Unmarshal(line, &e) != nil || e.ID == "" {
			continue
		}
		switch {
		case e.Gone:
			delete(recs, e.ID)
		case e.valid():
			recs[e.ID] = e.Record
		}
	}
}

// setAside renames runs.json to runs.json.corrupt-<stamp> and returns the
// new name.
func setAside(dir *statedir.Dir, now time.Time) (string, error) {
	name := corruptPrefix + now.UTC().Format("20060102T150405Z")
	for i := 2; ; i++ { // never over an earlier one
		if _, err := dir.Lstat(name); errors.Is(err, fs.ErrNotExist) {
			break
		}
		name = fmt.Sprintf("%s%s-%d", corruptPrefix, now.UTC().Format("20060102T150405Z"), i)
	}
	return name, dir.Rename(FileName, name)
}

// cause is the system error of a path error, which already names the file.
func cause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func sorted(m map[string]Record) []Record {
	out := make([]Record, 0, len(m))
	for _, r := range m {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Record) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Open starts recording in dir, beginning with recs (every record loaded:
// those no instance claims are written back as they are). It writes
// runs.json and the journal's snapshot at once.
func Open(dir *statedir.Dir, recs []Record) *File {
	f := &File{dir: dir, dirty: make(chan struct{}, 1), closing: make(chan struct{}), done: make(chan struct{}), recs: map[string]Record{}}
	for _, r := range recs {
		f.recs[r.ID] = r
	}
	f.mu.Lock()
	_ = f.compactLocked() // a failed write is retried with the next change
	f.mu.Unlock()
	go f.writer()
	return f
}

// Set records the run of an instance, replacing its previous one. It is in
// the journal when Set returns.
func (f *File) Set(r Record) { f.change(entry{Record: r}) }

// Delete records that an instance has no run in place.
func (f *File) Delete(id string) { f.change(entry{Record: Record{ID: id}, Gone: true}) }

// DeleteRun is Delete only while the instance's record is still the run of
// pid: for a run that ended outside any instance (a stray), so a newer run
// of the same id stays recorded.
func (f *File) DeleteRun(id string, pid int) {
	f.mu.Lock()
	r, ok := f.recs[id]
	if ok && r.PID == pid {
		f.changeLocked(entry{Record: Record{ID: id}, Gone: true})
	}
	f.mu.Unlock()
	if ok && r.PID == pid {
		f.touch()
	}
}

// Records returns the records in place, sorted by id.
func (f *File) Records() []Record {
	f.mu.Lock()
	defer f.mu.Unlock()
	return sorted(f.recs)
}

func (f *File) change(e entry) {
	f.mu.Lock()
	f.changeLocked(e)
	f.mu.Unlock()
	f.touch()
}

func (f *File) changeLocked(e entry) {
	line, _ := json.Marshal(e)
	if e.Gone {
		delete(f.recs, e.ID)
	} else {
		f.recs[e.ID] = e.Record
	}
	if f.journal != nil {
		_, _ = f.journal.Write(append(line, '\n'))
	}
}

// Close writes the last state and stops the writer. It is idempotent.
func (f *File) Close() error {
	var err error
	f.once.Do(func() {
		close(f.closing)
		<-f.done
		f.mu.Lock()
		defer f.mu.Unlock()
		err = f.compactLocked()
		if f.journal != nil {
			f.journal.Close()
			f.journal = nil
		}
	})
	return err
}

func (f *File) touch() {
	select {
	case f.dirty <- struct{}{}:
	default:
	}
}

// writer compacts the journal into runs.json at most once a second while
// changes come in.
func (f *File) writer() {
	defer close(f.done)
	for {
		select {
		case <-f.dirty:
		case <-f.closing:
			return
		}
		select {
		case <-time.After(compactEvery):
		case <-f.closing:
			return
		}
		f.mu.Lock()
		_ = f.compactLocked() // a failed write is retried with the next change
		f.mu.Unlock()
	}
}

// compactLocked writes every record to runs.json, then replaces the journal
// with a snapshot of them. A crash between the two leaves the old journal,
// which leads to the same records.
func (f *File) compactLocked() error {
	list := sorted(f.recs)
	if err := f.dir.WriteFileAtomic(FileName, Format(list), 0o600, false); err != nil {
		return err
	}
	var snap bytes.Buffer
	for _, r := range list {
		line, _ := json.Marshal(entry{Record: r})
		snap.Write(append(line, '\n'))
	}
	tmp := "." + journalName + ".tmp"
	_ = f.dir.Remove(tmp)
	j, err := f.dir.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err == nil {
		if _, err = j.Write(snap.Bytes()); err == nil {
			err = f.dir.Rename(tmp, journalName)
		}
		if err != nil {
			j.Close()
			_ = f.dir.Remove(tmp)
		}
	}
	if err != nil {
		// Keep appending to the old journal: it still leads to the
		// records, with runs.json or without it.
		return err
	}
	if f.journal != nil {
		f.journal.Close()
	}
	f.journal = j
	return nil
}

// Format is runs.json's form: a JSON array, one record a line, so that a
// damaged file still gives every line that is intact.
func Format(list []Record) []byte {
	var b bytes.Buffer
	b.WriteString("[")
	for i, r := range list {
		line, _ := json.Marshal(r)
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n")
		b.Write(line)
	}
	b.WriteString("\n]\n")
	return b.Bytes()
}

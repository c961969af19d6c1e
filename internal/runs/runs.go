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
// place (never torn), and then the journal starts over: a crash loop across a
// thousand instances costs a thousand small appends a second, not a thousand
// rewrites. Load applies the journal on top of runs.json; a record whose
// process is gone or was replaced is simply not adopted.
package runs

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Record is one run in place.
type Record struct {
	ID         string    `json:"id"`
	PID        int       `json:"pid"`
	StartTicks uint64    `json:"start_ticks"` // /proc/PID/stat field 22
	Run        int       `json:"run"`         // the instance's run number
	StartedAt  time.Time `json:"started_at"`
}

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
	path    string
	dirty   chan struct{} // a change waits to be compacted; capacity 1
	closing chan struct{} // closed by Close: the writer stops waiting
	done    chan struct{} // closed when the writer has returned

	mu      sync.Mutex        // guards recs and journal
	recs    map[string]Record // by instance id
	journal *os.File          // runs.json.log, appended to on every change; nil if it cannot be opened
}

// Load reads the records an earlier daemon left: runs.json, then its
// journal on top. Missing files are no records; a torn last journal line
// (a daemon killed mid-write) is skipped.
func Load(path string) ([]Record, error) {
	recs := map[string]Record{}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		var list []Record
		if err := json.Unmarshal(b, &list); err != nil {
			return nil, err
		}
		for _, r := range list {
			recs[r.ID] = r
		}
	}
	if j, err := os.ReadFile(path + ".log"); err == nil {
		for _, line := range bytes.Split(j, []byte("\n")) {
			var e entry
			if json.Unmarshal(line, &e) != nil || e.ID == "" {
				continue
			}
			if e.Gone {
				delete(recs, e.ID)
			} else {
				recs[e.ID] = e.Record
			}
		}
	}
	if len(recs) == 0 {
		return nil, nil
	}
	return sorted(recs), nil
}

func sorted(m map[string]Record) []Record {
	out := make([]Record, 0, len(m))
	for _, r := range m {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Record) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Open starts recording to path, beginning with recs (the runs adopted).
// It writes runs.json at once, then starts an empty journal.
func Open(path string, recs []Record) *File {
	f := &File{path: path, dirty: make(chan struct{}, 1), closing: make(chan struct{}), done: make(chan struct{}), recs: map[string]Record{}}
	for _, r := range recs {
		f.recs[r.ID] = r
	}
	f.mu.Lock()
	_ = f.compactLocked()
	f.mu.Unlock()
	go f.writer()
	return f
}

// Set records the run of an instance, replacing its previous one. It is in
// the journal when Set returns.
func (f *File) Set(r Record) { f.change(entry{Record: r}) }

// Delete records that an instance has no run in place.
func (f *File) Delete(id string) { f.change(entry{Record: Record{ID: id}, Gone: true}) }

func (f *File) change(e entry) {
	line, _ := json.Marshal(e)
	f.mu.Lock()
	if e.Gone {
		delete(f.recs, e.ID)
	} else {
		f.recs[e.ID] = e.Record
	}
	if f.journal != nil {
		_, _ = f.journal.Write(append(line, '\n'))
	}
	f.mu.Unlock()
	f.touch()
}

// Close writes the last state and stops the writer.
func (f *File) Close() error {
	close(f.closing)
	<-f.done
	f.mu.Lock()
	defer f.mu.Unlock()
	err := f.compactLocked()
	if f.journal != nil {
		f.journal.Close()
		f.journal = nil
	}
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

// compactLocked writes every record to runs.json and starts the journal
// over. A crash between the two replays entries runs.json already has,
// which changes nothing.
func (f *File) compactLocked() error {
	if err := f.writeLocked(); err != nil {
		return err
	}
	if f.journal != nil {
		f.journal.Close()
	}
	j, err := os.OpenFile(f.path+".log", os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o600)
	f.journal = j
	return err
}

// writeLocked replaces runs.json with the current records, sorted by id.
func (f *File) writeLocked() error {
	b, err := json.MarshalIndent(sorted(f.recs), "", " ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(f.path), ".runs-*.json")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), f.path)
}

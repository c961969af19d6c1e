// Package runs keeps state_dir/runs.json: every run in place, by instance,
// with what names its process for good (pid and start time). A daemon that
// dies leaves its runs running; the next one reads this file and adopts the
// ones that are still the recorded processes instead of starting duplicates.
//
// The file is rewritten whole and renamed into place, so a reader never sees
// a torn one. Writes are coalesced by one goroutine: a crash loop across a
// thousand instances must not rewrite the file a thousand times a second.
// The cost is a window of a few milliseconds after a spawn in which a daemon
// killed outright has not yet recorded the new run; a record whose process
// is gone or was replaced is simply not adopted.
package runs

import (
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

// coalesce is how long a change waits for others before the file is written.
const coalesce = 5 * time.Millisecond

// File is the runs.json of one daemon.
type File struct {
	path  string
	dirty chan struct{} // a change waits to be written; capacity 1
	done  chan struct{} // closed when the writer has returned

	mu     sync.Mutex        // guards recs and closed
	recs   map[string]Record // by instance id
	closed bool
}

// Load reads the records an earlier daemon left. A missing file is none.
func Load(path string) ([]Record, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var recs []Record
	if err := json.Unmarshal(b, &recs); err != nil {
		return nil, err
	}
	return recs, nil
}

// Open starts recording to path, beginning with recs (the runs adopted).
func Open(path string, recs []Record) *File {
	f := &File{path: path, dirty: make(chan struct{}, 1), done: make(chan struct{}), recs: map[string]Record{}}
	for _, r := range recs {
		f.recs[r.ID] = r
	}
	f.touch()
	go f.writer()
	return f
}

// Set records the run of an instance, replacing its previous one.
func (f *File) Set(r Record) {
	f.mu.Lock()
	f.recs[r.ID] = r
	f.mu.Unlock()
	f.touch()
}

// Delete records that an instance has no run in place.
func (f *File) Delete(id string) {
	f.mu.Lock()
	delete(f.recs, id)
	f.mu.Unlock()
	f.touch()
}

// Close writes the last state and stops the writer.
func (f *File) Close() error {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.touch()
	<-f.done
	return f.write()
}

func (f *File) touch() {
	select {
	case f.dirty <- struct{}{}:
	default:
	}
}

func (f *File) writer() {
	defer close(f.done)
	for range f.dirty {
		time.Sleep(coalesce)
		f.mu.Lock()
		closed := f.closed
		f.mu.Unlock()
		if closed {
			return
		}
		_ = f.write() // a failed write is retried with the next change
	}
}

// write replaces the file with the current records, sorted by id.
func (f *File) write() error {
	f.mu.Lock()
	recs := make([]Record, 0, len(f.recs))
	for _, r := range f.recs {
		recs = append(recs, r)
	}
	f.mu.Unlock()
	slices.SortFunc(recs, func(a, b Record) int { return strings.Compare(a.ID, b.ID) })
	b, err := json.MarshalIndent(recs, "", " ")
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

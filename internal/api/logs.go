package api

import (
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"time"
)

// Log tail limits.
const (
	defaultTail = 100
	maxTail     = 100000
	tailChunk   = 64 << 10 // bytes read at a time, backwards from the end
)

// logs answers GET /v1/logs/{id}?tail=N&follow=1: the last N lines of the
// instance's current log file, then with follow its new bytes as they come.
func (s *Server) logs(w http.ResponseWriter, r *http.Request) error {
	id, err := selectorParam(r.PathValue("id"))
	if err != nil {
		return err
	}
	tail, err := intParam(r, "tail", defaultTail)
	if err != nil {
		return err
	}
	tail = min(tail, maxTail)
	follow, err := boolParam(r, "follow")
	if err != nil {
		return err
	}
	path, err := s.b.LogPath(id)
	if err != nil {
		return err
	}
	fl := &follower{path: path}
	defer fl.close()
	// A missing file is an instance that has not written yet: empty output.
	if fl.f, err = os.Open(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if fl.f != nil {
		if fl.pos, err = tailFrom(fl.f, tail); err != nil {
			return err
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if err := fl.send(w); err != nil || !follow {
		return nil // done, or the client went away
	}
	// Send the header now: a follower may wait long for its first byte.
	if http.NewResponseController(w).Flush() != nil {
		return nil
	}
	tick := time.NewTicker(s.poll)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return nil
		case <-s.done:
			return nil
		case <-tick.C:
		}
		if err := fl.step(w); err != nil {
			return nil // the client went away
		}
	}
}

// tailFrom returns the offset where the last n lines of f begin.
func tailFrom(f *os.File, n int) (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return tailOffset(f, fi.Size(), n, tailChunk)
}

// tailOffset returns the offset where the last n lines of the first size
// bytes of r begin, reading backwards from the end chunk bytes at a time so
// a large file is not read whole. A last line without a newline counts.
func tailOffset(r io.ReaderAt, size int64, n, chunk int) (int64, error) {
	if n == 0 || size == 0 {
		return size, nil
	}
	buf := make([]byte, chunk)
	// The newline ending the last line does not start a line.
	end := size
	if _, err := r.ReadAt(buf[:1], end-1); err != nil {
		return 0, err
	}
	if buf[0] == '\n' {
		end--
	}
	found := 0
	for pos := end; pos > 0; {
		size := min(int64(chunk), pos)
		pos -= size
		part := buf[:size]
		if _, err := r.ReadAt(part, pos); err != nil && err != io.EOF {
			return 0, err
		}
		for i := len(part) - 1; i >= 0; i-- {
			if part[i] != '\n' {
				continue
			}
			if found++; found == n {
				return pos + int64(i) + 1, nil
			}
		}
	}
	return 0, nil
}

// follower tracks the log file a response reads. Only the handler's
// goroutine touches it.
type follower struct {
	path string
	f    *os.File // nil until the file exists
	pos  int64    // bytes of f already sent
}

func (fl *follower) close() {
	if fl.f != nil {
		fl.f.Close()
	}
}

// send writes f's bytes from pos to its current end. Its error is a write
// error: the client is gone.
func (fl *follower) send(w http.ResponseWriter) error {
	if fl.f == nil {
		return nil
	}
	fi, err := fl.f.Stat()
	if err != nil || fi.Size() <= fl.pos {
		return nil
	}
	n, err := io.Copy(w, io.NewSectionReader(fl.f, fl.pos, fi.Size()-fl.pos))
	fl.pos += n
	if err != nil {
		return err
	}
	return http.NewResponseController(w).Flush()
}

// step sends whatever the log gained since the last step. A file that
// shrank was truncated: it is read again from the start. A file replaced at
// path was rotated: the old one is finished, then the new one read.
func (fl *follower) step(w http.ResponseWriter) error {
	if fl.f == nil {
		f, err := os.Open(fl.path)
		if err != nil {
			return nil // not there yet
		}
		fl.f, fl.pos = f, 0
	}
	fi, err := fl.f.Stat()
	if err != nil {
		return nil
	}
	if fi.Size() < fl.pos {
		fl.pos = 0
	}
	if err := fl.send(w); err != nil {
		return err
	}
	cur, err := os.Stat(fl.path)
	if err != nil || os.SameFile(fi, cur) {
		return nil
	}
	next, err := os.Open(fl.path)
	if err != nil {
		return nil
	}
	// The writer moved to the new file before it appeared at path, so the
	// old one is complete now: drain what it gained since the send above.
	err = fl.send(w)
	fl.f.Close()
	fl.f, fl.pos = next, 0
	if err != nil {
		return err
	}
	return fl.send(w)
}

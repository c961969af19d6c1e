package events

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/statedir"
)

// The audit directory holds the events of each UTC day in one file or, when
// a day's events outgrow a part (Options.MaxSize / 8), several:
// events-YYYY-MM-DD.jsonl, then events-YYYY-MM-DD.1.jsonl, .2, and so on,
// one event per line. Everything here reads those files, through the
// directory's descriptor (never following a symlink); only Log writes them.

const (
	filePrefix = "events-"
	fileSuffix = ".jsonl"
	dayLayout  = "2006-01-02"
	// tailChunk is how much of a file's end is read at a time when looking
	// for its last complete line.
	tailChunk = 64 << 10
	// maxLine bounds a line the readers will hold in memory; no event comes
	// near it, so a longer "line" is junk (say, zeros after a machine crash).
	maxLine = 16 << 20
)

// fileName is the first audit file of a UTC day ("2006-01-02").
func fileName(day string) string { return partName(day, 0) }

// partName is the audit file of a day's part: events-DAY.jsonl for part 0,
// events-DAY.N.jsonl for part N.
func partName(day string, part int) string {
	if part == 0 {
		return filePrefix + day + fileSuffix
	}
	return filePrefix + day + "." + strconv.Itoa(part) + fileSuffix
}

// AuditFile is one file of the audit directory.
type AuditFile struct {
	Name string
	Day  time.Time // the UTC day whose events it holds
	Part int       // its place within the day, from 0
	Size int64     // bytes, when listed

	day string // Day as in the name
}

// ParseFileName reads the day and part of an audit file name; ok is false
// for any other name.
func ParseFileName(name string) (f AuditFile, ok bool) {
	rest, ok := strings.CutPrefix(name, filePrefix)
	if !ok {
		return f, false
	}
	rest, ok = strings.CutSuffix(rest, fileSuffix)
	if !ok || len(rest) < len(dayLayout) {
		return f, false
	}
	day, partStr := rest[:len(dayLayout)], rest[len(dayLayout):]
	t, err := time.Parse(dayLayout, day)
	if err != nil {
		return f, false
	}
	part := 0
	if partStr != "" {
		digits, ok := strings.CutPrefix(partStr, ".")
		n, err := strconv.Atoi(digits)
		// One spelling per part: no sign, no leading zero, no part 0.
		if !ok || err != nil || n < 1 || strconv.Itoa(n) != digits {
			return f, false
		}
		part = n
	}
	return AuditFile{Name: name, Day: t, Part: part, day: day}, true
}

// before orders audit files as their events were written: by day, then part.
func (f AuditFile) before(g AuditFile) bool {
	if f.day != g.day {
		return f.day < g.day
	}
	return f.Part < g.Part
}

// ListFiles returns the audit files in dir (regular files only: anything
// else planted under such a name is not read), oldest first, with sizes.
func ListFiles(dir *statedir.Dir) ([]AuditFile, error) {
	names, err := dir.Names()
	if err != nil {
		return nil, err
	}
	var files []AuditFile
	for _, name := range names {
		f, ok := ParseFileName(name)
		if !ok {
			continue
		}
		st, err := dir.Lstat(name)
		if err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			continue // removed meanwhile, or not a file of ours
		}
		f.Size = st.Size
		files = append(files, f)
	}
	slices.SortFunc(files, func(a, b AuditFile) int {
		switch {
		case a.before(b):
			return -1
		case b.before(a):
			return 1
		}
		return 0
	})
	return files, nil
}

// lineSeq reads the seq of a complete event line: the line must be valid
// JSON (a torn line never is) with a positive "seq".
func lineSeq(line []byte) (uint64, bool) {
	var h struct {
		Seq uint64 `json:"seq"`
	}
	if len(line) > maxLine || json.Unmarshal(line, &h) != nil || h.Seq == 0 {
		return 0, false
	}
	return h.Seq, true
}

// prefixSeq reads the seq from the start of a line as the log writes it,
// `{"seq":N,...`, without parsing the rest: a cheap way to skip lines that
// are too old. ok is false for any other shape; such a line needs a full parse.
func prefixSeq(line []byte) (seq uint64, ok bool) {
	rest, found := bytes.CutPrefix(line, []byte(`{"seq":`))
	if !found {
		return 0, false
	}
	i := 0
	for ; i < len(rest) && i < 20 && '0' <= rest[i] && rest[i] <= '9'; i++ {
		seq = seq*10 + uint64(rest[i]-'0')
	}
	if i == 0 || i == 20 || i == len(rest) || rest[i] != ',' {
		return 0, false
	}
	return seq, true
}

// lastSeqInFile returns the seq of the last complete line of a file, reading
// it backwards from the end, so a large file costs one or two reads. A torn
// last line (the daemon killed mid-write) does not parse and is passed over.
func lastSeqInFile(dir *statedir.Dir, name string) (uint64, bool, error) {
	f, err := dir.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, false, err
	}
	var carry []byte // the start of a line whose beginning lies further back
	for end := fi.Size(); end > 0; {
		start := max(0, end-tailChunk)
		data := make([]byte, end-start, int(end-start)+len(carry))
		if _, err := f.ReadAt(data, start); err != nil && err != io.EOF {
			return 0, false, err
		}
		data = append(data, carry...)
		for {
			nl := bytes.LastIndexByte(data, '\n')
			if nl < 0 {
				break
			}
			if seq, ok := lineSeq(data[nl+1:]); ok {
				return seq, true, nil
			}
			data = data[:nl]
		}
		if start == 0 {
			seq, ok := lineSeq(data)
			return seq, ok, nil
		}
		if len(data) > maxLine {
			data = nil // junk: its start cannot make it a valid line
		}
		carry, end = data, start
	}
	return 0, false, nil
}

// firstSeqInFile returns the seq of the first complete line of a file.
func firstSeqInFile(dir *statedir.Dir, name string) (uint64, bool, error) {
	f, err := dir.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, tailChunk)
	for {
		line, err := readLine(r)
		if seq, ok := lineSeq(line); ok {
			return seq, true, nil
		}
		if err == io.EOF {
			return 0, false, nil
		}
		if err != nil {
			return 0, false, err
		}
	}
}

// readLine returns the next line without its '\n'. At the end of the file
// it returns the unterminated rest (perhaps empty) with io.EOF. A line
// longer than maxLine is returned truncated, so it fails to parse.
func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if err == nil {
		return line[:len(line)-1], nil
	}
	if err != bufio.ErrBufferFull {
		return line, err
	}
	long := append([]byte(nil), line...)
	for err == bufio.ErrBufferFull {
		line, err = r.ReadSlice('\n')
		if len(long) <= maxLine {
			long = append(long, line...)
		}
	}
	if err == nil {
		long = bytes.TrimSuffix(long, []byte{'\n'})
	}
	return long, err
}

// scan calls fn with every event in dir with seq > since, in seq order,
// until fn returns false. Lines that do not parse (torn ones) are skipped,
// and so is any line whose seq does not exceed the one before it, so fn
// sees strictly increasing seqs. Files removed meanwhile (retention, the
// size cap) are skipped.
func scan(dir *statedir.Dir, since uint64, fn func(program.Event) bool) error {
	files, err := ListFiles(dir)
	if err != nil {
		return err
	}
	last := since
	for _, f := range files[startFile(dir, files, since):] {
		more, err := scanFile(dir, f.Name, &last, fn)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if !more {
			return nil
		}
	}
	return nil
}

// startFile returns the index of the first file that can hold a seq >
// since: the newest one whose first seq is at most since+1, since every
// older file holds only smaller seqs.
func startFile(dir *statedir.Dir, files []AuditFile, since uint64) int {
	if since == 0 {
		return 0
	}
	for i := len(files) - 1; i > 0; i-- {
		first, ok, err := firstSeqInFile(dir, files[i].Name)
		if err == nil && ok && first <= since+1 {
			return i
		}
	}
	return 0
}

// scanFile is scan for one file; *last is the last seq handed to fn.
func scanFile(dir *statedir.Dir, name string, last *uint64, fn func(program.Event) bool) (bool, error) {
	f, err := dir.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return true, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, tailChunk)
	for {
		line, rerr := readLine(r)
		if seq, ok := prefixSeq(line); !ok || seq > *last {
			var e program.Event
			if len(line) > 0 && e.UnmarshalJSON(line) == nil && e.Seq > *last {
				e.JSON = slices.Clone(line)
				*last = e.Seq
				if !fn(e) {
					return false, nil
				}
			}
		}
		if rerr == io.EOF {
			return true, nil
		}
		if rerr != nil {
			return true, rerr
		}
	}
}

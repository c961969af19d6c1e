package proctree

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"
)

// maxCmd caps a member's cmd, in bytes: a status shows what a process is,
// not its whole argument list.
const maxCmd = 256

// stat holds the fields of /proc/PID/stat a sample uses.
type stat struct {
	state    byte
	ppid     int
	pgid     int
	sid      int
	threads  int
	start    uint64 // starttime, clock ticks after boot: tells a reused pid apart
	rssPages int64
	comm     []byte // aliases the parsed buffer
}

// parseStat parses one /proc/PID/stat line. comm (field 2) may hold spaces,
// parentheses and even ") ", so the fields after it are counted from the
// last ')' of the line, never by splitting the whole line.
func parseStat(b []byte) (stat, bool) {
	var st stat
	b = bytes.TrimRight(b, "\n")
	open := bytes.IndexByte(b, '(')
	end := lastParen(b)
	if open < 0 || end < open {
		return st, false
	}
	st.comm = b[open+1 : end]
	rest := b[end+1:]
	for field := 3; field <= 24; field++ {
		if len(rest) < 2 || rest[0] != ' ' {
			return st, false
		}
		rest = rest[1:]
		i := bytes.IndexByte(rest, ' ')
		if i < 0 {
			i = len(rest)
		}
		f := rest[:i]
		rest = rest[i:]
		if len(f) == 0 || !st.setField(field, f) {
			return st, false
		}
	}
	return st, true
}

// lastParen is bytes.LastIndexByte(b, ')') for a stat line, where the last
// ')' is near the start: forward searches are vectorised, a backward one
// walks the whole line byte by byte.
func lastParen(b []byte) int {
	last := -1
	for {
		i := bytes.IndexByte(b[last+1:], ')')
		if i < 0 {
			return last
		}
		last += i + 1
	}
}

// setField stores field number n (1-based, as proc(5) counts) if it is one
// Sample uses, and reports whether it parsed.
func (st *stat) setField(n int, f []byte) bool {
	var v int64
	ok := true
	switch n {
	case 3:
		st.state = f[0]
		return len(f) == 1
	case 4, 5, 6, 20, 24:
		v, ok = parseInt(f)
	case 22:
		var u int64
		u, ok = parseInt(f)
		st.start = uint64(u)
		return ok && u >= 0
	default:
		return true
	}
	switch n {
	case 4:
		st.ppid = int(v)
	case 5:
		st.pgid = int(v)
	case 6:
		st.sid = int(v)
	case 20:
		st.threads = int(v)
	case 24:
		st.rssPages = v
	}
	return ok
}

// parseInt parses a decimal integer without allocating.
func parseInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if neg {
		v = -v
	}
	return v, true
}

// parsePids appends the pids of a children file ("12 345 ") to dst.
func parsePids(b []byte, dst []int) []int {
	for len(b) > 0 {
		i := bytes.IndexAny(b, " \n")
		if i < 0 {
			i = len(b)
		}
		if v, ok := parseInt(b[:i]); ok && v > 0 {
			dst = append(dst, int(v))
		}
		if i == len(b) {
			break
		}
		b = b[i+1:]
	}
	return dst
}

// stateString returns a one-letter process state as a string without
// allocating (string(byte) would allocate for every member and sample).
func stateString(c byte) string {
	const letters = "RSDZTtXxKWPI"
	if i := strings.IndexByte(letters, c); i >= 0 {
		return letters[i : i+1]
	}
	return string(rune(c))
}

// openRead opens a /proc file as a raw descriptor: members' files are kept
// open across samples and read with pread, which an *os.File would only
// wrap in locking and a finalizer.
func openRead(path string) (int, error) {
	for {
		fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

// closeFD closes a descriptor opened by openRead.
func closeFD(fd int) {
	_ = syscall.Close(fd)
}

// preadAll reads a whole /proc file from offset 0 into *buf, growing it when
// the file does not fit. /proc's seq files restart at offset 0, so the same
// descriptor gives a fresh snapshot on every call.
func preadAll(fd int, buf *[]byte) (int, error) {
	for {
		n, err := syscall.Pread(fd, *buf, 0)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		if n < len(*buf) || len(*buf) >= 1<<20 {
			return n, nil
		}
		*buf = make([]byte, 2*len(*buf))
	}
}

// readOnce opens, reads and closes a file, for files read once per member
// (cmdline) or rarely (tend's own children).
func readOnce(path string, buf *[]byte) (int, error) {
	fd, err := openRead(path)
	if err != nil {
		return 0, err
	}
	defer closeFD(fd)
	return preadAll(fd, buf)
}

// readCmd returns a process's command line as ps shows it: arguments joined
// by spaces, at most maxCmd bytes, or [comm] when it has none (a zombie, a
// kernel thread).
func readCmd(dir string, comm string, buf []byte) string {
	n := 0
	if fd, err := openRead(dir + "/cmdline"); err == nil {
		n, _ = syscall.Pread(fd, buf[:maxCmd], 0)
		closeFD(fd)
	}
	b := buf[:max(n, 0)]
	for i, c := range b {
		if c == 0 {
			b[i] = ' '
		}
	}
	if n == maxCmd {
		b = cutRune(b)
	}
	if s := strings.TrimSpace(string(b)); s != "" {
		return s
	}
	return "[" + comm + "]"
}

// cutRune drops a rune cut in two at the end of b.
func cutRune(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			break
		}
	}
	return b
}

// listTasks returns the thread ids of a process from /proc/PID/task.
func listTasks(dir string) []int {
	f, err := os.Open(dir + "/task")
	if err != nil {
		return nil
	}
	defer f.Close()
	names, _ := f.Readdirnames(-1)
	tids := make([]int, 0, len(names))
	for _, name := range names {
		if tid, err := strconv.Atoi(name); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids
}

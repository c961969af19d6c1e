package spawn

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/logfile"
)

// A protocol run's stdio (docs/protocol.md#a-daemon-that-goes-away): its
// stdout is the protocol, read by the protocol client rather than the log,
// and its stdin is the daemon's to write. With FIFOs in the state
// directory (NAME-K.out and NAME-K.in) the run holds both open read-write,
// so it never reads an end of input nor gets SIGPIPE while no daemon runs,
// and the next daemon opens them again by name (AttachProtocol).

// SetProtocol says the instance's runs speak a protocol on stdout: an
// adopted run's stdout FIFO is then left to AttachProtocol. Called before
// any run or adoption.
func (o *Output) SetProtocol() { o.protocol = true }

// inName is the named pipe of a protocol run's stdin.
func (o *Output) inName() string { return baseName(o.id) + ".in" }

// openProtocol makes a protocol run's stdin and stdout, and its stderr as
// any run's.
func (o *Output) openProtocol(p *runPipes) (err error) {
	o.mu.Lock()
	o.errTail = nil // a new run: what the last one said is not this one's
	o.mu.Unlock()
	defer func() {
		if err != nil {
			for _, f := range []*os.File{p.stdin, p.protoIn, p.stdout, p.stderr} {
				if f != nil {
					f.Close()
				}
			}
			for _, r := range p.reads {
				if r.fd >= 0 {
					unix.Close(r.fd)
				}
			}
		}
	}()
	if o.c == nil || o.c.opts.FIFO == nil {
		var in, out [2]int
		if err := unix.Pipe2(in[:], unix.O_CLOEXEC); err != nil {
			return fmt.Errorf("pipe2: %w", err)
		}
		p.stdin, p.protoIn = os.NewFile(uintptr(in[0]), "|stdin"), os.NewFile(uintptr(in[1]), "|stdin")
		if err := unix.Pipe2(out[:], unix.O_CLOEXEC); err != nil {
			return fmt.Errorf("pipe2: %w", err)
		}
		p.stdout, p.reads[0] = os.NewFile(uintptr(out[1]), "|stdout"), readEnd{fd: out[0], s: logfile.Stdout}
	} else {
		dir := o.c.opts.FIFO
		name := o.inName()
		if err := dir.Mkfifo(name, 0o600); err != nil && !errors.Is(err, unix.EEXIST) {
			return err
		}
		rw, err := openFIFO(dir, name, unix.O_RDWR)
		if err != nil {
			return err
		}
		p.stdin = os.NewFile(uintptr(rw), dir.Join(name))
		wfd, err := openFIFO(dir, name, unix.O_WRONLY|unix.O_NONBLOCK)
		if err != nil {
			return err
		}
		p.protoIn = os.NewFile(uintptr(wfd), dir.Join(name))
		if p.stdout, p.reads[0], err = o.openStream(logfile.Stdout); err != nil {
			return err
		}
	}
	if o.c == nil {
		p.stderr, err = os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		return err
	}
	p.stderr, p.reads[1], err = o.openStream(logfile.Stderr)
	return err
}

// AttachProtocol opens again the stdin and stdout of a protocol run an
// earlier daemon started (killed, or before an upgrade): nil, nil when
// there are no FIFOs to open.
func (o *Output) AttachProtocol() (stdin, stdout *os.File, err error) {
	if o.c == nil || o.c.opts.FIFO == nil {
		return nil, nil, nil
	}
	dir := o.c.opts.FIFO
	rfd, err := openFIFO(dir, o.fifoName(logfile.Stdout), unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return nil, nil, err
	}
	wfd, err := openFIFO(dir, o.inName(), unix.O_WRONLY|unix.O_NONBLOCK)
	if err != nil {
		unix.Close(rfd)
		return nil, nil, err
	}
	return os.NewFile(uintptr(wfd), dir.Join(o.inName())), os.NewFile(uintptr(rfd), dir.Join(o.fifoName(logfile.Stdout))), nil
}

// Text stores transcript text of a protocol run as its stdout: lines as
// they end, the unfinished one kept for what follows.
func (o *Output) Text(p []byte) { o.frame(logfile.Stdout, p, true) }

// EndText ends the transcript of a protocol run: its unfinished line is
// written, and the run's stdout counts as ended (StreamEnds).
func (o *Output) EndText() { o.frame(logfile.Stdout|endFlag, nil, false) }

// Raw stores one JSON-RPC line as it went over the wire (stream acp, shown
// by tend logs --raw). It is the run's activity (idle_output_timeout).
func (o *Output) Raw(line []byte) {
	if len(line) > maxRawRecord {
		line = append(append([]byte(nil), line[:maxRawRecord]...), fmt.Sprintf(" … (%d bytes)", len(line))...)
	}
	o.frame(logfile.Protocol, line, true)
}

// maxRawRecord bounds what a raw record keeps of a message: a message may
// be 8 MiB, a log line need not.
const maxRawRecord = 64 << 10

func (o *Output) frame(s logfile.Stream, p []byte, activity bool) {
	if o.c == nil {
		return
	}
	now := time.Now()
	if activity {
		o.last.Store(now.UnixNano())
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return
	}
	o.frameLocked(s, p, now)
	o.enqueueLocked()
}

// errTailMax bounds what a protocol run's stderr keeps in memory for
// StderrTail: its newest bytes only, and none for a run that writes none.
const errTailMax = 4 << 10

// keepTailLocked keeps the newest errTailMax bytes a protocol run wrote to
// stderr. Guarded by o.mu, as the reads that call it.
func (o *Output) keepTailLocked(s logfile.Stream, p []byte) {
	if !o.protocol || s != logfile.Stderr || len(p) == 0 {
		return
	}
	if len(p) >= errTailMax {
		o.errTail = append(o.errTail[:0], p[len(p)-errTailMax:]...)
		return
	}
	if over := len(o.errTail) + len(p) - errTailMax; over > 0 {
		o.errTail = append(o.errTail[:0], o.errTail[over:]...)
	}
	o.errTail = append(o.errTail, p...)
}

// StderrTail is what the current (or last) protocol run said on stderr,
// for a why (docs/protocol.md#states): its last lines that read as a
// sentence, at most lines of them, each cut to 200 characters, joined by
// " ⏎ "; "" when it said nothing. An agent that refuses a request often
// says why only there (claude-code-acp as root answers session/new
// "Internal error", its stderr "--dangerously-skip-permissions cannot be
// used with root/sudo privileges …", then a dump of the request). What the
// run wrote is read out of its pipes first, so nothing it wrote before it
// ended is missed; the run's end calls it, after the run is gone.
func (o *Output) StderrTail(lines int) string {
	if o.c == nil || !o.protocol {
		return ""
	}
	if !o.isClosed() {
		o.drainRest()
	}
	o.mu.Lock()
	tail := string(o.errTail)
	o.mu.Unlock()
	return sayings(tail, lines)
}

// sayings picks the last n lines of s that say something: not blank, not
// a continuation (indented: a stack frame, a field of a dumped object),
// not the opening or closing of a dump (a line ending in "{" or "[", or
// only brackets and punctuation).
func sayings(s string, n int) string {
	var keep []string
	all := strings.Split(s, "\n")
	for i := len(all) - 1; i >= 0 && len(keep) < n; i-- {
		l := strings.TrimRight(all[i], " \t\r")
		switch {
		case strings.TrimSpace(l) == "",
			l[0] == ' ' || l[0] == '\t',
			strings.HasSuffix(l, "{") || strings.HasSuffix(l, "["),
			strings.Trim(l, "{}[]()<>,;:. ") == "":
			continue
		}
		if i == 0 && len(s) >= errTailMax {
			continue // cut by the bound: not a whole line
		}
		if utf8.RuneCountInString(l) > 200 {
			r := []rune(l)
			l = string(r[:200]) + "…"
		}
		keep = append(keep, l)
	}
	for i, j := 0, len(keep)-1; i < j; i, j = i+1, j-1 {
		keep[i], keep[j] = keep[j], keep[i]
	}
	return strings.Join(keep, " ⏎ ")
}

package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// parseDetachKeys reads tend attach's --detach-keys in docker's syntax:
// comma-separated keys, each a single character or ctrl-X where X is a
// letter or one of @ [ \ ] ^ _. "" means no detach keys.
func parseDetachKeys(s string) ([]byte, error) {
	if s == "" {
		return nil, nil
	}
	var keys []byte
	for k := range strings.SplitSeq(s, ",") {
		switch {
		case len(k) == 1:
			keys = append(keys, k[0])
		case len(k) == 6 && strings.EqualFold(k[:5], "ctrl-"):
			c := k[5]
			switch {
			case c >= 'a' && c <= 'z':
				keys = append(keys, c-'a'+1)
			case c >= 'A' && c <= 'Z':
				keys = append(keys, c-'A'+1)
			case c == '@':
				keys = append(keys, 0)
			case c >= '[' && c <= '_': // [ \ ] ^ _
				keys = append(keys, c-'['+0x1b)
			default:
				return nil, fmt.Errorf("attach: --detach-keys %q: %q is not ctrl- and a letter or one of @[\\]^_", s, k)
			}
		default:
			return nil, fmt.Errorf("attach: --detach-keys %q: %q is neither one character nor ctrl-X (docker's syntax, such as ctrl-p,ctrl-q)", s, k)
		}
	}
	return keys, nil
}

// detacher finds the detach sequence in keystrokes, as docker attach does:
// the keys that begin the sequence are held back until the next key
// either completes it (detach) or does not (they are sent after all).
type detacher struct {
	keys []byte
	held int // how many of keys the last keystrokes matched
}

// filter returns the keystrokes to send and whether the sequence is
// complete (what came after it is dropped).
func (d *detacher) filter(p []byte) (out []byte, detach bool) {
	for _, b := range p {
		if len(d.keys) == 0 {
			out = append(out, b)
			continue
		}
		if b != d.keys[d.held] && d.held > 0 {
			out = append(out, d.keys[:d.held]...) // not the sequence after all
			d.held = 0
		}
		if b == d.keys[d.held] {
			d.held++
			if d.held == len(d.keys) {
				d.held = 0
				return out, true
			}
			continue
		}
		out = append(out, b)
	}
	return out, false
}

// errCanceled is a cancelReader's error after Cancel.
var errCanceled = errors.New("read canceled")

// cancelReader reads a terminal and can be stopped in the middle of a
// read (Go's os.File cannot, for a descriptor in blocking mode, and
// putting the caller's terminal in non-blocking mode would leak to the
// shell that shares it). It polls the terminal and a pipe together.
type cancelReader struct {
	fd     int
	pr, pw *os.File
}

func newCancelReader(fd int) (*cancelReader, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	return &cancelReader{fd: fd, pr: pr, pw: pw}, nil
}

func (r *cancelReader) Read(p []byte) (int, error) {
	fds := []unix.PollFd{{Fd: int32(r.fd), Events: unix.POLLIN}, {Fd: int32(r.pr.Fd()), Events: unix.POLLIN}}
	for {
		_, err := unix.Poll(fds, -1)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return 0, err
		case fds[1].Revents != 0:
			return 0, errCanceled
		case fds[0].Revents == 0:
			continue
		}
		n, err := unix.Read(r.fd, p)
		switch {
		case err == unix.EINTR || err == unix.EAGAIN:
			continue
		case err != nil:
			return 0, err
		case n == 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// Cancel ends a Read under way and every later one.
func (r *cancelReader) Cancel() { r.pw.Write([]byte{0}) }

// Close releases the pipe, after the last Read has returned.
func (r *cancelReader) Close() {
	r.pr.Close()
	r.pw.Close()
}

package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// ptyClient is a real terminal client (tend attach, tmux attach) running
// in a pty this process holds: this process is its terminal, writes its
// keystrokes into the master and reads what it draws from there.
type ptyClient struct {
	cmd    *exec.Cmd
	master *os.File
	exited chan struct{} // closed once cmd has been waited for
	strip  stripper
	buf    []byte
	drawn  atomic.Int64  // bytes pump has read
	pumped chan struct{} // closed when pump has returned; nil without a pump
}

// startClient runs argv in a new pty of cols x rows, as its controlling
// terminal.
func startClient(argv, env []string, cols, rows int) (*ptyClient, error) {
	c := &ptyClient{cmd: exec.Command(argv[0], argv[1:]...), exited: make(chan struct{}), buf: make([]byte, 64<<10)}
	c.cmd.Env = env
	master, err := pty.StartWithSize(c.cmd, &pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", argv[0], err)
	}
	go func() { c.cmd.Wait(); close(c.exited) }()
	if c.master, err = pollable(master); err != nil {
		c.kill()
		return nil, err
	}
	return c, nil
}

// pollable returns f as a file of Go's poller, on which read and write
// deadlines work: pty opens the master blocking, and a blocking read would
// wait forever for a client that draws nothing. It closes f.
func pollable(f *os.File) (*os.File, error) {
	defer f.Close()
	fd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		return nil, err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	unix.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), f.Name()), nil // a non-blocking descriptor: NewFile gives it to the poller
}

func (c *ptyClient) pid() int { return c.cmd.Process.Pid }

// waitText reads until the text the client drew (escape sequences left
// out) holds s.
func (c *ptyClient) waitText(s string, limit time.Duration) error {
	var seen []byte
	deadline := time.Now().Add(limit)
	c.master.SetReadDeadline(deadline)
	for !bytes.Contains(seen, []byte(s)) {
		n, err := c.master.Read(c.buf)
		seen = c.strip.text(seen, c.buf[:n])
		if err != nil {
			return fmt.Errorf("%s: waiting for %q on its terminal: %w (it drew %q)", c.cmd.Args[0], s, err, tail(seen, 200))
		}
	}
	return nil
}

// echo types key and returns the time until the client draws it.
func (c *ptyClient) echo(key byte, limit time.Duration) (time.Duration, error) {
	var text []byte
	t := time.Now()
	if _, err := c.master.Write([]byte{key}); err != nil {
		return 0, err
	}
	c.master.SetReadDeadline(t.Add(limit))
	for {
		n, err := c.master.Read(c.buf)
		if n > 0 {
			if text = c.strip.text(text[:0], c.buf[:n]); bytes.IndexByte(text, key) >= 0 {
				return time.Since(t), nil
			}
		}
		if err != nil {
			return 0, fmt.Errorf("%s: no echo of %q: %w", c.cmd.Args[0], key, err)
		}
	}
}

// drain reads what the client draws until it has drawn nothing for quiet.
func (c *ptyClient) drain(quiet time.Duration) {
	for {
		c.master.SetReadDeadline(time.Now().Add(quiet))
		n, err := c.master.Read(c.buf)
		c.strip.text(nil, c.buf[:n])
		if err != nil {
			return
		}
	}
}

// stop types keys (the client's detach keys) and waits for the client to
// exit, SIGKILLing it after a few seconds; then it closes the pty.
func (c *ptyClient) stop(keys []byte) error {
	var err error
	c.master.SetWriteDeadline(time.Now().Add(time.Second))
	c.master.Write(keys)
	if c.pumped == nil {
		go c.drainAll() // a client blocked drawing would never see its keys
	}
	select {
	case <-c.exited:
	case <-time.After(5 * time.Second):
		err = fmt.Errorf("%s did not exit on its detach keys", c.cmd.Args[0])
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
	c.master.Close()
	if c.pumped != nil {
		<-c.pumped
	}
	return err
}

// drainAll reads and drops everything until the pty closes.
func (c *ptyClient) drainAll() {
	buf := make([]byte, 64<<10)
	for {
		c.master.SetReadDeadline(time.Time{})
		if _, err := c.master.Read(buf); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			return
		}
	}
}

// kill ends the client outright (after a failure).
func (c *ptyClient) kill() {
	select {
	case <-c.exited:
	default:
		_ = c.cmd.Process.Signal(syscall.SIGKILL)
		<-c.exited
	}
	c.master.Close()
	if c.pumped != nil {
		<-c.pumped
	}
}

// mark is a marker END-n-DNE seen on a client's terminal, and when.
type mark struct {
	n  int
	at time.Time
}

// pump reads everything the client draws from now on, in its own
// goroutine, until the pty closes: it counts the bytes (drawn) and sends
// each marker END-n-DNE it sees, of an n above the last, on marks (dropped
// when marks is full). It looks for the bytes as written: a client draws
// a row's characters of one style one after the other, also in a redraw.
func (c *ptyClient) pump(marks chan<- mark) {
	c.pumped = make(chan struct{})
	go func() {
		defer close(c.pumped)
		buf := make([]byte, 64<<10)
		var window []byte
		last := -1
		c.master.SetReadDeadline(time.Time{})
		for {
			n, err := c.master.Read(buf)
			at := time.Now()
			c.drawn.Add(int64(n))
			k := copy(window, tail(window, 32)) // the start of a marker cut by the read
			window = append(window[:k], buf[:n]...)
			for _, m := range markers(window) {
				if m > last {
					last = m
					select {
					case marks <- mark{m, at}:
					default:
					}
				}
			}
			if err != nil {
				return
			}
		}
	}()
}

// markers are the numbers n of the END-n-DNE in b, in order.
func markers(b []byte) []int {
	var ns []int
	for {
		i := bytes.Index(b, []byte("END-"))
		if i < 0 {
			return ns
		}
		b = b[i+4:]
		n, j := 0, 0
		for j < len(b) && j < 9 && b[j] >= '0' && b[j] <= '9' {
			n = n*10 + int(b[j]-'0')
			j++
		}
		if j > 0 && bytes.HasPrefix(b[j:], []byte("-DNE")) {
			ns = append(ns, n)
		}
	}
}

func tail(b []byte, n int) []byte { return b[max(0, len(b)-n):] }

// stripper keeps the printable bytes of a terminal's byte stream and drops
// its control characters and escape sequences (CSI, OSC, DCS and the other
// strings, two- and three-byte escapes), also when one is cut between two
// reads.
type stripper struct{ state uint8 }

const (
	sGround = iota
	sEsc
	sEscInter // ESC, intermediates: ESC ( B, ESC # 8
	sCSI
	sString // OSC, DCS, SOS, PM, APC: until BEL or ST
	sStringEsc
)

// text appends the printable bytes of p to dst.
func (s *stripper) text(dst, p []byte) []byte {
	for _, b := range p {
		switch s.state {
		case sGround:
			switch {
			case b == 0x1b:
				s.state = sEsc
			case b >= 0x20 && b != 0x7f:
				dst = append(dst, b)
			}
		case sEsc:
			switch {
			case b == '[':
				s.state = sCSI
			case b == ']' || b == 'P' || b == 'X' || b == '^' || b == '_':
				s.state = sString
			case b >= 0x20 && b <= 0x2f:
				s.state = sEscInter
			default:
				s.state = sGround
			}
		case sEscInter:
			if b >= 0x30 && b <= 0x7e {
				s.state = sGround
			}
		case sCSI:
			if b >= 0x40 && b <= 0x7e {
				s.state = sGround
			}
		case sString:
			switch b {
			case 0x07:
				s.state = sGround
			case 0x1b:
				s.state = sStringEsc
			}
		case sStringEsc:
			s.state = sGround // ESC \ (or any escape) ends the string
		}
	}
	return dst
}

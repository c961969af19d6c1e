package notify

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// MaxDatagram is the largest datagram accepted, in bytes. A longer one is
// truncated by the read and dropped; systemd caps notify messages the same way.
const MaxDatagram = 4096

// The reasons a datagram is dropped whole. Every error Parse returns wraps
// one of them; a Socket's OnDrop gets one of these or ErrRead (see
// DropReason).
var (
	ErrMalformed = errors.New("malformed notify datagram")
	ErrOversized = errors.New("oversized notify datagram")
)

// Message is one parsed datagram. Only the fields present in it are set: a nil
// pointer or a false flag means the datagram did not carry that field (or
// carried it only with a bad value). When a key appears more than once, the
// first valid occurrence wins, as in systemd.
type Message struct {
	Ready     bool // READY=1
	Stopping  bool // STOPPING=1
	Reloading bool // RELOADING=1
	Barrier   bool // BARRIER=1 (its pipe fd is closed by the Socket)

	Status *string // STATUS=text; an empty text clears the status

	Watchdog        bool    // WATCHDOG=1: a heartbeat
	WatchdogTrigger bool    // WATCHDOG=trigger: the service says it is wedged now
	WatchdogUSec    *uint64 // WATCHDOG_USEC=N: new watchdog interval in µs (0 disables)

	ExtendTimeoutUSec *uint64 // EXTEND_TIMEOUT_USEC=N in µs

	MainPID *int // MAINPID=N, N > 0
	Errno   *int // ERRNO=N, N >= 0

	Turn *bool // X_TEND_TURN=active (true) or X_TEND_TURN=idle (false)

	// SenderPID is the sender's pid from SCM_CREDENTIALS, 0 when unknown. It
	// is set by Socket, never by Parse, and is for logs only: as root,
	// systemd-notify sends its parent's pid, so attribute by socket.
	SenderPID int
}

// Parse parses one datagram: KEY=VALUE assignments separated by newlines. As
// in systemd, '\r' also separates lines and empty lines are skipped, so a
// trailing newline is fine. Unknown keys are ignored, custom X_ fields
// included (except X_TEND_TURN).
//
// Each assignment stands on its own: a bad one (a line without '=', an empty
// key, invalid UTF-8, or a bad value for a known key such as READY=2 or
// MAINPID=abc) is skipped and the others apply, as systemd skips a field it
// cannot parse. The datagram is dropped whole, with an error wrapping
// ErrMalformed, only when it holds no good assignment at all (it is empty,
// only newlines, or every line is bad) or holds a NUL byte (systemd drops
// those too: a C client cannot have meant it); with an error wrapping
// ErrOversized when it is longer than MaxDatagram. A datagram of unknown
// keys only is good: it returns a zero Message and no error.
func Parse(b []byte) (Message, error) {
	switch {
	case len(b) == 0:
		return Message{}, malformed("empty datagram")
	case len(b) > MaxDatagram:
		return Message{}, fmt.Errorf("%w: longer than %d bytes", ErrOversized, MaxDatagram)
	case bytes.IndexByte(b, 0) >= 0:
		return Message{}, malformed("NUL byte")
	}
	var m Message
	lines, good := 0, 0
	var first error // the first bad assignment, to say why when none is good
	for line := range bytes.FieldsFuncSeq(b, isNewline) {
		lines++
		if err := m.assign(line); err != nil {
			if first == nil {
				first = fmt.Errorf("line %d: %w", lines, err)
			}
			continue
		}
		good++
	}
	switch {
	case lines == 0:
		return Message{}, malformed("no assignment")
	case good == 0:
		return Message{}, malformed(fmt.Sprintf("no valid assignment; %v", first))
	}
	return m, nil
}

// assign applies one line, or returns why it is bad and leaves m as it was.
func (m *Message) assign(line []byte) error {
	key, val, ok := bytes.Cut(line, []byte("="))
	switch {
	case !ok:
		return fmt.Errorf("no '=' in %q", clip(line))
	case len(key) == 0:
		return errors.New("empty key")
	case !utf8.Valid(line):
		return fmt.Errorf("invalid UTF-8 in %q", clip(key))
	}
	if err := m.set(key, val); err != nil {
		return fmt.Errorf("%s=%q: %v", clip(key), clip(val), err)
	}
	return nil
}

func isNewline(r rune) bool { return r == '\n' || r == '\r' }

// set applies one assignment. The switch on string(key) does not allocate.
func (m *Message) set(key, val []byte) error {
	switch string(key) {
	case "READY":
		return flag(&m.Ready, val)
	case "STOPPING":
		return flag(&m.Stopping, val)
	case "RELOADING":
		return flag(&m.Reloading, val)
	case "BARRIER":
		return flag(&m.Barrier, val)
	case "STATUS":
		if m.Status == nil {
			s := string(val) // a copy: the read buffer is reused
			m.Status = &s
		}
	case "WATCHDOG":
		switch string(val) {
		case "1":
			m.Watchdog = true
		case "trigger":
			m.WatchdogTrigger = true
		default:
			return errors.New(`want "1" or "trigger"`)
		}
	case "WATCHDOG_USEC":
		return setUint(&m.WatchdogUSec, val, math.MaxUint64)
	case "EXTEND_TIMEOUT_USEC":
		return setUint(&m.ExtendTimeoutUSec, val, math.MaxUint64)
	case "MAINPID":
		return setInt(&m.MainPID, val, 1)
	case "ERRNO":
		return setInt(&m.Errno, val, 0)
	case "X_TEND_TURN":
		var active bool
		switch string(val) {
		case "active":
			active = true
		case "idle":
		default:
			return errors.New(`want "active" or "idle"`)
		}
		if m.Turn == nil {
			m.Turn = &active
		}
	}
	return nil
}

// flag accepts only "1": READY=0 and the like are bad assignments (skipped,
// and the datagram is dropped and counted when nothing else in it is good).
func flag(dst *bool, val []byte) error {
	if string(val) != "1" {
		return errors.New(`want "1"`)
	}
	*dst = true
	return nil
}

func setUint(dst **uint64, val []byte, max uint64) error {
	n, err := decimal(val, max)
	if err != nil {
		return err
	}
	if *dst == nil {
		*dst = &n
	}
	return nil
}

// setInt parses a pid or errno: min..MaxInt32, the range of pid_t and int.
func setInt(dst **int, val []byte, min int) error {
	n, err := decimal(val, math.MaxInt32)
	if err != nil {
		return err
	}
	if int(n) < min {
		return fmt.Errorf("want at least %d", min)
	}
	if *dst == nil {
		v := int(n)
		*dst = &v
	}
	return nil
}

// decimal parses ASCII digits only: no sign, no spaces, no 0x.
func decimal(val []byte, max uint64) (uint64, error) {
	if len(val) == 0 {
		return 0, errors.New("want a number")
	}
	var n uint64
	for _, c := range val {
		if c < '0' || c > '9' {
			return 0, errors.New("want a decimal number")
		}
		d := uint64(c - '0')
		if n > (max-d)/10 {
			return 0, fmt.Errorf("number larger than %d", max)
		}
		n = n*10 + d
	}
	return n, nil
}

// clip bounds what an error message quotes from a datagram.
func clip(b []byte) []byte {
	const max = 64
	if len(b) > max {
		return b[:max]
	}
	return b
}

func malformed(why string) error { return fmt.Errorf("%w: %s", ErrMalformed, why) }

// String returns the datagram form of m: one KEY=VALUE line per field set, in
// a fixed order, without SenderPID. Parse(m.String()) gives m back (minus
// SenderPID) whenever m has at least one field and Status holds no newline.
func (m Message) String() string {
	var b []byte
	line := func(key string, val []byte) {
		if len(b) > 0 {
			b = append(b, '\n') // no trailing newline: the result is never longer than a parsed input
		}
		b = append(b, key...)
		b = append(b, '=')
		b = append(b, val...)
	}
	flags := []struct {
		on  bool
		key string
	}{{m.Ready, "READY"}, {m.Stopping, "STOPPING"}, {m.Reloading, "RELOADING"}, {m.Barrier, "BARRIER"}, {m.Watchdog, "WATCHDOG"}}
	for _, f := range flags {
		if f.on {
			line(f.key, []byte("1"))
		}
	}
	if m.WatchdogTrigger {
		line("WATCHDOG", []byte("trigger"))
	}
	if m.Status != nil {
		line("STATUS", []byte(*m.Status))
	}
	if m.WatchdogUSec != nil {
		line("WATCHDOG_USEC", strconv.AppendUint(nil, *m.WatchdogUSec, 10))
	}
	if m.ExtendTimeoutUSec != nil {
		line("EXTEND_TIMEOUT_USEC", strconv.AppendUint(nil, *m.ExtendTimeoutUSec, 10))
	}
	if m.MainPID != nil {
		line("MAINPID", strconv.AppendInt(nil, int64(*m.MainPID), 10))
	}
	if m.Errno != nil {
		line("ERRNO", strconv.AppendInt(nil, int64(*m.Errno), 10))
	}
	if m.Turn != nil {
		turn := "idle"
		if *m.Turn {
			turn = "active"
		}
		line("X_TEND_TURN", []byte(turn))
	}
	return string(b)
}

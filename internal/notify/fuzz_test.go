package notify

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"unicode/utf8"
)

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"READY=1", "READY=1\nSTATUS=waiting for work\n", "WATCHDOG=1", "WATCHDOG=trigger",
		"WATCHDOG_USEC=30000000", "EXTEND_TIMEOUT_USEC=5000000", "MAINPID=4242", "ERRNO=2",
		"X_TEND_TURN=active", "X_TEND_TURN=idle", "STOPPING=1", "RELOADING=1\nMONOTONIC_USEC=1",
		"BARRIER=1", "STATUS=", "X_CUSTOM=1", "READY=2", "READY", "=", "\n", "", "STATUS=\xff",
		"READY=1\x00", "MAINPID=0", "READY=2\nSTATUS=ok", "STATUS=\xff\nREADY=1", "MAINPID=x\nMAINPID=7", "WATCHDOG_USEC=18446744073709551616", "STATUS=a\r\nREADY=1\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Parse(b)
		if err != nil {
			if errors.Is(err, ErrOversized) != (len(b) > MaxDatagram) || DropReason(err) == DropReadError {
				t.Fatalf("error %v for %d bytes: reason %q", err, len(b), DropReason(err))
			}
			if m != (Message{}) {
				t.Fatalf("error with a non-zero Message %s", m)
			}
			if len(err.Error()) > 400 {
				t.Fatalf("error is %d bytes long", len(err.Error()))
			}
			return
		}
		if len(b) == 0 || len(b) > MaxDatagram || bytes.IndexByte(b, 0) >= 0 {
			t.Fatalf("accepted an invalid datagram %q", b)
		}
		// Accepted means at least one assignment stands: a valid UTF-8
		// line with '=' after a non-empty key.
		good := false
		for _, l := range bytes.FieldsFunc(b, isNewline) {
			if k, _, ok := bytes.Cut(l, []byte("=")); ok && len(k) > 0 && utf8.Valid(l) {
				good = true
			}
		}
		if !good {
			t.Fatalf("accepted %q, which has no well-formed assignment", b)
		}
		if m.SenderPID != 0 {
			t.Fatal("Parse set SenderPID")
		}
		// Bounded memory: what the Message holds comes from the input.
		if m.Status != nil && (len(*m.Status) > len(b) || !bytes.Contains(b, []byte("STATUS="+*m.Status))) {
			t.Fatalf("Status %q not from input %q", *m.Status, b)
		}
		lines := bytes.FieldsFunc(b, isNewline)
		has := func(line string) bool {
			for _, l := range lines {
				if string(l) == line {
					return true
				}
			}
			return false
		}
		for _, c := range []struct {
			got  bool
			line string
		}{
			{m.Ready, "READY=1"}, {m.Stopping, "STOPPING=1"}, {m.Reloading, "RELOADING=1"},
			{m.Barrier, "BARRIER=1"}, {m.Watchdog, "WATCHDOG=1"}, {m.WatchdogTrigger, "WATCHDOG=trigger"},
		} {
			if c.got != has(c.line) {
				t.Fatalf("%s: got %v, input %q", c.line, c.got, b)
			}
		}
		if m == (Message{}) {
			return // only unknown keys: nothing to encode
		}
		again, err := Parse([]byte(m.String()))
		if err != nil {
			t.Fatalf("Parse(%q.String() = %q): %v", b, m.String(), err)
		}
		if !reflect.DeepEqual(again, m) {
			t.Fatalf("round trip of %q\n got %s\nwant %s", b, again, m)
		}
	})
}

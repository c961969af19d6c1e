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
		"READY=1\x00", "MAINPID=0", "WATCHDOG_USEC=18446744073709551616", "STATUS=a\r\nREADY=1\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Parse(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			if m != (Message{}) {
				t.Fatalf("error with a non-zero Message %s", m)
			}
			if len(err.Error()) > 400 {
				t.Fatalf("error is %d bytes long", len(err.Error()))
			}
			return
		}
		if len(b) == 0 || len(b) > MaxDatagram || bytes.IndexByte(b, 0) >= 0 || !utf8.Valid(b) {
			t.Fatalf("accepted an invalid datagram %q", b)
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

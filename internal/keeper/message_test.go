package keeper

import (
	"errors"
	"reflect"
	"testing"
)

// Every message reads back as it was written; what is not a message is an
// error that says so.
func TestKeeperMessages(t *testing.T) {
	r := Run{ID: "agent:0", PID: 12, Ticks: 345}
	for _, m := range []Message{
		Hello{Version: Version}, Keep{Run: r, Log: LogSpec{Base: "agent-0", MaxSize: 1 << 20, MaxFiles: 3}},
		Drop{r}, List{}, Quit{}, Held{r}, End{}, Dropped{r}, Wrote{ID: "agent:0"}, Ended{r},
		Failed{ID: "agent:0", Bytes: 4096, Err: "write agent-0.log: no space left on device"}, Healed{ID: "agent:0"},
	} {
		got, err := Parse(Format(m))
		if err != nil || !reflect.DeepEqual(got, m) {
			t.Errorf("Parse(%q) = %#v, %v", Format(m), got, err)
		}
	}
	for _, bad := range []string{"", "keep", "keep a:0 x 1", "keep a:0 1 2 b 1", "keep a:0 1 2 ../x 1 1", "drop a:0 -1 2",
		"list x", "hello", "hello 0", "wrote", "wrote a b", "failed a:0 x y", "drop  a:0 1 2"} {
		if _, err := Parse([]byte(bad)); !errors.Is(err, ErrBadMessage) {
			t.Errorf("Parse(%q) = %v", bad, err)
		}
	}
	if _, err := Parse([]byte("frobnicate")); !errors.Is(err, ErrUnknownVerb) {
		t.Errorf("an unknown verb: %v", err)
	}
	if m, _ := Parse(Format(Failed{ID: "a:0", Bytes: 1, Err: "two\nlines  and\tspaces"})); m.(Failed).Err != "two lines and spaces" {
		t.Errorf("an error's text: %q", m.(Failed).Err)
	}
}

// FuzzKeeperMessage: any datagram is a message or an error, never a
// panic, and a message reads back as itself.
func FuzzKeeperMessage(f *testing.F) {
	for _, s := range []string{"hello 2", "keep a:0 1 2 a-0 1048576 2", "drop a:0 1 2", "list", "quit", "held a:0 1 2",
		"end", "dropped a:0 1 2", "failed a:0 1 x\u0085y", "wrote a:0", "ended a:0 1 2", "failed a:0 10 disk full", "healed a:0", "keep a:0 1 2 a 0 0"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Parse(b)
		if err != nil {
			if !errors.Is(err, ErrBadMessage) {
				t.Fatalf("Parse(%q): %v does not wrap ErrBadMessage", b, err)
			}
			return
		}
		again, err := Parse(Format(m))
		if err != nil || !reflect.DeepEqual(again, m) {
			t.Fatalf("Parse(%q) = %#v; formatted %q, read back %#v, %v", b, m, Format(m), again, err)
		}
	})
}

package notify

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func ptr[T any](v T) *T { return &v }

func TestParseValid(t *testing.T) {
	long := "STATUS=" + strings.Repeat("x", MaxDatagram-len("STATUS="))
	tests := []struct {
		name string
		in   string
		want Message
	}{
		{"ready", "READY=1", Message{Ready: true}},
		{"trailing newline", "READY=1\n", Message{Ready: true}},
		{"crlf", "READY=1\r\nSTATUS=x\r\n", Message{Ready: true, Status: ptr("x")}},
		{"empty lines skipped", "\n\nREADY=1\n\n\nSTOPPING=1\n", Message{Ready: true, Stopping: true}},
		{"status", "STATUS=waiting for work", Message{Status: ptr("waiting for work")}},
		{"status empty clears", "STATUS=", Message{Status: ptr("")}},
		{"status keeps '='", "STATUS=a=b==c", Message{Status: ptr("a=b==c")}},
		{"status spaces kept", "STATUS= padded ", Message{Status: ptr(" padded ")}},
		{"status utf-8", "STATUS=héllo ✓ 日本", Message{Status: ptr("héllo ✓ 日本")}},
		{"status first wins", "STATUS=first\nSTATUS=second", Message{Status: ptr("first")}},
		{"stopping", "STOPPING=1", Message{Stopping: true}},
		{"reloading with monotonic", "RELOADING=1\nMONOTONIC_USEC=123456", Message{Reloading: true}},
		{"barrier", "BARRIER=1", Message{Barrier: true}},
		{"watchdog heartbeat", "WATCHDOG=1", Message{Watchdog: true}},
		{"watchdog trigger", "WATCHDOG=trigger", Message{WatchdogTrigger: true}},
		{"watchdog both", "WATCHDOG=1\nWATCHDOG=trigger", Message{Watchdog: true, WatchdogTrigger: true}},
		{"watchdog usec", "WATCHDOG_USEC=30000000", Message{WatchdogUSec: ptr(uint64(30000000))}},
		{"watchdog usec zero", "WATCHDOG_USEC=0", Message{WatchdogUSec: ptr(uint64(0))}},
		{"watchdog usec max", "WATCHDOG_USEC=18446744073709551615", Message{WatchdogUSec: ptr(uint64(18446744073709551615))}},
		{"watchdog usec leading zeros", "WATCHDOG_USEC=007", Message{WatchdogUSec: ptr(uint64(7))}},
		{"extend timeout", "EXTEND_TIMEOUT_USEC=5000000", Message{ExtendTimeoutUSec: ptr(uint64(5000000))}},
		{"mainpid", "MAINPID=4242", Message{MainPID: ptr(4242)}},
		{"mainpid max", "MAINPID=2147483647", Message{MainPID: ptr(2147483647)}},
		{"errno zero", "ERRNO=0", Message{Errno: ptr(0)}},
		{"errno", "ERRNO=2", Message{Errno: ptr(2)}},
		{"turn active", "X_TEND_TURN=active", Message{Turn: ptr(true)}},
		{"turn idle", "X_TEND_TURN=idle", Message{Turn: ptr(false)}},
		{"turn first wins", "X_TEND_TURN=idle\nX_TEND_TURN=active", Message{Turn: ptr(false)}},
		{"custom X_ ignored", "X_CUSTOM=anything at all", Message{}},
		{"unknown keys ignored", "FDSTORE=1\nFDNAME=sock\nNOTIFYACCESS=all\nready=1", Message{}},
		{"unknown key with odd value ignored", "X_FOO=READY=2", Message{}},
		{"exactly MaxDatagram", long, Message{Status: ptr(long[len("STATUS="):])}},
		{"everything", "READY=1\nSTATUS=busy\nSTOPPING=1\nRELOADING=1\nBARRIER=1\nWATCHDOG=1\nWATCHDOG=trigger\n" +
			"WATCHDOG_USEC=1\nEXTEND_TIMEOUT_USEC=2\nMAINPID=3\nERRNO=4\nX_TEND_TURN=active\nX_OTHER=5\n",
			Message{Ready: true, Status: ptr("busy"), Stopping: true, Reloading: true, Barrier: true,
				Watchdog: true, WatchdogTrigger: true, WatchdogUSec: ptr(uint64(1)), ExtendTimeoutUSec: ptr(uint64(2)),
				MainPID: ptr(3), Errno: ptr(4), Turn: ptr(true)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.in))
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse(%q)\n got %s\nwant %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseMalformed(t *testing.T) {
	tests := []struct {
		name, in, why string // why: a substring of the error
	}{
		{"empty", "", "empty"},
		{"only newlines", "\n\r\n\n", "no assignment"},
		{"NUL byte", "READY=1\x00", "NUL"},
		{"NUL in status", "STATUS=a\x00b", "NUL"},
		{"invalid UTF-8", "STATUS=\xff\xfe", "UTF-8"},
		{"truncated UTF-8", "STATUS=\xc3", "UTF-8"},
		{"invalid UTF-8 in an unknown key", "X_FOO=\xff", "UTF-8"},
		{"line without =", "READY", "no '='"},
		{"empty key", "=1", "empty key"},
		{"ready 2", "READY=2", "READY"},
		{"ready 0", "READY=0", "READY"},
		{"ready empty", "READY=", "READY"},
		{"ready true", "READY=true", "READY"},
		{"ready space", "READY= 1", "READY"},
		{"stopping yes", "STOPPING=yes", "STOPPING"},
		{"reloading 2", "RELOADING=2", "RELOADING"},
		{"barrier 0", "BARRIER=0", "BARRIER"},
		{"watchdog 2", "WATCHDOG=2", "WATCHDOG"},
		{"watchdog empty", "WATCHDOG=", "WATCHDOG"},
		{"watchdog Trigger", "WATCHDOG=Trigger", "WATCHDOG"},
		{"watchdog usec abc", "WATCHDOG_USEC=abc", "WATCHDOG_USEC"},
		{"watchdog usec empty", "WATCHDOG_USEC=", "want a number"},
		{"watchdog usec negative", "WATCHDOG_USEC=-1", "decimal"},
		{"watchdog usec plus", "WATCHDOG_USEC=+5", "decimal"},
		{"watchdog usec hex", "WATCHDOG_USEC=0x10", "decimal"},
		{"watchdog usec space", "WATCHDOG_USEC= 5", "decimal"},
		{"watchdog usec overflow", "WATCHDOG_USEC=18446744073709551616", "larger"},
		{"extend timeout fraction", "EXTEND_TIMEOUT_USEC=1.5", "EXTEND_TIMEOUT_USEC"},
		{"mainpid zero", "MAINPID=0", "at least 1"},
		{"mainpid negative", "MAINPID=-1", "MAINPID"},
		{"mainpid too big", "MAINPID=2147483648", "larger"},
		{"mainpid abc", "MAINPID=abc", "MAINPID"},
		{"errno negative", "ERRNO=-1", "ERRNO"},
		{"errno abc", "ERRNO=x", "ERRNO"},
		{"errno too big", "ERRNO=2147483648", "larger"},
		{"turn busy", "X_TEND_TURN=busy", "X_TEND_TURN"},
		{"turn empty", "X_TEND_TURN=", "X_TEND_TURN"},
		{"turn upper", "X_TEND_TURN=ACTIVE", "X_TEND_TURN"},
		{"every line bad names the first", "garbage\nREADY=2\nMAINPID=x", "line 1: no '='"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.in))
			if err == nil {
				t.Fatalf("Parse(%q) = %s, want an error", tt.in, got)
			}
			if !errors.Is(err, ErrMalformed) || DropReason(err) != DropMalformed {
				t.Errorf("error %v does not wrap ErrMalformed (reason %q)", err, DropReason(err))
			}
			if !strings.Contains(err.Error(), tt.why) {
				t.Errorf("error %q does not mention %q", err, tt.why)
			}
			if got != (Message{}) {
				t.Errorf("Parse returned %s with its error, want a zero Message", got)
			}
		})
	}
}

func TestParseOversized(t *testing.T) {
	for _, n := range []int{MaxDatagram + 1, 64 << 10} {
		in := "READY=1\nSTATUS=" + strings.Repeat("x", n-len("READY=1\nSTATUS="))
		got, err := Parse([]byte(in))
		if !errors.Is(err, ErrOversized) || DropReason(err) != DropOversized || got != (Message{}) {
			t.Errorf("%d bytes: %s, %v; want a zero Message and ErrOversized", n, got, err)
		}
	}
}

// Each assignment stands on its own (docs/notify.md#fields): a bad field is skipped, the
// others apply, and the datagram is not dropped.
func TestParseBadFieldsStandAlone(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Message
	}{
		{"bad READY among good", "READY=2\nSTATUS=ok\nWATCHDOG=1", Message{Status: ptr("ok"), Watchdog: true}},
		{"bad MAINPID keeps READY", "READY=1\nMAINPID=abc", Message{Ready: true}},
		{"line without = keeps the rest", "READY=1\ngarbage\nSTATUS=x", Message{Ready: true, Status: ptr("x")}},
		{"empty key keeps the rest", "=1\nSTOPPING=1", Message{Stopping: true}},
		{"invalid UTF-8 line keeps the rest", "STATUS=\xff\nREADY=1", Message{Ready: true}},
		{"first valid occurrence wins", "MAINPID=x\nMAINPID=5\nMAINPID=6", Message{MainPID: ptr(5)}},
		{"bad watchdog usec keeps the heartbeat", "WATCHDOG=1\nWATCHDOG_USEC=-5", Message{Watchdog: true}},
		{"bad turn keeps the status", "X_TEND_TURN=busy\nSTATUS=thinking", Message{Status: ptr("thinking")}},
		{"unknown key makes a bad one harmless", "X_FOO=1\nREADY=2", Message{}},
		{"systemd-notify with a bad extra field", "READY=1\nSTATUS=waiting for work\nERRNO=nope", Message{Ready: true, Status: ptr("waiting for work")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.in))
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse(%q)\n got %s\nwant %s", tt.in, got, tt.want)
			}
		})
	}
}

// An error quotes at most a bounded piece of the datagram.
func TestParseErrorBounded(t *testing.T) {
	_, err := Parse([]byte(strings.Repeat("k", 4000) + "=" + "v"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Parse([]byte("MAINPID=" + strings.Repeat("9", 4000)))
	if err == nil || len(err.Error()) > 300 {
		t.Fatalf("error %d bytes long: %v", len(err.Error()), err)
	}
	_, err = Parse([]byte(strings.Repeat("k", 4000)))
	if err == nil || len(err.Error()) > 300 {
		t.Fatalf("error %d bytes long: %v", len(err.Error()), err)
	}
}

func TestMessageStringRoundTrip(t *testing.T) {
	m := Message{Ready: true, Status: ptr("a b=c"), Stopping: true, Reloading: true, Barrier: true,
		Watchdog: true, WatchdogTrigger: true, WatchdogUSec: ptr(uint64(10)), ExtendTimeoutUSec: ptr(uint64(20)),
		MainPID: ptr(30), Errno: ptr(0), Turn: ptr(false)}
	got, err := Parse([]byte(m.String()))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip\n got %s\nwant %s", got, m)
	}
}

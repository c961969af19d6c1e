package proctree

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

const sampleStat = "4242 (python3) S 1 4242 4242 0 -1 4194304 1012 0 0 0 12 3 0 0 20 0 4 0 98765 123456789 17920 18446744073709551615 1 1 0 0 0 0 0 16781312 2 0 0 0 17 1 0 0 0 0 0\n"

func TestParseStat(t *testing.T) {
	cases := []struct {
		name string
		line string
		ok   bool
		want stat
		comm string
	}{
		{"plain", sampleStat, true,
			stat{state: 'S', ppid: 1, pgid: 4242, sid: 4242, threads: 4, start: 98765, rssPages: 17920}, "python3"},
		{"comm with spaces and parens", strings.Replace(sampleStat, "(python3)", "(a) S 9 9 (b )", 1), true,
			stat{state: 'S', ppid: 1, pgid: 4242, sid: 4242, threads: 4, start: 98765, rssPages: 17920}, "a) S 9 9 (b "},
		{"empty comm", strings.Replace(sampleStat, "(python3)", "()", 1), true,
			stat{state: 'S', ppid: 1, pgid: 4242, sid: 4242, threads: 4, start: 98765, rssPages: 17920}, ""},
		{"zombie", "7 (sh) Z 6 6 6 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 55 0 0 0", true,
			stat{state: 'Z', ppid: 6, pgid: 6, sid: 6, threads: 1, start: 55}, "sh"},
		{"empty", "", false, stat{}, ""},
		{"no paren", "4242 python3 S 1 2 3", false, stat{}, ""},
		{"truncated before rss", "7 (sh) S 6 6 6 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 55 0", false, stat{}, ""},
		{"non-number ppid", "7 (sh) S x 6 6 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 55 0 0 0", false, stat{}, ""},
		{"two-letter state", "7 (sh) SS 6 6 6 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 55 0 0 0", false, stat{}, ""},
		{"double space", "7 (sh) S  6 6 6 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 55 0 0 0", false, stat{}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, ok := parseStat([]byte(c.line))
			if ok != c.ok {
				t.Fatalf("ok = %v, want %v", ok, c.ok)
			}
			if !ok {
				return
			}
			if string(st.comm) != c.comm {
				t.Errorf("comm = %q, want %q", st.comm, c.comm)
			}
			st.comm, c.want.comm = nil, nil
			if fmt.Sprintf("%+v", st) != fmt.Sprintf("%+v", c.want) {
				t.Errorf("stat = %+v\nwant   %+v", st, c.want)
			}
		})
	}
}

func TestParseStatOfThisProcess(t *testing.T) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	st, ok := parseStat(b)
	if !ok {
		t.Fatalf("cannot parse %q", b)
	}
	// The sid is 0 when the session leader lives outside this pid namespace
	// (as in a container CI runs in), so compare it with what the kernel
	// says rather than requiring a positive number.
	sid, err := unix.Getsid(0)
	if err != nil {
		t.Fatal(err)
	}
	if st.ppid != os.Getppid() || st.sid != sid || st.rssPages <= 0 || st.threads < 1 {
		t.Errorf("parsed %+v from %q", st, b)
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte(sampleStat))
	f.Add([]byte("1 ((x)) R 0 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 1 0 9 0\n"))
	f.Add([]byte("1 (x R 0 1 1"))
	f.Add([]byte(") ("))
	f.Add([]byte("7 (sh)  S 6 6 6 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 55 0 0 0"))
	f.Add([]byte("1 (a) b) S -1 -2 -3 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 1 0 99999999999999999999 0"))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, ok := parseStat(b)
		if !ok {
			return
		}
		// comm is what lies between the first '(' and the last ')'.
		open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
		if !bytes.Equal(st.comm, b[open+1:end]) {
			t.Fatalf("comm %q from %q", st.comm, b)
		}
	})
}

func TestParsePids(t *testing.T) {
	cases := map[string][]int{
		"":                nil,
		"12":              {12},
		"12 345 ":         {12, 345},
		"1 2 3\n":         {1, 2, 3},
		"7  x 0 -3 9 ":    {7, 9},
		"99999999999999 ": {99999999999999},
	}
	for in, want := range cases {
		if got := parsePids([]byte(in), nil); !slices.Equal(got, want) {
			t.Errorf("parsePids(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestReadCmd(t *testing.T) {
	dir := t.TempDir()
	buf := make([]byte, maxCmd)
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "cmdline"), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	write("python3\x00worker.py\x00--queue=a b\x00")
	if got := readCmd(dir, "python3", buf); got != "python3 worker.py --queue=a b" {
		t.Errorf("cmd = %q", got)
	}

	write("") // a zombie or a kernel thread
	if got := readCmd(dir, "kworker/0:1", buf); got != "[kworker/0:1]" {
		t.Errorf("empty cmdline gives %q", got)
	}

	long := strings.Repeat("a", maxCmd-1) + "é and more"
	write(long)
	got := readCmd(dir, "x", buf)
	if got != strings.Repeat("a", maxCmd-1) || !utf8.ValidString(got) {
		t.Errorf("a cut rune is kept: %q", got[maxCmd-8:])
	}

	write(strings.Repeat("b\x00", 1000))
	if got := readCmd(dir, "x", buf); len(got) > maxCmd || !strings.HasPrefix(got, "b b b") {
		t.Errorf("long cmdline gives %d bytes", len(got))
	}

	if got := readCmd(filepath.Join(dir, "gone"), "sleep", buf); got != "[sleep]" {
		t.Errorf("missing cmdline gives %q", got)
	}
}

func TestStateString(t *testing.T) {
	for _, c := range []byte("RSDZTtXxKWPI?") {
		if got := stateString(c); got != string(rune(c)) {
			t.Errorf("stateString(%q) = %q", c, got)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = stateString('S') }); n != 0 {
		t.Errorf("stateString allocates %v times", n)
	}
}

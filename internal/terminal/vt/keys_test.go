package vt

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var keyNames = []string{
	"Enter", "Escape", "Tab", "BTab", "BSpace", "Space", "Up", "Down", "Left", "Right",
	"Home", "End", "PageUp", "PageDown", "PgUp", "PgDn", "PPage", "NPage", "IC", "DC",
	"F1", "F2", "F3", "F4", "F5", "F6", "F7", "F8", "F9", "F10", "F11", "F12",
	"C-a", "C-c", "C-d", "C-z", "C-Space", "C-@", "C-[", "C-]", "C-\\", "C-_",
	"M-x", "M-Enter", "M-BSpace", "M-C-a", "C-M-b", "S-Up", "C-Left", "M-Right", "C-S-Down",
	"C-F5", "S-F1", "M-Home", "C-DC", "enter", "a", "Z", "é", "中", "KP5", "KPEnter",
}

// TestKeysMatchTmux sends each key name through tmux to a program that
// writes what it reads to a file, and compares with KeyBytes.
func TestKeysMatchTmux(t *testing.T) {
	m := newTmux(t)
	for i, appCursor := range []bool{false, true} {
		dir := t.TempDir()
		file := filepath.Join(dir, "keys")
		name := fmt.Sprintf("k%d", i)
		mode := "l"
		if appCursor {
			mode = "h"
		}
		m.start(name, Size{Cols: 80, Rows: 10}, fmt.Sprintf(`printf '\033[?1%s'; stty raw -echo; printf ready; exec cat > %s`, mode, file))
		m.Stable(name, func(s string) bool { return strings.Contains(s, "ready") }) // the mode and stty are in place
		var want []byte
		for _, k := range keyNames {
			m.Must("send-keys", "-t", name, k)
			b, err := KeyBytes(k, appCursor)
			if err != nil {
				t.Fatalf("KeyBytes(%q): %v", k, err)
			}
			want = append(want, b...)
		}
		deadline := time.Now().Add(10 * time.Second)
		var got []byte
		for time.Now().Before(deadline) {
			got, _ = os.ReadFile(file)
			if len(got) >= len(want) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("app cursor %v: tmux sent\n%q\nKeyBytes gives\n%q", appCursor, got, want)
		}
	}
}

func TestKeyBytes(t *testing.T) {
	for _, tc := range []struct {
		name string
		app  bool
		want string
	}{
		{"Enter", false, "\r"},
		{"Up", false, "\x1b[A"},
		{"Up", true, "\x1bOA"},
		{"C-Up", true, "\x1b[1;5A"},
		{"Home", true, "\x1b[1~"},
		{"C-a", false, "\x01"},
		{"C-A", false, "\x01"},
		{"^c", false, "\x03"},
		{"M-x", false, "\x1bx"},
		{"M-Up", false, "\x1b[1;3A"},
		{"BSpace", false, "\x7f"},
		{"F12", false, "\x1b[24~"},
	} {
		got, err := KeyBytes(tc.name, tc.app)
		if err != nil || string(got) != tc.want {
			t.Errorf("KeyBytes(%q, %v) = %q, %v; want %q", tc.name, tc.app, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "Bogus", "F13", "C-", "X-a", "C-é", "S-a", "ab", "\xff"} {
		_, err := KeyBytes(bad, false)
		if !errors.Is(err, ErrUnknownKey) || !strings.Contains(err.Error(), fmt.Sprintf("%q", bad)) {
			t.Errorf("KeyBytes(%q): error %v, want ErrUnknownKey naming it", bad, err)
		}
	}
}

func TestInputEncode(t *testing.T) {
	in := Input{Text: "hello\nworld", Keys: []string{"C-c", "Up"}, Enter: true}
	if got := in.Encode(false, true); string(got) != "hello\nworld\x03\x1bOA\r" {
		t.Fatalf("Encode = %q", got)
	}
	if got := in.Encode(true, false); string(got) != "\x1b[200~hello\nworld\x1b[201~\x03\x1b[A\r" {
		t.Fatalf("Encode bracketed = %q", got)
	}
	got := Input{Text: "a\x1b[201~b"}.Encode(true, false)
	if string(got) != "\x1b[200~a[201~b\x1b[201~" { // the ESC goes, as xterm drops it (paste.go)
		t.Fatalf("a paste end inside the text must not end the paste: %q", got)
	}
	// No key's name is typed as written, never pasted; literal text is
	// typed as keystrokes, not pasted (tmux's send-keys and send-keys -l).
	if got := (Input{Text: ":q!", Keys: []string{":set nu", "Enter", "C-"}, Literal: true}).Encode(true, false); string(got) != ":q!:set nu\rC-" {
		t.Fatalf("literal text and keys as text: %q", got)
	}
}

// TestKeysAsTextMatchTmux: an item that is no key name is typed as it is
// written, as tmux's send-keys types it.
func TestKeysAsTextMatchTmux(t *testing.T) {
	m := newTmux(t)
	file := filepath.Join(t.TempDir(), "keys")
	m.start("text", Size{Cols: 80, Rows: 10}, fmt.Sprintf(`stty raw -echo; printf ready; exec cat > %s`, file))
	m.Stable("text", func(s string) bool { return strings.Contains(s, "ready") })
	items := []string{":set nu", "Enter", "Hyper-x", "C-", "hello, world", "F13", ",", "Escape", "ü ber"}
	for _, k := range items {
		m.Must("send-keys", "-t", "text", k)
	}
	want := Input{Keys: items}.Encode(false, false)
	deadline := time.Now().Add(10 * time.Second)
	var got []byte
	for time.Now().Before(deadline) {
		got, _ = os.ReadFile(file)
		if len(got) >= len(want) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("tmux sent\n%q\nEncode gives\n%q", got, want)
	}
}

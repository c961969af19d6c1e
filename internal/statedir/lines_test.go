package statedir

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func openTestDir(t *testing.T) *Dir {
	t.Helper()
	d, err := Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

var t0 = time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)

type item struct {
	Name string          `json:"name"`
	Body json.RawMessage `json:"body,omitempty"`
}

// A file set aside keeps its bytes and never replaces an earlier one of
// the same second.
func TestSetAsideNeverOverwrites(t *testing.T) {
	d := openTestDir(t)
	for i, want := range []string{"x.json.corrupt-20261202T090000Z", "x.json.corrupt-20261202T090000Z-2", "x.json.corrupt-20261202T090000Z-3"} {
		body := strings.Repeat("#", i+1)
		os.WriteFile(d.Join("x.json"), []byte(body), 0o600)
		aside, err := d.SetAside("x.json", t0.In(time.FixedZone("X", 3600)))
		if err != nil || aside != want {
			t.Fatalf("set aside as %q (%v), want %q", aside, err, want)
		}
		if b, _ := d.ReadFile(want); string(b) != body {
			t.Errorf("%s holds %q, want %q", want, b, body)
		}
	}
	if _, err := d.Lstat("x.json"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("x.json is still there: %v", err)
	}
}

// The one-element-a-line form reads back whole, and a damaged file still
// gives every line that is intact.
func TestLinesReadBackAsFarAsIntact(t *testing.T) {
	list := []item{{Name: "a", Body: json.RawMessage("{\n  \"x\": 1\n}")}, {Name: "bad", Body: json.RawMessage("{nope")}, {Name: "c"}}
	b := MarshalLines(list)
	if strings.Count(string(b), "\n") != 4 {
		t.Errorf("not one element a line:\n%s", b)
	}
	got, err := UnmarshalLines[item](b)
	if err != nil || len(got) != 2 || got[0].Name != "a" || string(got[0].Body) != `{"x":1}` || got[1].Name != "c" {
		t.Fatalf("read back: %+v %v", got, err)
	}
	lines := strings.Split(string(b), "\n")
	lines[1] = "\x00garbage"
	got, err = UnmarshalLines[item]([]byte(strings.Join(lines, "\n")))
	if err == nil || len(got) != 1 || got[0].Name != "c" {
		t.Errorf("damaged: %+v %v", got, err)
	}
	if got, err := UnmarshalLines[item](MarshalLines[item](nil)); err != nil || len(got) != 0 {
		t.Errorf("empty: %+v %v", got, err)
	}
}

func TestReadLines(t *testing.T) {
	d := openTestDir(t)
	if list, damage, err := ReadLines[item](d, "x.json", t0); list != nil || damage != nil || err != nil {
		t.Fatalf("missing: %v %v %v", list, damage, err)
	}
	good := MarshalLines([]item{{Name: "a"}, {Name: "b"}})
	d.WriteFileAtomic("x.json", good, 0o600, true)
	if list, damage, err := ReadLines[item](d, "x.json", t0); len(list) != 2 || damage != nil || err != nil {
		t.Fatalf("good: %v %v %v", list, damage, err)
	}
	bad := append(good[:len(good)-4:len(good)-4], "garbage"...)
	os.WriteFile(d.Join("x.json"), bad, 0o600)
	list, damage, err := ReadLines[item](d, "x.json", t0)
	if err != nil || len(list) != 1 || list[0].Name != "a" || damage == nil || damage.Read || damage.Aside != "x.json.corrupt-20261202T090000Z" {
		t.Fatalf("damaged: %v %+v %v", list, damage, err)
	}
	if b, _ := d.ReadFile(damage.Aside); string(b) != string(bad) {
		t.Errorf("set aside as %q", b)
	}
	// Something that is not a file (a FIFO, which must not block the read).
	d.Mkfifo("x.json", 0o600)
	list, damage, err = ReadLines[item](d, "x.json", t0)
	if err != nil || list != nil || damage == nil || !damage.Read || !errors.Is(Unsafe(damage.Err), ErrUnsafe) || damage.Aside != "x.json.corrupt-20261202T090000Z-2" {
		t.Errorf("a FIFO: %v %+v %v", list, damage, err)
	}
}

// A symlink planted as a state file is refused in one line that says
// what to do, and so is anything else that is not a regular file.
func TestUnsafeWordsTheRefusal(t *testing.T) {
	d := openTestDir(t)
	os.Symlink("/etc/passwd", d.Join("link"))
	_, err := d.ReadFile("link")
	if u := Unsafe(err); !errors.Is(u, ErrUnsafe) || !strings.Contains(u.Error(), "link is a symlink") {
		t.Errorf("symlink: %v", u)
	}
	os.Mkdir(d.Join("dir"), 0o700)
	_, err = d.ReadFile("dir")
	if u := Unsafe(err); !errors.Is(u, ErrUnsafe) || !strings.Contains(u.Error(), "dir is not a regular file") {
		t.Errorf("directory: %v", u)
	}
	_, err = d.ReadFile("missing")
	if u := Unsafe(err); u != err {
		t.Errorf("a missing file: %v", u)
	}
}

// WriteFileAtomic leaves the new file or the old one, never a temporary.
func TestWriteFileAtomic(t *testing.T) {
	d := openTestDir(t)
	for _, sync := range []bool{false, true} {
		if err := d.WriteFileAtomic("f", []byte("one"), 0o600, sync); err != nil {
			t.Fatal(err)
		}
		if err := d.WriteFileAtomic("f", []byte("two"), 0o600, sync); err != nil {
			t.Fatal(err)
		}
		if b, _ := d.ReadFile("f"); string(b) != "two" {
			t.Errorf("sync %v: %q", sync, b)
		}
	}
	if names, _ := d.Names(); len(names) != 1 {
		t.Errorf("files left: %v", names)
	}
	if err := d.WriteFileAtomic("../f", nil, 0o600, true); err == nil {
		t.Error("wrote outside the directory")
	}
}

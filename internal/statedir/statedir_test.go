package statedir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tend-sh/tend/internal/program"
)

func TestOpenCreates0700(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "state")
	d, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("mode %v, %v; want 0700", fi.Mode(), err)
	}
}

func TestOpenNarrowsAnOpenDirectory(t *testing.T) {
	path := t.TempDir()
	os.Chmod(path, 0o711)
	d, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o700 {
		t.Fatalf("mode %v, want 0700", fi.Mode().Perm())
	}
}

func TestOpenRefuses(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "real")
	os.Mkdir(real, 0o700)
	link := filepath.Join(base, "link")
	os.Symlink(real, link)
	writable := filepath.Join(base, "writable")
	os.Mkdir(writable, 0o700)
	os.Chmod(writable, 0o770)
	cases := map[string]string{link: "is a symlink", writable: "writable by group or others"}
	if os.Geteuid() == 0 {
		foreign := filepath.Join(base, "foreign")
		os.Mkdir(foreign, 0o700)
		if err := os.Chown(foreign, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		cases[foreign] = "belongs to uid 65534"
	}
	for path, msg := range cases {
		_, err := Open(path)
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: error %v, want %q", path, err, msg)
		}
		if !errors.Is(err, ErrUnsafe) || !errors.Is(err, program.ErrBadConfig) {
			t.Errorf("%s: %v does not match ErrUnsafe and ErrBadConfig", path, err)
		}
	}
}

func TestOpenFileNeverFollowsASymlink(t *testing.T) {
	d, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	target := filepath.Join(t.TempDir(), "precious")
	os.WriteFile(target, []byte("keep me"), 0o600)
	os.Symlink(target, d.Join("tend.lock"))
	for _, flag := range []int{os.O_RDWR | os.O_CREATE, os.O_WRONLY | os.O_CREATE | os.O_TRUNC, os.O_WRONLY | os.O_APPEND} {
		if f, err := d.OpenFile("tend.lock", flag, 0o600); err == nil {
			f.Close()
			t.Fatalf("flag %#x: opened through the symlink", flag)
		}
	}
	if b, _ := os.ReadFile(target); string(b) != "keep me" {
		t.Fatalf("target now holds %q", b)
	}
	// An atomic write replaces the link itself and leaves the target alone.
	if err := d.WriteFileAtomic("tend.lock", []byte("new"), 0o600, false); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep me" {
		t.Fatalf("target now holds %q", b)
	}
	if b, err := d.ReadFile("tend.lock"); err != nil || string(b) != "new" {
		t.Fatalf("read %q, %v", b, err)
	}
}

func TestOpenFileRefusesAFIFOWithoutBlocking(t *testing.T) {
	d, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Mkfifo("log", 0o600); err != nil {
		t.Fatal(err)
	}
	for _, flag := range []int{os.O_RDONLY, os.O_WRONLY | os.O_APPEND | os.O_CREATE} {
		_, err := d.OpenFile("log", flag, 0o600)
		if err == nil {
			t.Fatalf("flag %#x: opened a FIFO as a file", flag)
		}
	}
}

func TestMkfifoReplacesASymlink(t *testing.T) {
	d, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	target := filepath.Join(t.TempDir(), "elsewhere")
	os.Symlink(target, d.Join("p"))
	if err := d.Mkfifo("p", 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(d.Join("p"))
	if err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("%v %v: not a FIFO", fi.Mode(), err)
	}
	if _, err := os.Lstat(target); !os.IsNotExist(err) {
		t.Fatalf("something was made at the link's target: %v", err)
	}
}

func TestSubIsCheckedToo(t *testing.T) {
	d, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	elsewhere := t.TempDir()
	os.Symlink(elsewhere, d.Join("logs"))
	if _, err := d.Sub("logs"); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Fatalf("Sub through a symlink: %v", err)
	}
	s, err := d.Sub("audit")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if fi, _ := os.Stat(d.Join("audit")); fi.Mode().Perm() != 0o700 {
		t.Fatalf("mode %v", fi.Mode())
	}
	if _, err := d.OpenFile("../x", os.O_RDONLY, 0); err == nil {
		t.Fatal("a path with a slash was accepted")
	}
}

func TestNamesAndRemove(t *testing.T) {
	d, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	d.WriteFileAtomic("a", nil, 0o600, true)
	d.WriteFileAtomic("b", nil, 0o600, false)
	if err := d.Remove("a"); err != nil {
		t.Fatal(err)
	}
	if err := d.Remove("missing"); err != nil {
		t.Fatal(err)
	}
	names, err := d.Names()
	if err != nil || len(names) != 1 || names[0] != "b" {
		t.Fatalf("names %v, %v", names, err)
	}
}

func TestRuntimeDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	}
	id := ID(t.TempDir())
	r, err := Runtime(id, true)
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(r.Path())
	defer r.Close()
	if fi, err := os.Stat(r.Path()); err != nil || fi.Mode().Perm() != 0o711 {
		t.Fatalf("%v %v", fi, err)
	}
	if len(r.Path()) > 40 {
		t.Errorf("runtime dir %s is not short", r.Path())
	}
}

// A state directory another user could replace through a parent is
// refused, naming that parent: one writable by others without the sticky
// bit, one of another user (also when reached through a symlink), one
// behind another user's symlink. /tmp-like sticky parents stay fine.
func TestOpenRefusesReplaceableParents(t *testing.T) {
	base := t.TempDir()
	mk := func(path string, mode os.FileMode, uid int) string {
		t.Helper()
		if err := os.Mkdir(path, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if uid >= 0 {
			if err := os.Lchown(path, uid, uid); err != nil {
				t.Fatal(err)
			}
		}
		return path
	}
	open := filepath.Join(mk(filepath.Join(base, "open"), 0o777, -1), "mine")
	mk(open, 0o755, -1)
	cases := map[string]string{ // the state dir: the parent its refusal names
		filepath.Join(open, ".tend"):                 filepath.Join(base, "open") + ", a parent of state_dir",
		filepath.Join(base, "open", "new"):           filepath.Join(base, "open") + ", a parent of state_dir",
		filepath.Join(base, "open", "made", ".tend"): filepath.Join(base, "open") + ", a parent of state_dir",
	}
	sticky := mk(filepath.Join(base, "sticky"), os.ModeSticky|0o777, -1)
	mk(filepath.Join(sticky, "x"), 0o755, -1)
	fine := []string{filepath.Join(sticky, "x", ".tend"), filepath.Join(sticky, "y", "z", ".tend")}
	if os.Geteuid() == 0 {
		shared := mk(filepath.Join(base, "shared"), 0o755, 65534) // /srv/shared of another user
		cases[filepath.Join(shared, ".tend")] = shared + ", a parent of state_dir"
		// Through a symlink of ours into another user's directory.
		os.Symlink(shared, filepath.Join(base, "via"))
		cases[filepath.Join(base, "via", ".tend")] = shared + ", a parent of state_dir"
		// Behind a symlink another user owns, in a sticky directory.
		link := filepath.Join(sticky, "theirs")
		os.Symlink(filepath.Join(sticky, "x"), link)
		if err := os.Lchown(link, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		cases[filepath.Join(link, ".tend")] = link + ", a symlink on the way to state_dir"
		// Inside a sticky directory, what is in it must be ours.
		their := mk(filepath.Join(sticky, "their"), 0o755, 65534)
		cases[filepath.Join(their, ".tend")] = their + ", a parent of state_dir"
	}
	for path, msg := range cases {
		d, err := Open(path)
		if err == nil {
			d.Close()
		}
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: error %v, want %q", path, err, msg)
		}
		if !errors.Is(err, ErrUnsafe) || !errors.Is(err, program.ErrBadConfig) {
			t.Errorf("%s: %v does not match ErrUnsafe and ErrBadConfig", path, err)
		}
		if _, serr := os.Lstat(path); serr == nil {
			t.Errorf("%s was made before the refusal", path)
		}
		if _, serr := os.Lstat(filepath.Join(base, "open", "made")); serr == nil {
			t.Errorf("a parent was made before the refusal")
		}
	}
	for _, path := range fine {
		d, err := Open(path)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		d.Close()
	}
}

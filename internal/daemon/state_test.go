package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/statedir"
	"github.com/tend-sh/tend/internal/testutil"
)

// TestAuditStaysUnderItsCap: a crash loop writes far more events than
// audit_max_size; the audit directory never holds more, and the events
// kept read back without a gap from the oldest kept seq.
func TestAuditStaysUnderItsCap(t *testing.T) {
	dir := t.TempDir()
	c, _ := startDaemon(t, dir, `[daemon]
audit_max_size = "1MiB"
[program.loop]
shell = "exit 1"
backoff_initial = "0s"
backoff_max = "0s"
max_crashes = 1000000
`)
	audit := filepath.Join(dir, ".tend", "audit")
	size := func() (n int64, files int) {
		entries, _ := os.ReadDir(audit)
		for _, e := range entries {
			if fi, err := e.Info(); err == nil {
				n += fi.Size()
				files++
			}
		}
		return n, files
	}
	var written int64
	var last uint64
	deadline := time.Now().Add(2 * time.Minute)
	for written < 2<<20 { // twice the cap
		if time.Now().After(deadline) {
			t.Fatalf("only %d bytes of events in 2 minutes", written)
		}
		if n, files := size(); n > 1<<20 {
			t.Fatalf("the audit dir holds %d bytes in %d files, over the cap of 1MiB", n, files)
		}
		evs, err := c.Events(last)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if last > 0 && e.Seq != last+1 {
				t.Fatalf("seq %d after %d", e.Seq, last)
			}
			line, _ := e.MarshalJSON()
			written += int64(len(line)) + 1
			last = e.Seq
		}
		time.Sleep(50 * time.Millisecond)
	}
	evs, err := c.Events(0)
	if err != nil {
		t.Fatal(err)
	}
	if evs[0].Seq == 1 {
		t.Error("nothing was removed")
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].Seq != evs[i-1].Seq+1 {
			t.Fatalf("a gap in the kept events after seq %d", evs[i-1].Seq)
		}
	}
	if n, _ := size(); n < 1<<19 {
		t.Errorf("the cap removed too much: %d bytes kept", n)
	}
	// The loop goes on removing the oldest: ask for recent ones.
	mid := evs[len(evs)*3/4].Seq
	if since, err := c.Events(mid); err != nil || len(since) == 0 || since[0].Seq != mid+1 {
		t.Errorf("events after %d: %v", mid, err)
	}
}

func TestTokenIsMadeOnceAndCheckedAfter(t *testing.T) {
	d := testutil.StateDir(t)
	tok, err := loadToken(d)
	if err != nil || len(tok) != 64 {
		t.Fatalf("new token %q: %v", tok, err)
	}
	if fi, _ := os.Stat(d.Join(tokenName)); fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v", fi.Mode().Perm())
	}
	if again, err := loadToken(d); err != nil || again != tok {
		t.Errorf("second load: %q %v", again, err)
	}

	os.Chmod(d.Join(tokenName), 0o640)
	if _, err := loadToken(d); !errors.Is(err, program.ErrBadConfig) || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a token others may read: %v", err)
	}
	os.Chmod(d.Join(tokenName), 0o600)

	if os.Geteuid() == 0 {
		os.Chown(d.Join(tokenName), 65534, 65534)
		if _, err := loadToken(d); !errors.Is(err, program.ErrBadConfig) || !strings.Contains(err.Error(), "uid 65534") {
			t.Errorf("a token of another user: %v", err)
		}
	}

	os.Remove(d.Join(tokenName))
	target := filepath.Join(t.TempDir(), "target")
	os.WriteFile(target, []byte("0123456789abcdef0123456789abcdef\n"), 0o600)
	os.Symlink(target, d.Join(tokenName))
	if _, err := loadToken(d); !errors.Is(err, statedir.ErrUnsafe) || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("a symlinked token: %v", err)
	}
	if b, _ := os.ReadFile(target); string(b) != "0123456789abcdef0123456789abcdef\n" {
		t.Errorf("the target changed: %q", b)
	}

	os.Remove(d.Join(tokenName))
	os.WriteFile(d.Join(tokenName), []byte("short\n"), 0o600)
	if _, err := loadToken(d); err == nil || !strings.Contains(err.Error(), "at least 16") {
		t.Errorf("a short token: %v", err)
	}
}

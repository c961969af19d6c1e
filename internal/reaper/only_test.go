package reaper

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Run hands back the exit of its child, collected by the drain like any
// other, and a failed fork leaves nothing registered.
func TestInChildRunWaitsThroughTheDrain(t *testing.T) {
	r := inChild(t)
	done := make(chan Status, 1)
	go func() {
		s, err := r.Run(forkExec("/bin/sh", "-c", "exit 7"))
		if err != nil {
			t.Error(err)
		}
		done <- s
	}()
	select {
	case s := <-done:
		if !s.Wait.Exited() || s.Wait.ExitStatus() != 7 {
			t.Errorf("status %v, want exit 7", s.Wait)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run never returned")
	}
	if _, err := r.Run(forkExec("/nonexistent/tend-test")); err == nil {
		t.Error("a failed exec returned no error")
	}
	r.mu.Lock()
	n := len(r.routes)
	r.mu.Unlock()
	if n != 0 {
		t.Errorf("%d routes left", n)
	}
}

// waiters are the calls that wait for a child: in the daemon, only this
// package may make them (the README's "one caller of wait4"). The CLI's
// own process (internal/cli), the test helpers and the benchmarks are not
// the daemon.
var waiters = regexp.MustCompile(`\b(Wait4|Waitid|StartProcess|exec\.Command(Context)?)\(`)

func TestOnlyTheReaperWaitsForChildren(t *testing.T) {
	root := filepath.Join("..", "..")
	notDaemon := []string{"internal/reaper/", "internal/cli/", "internal/testutil/", "bench/", "scripts/"}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if strings.HasPrefix(rel, ".") && rel != "." || strings.Contains(rel, "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		for _, p := range notDaemon {
			if strings.HasPrefix(rel, p) {
				return nil
			}
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if trimmed := strings.TrimSpace(line); !strings.HasPrefix(trimmed, "//") && waiters.MatchString(line) {
				t.Errorf("%s:%d waits for a child outside the reaper: %s", rel, i+1, trimmed)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

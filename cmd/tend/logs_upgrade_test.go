package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/testutil"
)

// TestLogsFollowAcrossAnUpgrade: tend logs -f goes on through tend
// upgrade, from where it was: every line the program writes before,
// during and after the upgrade is printed once, in order.
func TestLogsFollowAcrossAnUpgrade(t *testing.T) {
	dir := t.TempDir()
	tend := installTend(t, dir)
	conf := filepath.Join(dir, "tend.toml")
	write(t, conf, "[program.counter]\nshell = \"i=0; while :; do i=$((i+1)); echo line $i; sleep 0.005; done\"\n")
	c := client.New(filepath.Join(dir, ".tend", "tend.sock"))
	up, stderr := startUpLogged(t, tend, conf)
	waitRunning(t, c, "counter:0")

	var out, errOut testutil.Buffer
	follow := exec.Command(tend, "-c", conf, "logs", "-f", "-n", "1000000", "counter")
	follow.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=10")
	follow.Stdout, follow.Stderr = &out, &errOut
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- follow.Wait() }()
	t.Cleanup(func() {
		follow.Process.Kill()
		<-done
	})
	lines := func() int { return strings.Count(out.String(), "\n") }
	testutil.Eventually(t, "the follower to print lines", func() bool { return lines() >= 50 })

	replaceTend(t, tend, tend, "\n# the next build\n")
	if code, o, e := tendRun(t, tend, "-c", conf, "upgrade"); code != 0 {
		t.Fatalf("tend upgrade: %d %s%s\n%s", code, o, e, stderr())
	}
	n := lines()
	testutil.Eventually(t, "the follower to print lines after the upgrade", func() bool {
		select {
		case err := <-done:
			done <- err
			return true // reported below
		default:
		}
		return lines() >= n+200
	}, testutil.Within(30*time.Second))
	select {
	case err := <-done:
		done <- err
		t.Fatalf("tend logs -f ended with the upgrade (%v): %s", err, errOut.String())
	default:
	}
	follow.Process.Signal(syscall.SIGTERM)
	<-done
	done <- nil
	checkFollowed(t, out.String())
	downAndGone(t, c, up, nil)
}

// checkFollowed checks that text is "line K", "line K+1", ... with no gap
// and no repeat (the first line may be any: the log's start).
func checkFollowed(t *testing.T, text string) {
	t.Helper()
	prev := 0
	for i, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		v, ok := strings.CutPrefix(l, "line ")
		k, err := strconv.Atoi(v)
		if !ok || err != nil {
			t.Fatalf("line %d of the output: %q", i+1, l)
		}
		if i > 0 && k != prev+1 {
			t.Fatalf("line %d of the output: %q after line %d", i+1, l, prev)
		}
		prev = k
	}
	if prev < 200 {
		t.Errorf("only up to line %d", prev)
	}
}

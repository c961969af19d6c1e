package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/testutil"
)

// countCmdline counts the live processes whose command line is cmd.
func countCmdline(cmd string) int {
	entries, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err == nil && cmdline(pid) == cmd+" " && testutil.Alive(pid) {
			n++
		}
	}
	return n
}

// TestADamagedRunsJSONStartsNothingTwice: the daemon is SIGKILLed and its
// runs.json damaged (garbage, then cut short); each time the next daemon
// adopts the recorded runs instead of starting them again, and keeps the
// bad file aside. Then a daemon that fails at start (its HTTP port taken)
// keeps the records for the one after it.
func TestADamagedRunsJSONStartsNothingTwice(t *testing.T) {
	dir := t.TempDir()
	tend := tendBinary(t)
	becomeSubreaper(t)
	conf := filepath.Join(dir, "tend.toml")
	state := filepath.Join(dir, ".tend")
	runsJSON := filepath.Join(state, "runs.json")
	const sleeper = "sleep 100042"
	fleet := "[program.w]\ncommand = [\"sleep\", \"100042\"]\ninstances = 2\n"
	write(t, conf, fleet)
	c := client.New(filepath.Join(state, "tend.sock"))

	up := startUp(t, tend, conf)
	waitRunning(t, c, "w:0", "w:1")
	first := pids(t, c, "w:0", "w:1")
	testutil.Eventually(t, "runs.json to hold both runs", func() bool {
		b, _ := os.ReadFile(runsJSON)
		return strings.Contains(string(b), `"pid":`+strconv.Itoa(first["w:0"])) && strings.Contains(string(b), `"pid":`+strconv.Itoa(first["w:1"]))
	})

	for _, damage := range []struct {
		name string
		bad  func(b []byte) []byte
	}{
		{"garbage", func([]byte) []byte { return []byte("\x00\x00\x00{not json at all") }},
		{"truncated", func(b []byte) []byte { return b[:len(b)/2] }},
	} {
		killUp(t, up, up.Process.Pid, first)
		good, err := os.ReadFile(runsJSON)
		if err != nil {
			t.Fatal(err)
		}
		bad := damage.bad(good)
		write(t, runsJSON, string(bad))
		asideBefore, _ := filepath.Glob(runsJSON + ".corrupt-*")

		up = startUp(t, tend, conf)
		waitRunning(t, c, "w:0", "w:1")
		if got := pids(t, c, "w:0", "w:1"); got["w:0"] != first["w:0"] || got["w:1"] != first["w:1"] {
			t.Errorf("%s runs.json: runs %v, before %v", damage.name, got, first)
		}
		if n := countCmdline(sleeper); n != 2 {
			t.Errorf("%s runs.json: %d copies of %q running, want 2", damage.name, n, sleeper)
		}
		aside, _ := filepath.Glob(runsJSON + ".corrupt-*")
		if len(aside) != len(asideBefore)+1 {
			t.Fatalf("%s runs.json: set aside as %v", damage.name, aside)
		}
		for _, name := range aside {
			if b, _ := os.ReadFile(name); string(b) == string(bad) {
				bad = nil
			}
		}
		if bad != nil {
			t.Errorf("%s runs.json: the bad file was not kept as it was", damage.name)
		}
	}

	// A daemon that fails after reading runs.json writes back what it read.
	killUp(t, up, up.Process.Pid, first)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	write(t, conf, "[daemon]\nhttp = \""+taken.Addr().String()+"\"\n"+fleet)
	if out, err := exec.Command(tend, "up", "-c", conf).CombinedOutput(); err == nil {
		t.Fatalf("tend up with its port taken succeeded:\n%s", out)
	}
	write(t, conf, fleet)
	up = startUp(t, tend, conf)
	waitRunning(t, c, "w:0", "w:1")
	if got := pids(t, c, "w:0", "w:1"); got["w:0"] != first["w:0"] || got["w:1"] != first["w:1"] {
		t.Errorf("after a failed start: runs %v, before %v", got, first)
	}
	if n := countCmdline(sleeper); n != 2 {
		t.Errorf("after a failed start: %d copies running, want 2", n)
	}

	downAndGone(t, c, up, first)
}

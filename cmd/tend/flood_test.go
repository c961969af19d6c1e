package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/keeper"
	"github.com/tend-sh/tend/internal/logfile"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// The terminal keeper reads every tty run always (docs/terminal.md#the-keeper):
// not one byte a run writes is lost or doubled across a daemon SIGKILL at
// any moment, and a run never blocks while no daemon runs. These tests
// flood a terminal with numbered lines of a fixed width and read the log
// back, whole.

var soak = flag.Bool("tend.soak", false, "run the long variants (a 200 MB flood)")

// floodPy writes lines 0 … n-1 as "%0*d\n" of width w, in batches, paced
// to take about secs seconds (0: as fast as the terminal takes them),
// then END, then waits for its gate file (if any) to go, and sleeps on or
// exits.
const floodPy = `
import os, sys, time
n, w, secs, after = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
gate = sys.argv[5] if len(sys.argv) > 5 else ""
while gate and not os.path.exists(gate):
    time.sleep(0.02)
out = sys.stdout.buffer
batch = 4096
start = time.monotonic()
fmt = b"%0" + str(w).encode() + b"d\n"
for i in range(0, n, batch):
    out.write(b"".join(fmt % j for j in range(i, min(n, i + batch))))
    out.flush()
    if secs > 0:
        ahead = start + secs * min(n, i + batch) / n - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)
out.write(b"END\n")
out.flush()
if after == "sleep":
    os.execvp("sleep", ["sleep", "100000"])
`

// floodConf writes the flood program's config: n lines of width w over
// secs seconds, then after ("sleep", or "exit"), started once gate exists
// ("" for at once).
func floodConf(t *testing.T, dir string, n, w int, secs float64, after, gate string) string {
	t.Helper()
	py := filepath.Join(dir, "flood.py")
	write(t, py, floodPy)
	args := fmt.Sprintf(`"%s", "%d", "%d", "%g", "%s"`, py, n, w, secs, after)
	if gate != "" {
		args += `, "` + gate + `"`
	}
	conf := filepath.Join(dir, "tend.toml")
	write(t, conf, `[program.flood]
command = ["python3", "-u", `+args+`]
tty = true
restart = "never"
[program.flood.logs]
max_size = "256MiB"
max_files = 8
`)
	return conf
}

// checkFlood reads the flood's log files (oldest first, as one stream) and
// finds lines 0 … n-1 of width w, each once, whole, in order, then END.
// With gaps > 0 it allows that many runs of missing bytes (a keeper killed
// outright), each at most maxGap bytes, and returns the bytes missing.
func checkFlood(t *testing.T, dir string, n, w int, gaps, maxGap int) int {
	t.Helper()
	logs := filepath.Join(dir, ".tend", "logs")
	var files []io.Reader
	for i := 20; i >= 0; i-- {
		name := filepath.Join(logs, "flood-0.log")
		if i > 0 {
			name += "." + strconv.Itoa(i)
		}
		f, err := os.Open(name)
		if err != nil {
			continue
		}
		defer f.Close()
		files = append(files, f)
	}
	sc := bufio.NewScanner(io.MultiReader(files...))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) { // lines as they are: a record's line may end in CR
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			return i + 1, data[:i], nil
		}
		if atEOF && len(data) > 0 {
			return len(data), data, nil
		}
		return 0, nil, nil
	})
	var pend []byte
	next, missing, lineLen := 0, 0, w+2
	ended := false
	check := func(line []byte) {
		if ended {
			t.Fatalf("after END: %q", line)
		}
		if string(line) == "END\r" && next == n {
			ended = true
			return
		}
		if len(line) == w+1 && line[w] == '\r' {
			if v, err := strconv.Atoi(string(line[:w])); err == nil && v == next {
				next++
				return
			} else if err == nil && v > next && gaps > 0 {
				gaps--
				missing += (v - next) * lineLen
				if (v-next)*lineLen > maxGap {
					t.Fatalf("%d bytes missing before line %d, more than %d", (v-next)*lineLen, v, maxGap)
				}
				next = v + 1
				return
			}
		}
		// A line a keeper's death cut: the end of one glued to the start
		// of another, counted with the gap that follows it.
		if gaps > 0 && len(line) > 0 && len(line) < 2*lineLen {
			if k := bytes.LastIndexByte(line, '\r'); k == len(line)-1 && len(line) > w {
				if v, err := strconv.Atoi(string(line[len(line)-1-w : len(line)-1])); err == nil && v > next {
					gaps--
					missing += (v-next)*lineLen + lineLen - len(line) - 1
					if (v-next+1)*lineLen > maxGap+lineLen {
						t.Fatalf("%d bytes missing before line %d, more than %d", (v-next)*lineLen, v, maxGap)
					}
					next = v + 1
					return
				}
			}
		}
		t.Fatalf("after line %d of %d (%d bytes missing so far): %d bytes %q", next-1, n, missing, len(line), line[max(0, len(line)-20):])
	}
	for sc.Scan() {
		r, err := logfile.Parse(sc.Bytes())
		if err != nil {
			t.Fatalf("not a record: %q", sc.Bytes())
		}
		if r.Stream != logfile.TTY {
			continue
		}
		pend = append(pend, r.Line...)
		if !r.Partial {
			pend = append(pend, '\n')
		}
		for {
			i := bytes.IndexByte(pend, '\n')
			if i < 0 {
				break
			}
			check(pend[:i])
			pend = pend[i+1:]
		}
		if len(pend) == 0 {
			pend = pend[:0:0]
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if !ended || len(pend) > 0 {
		t.Fatalf("the log ends after line %d of %d (ended %v), then %q", next-1, n, ended, pend)
	}
	return missing
}

// burstPy writes lines 0 … n-1 as "%0*d\n" of width w in bursts, as fast
// as the terminal takes them: a burst of n/20 lines for each b read from
// the FIFO fifo; at e, the rest, then END, then it sleeps on.
const burstPy = `
import os, sys
n, w, fifo = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
out = sys.stdout.buffer
fmt = b"%0" + str(w).encode() + b"d\n"
gate = open(fifo, "rb", buffering=0)
i, burst = 0, max(1, n // 20)
while i < n:
    c = gate.read(1)
    end = n if c in (b"e", b"") else min(n, i + burst)
    while i < end:
        k = min(end, i + 4096)
        out.write(b"".join(fmt % j for j in range(i, k)))
        out.flush()
        i = k
out.write(b"END\n")
out.flush()
os.execvp("sleep", ["sleep", "100000"])
`

// burstConf writes the config of a program of burstPy's, n lines, and
// returns it with the FIFO that gates its bursts.
func burstConf(t *testing.T, dir string, n int) (string, *os.File) {
	t.Helper()
	py, fifo := filepath.Join(dir, "burst.py"), filepath.Join(dir, "bursts")
	write(t, py, burstPy)
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	gate, err := os.OpenFile(fifo, os.O_RDWR, 0) // read and write: opening it never waits
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gate.Close() })
	conf := filepath.Join(dir, "tend.toml")
	write(t, conf, fmt.Sprintf(`[program.flood]
command = ["python3", "-u", "%s", "%d", "12", "%s"]
tty = true
restart = "never"
[program.flood.logs]
max_size = "256MiB"
max_files = 8
`, py, n, fifo))
	return conf, gate
}

// floodSize is the default test's flood, and the soak's: numbered lines
// of 12 digits (13 bytes, 14 in the terminal's CR LF), and how long a
// burst of a twentieth of them may take at most, about.
func floodSize() (lines int, burst time.Duration) {
	if *soak {
		return 200000000 / 13, 400 * time.Millisecond // 200 MB
	}
	return 1500000, 40 * time.Millisecond // 19.5 MB
}

// A tty run floods its terminal with numbered lines, in 20 bursts as fast
// as the terminal takes them, and the daemon is killed outright (SIGKILL)
// at a random moment of each burst (or of its own start, replay or
// following), and started again each time: the log holds every line once,
// whole, in order. A killed daemon had read nothing that the keeper had
// not written.
func TestTTYFloodAcrossDaemonKills(t *testing.T) {
	dir := t.TempDir()
	tend := tendBinary(t)
	becomeSubreaper(t)
	n, burst := floodSize()
	conf, gate := burstConf(t, dir, n)
	c := client.New(filepath.Join(dir, ".tend", "tend.sock"))
	up, _ := startUpLogged(t, tend, conf)
	waitRunning(t, c, "flood:0")
	runs := pids(t, c, "flood:0")
	pid := runs["flood:0"]
	orphaned(t, keeperOf(t, dir))
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 29))
	for kill := range 20 {
		if kill > 0 {
			up = startUp(t, tend, conf)
		}
		if kill%2 == 1 {
			// Every other kill waits for the run's adoption first: the
			// others may come as the daemon starts, replays or follows.
			waitRunning(t, c, "flood:0")
		}
		if _, err := gate.Write([]byte("b")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rng.Int64N(int64(burst))))
		killUp(t, up, up.Process.Pid, runs)
	}
	if _, err := gate.Write([]byte("e")); err != nil {
		t.Fatal(err)
	}
	up, stderr := startUpLogged(t, tend, conf)
	waitRunning(t, c, "flood:0")
	if got := pids(t, c, "flood:0"); got["flood:0"] != pid {
		t.Fatalf("the run changed: %v, was %d\n%s", got, pid, stderr())
	}
	testutil.Eventually(t, "the flood's end", func() bool { return comm(pid) == "sleep" })
	checkFlood(t, dir, n, 12, 0, 0)
	// The screen was rebuilt from the log's tail and followed on from
	// there: its last lines are the flood's last, once each.
	screen := func() string { _, out, _ := tendRun(t, tend, "-c", conf, "screen", "flood:0"); return out }
	testutil.Eventually(t, "the screen's end", func() bool { return strings.Contains(screen(), "END") }, testutil.Explain(screen))
	checkScreenTail(t, screen(), n)
	downAndGone(t, c, up, runs)
}

// checkScreenTail finds the flood's last lines on the screen, in order,
// once each, then END.
func checkScreenTail(t *testing.T, screen string, n int) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(screen, "\n"), "\n")
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) < 3 || strings.TrimSpace(lines[len(lines)-1]) != "END" {
		t.Fatalf("the screen does not end with END:\n%s", screen)
	}
	want := n - 1
	for i := len(lines) - 2; i >= 0 && i >= len(lines)-6; i-- {
		if strings.TrimSpace(lines[i]) != fmt.Sprintf("%012d", want) {
			t.Fatalf("screen line %d is %q, want line %d:\n%s", i, lines[i], want, screen)
		}
		want--
	}
}

// comm is the command name of pid ("" once gone).
func comm(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return strings.TrimSpace(string(b))
}

// A run that writes 100 MB while no daemon runs finishes without
// blocking, and the next daemon finds all of it in the log.
func TestTTYFloodWhileNoDaemonRuns(t *testing.T) {
	dir := t.TempDir()
	tend := tendBinary(t)
	becomeSubreaper(t)
	gate := filepath.Join(dir, "gate")
	const n, w = 100 << 20 / 128, 127 // 100 MiB of lines of 128 bytes
	conf := floodConf(t, dir, n, w, 0, "exit", gate)
	c := client.New(filepath.Join(dir, ".tend", "tend.sock"))
	up := startUp(t, tend, conf)
	waitRunning(t, c, "flood:0")
	runs := pids(t, c, "flood:0")
	pid := runs["flood:0"]
	orphaned(t, keeperOf(t, dir))
	killUp(t, up, up.Process.Pid, runs)
	write(t, gate, "")
	// The run is this process's to reap now (a subreaper): it exits once
	// it has written everything, with no daemon to read its terminal.
	deadline := time.Now().Add(120 * time.Second)
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		if err != nil || got == pid {
			if got == pid && (!ws.Exited() || ws.ExitStatus() != 0) {
				t.Fatalf("the run ended %v", ws)
			}
			break
		}
		if time.Now().After(deadline) {
			w, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/wchan")
			t.Fatalf("the run did not finish while no daemon ran (it waits in %s)", w)
		}
		time.Sleep(50 * time.Millisecond)
	}
	up = startUp(t, tend, conf)
	testutil.Eventually(t, "the next daemon to see the run ended", func() bool {
		st, err := c.Status("flood:0")
		return err == nil && st.PID == nil && st.State == program.StateExited
	})
	checkFlood(t, dir, n, w, 0, 0)
	if err := c.Shutdown(); err != nil {
		t.Fatal(err)
	}
	up.Wait()
}

// tend upgrade in the middle of a flood, several times, then a SIGKILL:
// the log holds every line once, whole, in order.
func TestTTYFloodAcrossUpgrades(t *testing.T) {
	dir := t.TempDir()
	tend := installTend(t, dir)
	becomeSubreaper(t)
	n, secs := 1000000, 15.0
	if *soak {
		n, secs = 200000000/13, 60 // 200 MB
	}
	conf := floodConf(t, dir, n, 12, secs, "sleep", "")
	c := client.New(filepath.Join(dir, ".tend", "tend.sock"))
	up, stderr := startUpLogged(t, tend, conf)
	waitRunning(t, c, "flood:0")
	runs := pids(t, c, "flood:0")
	pid := runs["flood:0"]
	orphaned(t, keeperOf(t, dir))
	for i := range 3 {
		time.Sleep(time.Duration(500+rand.IntN(1500)) * time.Millisecond)
		replaceTend(t, tend, tend, fmt.Sprintf("\n# build %d\n", i))
		if code, out, errOut := tendRun(t, tend, "-c", conf, "upgrade"); code != 0 {
			t.Fatalf("tend upgrade: %d %s%s\n%s", code, out, errOut, stderr())
		}
		waitRunning(t, c, "flood:0")
	}
	if comm(pid) == "sleep" {
		t.Logf("the flood ended before the last upgrade")
	}
	killUp(t, up, up.Process.Pid, runs)
	up = startUp(t, tend, conf)
	waitRunning(t, c, "flood:0")
	// The flood is paced over secs: the soak's takes a minute.
	testutil.Eventually(t, "the flood's end", func() bool { return comm(pid) == "sleep" }, testutil.Within(time.Duration(2*secs)*time.Second+30*time.Second))
	checkFlood(t, dir, n, 12, 0, 0)
	downAndGone(t, c, up, runs)
}

// A keeper killed outright in the middle of a flood loses at most what it
// had read and not yet written: one read chunk (docs/terminal.md#a-keeper-that-dies).
// The run keeps its terminal (a new keeper reads on), and a daemon SIGKILL
// in the middle of the next burst loses nothing.
func TestTTYFloodAcrossAKeeperKill(t *testing.T) {
	dir := t.TempDir()
	tend := tendBinary(t)
	becomeSubreaper(t)
	n, burst := floodSize()
	conf, gate := burstConf(t, dir, n)
	c := client.New(filepath.Join(dir, ".tend", "tend.sock"))
	up, stderr := startUpLogged(t, tend, conf)
	waitRunning(t, c, "flood:0")
	runs := pids(t, c, "flood:0")
	pid := runs["flood:0"]
	old := keeperOf(t, dir)
	gate.Write([]byte("b"))
	time.Sleep(time.Duration(rand.Int64N(int64(burst))))
	syscall.Kill(old, syscall.SIGKILL)
	var kp int
	testutil.Eventually(t, "a new keeper holding the run's master", func() bool {
		kp = recordedKeeper(dir)
		return kp > 0 && kp != old && holdsTerminalOf(kp, pid)
	}, testutil.Explain(stderr))
	orphaned(t, kp)
	gate.Write([]byte("b"))
	time.Sleep(time.Duration(rand.Int64N(int64(burst))))
	killUp(t, up, up.Process.Pid, runs)
	up = startUp(t, tend, conf)
	waitRunning(t, c, "flood:0")
	if !holdsTerminalOf(kp, pid) {
		t.Errorf("the new keeper lost the run's terminal")
	}
	gate.Write([]byte("e"))
	testutil.Eventually(t, "the flood's end", func() bool { return comm(pid) == "sleep" })
	missing := checkFlood(t, dir, n, 12, 1, ReadChunk)
	t.Logf("the keeper's death lost %d bytes", missing)
	downAndGone(t, c, up, runs)
}

// ReadChunk is the keeper's read chunk (keeper.ReadChunk): what its death
// may lose of a terminal.
const ReadChunk = keeper.ReadChunk

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// Programs added and removed by the hundred (remove_on_exit, the way a
// platform runs agents per task) leave the daemon as they found it: its
// descriptors and goroutines back where they were, and nothing of them on
// disk (logs, FIFOs, notify sockets, programs.json, runs.json) or in the
// cgroup tree.
func TestSessionsLeaveNothingBehind(t *testing.T) {
	if testing.Short() {
		t.Skip("300 programs through a real daemon")
	}
	cg := testutil.CgroupDir(t) // skips without root
	dir := t.TempDir()
	conf := filepath.Join(dir, "tend.toml")
	write(t, conf, fmt.Sprintf("[daemon]\ncgroup = %q\n\n[defaults]\nstop_grace = \"2s\"\n\n[program.web]\ncommand = [\"sleep\", \"1000\"]\n", cg))
	state := filepath.Join(dir, ".tend")
	tend := tendBinary(t)
	up, stderr := startUpLogged(t, tend, conf)
	c := client.New(filepath.Join(state, "tend.sock"))
	testutil.Eventually(t, "the daemon", func() bool { _, err := c.Health(); return err == nil })
	waitRunning(t, c, "web:0")

	churn(t, c, 0, 1, 50) // warm up: what a first session allocates for good
	// The base is taken once the warm-up's programs are gone from disk too
	// (runs.json is rewritten from its journal within a second): a base
	// that still lists them can never be matched (found in CI under load).
	var base residue
	testutil.Eventually(t, "the warm-up's programs gone", func() bool {
		base = measureDaemon(t, c, up.Process.Pid, state, cg)
		return !slices.ContainsFunc(base.files, func(f string) bool { return strings.Contains(f, "run-") })
	}, testutil.Within(60*time.Second), testutil.Explain(func() string { return base.String() }))
	churn(t, c, 1, 6, 50)
	var now residue
	testutil.Eventually(t, "the daemon back where it was", func() bool {
		now = measureDaemon(t, c, up.Process.Pid, state, cg)
		return now.goroutines <= base.goroutines+2 && now.fds <= base.fds && now.sameFiles(base)
	}, testutil.Within(60*time.Second), testutil.Explain(func() string {
		return fmt.Sprintf("before %s\nafter  %s\n%s", base, now, stderr())
	}))
	t.Logf("before: %s\nafter:  %s", base, now)
	if names := keptNames(t, state); !slices.Equal(names, nil) {
		t.Errorf("programs.json still has %v", names)
	}
	if ids := programNames(t, c); !slices.Equal(ids, []string{"web"}) {
		t.Errorf("programs left: %v", ids)
	}
	// No series of them either, even where every instance is listed.
	hc := unixHTTP(filepath.Join(state, "tend.sock"))
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("http://tend/metrics?instances=all")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), `program="run-`) {
			t.Errorf("/metrics still has a removed program: %s", sc.Text())
			break
		}
	}
}

// churn runs batches from..to-1 of n programs each: a quarter exit 0, a
// quarter exit 3 after a line of output, a quarter cannot be spawned, a
// quarter sleep until removed by label; two of each batch are followed
// attached. Each batch is gone before the next starts.
func churn(t *testing.T, c *client.Client, from, to, n int) {
	t.Helper()
	ctx := t.Context()
	for b := from; b < to; b++ {
		batch := "b" + strconv.Itoa(b)
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			cmd := [][]string{{"true"}, {"sh", "-c", "echo out; exit 3"}, {"/nonexistent/agent"}, {"sleep", "60"}}[i%4]
			kind := [...]string{"clean", "crash", "missing", "sleep"}[i%4]
			body := map[string]any{"command": cmd, "remove_on_exit": true,
				"labels": map[string]string{"batch": batch, "kind": kind}}
			wg.Go(func() {
				if i < 2 { // attached: the run's end comes back, and then it is gone
					end, err := c.Attach(ctx, body, nil, nil)
					if err == nil && end.Status != [...]int{0, 3}[i] {
						err = fmt.Errorf("attached run of %v: status %d", cmd, end.Status)
					}
					errs <- err
					return
				}
				_, err := c.AddProgram(ctx, body)
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		sleepers, _ := program.ParseLabelSelector([]string{"batch=" + batch, "kind=sleep"})
		testutil.Eventually(t, "the sleepers of "+batch+" to run", func() bool {
			sts, err := c.Select(ctx, "all", sleepers)
			return err == nil && len(sts) == n/4 && !slices.ContainsFunc(sts, func(st program.Status) bool { return st.PID == nil })
		})
		if removed, err := c.RemoveMatching(ctx, "", sleepers, program.RemoveOptions{}); err != nil || len(removed) != n/4 {
			t.Fatalf("removing the sleepers of %s: %v, %v", batch, removed, err)
		}
		all, _ := program.ParseLabelSelector([]string{"batch=" + batch})
		testutil.Eventually(t, batch+" to be gone", func() bool {
			sts, err := c.Select(ctx, "all", all)
			return err == nil && len(sts) == 0
		}, testutil.Within(60*time.Second))
	}
}

// residue is what the daemon holds: descriptors, goroutines, memory, and
// the files and groups there are.
type residue struct {
	fds, goroutines int
	rss             int64
	files           []string // in logs, fifo, notify; the runs in runs.json; the cgroup tree
}

func (r residue) String() string {
	return fmt.Sprintf("%d descriptors, %d goroutines, RSS %d KiB, files %v", r.fds, r.goroutines, r.rss>>10, r.files)
}

func (r residue) sameFiles(o residue) bool { return slices.Equal(r.files, o.files) }

func measureDaemon(t *testing.T, c *client.Client, pid int, state, cg string) residue {
	t.Helper()
	r := residue{fds: descriptors(pid), goroutines: goroutines(t, filepath.Join(state, "tend.sock")), rss: rssOf(pid)}
	for _, sub := range []string{"logs", "fifo", "notify"} {
		ents, _ := os.ReadDir(filepath.Join(state, sub))
		for _, e := range ents {
			r.files = append(r.files, sub+"/"+e.Name())
		}
	}
	// runs.json is rewritten from its journal within a second: either
	// holds every run in place.
	for _, name := range []string{"runs.json", "runs.json.log"} {
		b, _ := os.ReadFile(filepath.Join(state, name))
		in := map[string]bool{} // the journal's later lines win: "gone" drops a run
		for _, line := range strings.Split(string(b), "\n") {
			var r struct {
				ID   string `json:"id"`
				Gone bool   `json:"gone"`
			}
			if json.Unmarshal([]byte(strings.TrimSuffix(strings.TrimSpace(line), ",")), &r) == nil && r.ID != "" {
				in[r.ID] = !r.Gone
			}
		}
		for id, ok := range in {
			if ok && !slices.Contains(r.files, "run:"+id) {
				r.files = append(r.files, "run:"+id)
			}
		}
	}
	filepath.WalkDir(cg, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && path != cg {
			r.files = append(r.files, "cgroup:"+strings.TrimPrefix(path, cg))
		}
		return nil
	})
	slices.Sort(r.files)
	return r
}

// descriptors counts every descriptor table of pid once: tend's epoll
// loops and its forker keep private tables that /proc/PID/fd does not
// show, and threads that share a table list the same entries.
func descriptors(pid int) int {
	total := 0
	seen := map[string]bool{}
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, task := range tasks {
		dir := fmt.Sprintf("/proc/%d/task/%s/fd", pid, task.Name())
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		var key strings.Builder
		for _, fd := range fds {
			target, _ := os.Readlink(dir + "/" + fd.Name())
			key.WriteString(fd.Name() + "=" + target + "\n")
		}
		if !seen[key.String()] {
			seen[key.String()] = true
			total += len(fds)
		}
	}
	return total
}

// goroutines reads go_goroutines from the daemon's /metrics.
func goroutines(t *testing.T, sock string) int {
	t.Helper()
	hc := unixHTTP(sock)
	defer hc.CloseIdleConnections() // no connection of ours stays open in the daemon
	resp, err := hc.Get("http://tend/metrics?instances=none")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return int(n)
		}
	}
	t.Fatal("no go_goroutines in /metrics")
	return 0
}

// rssOf is pid's resident memory in bytes (0 if unknown).
func rssOf(pid int) int64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/bench/internal/measure"
	"github.com/tend-sh/tend/internal/client"
)

// binaries are what a run executes, built for it.
type binaries struct {
	tend, floor string
	src         measure.Source
}

// build compiles tend and the floor program from the module at root.
func build(ctx context.Context, root, dir string) (binaries, error) {
	b := binaries{tend: filepath.Join(dir, "tend"), floor: filepath.Join(dir, "floor"), src: measure.ReadSource(root)}
	for _, p := range []struct{ out, pkg string }{{b.tend, "./cmd/tend"}, {b.floor, "./bench/churn/floor"}} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", p.out, p.pkg)
		cmd.Dir, cmd.Env = root, measure.StaticEnv()
		if out, err := cmd.CombinedOutput(); err != nil {
			return b, fmt.Errorf("go build %s: %w\n%s", p.pkg, err, out)
		}
	}
	return b, nil
}

// daemon is one tend up of the benchmark, in its own process group.
type daemon struct {
	bin, dir, sock string
	pid            int
	c              *client.Client
	hc             *http.Client // one connection, kept alive, for scrapes
	cmd            *exec.Cmd
	exited         chan struct{}
}

// startDaemon writes config as dir/tend.toml, runs tend up on it (its
// lines in dir/tend-up.log) and waits until it answers.
func startDaemon(bin, dir, config string) (*daemon, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "tend.toml")
	if err := os.WriteFile(conf, []byte(config), 0o600); err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "tend-up.log"))
	if err != nil {
		return nil, err
	}
	d := &daemon{bin: bin, dir: dir, sock: filepath.Join(dir, ".tend", "tend.sock"), exited: make(chan struct{})}
	d.c = client.New(d.sock)
	d.hc = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", d.sock)
	}}}
	d.cmd = exec.Command(bin, "up", "-c", conf)
	d.cmd.Dir = dir
	d.cmd.Stdout, d.cmd.Stderr = log, log
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	d.pid = d.cmd.Process.Pid
	go func() {
		d.cmd.Wait()
		log.Close()
		close(d.exited)
	}()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if _, err := d.c.Health(); err == nil {
			return d, nil
		}
		select {
		case <-d.exited:
			b, _ := os.ReadFile(filepath.Join(dir, "tend-up.log"))
			return nil, fmt.Errorf("tend up exited:\n%s", b)
		default:
		}
		if time.Now().After(deadline) {
			d.stop()
			return nil, errors.New("tend up did not answer within 2 minutes")
		}
	}
}

// stop is tend down, then SIGKILL of the daemon's group if it lingers.
func (d *daemon) stop() {
	d.hc.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	exec.CommandContext(ctx, d.bin, "down", "--socket", d.sock).Run()
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		syscall.Kill(-d.pid, syscall.SIGKILL)
		<-d.exited
	}
}

// tend execs the CLI against this daemon and returns how long it took.
func (d *daemon) tend(ctx context.Context, stdout io.Writer, args ...string) (time.Duration, int, error) {
	cmd := exec.CommandContext(ctx, d.bin, append(args[:1:1], append([]string{"--socket", d.sock}, args[1:]...)...)...)
	cmd.Stdout = stdout
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	t0 := time.Now()
	err := cmd.Run()
	took := time.Since(t0)
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return took, ee.ExitCode(), nil
	}
	if err != nil {
		return took, -1, fmt.Errorf("tend %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return took, 0, nil
}

// scrape returns the daemon's /metrics with query q.
func (d *daemon) scrape(q string) (string, error) {
	resp, err := d.hc.Get("http://tend/metrics" + q)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("GET /metrics%s: %s", q, resp.Status)
	}
	return string(b), err
}

// metric reads one unlabelled series' value from a scrape.
func metric(text, name string) (float64, bool) {
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return 0, false
}

// seriesCount counts the samples of a scrape (the lines that are not
// comments): the series a Prometheus server keeps for it.
func seriesCount(text string) (total, tend int) {
	for line := range strings.SplitSeq(text, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		total++
		if strings.HasPrefix(line, "tend_") {
			tend++
		}
	}
	return total, tend
}

// Sample is one look at the daemon during the soak.
type Sample struct {
	At         float64 `json:"at_s"`       // seconds since the soak began
	Programs   int     `json:"programs"`   // added so far
	RSS        int64   `json:"rss_bytes"`  // VmRSS
	HeapAlloc  int64   `json:"heap_bytes"` // go_memstats_heap_alloc_bytes: the live heap (and garbage not yet collected)
	FDs        int     `json:"fds"`        // every descriptor table once
	Goroutines int     `json:"goroutines"` // go_goroutines
	Audit      int64   `json:"audit_bytes"`
	Instances  int     `json:"instances"` // registered now
}

// sample looks at the daemon now.
func (d *daemon) sample(start time.Time, programs int) (Sample, error) {
	s := Sample{At: time.Since(start).Seconds(), Programs: programs, RSS: rss(d.pid), FDs: descriptors(d.pid), Audit: dirSize(filepath.Join(d.dir, ".tend", "audit"))}
	text, err := d.scrape("?instances=none")
	if err != nil {
		return s, err
	}
	g, _ := metric(text, "go_goroutines")
	h, _ := metric(text, "go_memstats_heap_alloc_bytes")
	s.Goroutines, s.HeapAlloc = int(g), int64(h)
	for _, st := range []string{"starting", "running", "backoff", "stopping", "stopped", "exited", "fatal"} {
		n, _ := metric(text, `tend_instances_in_state{state="`+st+`"}`)
		s.Instances += int(n)
	}
	return s, nil
}

func rss(pid int) int64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// descriptors counts every descriptor table of pid once: tend's epoll
// loops and forker keep private ones /proc/PID/fd does not show.
func descriptors(pid int) int {
	total := 0
	seen := map[string]bool{}
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, t := range tasks {
		dir := fmt.Sprintf("/proc/%d/task/%s/fd", pid, t.Name())
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

func dirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// becomeSubreaper makes this process adopt what a killed daemon leaves.
func becomeSubreaper() error { return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }

// killOrphans kills and reaps this process's children but keep.
func killOrphans(keep ...int) {
	for range 20 {
		kids := slices.DeleteFunc(measure.Children(), func(p int) bool { return slices.Contains(keep, p) })
		if len(kids) == 0 {
			return
		}
		for _, pid := range kids {
			syscall.Kill(pid, syscall.SIGKILL)
			var ws syscall.WaitStatus
			syscall.Wait4(pid, &ws, 0, nil)
		}
	}
}

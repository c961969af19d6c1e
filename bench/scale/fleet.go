package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tend-sh/tend/bench/internal/measure"
	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
)

// While the fleet starts, the benchmark asks for the last program's status
// every pollEvery, and only once that one runs for the full listing (about
// 0.6 MB of JSON at N=1000, some 10 ms of daemon CPU), every listEvery until
// all run: polling the listing alone would slow the start it times.
const (
	pollEvery = 10 * time.Millisecond
	listEvery = 20 * time.Millisecond
)

// fleetResult is one daemon running n programs of `sleep 100000`.
type fleetResult struct {
	n          int
	answered   time.Duration   // start of tend up -> the API first answered
	allRunning time.Duration   // start of tend up -> a listing showed all n running
	lastSpawn  time.Duration   // start of tend up -> the last spawned event's own timestamp (ms)
	firstTenth time.Duration   // mean time between spawns over the first tenth of them
	lastTenth  time.Duration   // and over the last tenth
	polls      int             // listings made while waiting
	startCPU   time.Duration   // the daemon's CPU from its start until all n ran
	idle       cpuWindow       // the daemon at rest
	mem        memory          // after the idle window
	status     []time.Duration // through the Go client, decoded
	statusRaw  []time.Duration // the same request, the body read and discarded
	statusSize int             // bytes of one listing, as JSON
	ps         []time.Duration
	downCLI    time.Duration // tend down: exec until it returned
	downExit   time.Duration // tend down exec until the daemon was reaped
}

// fleetConfig is a config of n programs p0..p(n-1), each running sleep
// 100000, with defaults as the [defaults] table's lines.
func fleetConfig(n int, sleep, defaults string) string {
	var b strings.Builder
	b.WriteString("[daemon]\nstate_dir = \"state\"\n\n")
	if defaults != "" {
		b.WriteString("[defaults]\n" + defaults + "\n\n")
	}
	for i := range n {
		fmt.Fprintf(&b, "[program.p%d]\ncommand = [%q, \"100000\"]\n\n", i, sleep)
	}
	return b.String()
}

// runFleet starts tend up on a fleet of o.n programs (with [defaults] lines
// defaults), times the start, then measures the daemon at rest, and with
// listings, the status API and tend ps, and last times tend down.
func runFleet(ctx context.Context, bins binaries, dir string, o options, defaults string, listings bool, progress io.Writer) (res fleetResult, err error) {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return res, err
	}
	sleep, err := sleepPath()
	if err != nil {
		return res, err
	}
	res.n = o.n
	d, err := startDaemon(bins.tend, dir, fleetConfig(o.n, sleep, defaults))
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, finish(d)) }()

	if err := waitFleet(ctx, d, o.n, &res); err != nil {
		return res, err
	}
	fmt.Fprintf(progress, "  %d running after %v; settling %v, then idle for %v\n", o.n, res.allRunning.Round(time.Millisecond), o.settle, o.idle)
	if err := measure.Sleep(ctx, o.settle); err != nil {
		return res, err
	}
	u, err := sampleUsage(d.pid)
	if err != nil {
		return res, err
	}
	if err := measure.Sleep(ctx, o.idle); err != nil {
		return res, err
	}
	if res.idle, err = u.since(d.pid); err != nil {
		return res, err
	}
	if res.mem, err = readMemory(d.pid); err != nil {
		return res, err
	}
	if listings {
		fmt.Fprintf(progress, "  %d GET /v1/status, %d tend ps\n", o.requests, o.psRuns)
		if err := measureListings(ctx, d, o, &res); err != nil {
			return res, err
		}
	}
	fmt.Fprintf(progress, "  tend down\n")
	return res, timeDown(ctx, d, &res)
}

// waitFleet waits until all n instances run and times the start.
func waitFleet(ctx context.Context, d *daemon, n int, res *fleetResult) error {
	deadline := time.Now().Add(upWait)
	for full := false; ; {
		if !d.alive() {
			return fmt.Errorf("tend up exited early:\n%s", logTail(d))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not all %d instances running after %v", n, upWait)
		}
		running, err := countRunning(d, n, full)
		at := time.Now()
		switch {
		case errors.Is(err, client.ErrNoDaemon): // the socket is not there yet
			if err := measure.Sleep(ctx, 5*time.Millisecond); err != nil {
				return err
			}
			continue
		case !full && isNotFound(err): // tend up has not added the last program yet
		case err != nil:
			return err
		}
		if res.answered == 0 {
			res.answered = at.Sub(d.started)
		}
		res.polls++
		if full && running == n {
			res.allRunning = at.Sub(d.started)
			return startDetails(d, res)
		}
		full = full || running == 1
		pause := pollEvery
		if full {
			pause = listEvery
		}
		if err := measure.Sleep(ctx, pause); err != nil {
			return err
		}
	}
}

// countRunning counts the running instances in the full listing, or, short
// of full, whether the last program p{n-1} runs.
func countRunning(d *daemon, n int, full bool) (int, error) {
	var list []program.Status
	var err error
	if full {
		list, err = d.client.List(false)
	} else {
		var st program.Status
		st, err = d.client.Status(program.InstanceID(fmt.Sprintf("p%d", n-1), 0))
		list = []program.Status{st}
	}
	running := 0
	for i := range list {
		if list[i].State == program.StateRunning && list[i].PID != nil {
			running++
		}
	}
	return running, err
}

// startDetails records, once the fleet runs, the daemon's CPU so far and the
// timing of its spawned events.
func startDetails(d *daemon, res *fleetResult) error {
	c, err := readCPU(d.pid)
	if err != nil {
		return err
	}
	res.startCPU = c.run
	spawned, err := d.client.EventsMatching(0, client.EventFilter{Kinds: []string{program.KindSpawned}})
	if err != nil {
		return err
	}
	var at []time.Time
	for _, e := range spawned {
		res.lastSpawn = max(res.lastSpawn, e.TS.Sub(d.started))
		at = append(at, e.TS)
	}
	res.firstTenth, res.lastTenth = spawnPace(at)
	return nil
}

// spawnPace is the mean time between two spawns over the first and over the
// last tenth of them: a pace that slows as the fleet grows means a cost per
// spawn that grows with the number of instances.
func spawnPace(at []time.Time) (first, last time.Duration) {
	slices.SortFunc(at, time.Time.Compare)
	k := len(at) / 10
	if k < 1 {
		return 0, 0
	}
	n := len(at) - 1
	return at[k].Sub(at[0]) / time.Duration(k), at[n].Sub(at[n-k]) / time.Duration(k)
}

// isNotFound reports whether err is the API's answer for an unknown id.
func isNotFound(err error) bool {
	var ae *client.APIError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

// measureListings times o.requests full listings through the Go client and
// o.psRuns runs of the tend ps binary, each after warm-up calls.
func measureListings(ctx context.Context, d *daemon, o options, res *fleetResult) error {
	for i := range 2 + o.requests {
		t0 := time.Now()
		list, err := d.client.List(false)
		took := time.Since(t0)
		if err != nil {
			return err
		}
		if len(list) != res.n {
			return fmt.Errorf("listing has %d instances, want %d", len(list), res.n)
		}
		if i >= 2 {
			res.status = append(res.status, took)
		}
	}
	raw := rawClient(d.sock)
	for i := range 2 + o.requests {
		t0 := time.Now()
		n, err := rawGet(raw, "/v1/status")
		took := time.Since(t0)
		if err != nil {
			return err
		}
		if i == 0 {
			res.statusSize = int(n)
		}
		if i >= 2 {
			res.statusRaw = append(res.statusRaw, took)
		}
	}
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer null.Close()
	for i := range 1 + o.psRuns {
		took, err := d.tend(ctx, null, "ps")
		if err != nil {
			return err
		}
		if i >= 1 {
			res.ps = append(res.ps, took)
		}
	}
	return nil
}

// timeDown runs tend down and waits until the daemon has been reaped.
func timeDown(ctx context.Context, d *daemon, res *fleetResult) error {
	t0 := time.Now()
	took, err := d.tend(ctx, io.Discard, "down")
	if err != nil {
		return err
	}
	res.downCLI = took
	select {
	case <-d.exited:
		res.downExit = d.exitAt.Sub(t0)
		return nil
	case <-time.After(downWait):
		return fmt.Errorf("daemon still running %v after tend down", downWait)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// finish stops d if it still runs and fails if any instance outlived it.
func finish(d *daemon) error {
	err := d.stop()
	if n := killOrphans(); n > 0 {
		err = errors.Join(err, fmt.Errorf("%d processes outlived the daemon (killed)", n))
	}
	return err
}

// logTail is the end of the daemon's output, for an error message.
func logTail(d *daemon) string {
	b, _ := os.ReadFile(filepath.Join(d.dir, "tend-up.log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

func sleepPath() (string, error) {
	for _, p := range []string{"/bin/sleep", "/usr/bin/sleep"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no sleep binary in /bin or /usr/bin")
}

// rawClient is a plain HTTP client of the daemon's socket, for timing the
// daemon's side of a request without the Go client's JSON decoding.
func rawClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
}

// rawGet reads path's answer to the end and returns its length.
func rawGet(c *http.Client, path string) (int64, error) {
	req, err := http.NewRequest("GET", "http://tend"+path, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return n, err
}

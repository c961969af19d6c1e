package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tend-sh/tend/bench/internal/measure"
	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
)

// While the fleet starts, the benchmark asks for the last instance's status
// every pollEvery (the cheapest request) and for /readyz's counts every
// probeEvery, to see progress; once the last instance runs, /readyz every
// listEvery or four times as long as it took to answer, whichever is
// longer, and a full listing only to confirm that all run: polling the
// listing of 10,000 would slow the start it times.
const (
	pollEvery  = 10 * time.Millisecond
	probeEvery = 500 * time.Millisecond
	listEvery  = 20 * time.Millisecond
)

// memEvery is the pace of the memory watch, from tend up to tend down.
const memEvery = 100 * time.Millisecond

// fleetSpec is one fleet to run.
type fleetSpec struct {
	label     string
	programs  int
	instances int    // per program
	defaults  string // lines of [defaults]
	cgroup    string // [daemon] cgroup; "" = the default (auto)
	listings  bool   // time listings, tend ps and tend status
	reads     bool   // time sweeps of the groups' memory files
	floor     bool   // first time a Go loop starting as many sleeps
}

func (fs fleetSpec) n() int { return fs.programs * fs.instances }

// fleetConfig is a config of programs p0..p(programs-1), each running sleep
// 100000 in instances instances, with defaults as the [defaults] table's
// lines and cgroup as [daemon] cgroup ("" leaves it at its default).
func fleetConfig(programs, instances int, sleep, defaults, cgroup string) string {
	var b strings.Builder
	b.WriteString("[daemon]\nstate_dir = \"state\"\n")
	if cgroup != "" {
		fmt.Fprintf(&b, "cgroup = %q\n", cgroup)
	}
	b.WriteString("\n")
	if defaults != "" {
		b.WriteString("[defaults]\n" + defaults + "\n\n")
	}
	for i := range programs {
		fmt.Fprintf(&b, "[program.p%d]\ncommand = [%q, \"100000\"]\n", i, sleep)
		if instances != 1 {
			fmt.Fprintf(&b, "instances = %d\n", instances)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// runFleet starts tend up on the fleet fs, times the start, then measures
// the daemon at rest, its memory and descriptors, with fs.listings the
// status API, tend ps and tend status, with fs.reads the sweeps of the
// groups' memory files, and last times tend down. A fleet that does not get
// all its instances running is a figure, not a failure: Error says how far
// it got, and the rest of the run goes on.
func runFleet(ctx context.Context, bins binaries, dir string, o options, fs fleetSpec, progress io.Writer) (res Fleet, reads *MemoryReads, err error) {
	res = Fleet{Label: fs.label, N: fs.n(), Programs: fs.programs, Instances: fs.instances, Defaults: fs.defaults, Cgroup: fs.cgroup}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return res, nil, err
	}
	sleep, err := sleepPath()
	if err != nil {
		return res, nil, err
	}
	if fs.floor {
		fmt.Fprintf(progress, "  floor: a Go loop starting %d sleeps with a pipe each\n", fs.n())
		fl, err := measureFloor(ctx, fs.n(), sleep)
		if err != nil {
			return res, nil, fmt.Errorf("floor: %w", err)
		}
		res.Floor = &fl
	}
	d, err := startDaemon(bins.tend, dir, fleetConfig(fs.programs, fs.instances, sleep, fs.defaults, fs.cgroup))
	if err != nil {
		return res, nil, err
	}
	mw := measure.WatchMem(d.pid, memEvery, "start")
	stopWatch := func() {
		if mw != nil {
			res.Peak, mw = mw.Stop(), nil
		}
	}
	defer func() {
		stopWatch()
		err = errors.Join(err, finish(d))
		res.Notes = daemonNotes(d)
	}()

	n := fs.n()
	short, err := waitFleet(ctx, d, o, fs, &res)
	if err != nil {
		return res, nil, err
	}
	res.Tracking, res.Groups = d.tracking(lastID(fs, 0, 0))
	if short != "" {
		res.Error = short
		fmt.Fprintf(progress, "  %s\n", short)
		if res.Mem, err = readMemory(d.pid); err != nil {
			return res, nil, err
		}
		stopWatch()
		fmt.Fprintf(progress, "  tend down\n")
		return res, nil, timeDown(ctx, d, &res)
	}
	fmt.Fprintf(progress, "  %d running after %v (%d spawn_failed, tracking %s); settling %v, then idle for %v\n",
		n, res.AllRunning.D().Round(time.Millisecond), res.Failed, res.Tracking, o.settle, o.idle)
	mw.Phase("settle")
	if err := measure.Sleep(ctx, o.settle); err != nil {
		return res, nil, err
	}
	mw.Phase("idle")
	u, err := sampleUsage(d.pid)
	if err != nil {
		return res, nil, err
	}
	if err := measure.Sleep(ctx, o.idle); err != nil {
		return res, nil, err
	}
	if res.Idle, err = u.since(d.pid); err != nil {
		return res, nil, err
	}
	if res.Mem, err = readMemory(d.pid); err != nil {
		return res, nil, err
	}
	if fs.listings {
		mw.Phase("listings")
		fmt.Fprintf(progress, "  %d cold GET /v1/status and tend ps (%v apart), %d warm GET /v1/status, %d tend ps, %d tend status ID and hello\n",
			o.cold, o.coldGap, o.requests, o.cliRuns, o.cliRuns)
		if err := measureListings(ctx, d, bins, o, fs, &res); err != nil {
			return res, nil, err
		}
	}
	if fs.reads {
		mw.Phase("sweeps")
		fmt.Fprintf(progress, "  %d sweeps of the groups' memory files\n", o.sweeps)
		if reads, err = measureReads(d, o.sweeps, res.Tracking); err != nil {
			return res, nil, err
		}
	}
	stopWatch()
	fmt.Fprintf(progress, "  tend down\n")
	return res, reads, timeDown(ctx, d, &res)
}

// lastID is an instance id of fs: program p(programs-1-back), instance k.
func lastID(fs fleetSpec, back, k int) string {
	return program.InstanceID(fmt.Sprintf("p%d", max(fs.programs-1-back, 0)), min(k, fs.instances-1))
}

// waitFleet waits until all of the fleet's instances run and times the
// start; short says why it stopped waiting before that (the start gained
// no instance for o.stall, or o.upTimeout passed), "" when all run.
func waitFleet(ctx context.Context, d *daemon, o options, fs fleetSpec, res *Fleet) (short string, err error) {
	n := fs.n()
	last := lastID(fs, 0, fs.instances-1)
	deadline := d.started.Add(o.upTimeout)
	lastRunning := false
	best, progressAt, nextProbe := -1, time.Now(), time.Now()
	for {
		if !d.alive() {
			return "", fmt.Errorf("tend up exited early:\n%s", logTail(d))
		}
		now := time.Now()
		if now.After(deadline) {
			return finalCount(d, res, fmt.Sprintf("not all %d running %v after tend up", n, o.upTimeout)), nil
		}
		if !lastRunning {
			st, err := d.client.Status(last)
			at := time.Now()
			switch {
			case errors.Is(err, client.ErrNoDaemon): // the socket is not there yet
				if err := measure.Sleep(ctx, 5*time.Millisecond); err != nil {
					return "", err
				}
				continue
			case isNotFound(err): // tend up has not added the last program yet
			case err != nil:
				return "", err
			}
			if res.Answered == 0 {
				res.Answered = measure.NewMs(at.Sub(d.started))
			}
			res.Polls++
			lastRunning = err == nil && st.State == program.StateRunning && st.PID != nil
		}
		if lastRunning || !now.Before(nextProbe) {
			t0 := time.Now()
			rd, err := readiness(d.raw)
			at := time.Now()
			if err != nil {
				return "", err
			}
			res.Polls++
			if rd.ReadyN > best {
				best, progressAt = rd.ReadyN, at
			}
			if rd.ReadyN >= n {
				running, err := countRunning(d)
				if err != nil {
					return "", err
				}
				if running == n {
					res.AllRunning, res.Running = measure.NewMs(at.Sub(d.started)), n
					return "", startDetails(d, res)
				}
			}
			if at.Sub(progressAt) > o.stall {
				return finalCount(d, res, fmt.Sprintf("the start stalled: no more of the %d instances running for %v", n, o.stall)), nil
			}
			pause := probeEvery
			if lastRunning {
				pause = max(listEvery, 4*at.Sub(t0))
			}
			nextProbe = at.Add(pause)
		}
		pause := pollEvery
		if lastRunning {
			pause = time.Until(nextProbe)
		}
		if err := measure.Sleep(ctx, pause); err != nil {
			return "", err
		}
	}
}

// finalCount records how far a start that stopped short got, and says so.
func finalCount(d *daemon, res *Fleet, why string) string {
	res.Running, _ = countRunning(d)
	_ = startDetails(d, res)
	return fmt.Sprintf("%s: %d running, %d spawned, %d spawn_failed %s", why, res.Running, res.Spawned, res.Failed, kinds(res.Errnos))
}

// readiness is GET /readyz: the counts of instances that should run and
// of those running and ready (its status is 503 until all are).
func readiness(c *http.Client) (program.Readiness, error) {
	var rd program.Readiness
	resp, err := c.Get("http://tend/readyz")
	if err != nil {
		return rd, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusServiceUnavailable {
		return rd, fmt.Errorf("GET /readyz: %s", resp.Status)
	}
	return rd, json.NewDecoder(resp.Body).Decode(&rd)
}

// countRunning counts the running instances in the full listing.
func countRunning(d *daemon) (int, error) {
	list, err := d.client.List(false)
	running := 0
	for i := range list {
		if list[i].State == program.StateRunning && list[i].PID != nil {
			running++
		}
	}
	return running, err
}

// startDetails records, once the fleet runs (or stopped short), the
// daemon's CPU so far and its spawned and spawn_failed events.
func startDetails(d *daemon, res *Fleet) error {
	c, err := readCPU(d.pid)
	if err != nil {
		return err
	}
	res.StartCPU = measure.NewMs(c.run)
	evs, err := d.client.EventsMatching(0, client.EventFilter{Kinds: []string{program.KindSpawned, program.KindSpawnFailed}})
	if err != nil {
		return err
	}
	var at []time.Time
	res.Spawned, res.Failed, res.Errnos = 0, 0, nil
	for _, e := range evs {
		switch e.Kind {
		case program.KindSpawned:
			res.Spawned++
			res.LastSpawn = max(res.LastSpawn, measure.NewMs(e.TS.Sub(d.started)))
			at = append(at, e.TS)
		case program.KindSpawnFailed:
			res.Failed++
			if res.Errnos == nil {
				res.Errnos = map[string]int{}
			}
			errno := "?"
			if sf, ok := e.Data.(*program.SpawnFailed); ok {
				errno = sf.Errno
			}
			res.Errnos[errno]++
		}
	}
	first, last := spawnPace(at)
	res.FirstTenth, res.LastTenth = measure.NewMs(first), measure.NewMs(last)
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

// measureListings times o.cold cold full listings, raw, and o.cold cold
// tend ps, alternating, each the first request after o.coldGap without one
// (the first follows the idle window); then, warm, o.requests full listings
// through the Go client and raw, and o.cliRuns execs of tend ps and of tend
// status ID (each followed by a Go hello world), each after warm-up calls.
func measureListings(ctx context.Context, d *daemon, bins binaries, o options, fs fleetSpec, res *Fleet) error {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer null.Close()
	for i := range o.cold {
		if i > 0 {
			if err := measure.Sleep(ctx, o.coldGap); err != nil {
				return err
			}
		}
		t0 := time.Now()
		if _, err := rawGet(d.raw, "/v1/status"); err != nil {
			return err
		}
		res.StatusCold = append(res.StatusCold, measure.NewMs(time.Since(t0)))
		if err := measure.Sleep(ctx, o.coldGap); err != nil {
			return err
		}
		took, err := d.tend(ctx, null, "ps")
		if err != nil {
			return err
		}
		res.PSCold = append(res.PSCold, measure.NewMs(took))
	}
	for i := range 2 + o.requests {
		t0 := time.Now()
		list, err := d.client.List(false)
		took := time.Since(t0)
		if err != nil {
			return err
		}
		if len(list) != res.N {
			return fmt.Errorf("listing has %d instances, want %d", len(list), res.N)
		}
		if i >= 2 {
			res.Status = append(res.Status, measure.NewMs(took))
		}
	}
	for i := range 2 + o.requests {
		t0 := time.Now()
		n, err := rawGet(d.raw, "/v1/status")
		took := time.Since(t0)
		if err != nil {
			return err
		}
		if i == 0 {
			res.StatusBytes = int(n)
		}
		if i >= 2 {
			res.StatusRaw = append(res.StatusRaw, measure.NewMs(took))
		}
	}
	mid := program.InstanceID(fmt.Sprintf("p%d", fs.programs/2), 0)
	for i := range 1 + o.cliRuns {
		took, err := d.tend(ctx, null, "ps")
		if err != nil {
			return err
		}
		if i >= 1 {
			res.PS = append(res.PS, measure.NewMs(took))
		}
	}
	for i := range 1 + o.cliRuns {
		took, err := d.tend(ctx, null, "status", mid)
		if err != nil {
			return err
		}
		hello, err := d.exec(ctx, null, bins.hello)
		if err != nil {
			return err
		}
		if i >= 1 {
			res.StatusCLI = append(res.StatusCLI, measure.NewMs(took))
			res.Hello = append(res.Hello, measure.NewMs(hello))
		}
	}
	return nil
}

// timeDown runs tend down and waits until the daemon has been reaped.
func timeDown(ctx context.Context, d *daemon, res *Fleet) error {
	t0 := time.Now()
	took, err := d.tend(ctx, io.Discard, "down")
	if err != nil {
		return err
	}
	res.DownCLI = measure.NewMs(took)
	select {
	case <-d.exited:
		res.DownExit = measure.NewMs(d.exitAt.Sub(t0))
		return nil
	case <-time.After(downWait):
		return fmt.Errorf("daemon still running %v after tend down", downWait)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// finish stops d if it still runs and fails if any instance outlived it,
// then removes the daemon's cgroup tree, which tend down leaves (empty).
func finish(d *daemon) error {
	err := d.stop()
	if n := killOrphans(); n > 0 {
		err = errors.Join(err, fmt.Errorf("%d processes outlived the daemon (killed)", n))
	}
	if d.groups != "" {
		if rerr := measure.RemoveEmptyCgroups(d.groups); rerr != nil {
			err = errors.Join(err, fmt.Errorf("the daemon's cgroups: %w", rerr))
		}
	}
	return err
}

// tracking asks how instance id's run is tracked and, with cgroups, notes
// the daemon's cgroup tree (the parent of the run's group, tend-ID) for
// finish to remove.
func (d *daemon) tracking(id string) (tracking, groups string) {
	st, err := d.client.Status(id)
	if err != nil {
		return "", ""
	}
	if st.Tracking == program.TrackingCgroup && st.PID != nil {
		if g, err := measure.CgroupDir(strconv.Itoa(*st.PID)); err == nil && strings.HasPrefix(filepath.Base(filepath.Dir(g)), "tend-") {
			d.groups = filepath.Dir(g)
		}
	}
	return st.Tracking, d.groups
}

// eventLine is how tend up prints an event; anything else it printed is a
// note worth keeping (a descriptor limit it could not raise, say).
var eventLine = regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d{3} #\d+ `)

// daemonNotes are the first lines of tend up's output that are not events.
func daemonNotes(d *daemon) []string {
	b, err := os.ReadFile(filepath.Join(d.dir, "tend-up.log"))
	if err != nil {
		return nil
	}
	var notes []string
	for line := range strings.SplitSeq(string(b), "\n") {
		if line == "" || eventLine.MatchString(line) {
			continue
		}
		if len(line) > 300 {
			line = line[:300] + "…"
		}
		if notes = append(notes, line); len(notes) == 20 {
			break
		}
	}
	return notes
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

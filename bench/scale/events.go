package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tend-sh/tend/bench/internal/measure"
	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
)

// Timing of the event phases.
const (
	eventWait    = 10 * time.Second       // bounds every wait for one event
	warmupKills  = 2                      // uncounted kills before each measured round
	notifyEvery  = 50 * time.Millisecond  // the notifier's STATUS= period
	connectWait  = 10 * time.Second       // until every extra subscriber has an event
	drainWait    = 5 * time.Second        // until every extra subscriber has every event
	notifyBudget = 200 * time.Millisecond // per wanted sample, before giving up
)

// eventsConfig has the kill victim, restarted at once, and the notifier,
// started only for its own phase so that it cannot disturb the kills.
func eventsConfig(sleep, notifier string) string {
	return fmt.Sprintf(`[daemon]
state_dir = "state"

[program.victim]
command = [%q, "100000"]
backoff_initial = "0s"
backoff_max = "0s"
max_crashes = 1000000000

[program.notifier]
command = [%q, "-every", %q]
autostart = false
`, sleep, notifier, notifyEvery.String())
}

// runEvents starts a daemon with the victim and the notifier programs and
// measures the event fan-out and the notify path on it.
func runEvents(ctx context.Context, bins binaries, dir string, o options, progress io.Writer) (res *Events, err error) {
	res = &Events{}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return res, err
	}
	sleep, err := sleepPath()
	if err != nil {
		return res, err
	}
	d, err := startDaemon(bins.tend, dir, eventsConfig(sleep, bins.notifier))
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, finish(d)) }()

	fmt.Fprintf(progress, "  %d SIGKILLs with 1 subscriber, then %d with %d more\n", o.kills, o.kills, o.subscribers)
	if err = measureFanout(ctx, d, o, res); err != nil {
		return res, fmt.Errorf("fan-out: %w", err)
	}
	fmt.Fprintf(progress, "  %d STATUS= messages, %v apart\n", o.notifies, notifyEvery)
	if err = measureNotify(ctx, d, o.notifies, res); err != nil {
		return res, fmt.Errorf("notify: %w", err)
	}
	return res, nil
}

// arrival is an event and when the subscriber's callback got it.
type arrival struct {
	e  program.Event
	at time.Time
}

// measureFanout times SIGKILL of the victim -> its exited event reaching a
// client.Follow, first with that subscriber alone, then with o.subscribers
// more, each reading every event in its own goroutine.
func measureFanout(ctx context.Context, d *daemon, o options, res *Events) (err error) {
	since, pid, err := victimAtRest(d)
	if err != nil {
		return err
	}
	d.tracking("victim:0") // for finish, which removes the daemon's cgroups
	fctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()

	// Its own client, so its connection is not one the crowd's share.
	evs := make(chan arrival, 1024)
	followErr := make(chan error, 1)
	wg.Go(func() {
		err := client.New(d.sock).Follow(fctx, since, []string{program.KindSpawned, program.KindExited}, "victim:0", func(e program.Event) error {
			select {
			case evs <- arrival{e, time.Now()}:
				return nil
			default:
				return errors.New("measuring subscriber fell behind")
			}
		})
		if fctx.Err() == nil {
			followErr <- fmt.Errorf("the measuring subscriber stopped: %v", err)
		}
	})
	k := killer{d: d, evs: evs, pid: pid, gap: o.gap}
	if _, err := k.rounds(ctx, warmupKills); err != nil { // the first also proves the stream is live
		return err
	}
	if res.Alone, res.AloneCPU, res.AloneSelf, err = k.measured(ctx, o.kills); err != nil {
		return err
	}

	res.Subscribers = o.subscribers
	crowdSince := lastSeq(d)
	counts := startCrowd(fctx, &wg, d, crowdSince, o.subscribers)
	if err := k.untilAll(ctx, counts); err != nil {
		return err
	}
	if res.Crowd, res.CrowdCPU, res.CrowdSelf, err = k.measured(ctx, o.kills); err != nil {
		return err
	}
	res.Published, res.Delivered = waitDrained(ctx, d, crowdSince, counts)
	select {
	case err := <-followErr:
		return err
	default:
		return nil
	}
}

// startCrowd connects n subscribers in goroutines of wg until ctx ends. Each
// reads the SSE stream of every event after since as bytes and counts the
// events ("id:" lines), as curl -N or a browser's EventSource in another
// process would: the daemon's side of the fan-out is what is measured, not
// the JSON decoding of a hundred clients that share this process, and its
// two CPUs, with the measuring subscriber.
func startCrowd(ctx context.Context, wg *sync.WaitGroup, d *daemon, since uint64, n int) []atomic.Int64 {
	counts := make([]atomic.Int64, n)
	hc := rawClient(d.sock) // its own: the crowd's connections are not the benchmark's
	for i := range counts {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("http://tend/v1/events?since=%d", since), nil)
			if err != nil {
				return
			}
			resp, err := hc.Do(req)
			if err != nil {
				return
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				if bytes.HasPrefix(sc.Bytes(), []byte("id: ")) {
					counts[i].Add(1)
				}
			}
		})
	}
	return counts
}

// victimAtRest waits until the victim runs and returns the last event seq
// and its pid.
func victimAtRest(d *daemon) (uint64, int, error) {
	deadline := time.Now().Add(upWait)
	for {
		st, err := d.client.Status("victim:0")
		if err == nil && st.State == program.StateRunning && st.PID != nil {
			return lastSeq(d), *st.PID, nil
		}
		if !d.alive() {
			return 0, 0, fmt.Errorf("tend up exited early:\n%s", logTail(d))
		}
		if time.Now().After(deadline) {
			return 0, 0, fmt.Errorf("victim:0 not running after %v (%v)", upWait, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// lastSeq is the seq of the newest event, 0 if unknown.
func lastSeq(d *daemon) uint64 {
	all, err := d.client.Events(0)
	if err != nil || len(all) == 0 {
		return 0
	}
	return all[len(all)-1].Seq
}

// killer kills the victim round after round, reading its events from evs.
type killer struct {
	d   *daemon
	evs <-chan arrival
	pid int // the victim's current pid
	gap time.Duration
}

// measured is rounds with the CPU the daemon and this process used.
func (k *killer) measured(ctx context.Context, n int) ([]measure.Ms, CPUWindow, measure.Ms, error) {
	u, err := sampleUsage(k.d.pid)
	if err != nil {
		return nil, CPUWindow{}, 0, err
	}
	lat, err := k.rounds(ctx, n)
	if err != nil {
		return measure.MsOf(lat), CPUWindow{}, 0, err
	}
	w, err := u.since(k.d.pid)
	return measure.MsOf(lat), w, measure.NewMs(rusageSelf() - u.self), err
}

// rounds kills the victim n times, each once it has run for gap, and
// returns kill -> exited event arrival of each.
func (k *killer) rounds(ctx context.Context, n int) ([]time.Duration, error) {
	var out []time.Duration
	for range n {
		if err := k.atRest(ctx); err != nil {
			return out, err
		}
		t0 := time.Now()
		if err := syscall.Kill(k.pid, syscall.SIGKILL); err != nil {
			return out, fmt.Errorf("kill %d: %w", k.pid, err)
		}
		ex, err := next(ctx, k.evs, program.KindExited)
		if err != nil {
			return out, err
		}
		if got := ex.e.Data.(*program.Exited).PID; got != k.pid {
			return out, fmt.Errorf("exited pid %d, killed %d", got, k.pid)
		}
		sp, err := next(ctx, k.evs, program.KindSpawned)
		if err != nil {
			return out, err
		}
		out = append(out, ex.at.Sub(t0))
		k.pid = sp.e.Data.(*program.Spawned).PID
	}
	return out, nil
}

// atRest pauses gap, then checks that the status API shows the current pid
// running: the daemon and every subscriber have settled before the kill.
func (k *killer) atRest(ctx context.Context) error {
	if err := measure.Sleep(ctx, k.gap); err != nil {
		return err
	}
	deadline := time.Now().Add(eventWait)
	for {
		st, err := k.d.client.Status("victim:0")
		if err == nil && st.State == program.StateRunning && st.PID != nil && *st.PID == k.pid {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("victim:0 not running as pid %d (state %q, %v)", k.pid, st.State, err)
		}
		if err := measure.Sleep(ctx, time.Millisecond); err != nil {
			return err
		}
	}
}

// untilAll kills (uncounted) until every subscriber of counts has received
// an event, so that all are connected and live before the measured round.
func (k *killer) untilAll(ctx context.Context, counts []atomic.Int64) error {
	deadline := time.Now().Add(connectWait)
	for {
		if _, err := k.rounds(ctx, 1); err != nil {
			return err
		}
		if err := measure.Sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
		idle := 0
		for i := range counts {
			if counts[i].Load() == 0 {
				idle++
			}
		}
		if idle == 0 {
			_, err := k.rounds(ctx, warmupKills)
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d subscribers got no event in %v", idle, len(counts), connectWait)
		}
	}
}

// waitDrained waits until every subscriber has every event published after
// since (or drainWait has passed) and returns how many were published and
// the fewest any subscriber received.
func waitDrained(ctx context.Context, d *daemon, since uint64, counts []atomic.Int64) (published, fewest int) {
	all, _ := d.client.Events(since)
	published = len(all)
	deadline := time.Now().Add(drainWait)
	for {
		fewest = published
		for i := range counts {
			fewest = min(fewest, int(counts[i].Load()))
		}
		if fewest >= published || time.Now().After(deadline) || measure.Sleep(ctx, 20*time.Millisecond) != nil {
			return published, fewest
		}
	}
}

// next returns the next event, failing if it is not of kind: the victim's
// events alternate exited, spawned.
func next(ctx context.Context, evs <-chan arrival, kind string) (arrival, error) {
	t := time.NewTimer(eventWait)
	defer t.Stop()
	select {
	case a := <-evs:
		if a.e.Kind != kind {
			return a, fmt.Errorf("got %s event, want %s", a.e.Kind, kind)
		}
		return a, nil
	case <-t.C:
		return arrival{}, fmt.Errorf("no %s event within %v", kind, eventWait)
	case <-ctx.Done():
		return arrival{}, ctx.Err()
	}
}

// measureNotify starts the notifier and reads its status in a tight loop,
// timing each STATUS= message from its send to the first answer that shows
// it. The message seen first is not counted: it may have waited for the loop.
func measureNotify(ctx context.Context, d *daemon, samples int, res *Events) (err error) {
	if _, err := d.client.Start("notifier"); err != nil {
		return err
	}
	defer func() {
		if _, serr := d.client.Stop("notifier"); serr != nil {
			err = errors.Join(err, serr)
		}
	}()
	deadline := time.Now().Add(eventWait + time.Duration(samples)*notifyBudget)
	last := -1
	for len(res.Notify) < samples {
		if err := ctx.Err(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d messages seen before the deadline", len(res.Notify), samples)
		}
		t0 := time.Now()
		st, err := d.client.Status("notifier:0")
		at := time.Now()
		if err != nil {
			return err
		}
		res.NotifyRequests = append(res.NotifyRequests, measure.NewMs(at.Sub(t0)))
		sent, n, ok := parseNotify(st.StatusText)
		switch {
		case !ok || n <= last:
			continue
		case last < 0:
			last = n
			continue
		}
		res.NotifyMissed += n - last - 1
		last = n
		res.Notify = append(res.Notify, measure.NewMs(at.Sub(sent)))
	}
	return nil
}

// parseNotify reads "t=UNIXNANO n=N", the notifier's status text.
func parseNotify(s string) (sent time.Time, n int, ok bool) {
	ts, ns, found := strings.Cut(s, " ")
	if !found || !strings.HasPrefix(ts, "t=") || !strings.HasPrefix(ns, "n=") {
		return time.Time{}, 0, false
	}
	t, err1 := strconv.ParseInt(ts[2:], 10, 64)
	n, err2 := strconv.Atoi(ns[2:])
	if err1 != nil || err2 != nil {
		return time.Time{}, 0, false
	}
	return time.Unix(0, t), n, true
}

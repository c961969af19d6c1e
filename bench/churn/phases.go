package main

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tend-sh/tend/bench/internal/measure"
	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
)

// anchorConfig is the soak's and the add phase's daemon: one program that
// just runs, so the fleet is never empty.
const anchorConfig = "[program.anchor]\ncommand = [\"sleep\", \"1000000\"]\n"

// Soak is the churn phase's outcome: the raw series and what it did.
type Soak struct {
	Programs int      `json:"programs"` // added (and removed) in all
	Batch    int      `json:"batch"`
	Seconds  float64  `json:"seconds"`
	Failed   int      `json:"failed"` // adds the daemon refused
	Samples  []Sample `json:"samples"`
}

// soak adds and removes programs with remove_on_exit, batch at a time,
// until total or the duration, sampling the daemon every `every`.
func soak(ctx context.Context, o options, bin, dir string, progress io.Writer) (*Soak, error) {
	d, err := startDaemon(bin, dir, anchorConfig)
	if err != nil {
		return nil, err
	}
	defer d.stop()
	res := &Soak{Batch: o.batch}
	start := time.Now()
	next := start
	for b := 0; res.Programs < o.total && time.Since(start) < o.duration && ctx.Err() == nil; b++ {
		if !time.Now().Before(next) {
			s, err := d.sample(start, res.Programs)
			if err != nil {
				return res, err
			}
			res.Samples = append(res.Samples, s)
			fmt.Fprintf(progress, "  %6.0fs %7d programs  rss %5.1f MiB  fds %4d  goroutines %4d  audit %6.1f MiB\n",
				s.At, s.Programs, mib(s.RSS), s.FDs, s.Goroutines, mib(s.Audit))
			next = next.Add(o.every)
		}
		if o.spread { // batch b starts at its share of the duration
			due := start.Add(time.Duration(float64(o.duration) * float64(res.Programs) / float64(o.total)))
			if w := time.Until(due); w > 0 {
				select {
				case <-time.After(min(w, time.Until(next))):
					continue // a sample may be due first
				case <-ctx.Done():
				}
			}
		}
		n := min(o.batch, o.total-res.Programs)
		res.Failed += batch(ctx, d.c, "b"+strconv.Itoa(b), n)
		res.Programs += n
	}
	res.Seconds = time.Since(start).Seconds()
	time.Sleep(3 * time.Second) // quiet: the daemon hands back what the last burst took
	s, err := d.sample(start, res.Programs)
	res.Samples = append(res.Samples, s)
	return res, err
}

// batch adds n programs that run /bin/true with remove_on_exit, labelled
// batch=name, and waits until they are gone. It returns the adds refused.
func batch(ctx context.Context, c *client.Client, name string, n int) int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	body := map[string]any{"command": []string{"/bin/true"}, "remove_on_exit": true, "labels": map[string]string{"batch": name}}
	for range n {
		wg.Go(func() {
			if _, err := c.AddProgram(ctx, body); err != nil {
				mu.Lock()
				failed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	sel := program.LabelSelector{{Key: "batch", Value: name}}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(5 * time.Millisecond) {
		if sts, err := c.Select(ctx, "all", sel); err == nil && len(sts) == 0 {
			break
		}
	}
	return failed
}

// Add is the add phase: from sending POST /v1/programs to the answer, and
// to the run's spawned event (the daemon's own time stamp), per add.
type Add struct {
	Answer  []measure.Ms `json:"answer_ms"`
	Running []measure.Ms `json:"running_ms"`
}

func addPhase(ctx context.Context, o options, bin, dir string) (*Add, error) {
	d, err := startDaemon(bin, dir, anchorConfig)
	if err != nil {
		return nil, err
	}
	defer d.stop()
	spawned := make(chan program.Event, 16)
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go d.c.FollowMatching(fctx, lastSeq(d.c), client.EventFilter{Kinds: []string{program.KindSpawned}}, func(e program.Event) error {
		spawned <- e
		return nil
	})
	time.Sleep(200 * time.Millisecond) // the stream is open
	res := &Add{}
	for i := range o.runs + 2 { // two warm-ups
		name := fmt.Sprintf("add-%d", i)
		t0 := time.Now()
		_, err := d.c.AddProgram(ctx, map[string]any{"name": name, "command": []string{"sleep", "1000000"}})
		answer := time.Since(t0)
		if err != nil {
			return res, err
		}
		var e program.Event
		select {
		case e = <-spawned:
		case <-time.After(30 * time.Second):
			return res, fmt.Errorf("%s: no spawned event in 30s", name)
		}
		if i >= 2 {
			res.Answer = append(res.Answer, measure.NewMs(answer))
			res.Running = append(res.Running, measure.NewMs(e.TS.Sub(t0)))
		}
		if err := d.c.Remove(name, program.RemoveOptions{}); err != nil {
			return res, err
		}
	}
	return res, nil
}

// lastSeq is the daemon's newest event seq (0 if it cannot be read).
func lastSeq(c *client.Client) uint64 {
	evs, err := c.Events(0)
	if err != nil || len(evs) == 0 {
		return 0
	}
	return evs[len(evs)-1].Seq
}

// Run is the run phase: tend run --rm -a -- /bin/true exec'd, beside the
// floor (a Go program that forks and waits /bin/true) exec'd in turn.
type Run struct {
	Tend  []measure.Ms `json:"tend_ms"`
	Floor []measure.Ms `json:"floor_ms"`
	// CLI is `tend version` exec'd: what the CLI's own start costs, the
	// part of Tend that is not the daemon's.
	CLI []measure.Ms `json:"cli_ms"`
}

func runPhase(ctx context.Context, o options, b binaries, dir string) (*Run, error) {
	d, err := startDaemon(b.tend, dir, anchorConfig)
	if err != nil {
		return nil, err
	}
	defer d.stop()
	res := &Run{}
	for i := range o.runs + 2 {
		took, code, err := d.tend(ctx, io.Discard, "run", "--rm", "-a", "--", "/bin/true")
		if err != nil || code != 0 {
			return res, fmt.Errorf("tend run --rm -a -- /bin/true: exit %d, %v", code, err)
		}
		t0 := time.Now()
		if err := execWait(ctx, b.floor, "/bin/true"); err != nil {
			return res, err
		}
		floor := time.Since(t0)
		t0 = time.Now()
		if err := execWait(ctx, b.tend, "version"); err != nil {
			return res, err
		}
		cli := time.Since(t0)
		if i >= 2 {
			res.Tend = append(res.Tend, measure.NewMs(took))
			res.Floor = append(res.Floor, measure.NewMs(floor))
			res.CLI = append(res.CLI, measure.NewMs(cli))
		}
	}
	return res, nil
}

// PS is the ps phase: tend ps and tend ps -l KEY=VALUE (one session of
// Programs/Sessions programs) exec'd in turn at Programs programs, and the
// series of /metrics there.
type PS struct {
	Programs  int          `json:"programs"`
	Sessions  int          `json:"sessions"`
	PS        []measure.Ms `json:"ps_ms"`
	PSLabel   []measure.Ms `json:"ps_label_ms"`
	Transient int          `json:"transient"` // remove_on_exit programs added over the API besides
	Series    Series       `json:"series"`
}

// Series counts the samples of one /metrics scrape per ?instances= mode.
type Series struct {
	Default, All, None             int
	TendDefault, TendAll, TendNone int
}

func psPhase(ctx context.Context, o options, bin, dir string, progress io.Writer) (*PS, error) {
	var conf strings.Builder
	sessions := max(o.n/10, 1)
	for i := range o.n {
		fmt.Fprintf(&conf, "[program.p%d]\ncommand = [\"sleep\", \"1000000\"]\nlabels = { session = \"s%d\" }\n", i, i%sessions)
	}
	d, err := startDaemon(bin, dir, conf.String())
	if err != nil {
		return nil, err
	}
	defer d.stop()
	fmt.Fprintf(progress, "  waiting for %d programs to run\n", o.n)
	for deadline := time.Now().Add(10 * time.Minute); ; time.Sleep(time.Second) {
		if resp, err := d.hc.Get("http://tend/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d programs did not all run in 10 minutes", o.n)
		}
	}
	res := &PS{Programs: o.n, Sessions: sessions}
	for i := range o.cli + 1 {
		a, _, err := d.tend(ctx, io.Discard, "ps")
		if err != nil {
			return res, err
		}
		b, _, err := d.tend(ctx, io.Discard, "ps", "-l", "session=s7")
		if err != nil {
			return res, err
		}
		if i > 0 {
			res.PS = append(res.PS, measure.NewMs(a))
			res.PSLabel = append(res.PSLabel, measure.NewMs(b))
		}
	}
	// Short-lived agents besides: remove_on_exit programs, which the
	// default scrape counts but does not list.
	res.Transient = o.transient
	var wg sync.WaitGroup
	sem := make(chan struct{}, 50)
	for i := range o.transient {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			d.c.AddProgram(ctx, map[string]any{"command": []string{"sleep", "1000000"}, "remove_on_exit": true,
				"labels": map[string]string{"session": "t" + strconv.Itoa(i)}})
		})
	}
	wg.Wait()
	for _, m := range []struct {
		q          string
		all, tendN *int
	}{{"", &res.Series.Default, &res.Series.TendDefault}, {"?instances=all", &res.Series.All, &res.Series.TendAll}, {"?instances=none", &res.Series.None, &res.Series.TendNone}} {
		text, err := d.scrape(m.q)
		if err != nil {
			return res, err
		}
		*m.all, *m.tendN = seriesCount(text)
	}
	return res, nil
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// execWait runs a program to its end.
func execWait(ctx context.Context, name string, args ...string) error {
	return exec.CommandContext(ctx, name, args...).Run()
}

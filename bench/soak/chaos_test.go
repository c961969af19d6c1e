//go:build soak

package soak

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/program"
)

// The chaos's pace.
const (
	killEvery    = 50 * time.Millisecond  // a SIGKILL to a random run
	restartEvery = 500 * time.Millisecond // an operator restart of a random instance
	listEvery    = time.Second            // a fresh status list to pick from
)

// chaos is the storm: SIGKILLs to random runs and operator restarts of
// random instances. One goroutine (run) owns rng, targets and ids; the
// counters are atomic so the test can read them afterwards.
type chaos struct {
	c   *client.Client
	rng *rand.Rand

	kills       atomic.Int64 // SIGKILLs delivered
	missed      atomic.Int64 // picked runs that had ended (or been replaced) by the kill
	restarts    atomic.Int64 // operator restarts the daemon took
	restartErrs atomic.Int64

	mu       sync.Mutex // guards errSeen
	errSeen  []string   // the first few errors, for the summary
	listErrs atomic.Int64
}

func newChaos(c *client.Client, seed uint64) *chaos {
	return &chaos{c: c, rng: rand.New(rand.NewPCG(seed, seed^0x5eed))}
}

func (ch *chaos) note(err error) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if len(ch.errSeen) < 5 {
		ch.errSeen = append(ch.errSeen, err.Error())
	}
}

// run storms the fleet of the daemon daemonPID until ctx ends, and returns
// once the restart it may have in flight has returned too.
func (ch *chaos) run(ctx context.Context, daemonPID int) {
	kill := time.NewTicker(killEvery)
	defer kill.Stop()
	restart := time.NewTicker(restartEvery)
	defer restart.Stop()
	list := time.NewTicker(listEvery)
	defer list.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	var busy atomic.Bool // an operator restart is in flight

	targets, ids := ch.refresh()
	for {
		select {
		case <-ctx.Done():
			return
		case <-list.C:
			targets, ids = ch.refresh()
		case <-kill.C:
			if len(targets) == 0 {
				continue
			}
			i := ch.rng.IntN(len(targets))
			if killRun(targets[i], daemonPID) == nil {
				ch.kills.Add(1)
			} else {
				ch.missed.Add(1)
			}
			targets = append(targets[:i], targets[i+1:]...)
		case <-restart.C:
			if len(ids) == 0 || !busy.CompareAndSwap(false, true) {
				continue
			}
			id := ids[ch.rng.IntN(len(ids))]
			wg.Go(func() {
				defer busy.Store(false)
				if _, err := ch.c.Restart(id); err != nil {
					ch.restartErrs.Add(1)
					ch.note(err)
					return
				}
				ch.restarts.Add(1)
			})
		}
	}
}

// refresh lists the fleet: the pids of the running runs, and every id.
func (ch *chaos) refresh() (targets []int, ids []string) {
	list, err := ch.c.List(false)
	if err != nil {
		ch.listErrs.Add(1)
		ch.note(err)
		return nil, nil
	}
	for _, st := range list {
		ids = append(ids, st.ID)
		if st.State == program.StateRunning && st.PID != nil {
			targets = append(targets, *st.PID)
		}
	}
	return targets, ids
}

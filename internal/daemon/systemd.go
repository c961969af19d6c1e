package daemon

// tend under systemd (docs/notify.md#tend-under-systemd): when tend itself is a
// Type=notify service (NOTIFY_SOCKET in its own environment) it tells its
// manager READY=1 once the initial start of the fleet is done, STATUS= with
// the fleet's counts as they change, STOPPING=1 when it begins to stop, and
// WATCHDOG=1 every WATCHDOG_USEC/2 when the unit has WatchdogSec. The runs
// never see any of it: spawn.Env keeps NOTIFY_SOCKET and WATCHDOG_* of
// tend's own out of their environment.

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	sd "github.com/coreos/go-systemd/v22/daemon"

	"github.com/tend-sh/tend/internal/program"
)

// sdStatusEvery is the least time between two STATUS= messages: a fleet in
// a crash loop changes many times a second, and systemd keeps (and
// `systemctl status` shows) only the latest anyway.
const sdStatusEvery = 3 * time.Second

// sdNotifier speaks for tend to its service manager. Its state belongs to
// its goroutine (run); ready, stopping and close only close channels.
type sdNotifier struct {
	d        *daemon
	watchdog time.Duration // WATCHDOG_USEC; 0 when the manager wants no heartbeat

	readyC, stopC chan struct{} // closed by ready and stopping (each once)
	readyOnce     sync.Once
	stopOnce      sync.Once
	quit          chan struct{} // closed by close
	done          chan struct{} // closed when run has returned
}

// startSystemd starts speaking to tend's service manager, or returns nil
// when tend has none (no NOTIFY_SOCKET). Every method of the result is
// safe to call on nil.
func startSystemd(d *daemon) *sdNotifier {
	if os.Getenv("NOTIFY_SOCKET") == "" {
		return nil
	}
	// 0 and no error when not asked, or when WATCHDOG_PID names another
	// process (the variables were inherited, not meant for tend).
	wd, err := sd.SdWatchdogEnabled(false)
	if err != nil {
		d.note("systemd watchdog: %v; not sending WATCHDOG=1", err)
	}
	n := &sdNotifier{
		d: d, watchdog: wd,
		readyC: make(chan struct{}), stopC: make(chan struct{}),
		quit: make(chan struct{}), done: make(chan struct{}),
	}
	go n.run()
	return n
}

// ready sends READY=1 (with the first STATUS=): the initial start is done.
func (n *sdNotifier) ready() {
	if n != nil {
		n.readyOnce.Do(func() { close(n.readyC) })
	}
}

// stopping sends STOPPING=1: the daemon has begun to stop the fleet.
func (n *sdNotifier) stopping() {
	if n != nil {
		n.stopOnce.Do(func() { close(n.stopC) })
	}
}

// close ends the heartbeats and updates once the daemon has stopped.
func (n *sdNotifier) close() {
	if n != nil {
		close(n.quit)
		<-n.done
	}
}

// run sends the messages: ready and stopping as they come, STATUS= when
// an event may have changed the counts (at most every sdStatusEvery), and
// the heartbeats.
func (n *sdNotifier) run() {
	defer close(n.done)
	var beat <-chan time.Time
	if n.watchdog > 0 {
		t := time.NewTicker(max(n.watchdog/2, time.Millisecond))
		defer t.Stop()
		beat = t.C
		n.heartbeat()
	}
	seq := n.d.log.LastSeq()
	sub := n.d.log.Subscribe(seq)
	defer func() { sub.Close() }()
	events := sub.C()

	statusT := time.NewTimer(time.Hour)
	statusT.Stop()
	defer statusT.Stop()
	var (
		ready, stopping, dirty, armed bool
		sent                          string    // the last STATUS= text
		sentAt                        time.Time // when it was sent
	)
	// schedule sends an update now or, within sdStatusEvery of the last,
	// when that has passed.
	schedule := func() {
		dirty = true
		if !ready || armed {
			return
		}
		armed = true
		statusT.Reset(max(time.Until(sentAt.Add(sdStatusEvery)), 0))
	}
	for {
		select {
		case <-n.quit:
			return
		case <-beat:
			n.heartbeat()
		case e, ok := <-events:
			if !ok {
				if !sub.CutOff() {
					events = nil // the log closed: the daemon is ending
					continue
				}
				sub = n.d.log.Subscribe(seq) // too slow once: resume where it was
				events = sub.C()
				continue
			}
			seq = e.Seq
			schedule()
		case <-n.readyC:
			n.readyC, ready = nil, true
			sent, sentAt, dirty = n.status(stopping), time.Now(), false
			n.send("READY=1\nSTATUS=" + sent)
		case <-n.stopC:
			n.stopC, stopping = nil, true
			sent, sentAt = "stopping", time.Now()
			n.send("STOPPING=1\nSTATUS=" + sent)
			schedule()
		case <-statusT.C:
			armed = false
			if !dirty {
				continue
			}
			dirty = false
			if text := n.status(stopping); text != sent {
				sent, sentAt = text, time.Now()
				n.send("STATUS=" + text)
			}
		}
	}
}

// heartbeat sends WATCHDOG=1 if the supervisors' manager answers: a daemon
// whose manager is stuck should be restarted by systemd, not kept alive by
// a timer.
func (n *sdNotifier) heartbeat() {
	n.d.mgr.IDs()
	n.send(sd.SdNotifyWatchdog)
}

// status is the STATUS= text: the fleet's counts by state.
func (n *sdNotifier) status(stopping bool) string {
	text := fleetCounts(n.d.broker.ListBare())
	if stopping {
		return "stopping; " + text
	}
	return text
}

func (n *sdNotifier) send(state string) {
	if _, err := sd.SdNotify(false, state); err != nil {
		n.d.note("telling systemd %q: %v", strings.SplitN(state, "\n", 2)[0], err)
	}
}

// fleetCounts says how many instances are in each state: running, backoff
// and fatal always ("12 running, 1 backoff, 0 fatal"), the other states and
// the degraded instances when there are any.
func fleetCounts(sts []program.Status) string {
	n := make(map[string]int, 8)
	degraded := 0
	for i := range sts {
		n[sts[i].State]++
		if sts[i].Degraded {
			degraded++
		}
	}
	parts := []string{
		fmt.Sprintf("%d running", n[program.StateRunning]),
		fmt.Sprintf("%d backoff", n[program.StateBackoff]),
		fmt.Sprintf("%d fatal", n[program.StateFatal]),
	}
	for _, s := range []string{program.StateStarting, program.StateStopping, program.StateStopped, program.StateExited} {
		if n[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n[s], s))
		}
	}
	if degraded > 0 {
		parts = append(parts, fmt.Sprintf("%d degraded", degraded))
	}
	return strings.Join(parts, ", ")
}

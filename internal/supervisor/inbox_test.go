package supervisor

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/notify"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/reaper"
	"github.com/tend-sh/tend/internal/testutil"
)

// bare is an instance with no run and no process behind it: what reaches
// it goes through its inbox alone, and every turn of its loop ends in a
// report, counted here.
type bare struct {
	in      *Instance
	reports atomic.Int64
	inside  atomic.Int32  // loops inside Update at once: more than one is two loops
	gate    chan struct{} // when not nil, Update waits for it (a busy loop)
	t       *testing.T
}

func newBare(t *testing.T) *bare {
	b := &bare{t: t}
	s := spec("bare", "/bin/true")
	b.in = newInstance(&s, "", 0, Deps{Publish: func(program.Event) {}, Update: b.update})
	b.in.letGo()
	return b
}

func (b *bare) update(program.Snapshot) {
	if b.inside.Add(1) != 1 {
		b.t.Error("two loop goroutines of one instance ran at once")
	}
	runtime.Gosched() // give a second loop, if there were one, the time to show
	if b.gate != nil {
		<-b.gate
	}
	b.inside.Add(-1)
	b.reports.Add(1)
}

// parked reports whether the instance has no loop goroutine and no mail.
func (b *bare) parked() bool {
	box := &b.in.box
	box.mu.Lock()
	defer box.mu.Unlock()
	return !box.active && box.mail.empty() && len(box.sig) == 0
}

// waitParked waits for the loop to have handled everything and parked.
func (b *bare) waitParked(what string) {
	b.t.Helper()
	testutil.Eventually(b.t, what, b.parked)
}

// Every source of wake-ups is one put call: each wakes a parked instance,
// whose loop handles the delivery (and reports, as after any delivery),
// then parks again. A source added to the inbox belongs in this table.
func TestEachPutWakesAParkedInstance(t *testing.T) {
	sources := []struct {
		name string
		put  func(in *Instance)
	}{
		{"command", func(in *Instance) {
			reply := make(chan bool, 1)
			in.putCmd(command{kind: cmdStop, reply: reply})
			select {
			case ok := <-reply:
				if !ok {
					t.Error("stop of a stopped instance not answered true")
				}
			case <-time.After(30 * time.Second):
				t.Error("the command was never answered")
			}
		}},
		{"exit", func(in *Instance) { in.putExit(reaper.Status{PID: 1 << 22}) }},
		{"notify", func(in *Instance) { in.putNote(notify.Message{Ready: true}) }},
		{"emptied", func(in *Instance) { in.putEmptied() }},
		{"over memory", func(in *Instance) { in.putOver(memOver{pid: 1 << 22, rss: 1}) }},
		{"probe", func(in *Instance) { in.putProbe(probeResult{run: 1}) }},
		{"terminal", func(in *Instance) { in.putTerm(termScreen|termClients, 2) }},
	}
	for _, src := range sources {
		t.Run(src.name, func(t *testing.T) {
			b := newBare(t)
			if !b.parked() {
				t.Fatal("a new instance has a loop goroutine")
			}
			src.put(b.in)
			testutil.Eventually(t, "the delivery's report", func() bool { return b.reports.Load() >= 1 })
			b.waitParked("the loop to park again")
			if !b.in.pending.empty() {
				t.Errorf("pending mail left after parking: %+v", b.in.pending)
			}
		})
	}
}

// A new instance is its creator's until letGo: what comes meanwhile (the
// exit of an adopted run that ended at once) waits, and is handled after.
func TestANewInstanceIsItsCreatorsUntilLetGo(t *testing.T) {
	b := &bare{t: t}
	s := spec("held", "/bin/true")
	b.in = newInstance(&s, "", 0, Deps{Publish: func(program.Event) {}, Update: b.update})
	b.in.putExit(reaper.Status{PID: 1 << 22})
	time.Sleep(50 * time.Millisecond) // a loop started by the put would have reported by now
	if n := b.reports.Load(); n != 0 {
		t.Fatalf("%d reports before letGo: a loop ran beside the creator", n)
	}
	b.in.letGo()
	testutil.Eventually(t, "the exit's report", func() bool { return b.reports.Load() == 1 })
	b.waitParked("the loop to park")
}

// The reaper, the notify socket's epoll loop and the memory sampler serve
// every instance: a put must return while the instance's loop is busy,
// however much piles up.
func TestPutsNeverBlockOnABusyLoop(t *testing.T) {
	b := newBare(t)
	b.gate = make(chan struct{})
	b.in.putEmptied() // the loop wakes and blocks in its report
	testutil.Eventually(t, "the loop to be busy", func() bool { return b.inside.Load() == 1 })
	done := make(chan struct{})
	go func() {
		for i := range 100 {
			b.in.putExit(reaper.Status{PID: 1<<22 + i})
			b.in.putNote(notify.Message{Watchdog: true})
			b.in.putOver(memOver{pid: 1, rss: int64(i)})
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("puts blocked on a busy loop")
	}
	close(b.gate)
	b.waitParked("the loop to take the pile and park")
}

// Puts from many goroutines at once, against a loop that parks whenever
// it runs dry: no command goes unanswered (no wake-up is lost), no two
// loops run at once, and the instance ends parked with nothing left.
func TestConcurrentPutsAgainstParking(t *testing.T) {
	b := newBare(t)
	const senders, each = 8, 300
	var wg sync.WaitGroup
	replies := make(chan chan bool, senders*each)
	for g := range senders {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for i := range each {
				switch r.IntN(7) {
				case 0, 1:
					reply := make(chan bool, 1) // a stop: the bare instance has nothing to start
					b.in.putCmd(command{kind: cmdStop, opts: program.ActOptions{Wait: r.IntN(2) == 0}, reply: reply})
					replies <- reply
				case 2:
					b.in.putExit(reaper.Status{PID: 1<<22 + i})
				case 3:
					b.in.putNote(notify.Message{Ready: r.IntN(2) == 0, Reloading: r.IntN(2) == 0})
				case 4:
					b.in.putEmptied()
				case 5:
					b.in.putOver(memOver{pid: 1 << 22, rss: 1})
				case 6:
					b.in.putTerm(termInput, 0)
				}
				if r.IntN(4) == 0 {
					time.Sleep(time.Duration(r.IntN(200)) * time.Microsecond) // let the loop run dry and park
				}
			}
		})
	}
	// A watcher looks at the inbox as often as it can: it must never see
	// mail with no loop to take it (a lost wake-up, which a later put would
	// otherwise hide), and it counts how often it saw the loop parked.
	stop, parks, lost := make(chan struct{}), 0, 0
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stop:
				return
			default:
			}
			box := &b.in.box
			box.mu.Lock()
			switch {
			case !box.active && !box.mail.empty():
				lost++
			case !box.active:
				parks++
			}
			box.mu.Unlock()
			runtime.Gosched()
		}
	}()
	wg.Wait()
	close(stop)
	<-watched
	t.Logf("seen parked %d times during the puts", parks)
	if lost > 0 {
		t.Errorf("mail with no loop to take it, seen %d times", lost)
	}
	close(replies)
	n := 0
	for reply := range replies {
		select {
		case <-reply:
			n++
		case <-time.After(30 * time.Second):
			t.Fatalf("a command was never answered (%d answered): a lost wake-up", n)
		}
	}
	b.waitParked("the loop to park at the end")
	if b.reports.Load() == 0 {
		t.Error("no report")
	}
}

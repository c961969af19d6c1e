package supervisor

import (
	"sync"

	"github.com/tend-sh/tend/internal/notify"
	"github.com/tend-sh/tend/internal/reaper"
)

// The inbox is the one way into an instance from other goroutines. Every
// source (an operator's command, the reaper's exit, the notify socket, the
// group's emptying, the memory sampler, a probe, a terminal) calls a put
// method: it stores what it brings in the inbox's mail, under the inbox's
// lock, signals, and makes sure a loop goroutine runs to look. Nothing a
// source does blocks on the loop (the reaper, the epoll loop and the
// sampler serve every instance). The loop takes all of the mail at once
// into its own pending mail and handles it one item at a time; it parks
// only when the inbox is empty, checked under the same lock a put holds,
// so a put either is seen by the parking loop or finds no loop and starts
// one: no wake-up is lost.
//
// A new source is a field of mail (and, if a put must merge, its rule in
// merge), a line in deliver, and one put call.

// inbox is an instance's mail from other goroutines.
type inbox struct {
	// sig (capacity 1) holds a token exactly while mail is not empty: puts
	// signal and takeMail drains under mu, so the loop's select needs no
	// other channel for what others deliver.
	sig chan struct{}

	mu       sync.Mutex // guards mail, active and finished
	mail     mail
	active   bool // a loop goroutine is on
	finished bool // the loop has ended for good: puts are refused
}

// mail is what the sources delivered and the loop has not handled yet,
// merged where a later delivery supersedes an earlier one. The zero value
// is empty.
type mail struct {
	cmds  []command       // operator commands, in the order sent
	exits []reaper.Status // reaped leaders of the instance's runs (one per run)
	// note is what the notify socket delivered, merged: the socket's
	// handler must never block and a message must never be lost (a lost
	// READY=1 would become a start_timeout crash), so a message that finds
	// one waiting is folded into it (mergeMessage) and the loop applies
	// the sum.
	note    *notify.Message
	emptied bool         // the draining run's group emptied (without cgroups: its last processes are gone)
	over    memOver      // the memory sampler's latest finding past max_rss; pid 0: none
	probe   *probeResult // the liveness probe's result (one in flight at a time)
	term    termEvents   // a run's terminal's news
	freeze  *freezeReq   // an upgrade asks the instance to hold still (upgrade.go)
	acp     []acpNews    // a protocol run's connection's news, in order (protocol.go)
}

// termEvent is a kind of news from a run's terminal.
type termEvent uint8

const (
	termScreen  termEvent = 1 << iota // the screen changed
	termInput                         // input was typed into the terminal
	termClients                       // the number of attached clients changed
)

// termEvents is the place for a run's terminal (a tty program) to reach the
// instance: the terminal calls putTerm, which ORs what happened and keeps
// the latest client count, so a busy screen costs the loop one look, not
// one per change. The news is only a wake-up: what the loop does with it
// is the report that follows every delivery (deliver).
type termEvents struct {
	what    termEvent
	clients int // attached clients, as of the last termClients
}

func (m *mail) empty() bool {
	return len(m.cmds) == 0 && len(m.exits) == 0 && m.note == nil && !m.emptied &&
		m.over.pid == 0 && m.probe == nil && m.term.what == 0 && m.freeze == nil && len(m.acp) == 0
}

// merge moves what o holds into m, as if o's deliveries had come to m
// after its own, and empties o.
func (m *mail) merge(o *mail) {
	m.cmds = append(m.cmds, o.cmds...)
	m.exits = append(m.exits, o.exits...)
	if o.note != nil {
		m.putNote(o.note)
	}
	m.emptied = m.emptied || o.emptied
	if o.over.pid != 0 {
		m.over = o.over
	}
	if o.probe != nil {
		m.probe = o.probe
	}
	m.putTerm(o.term)
	m.acp = append(m.acp, o.acp...)
	if o.freeze != nil {
		m.freeze = o.freeze
	}
	*o = mail{}
}

func (m *mail) putNote(n *notify.Message) {
	if m.note == nil {
		m.note = n
	} else {
		mergeMessage(m.note, n)
	}
}

func (m *mail) putTerm(t termEvents) {
	if t.what&termClients != 0 {
		m.term.clients = t.clients
	}
	m.term.what |= t.what
}

// put stores a delivery with f (under the inbox's lock) and makes sure a
// loop goroutine will look at it; false, with nothing stored, once the
// instance has ended for good. f must only store: it runs under the lock.
func (in *Instance) put(f func(*mail)) bool {
	b := &in.box
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.finished {
		return false
	}
	f(&b.mail)
	select {
	case b.sig <- struct{}{}:
	default: // already signalled
	}
	if !b.active {
		b.active = true
		go in.loop()
	}
	return true
}

// putCmd hands c to the loop; false if the instance is gone (c.reply then
// holds what a gone instance means for it).
func (in *Instance) putCmd(c command) bool {
	if !in.put(func(m *mail) { m.cmds = append(m.cmds, c) }) {
		c.reply <- c.kind == cmdStop || c.kind == cmdRemove // gone is stopped
		return false
	}
	return true
}

// putExit is the reaper's Owner of the instance's runs.
func (in *Instance) putExit(s reaper.Status) {
	in.put(func(m *mail) { m.exits = append(m.exits, s) })
}

// putNote is the handler of the run's notify socket (on the epoll loop).
func (in *Instance) putNote(n notify.Message) {
	in.put(func(m *mail) { m.putNote(&n) })
}

// putEmptied is the group watcher's (or waitGone's) notice that the
// draining run has no process left.
func (in *Instance) putEmptied() {
	in.put(func(m *mail) { m.emptied = true })
}

// putOver is the memory sampler's finding that a run passed max_rss.
func (in *Instance) putOver(o memOver) {
	in.put(func(m *mail) { m.over = o })
}

// putProbe is a probe's result, from the probe's goroutine.
func (in *Instance) putProbe(r probeResult) {
	in.put(func(m *mail) { m.probe = &r })
}

// putTerm is a run's terminal's news: what happened, and with termClients
// the number of attached clients now.
func (in *Instance) putTerm(what termEvent, clients int) {
	in.put(func(m *mail) { m.putTerm(termEvents{what: what, clients: clients}) })
}

// takeMail moves the inbox's mail to the loop's pending mail. It reports
// whether a stop or remove is among the commands it took.
func (in *Instance) takeMail() (stop bool) {
	b := &in.box
	b.mu.Lock()
	for _, c := range b.mail.cmds {
		stop = stop || c.kind == cmdStop || c.kind == cmdRemove
	}
	in.pending.merge(&b.mail)
	select {
	case <-b.sig:
	default:
	}
	b.mu.Unlock()
	return stop
}

// drop removes a delivery that no longer matters (f clears it) from the
// inbox and from the pending mail.
func (in *Instance) drop(f func(*mail)) {
	f(&in.pending)
	b := &in.box
	b.mu.Lock()
	f(&b.mail)
	if b.mail.empty() {
		select {
		case <-b.sig:
		default:
		}
	}
	b.mu.Unlock()
}

// park ends the loop goroutine unless mail came meanwhile: under the lock
// a put holds, either this sees the mail, or the put sees the loop gone
// and starts another.
func (in *Instance) park() bool {
	b := &in.box
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.mail.empty() {
		return false
	}
	b.active = false
	return true
}

// letGo ends the creator's hold on a new instance (newInstance): from here
// on puts start its loop, and one starts at once if something came
// meanwhile (the exit of an adopted run that had just ended) or a timer
// waits (a backoff restored from the intent record).
func (in *Instance) letGo() {
	if !in.idle() || !in.park() {
		go in.loop()
	}
}

// closeBox refuses further puts, for good, and returns the commands that
// came too late to be handled.
func (in *Instance) closeBox() []command {
	b := &in.box
	b.mu.Lock()
	defer b.mu.Unlock()
	b.finished, b.active = true, false
	late := b.mail.cmds
	b.mail = mail{}
	select {
	case <-b.sig:
	default:
	}
	return late
}

// deliver handles the next item of the pending mail that is not a command
// (the loop takes those first, one a turn).
func (in *Instance) deliver() {
	m := &in.pending
	switch {
	case m.note != nil:
		n := m.note
		m.note = nil
		in.onNotify(*n)
	case m.probe != nil:
		r := m.probe
		m.probe = nil
		in.onProbe(*r)
	case m.over.pid != 0:
		o := m.over
		m.over = memOver{}
		in.onOverMem(o)
	case len(m.exits) > 0:
		st := m.exits[0]
		if m.exits = m.exits[1:]; len(m.exits) == 0 {
			m.exits = nil
		}
		in.onExit(st)
	case m.emptied:
		m.emptied = false
		in.onEmptied()
	case len(m.acp) > 0:
		n := m.acp[0]
		if m.acp = m.acp[1:]; len(m.acp) == 0 {
			m.acp = nil
		}
		in.onACP(n)
	case m.term.what != 0:
		// Nothing to do but take it: the report after every delivery
		// publishes the status, which reads the clients from the TTY.
		m.term = termEvents{}
	case m.freeze != nil: // last: what came before it is handled first
		r := m.freeze
		m.freeze = nil
		in.beginFreeze(r)
	}
}

// nextCmd takes the next pending command, if any.
func (in *Instance) nextCmd() (command, bool) {
	m := &in.pending
	if len(m.cmds) == 0 {
		return command{}, false
	}
	c := m.cmds[0]
	m.cmds[0] = command{}
	if m.cmds = m.cmds[1:]; len(m.cmds) == 0 {
		m.cmds = nil
	}
	return c, true
}

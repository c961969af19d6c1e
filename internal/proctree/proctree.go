// Package proctree reads the process trees of tend's runs from /proc, cheaply
// enough for the status broker and the memory watchdog to sample every run
// often.
//
// A run's members are its leader, every process in the leader's session or
// process group, and every descendant of those by parent link. They are
// found without ever scanning all of /proc: from the leader down through each
// member's /proc/PID/task/TID/children files, plus tend's own children files,
// where a subreaper finds the orphans whose middle process died. A member's
// /proc/PID/stat and children files stay open while it lives and are re-read
// with pread, so a steady tree costs about two preads per process and one
// allocation (the result) per sample.
//
// The children files need a kernel built with CONFIG_PROC_CHILDREN (every
// common distribution's is); without them only the leader and the orphans
// tend adopted are found.
package proctree

import (
	"cmp"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/tend-sh/tend/internal/program"
)

const (
	// defaultSelfEvery is how stale the index of tend's own children (where
	// adopted orphans show up) may be: re-listing it costs O(runs), so one
	// round of samples over every run shares one listing.
	defaultSelfEvery = 100 * time.Millisecond
	// defaultTaskEvery is how often a multi-threaded member's thread list
	// may be re-listed when its thread count changed.
	defaultTaskEvery = time.Second
)

// Tracker follows the process trees of many runs. It is safe for concurrent
// use; one mutex serialises samples, which are a few microseconds of reads.
//
// Each known member of a monitored run holds one descriptor for its stat and one
// per thread for its children files, until it is gone, its run goes cold or
// its leader is gone (seen by a Sample), or Forget.
type Tracker struct {
	// Set by NewAt and never changed after (tests adjust them before use).
	root      string // "/proc", or a test's stand-in
	self      int    // tend's pid: a subreaper's adopted orphans are its children
	pageSize  int64
	now       func() time.Time
	selfEvery time.Duration
	taskEvery time.Duration

	mu      sync.Mutex // guards everything below, including every member's fds and fields
	runs    map[int]*run
	gen     uint64 // number of the sample in progress; marks members reached by it
	orphans orphanIndex
	statBuf []byte
	kidsBuf []byte
	cmdBuf  []byte
	pids    []int     // scratch: the pids of one children file
	queue   []*member // scratch: members reached but not yet walked
}

// run is what a Tracker keeps for one run, between its first Sample and
// Forget (or its leader's end).
type run struct {
	leader   int
	members  map[int]*member
	at       time.Time // when procs was sampled
	procs    []program.Process
	tracking string
	rss      int64
	// monitored: sampled through Monitor, so its files stay open.
	monitored bool
	truncated bool // the last walk met more than MaxMembers
}

// member is one process of a run, with its /proc files held open.
type member struct {
	pid     int
	fd      int    // /proc/PID/stat
	start   uint64 // starttime when first opened: another one means a reused pid
	comm    string // comm when cmd was read: a new one means an exec, so cmd is re-read
	cmd     string
	tasks   []task // its threads' children files, open
	tasksAt time.Time
	read    uint64 // gen of the last stat read
	reached uint64 // gen of the last sample that found it a member

	state    string
	ppid     int
	pgid     int
	sid      int
	threads  int
	rssBytes int64
}

// task is one thread's open children file.
type task struct {
	tid int
	fd  int
}

// New returns a Tracker reading /proc for the runs of this process.
func New() *Tracker {
	return NewAt("/proc", os.Getpid())
}

// NewAt returns a Tracker reading the proc filesystem at procRoot, where self
// is the pid of the process that started the runs and may adopt their
// orphans.
func NewAt(procRoot string, self int) *Tracker {
	return &Tracker{
		root:      procRoot,
		self:      self,
		pageSize:  int64(os.Getpagesize()),
		now:       time.Now,
		selfEvery: defaultSelfEvery,
		taskEvery: defaultTaskEvery,
		runs:      make(map[int]*run),
		statBuf:   make([]byte, 1024),
		kidsBuf:   make([]byte, 1024),
		cmdBuf:    make([]byte, maxCmd),
	}
}

// Sample returns the members of the run led by leader: the leader, every
// process in its session or process group (sid == leader or pgid ==
// leader), and every descendant of those by parent link, each once, sorted
// by pid. tracking is program.TrackingTree when some member is in neither
// the leader's session nor its group (found by parent links only: a signal
// to the group misses it), program.TrackingGroup otherwise, and
// program.TrackingNone when the leader is gone (reaped), with no procs. rss
// is the sum of the members' rss_bytes. A leader that exited but is not
// reaped yet is still there, in state "Z", with its surviving members.
//
// A sample younger than maxAge is returned as is; 0 always samples. The
// returned slice is shared with later callers and must not be modified. The
// run's /proc files are closed again after the sample (see Monitor).
func (t *Tracker) Sample(leader int, maxAge time.Duration) (procs []program.Process, tracking string, rss int64) {
	m := t.sample(leader, maxAge, false)
	return m.Procs, m.Tracking, m.RSS
}

// Members is Sample as the broker reads it: with Truncated set when the run
// has more than MaxMembers processes (only that many are listed).
// At is when the sample was taken.
func (t *Tracker) Members(leader int, maxAge time.Duration) program.Members {
	return t.sample(leader, maxAge, false)
}

// Monitor samples the run led by leader afresh for its summed RSS, as the
// memory watchdog does every second: the run's files stay open between
// calls, so a steady tree costs a pread per file.
func (t *Tracker) Monitor(leader int) int64 {
	return t.sample(leader, 0, true).RSS
}

// sample is Members; keep: the run's files stay open (Monitor).
func (t *Tracker) sample(leader int, maxAge time.Duration, keep bool) program.Members {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	r := t.runs[leader]
	if r != nil && maxAge > 0 && now.Sub(r.at) < maxAge {
		return r.last()
	}
	if leader <= 0 || leader == t.self {
		return program.Members{Procs: []program.Process{}, Tracking: program.TrackingNone, At: now}
	}
	if r == nil {
		r = &run{leader: leader, members: make(map[int]*member)}
		t.runs[leader] = r
	}
	if keep {
		r.monitored = true
	}
	if !t.walkLocked(r, now) {
		// The members last seen are kept, their files closed, for Signal,
		// which a supervisor calls once its run has ended (and which
		// forgets them), or until Forget.
		t.coolLocked(r)
		if len(r.members) == 0 {
			delete(t.runs, leader)
		}
		return program.Members{Procs: []program.Process{}, Tracking: program.TrackingNone, At: now}
	}
	t.resultLocked(r, now)
	if !r.monitored {
		t.coolLocked(r)
	}
	return r.last()
}

// last is r's last sample.
func (r *run) last() program.Members {
	return program.Members{Procs: r.procs, Tracking: r.tracking, RSS: r.rss, Truncated: r.truncated, At: r.at}
}

// Forget closes and drops everything kept for the run led by leader. Call it
// when the run ends.
func (t *Tracker) Forget(leader int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r := t.runs[leader]; r != nil {
		t.forgetLocked(r)
	}
}

func (t *Tracker) forgetLocked(r *run) {
	for _, m := range r.members {
		t.dropLocked(r, m)
	}
	delete(t.runs, r.leader)
}

// walkLocked finds r's members afresh and reads their stat; it reports false
// when the leader is gone.
func (t *Tracker) walkLocked(r *run, now time.Time) bool {
	t.gen++
	r.truncated = false
	t.queue = t.queue[:0]
	if !t.reachLocked(r, r.leader, 0) {
		return false
	}
	t.drainLocked(r, now)

	// Orphans adopted by tend (a subreaper) after their parent died.
	t.refreshOrphansLocked(now)
	for _, pid := range t.orphans.of[r.leader] {
		if !t.reachLocked(r, pid, 0) {
			t.orphans.reread(pid)
		}
	}
	t.drainLocked(r, now)

	// Members seen before but not reached now stay while they are still in
	// the group or session (adopted by init, say, where no children file we
	// read lists them), or when their parent is a member and they were
	// forked after its children file was read.
	for _, m := range r.members {
		if m.reached != t.gen && t.keepLocked(r, m) {
			m.reached = t.gen
			t.queue = append(t.queue, m)
		}
	}
	t.drainLocked(r, now)

	for _, m := range r.members {
		if m.reached != t.gen {
			t.dropLocked(r, m)
		}
	}
	return true
}

// reachLocked makes pid a member if its stat says it is one: a child listed
// by parent must have parent as its ppid (the pid may have been reused since
// the list was read); with parent 0 it must be in the leader's session or
// group. A new member is queued to have its own children walked.
func (t *Tracker) reachLocked(r *run, pid, parent int) bool {
	m := r.members[pid]
	if m != nil && m.reached == t.gen {
		return true
	}
	if m != nil && !t.readLocked(m) {
		t.dropLocked(r, m)
		m = nil
	}
	if m == nil {
		if len(r.members) >= MaxMembers {
			r.truncated = true // a fork bomb: not one more file to hold
			return false
		}
		if m = t.openLocked(pid); m == nil {
			return false
		}
		r.members[pid] = m
	}
	ok := m.sid == r.leader || m.pgid == r.leader
	if parent != 0 {
		ok = m.ppid == parent
	}
	if !ok {
		if m.reached == 0 { // never a member: nothing to keep open
			t.dropLocked(r, m)
		}
		return false
	}
	m.reached = t.gen
	t.queue = append(t.queue, m)
	return true
}

// keepLocked reports whether a known member not reached by this sample's
// walk is still one.
func (t *Tracker) keepLocked(r *run, m *member) bool {
	if !t.readLocked(m) {
		return false
	}
	if m.sid == r.leader || m.pgid == r.leader {
		return true
	}
	p := r.members[m.ppid]
	return p != nil && p.reached == t.gen
}

// drainLocked walks the children of every queued member, which queues theirs.
func (t *Tracker) drainLocked(r *run, now time.Time) {
	for len(t.queue) > 0 {
		m := t.queue[len(t.queue)-1]
		t.queue = t.queue[:len(t.queue)-1]
		t.walkChildrenLocked(r, m, now)
	}
}

// walkChildrenLocked reaches every child of m listed by its threads'
// children files: a child is listed under the thread that forked it.
func (t *Tracker) walkChildrenLocked(r *run, m *member, now time.Time) {
	if m.state == "Z" || m.state == "X" {
		return // a dead process's children were already reparented
	}
	t.tasksLocked(m, now)
	for _, tk := range m.tasks {
		n, err := preadAll(tk.fd, &t.kidsBuf)
		if err != nil {
			continue
		}
		t.pids = parsePids(t.kidsBuf[:n], t.pids[:0])
		for _, pid := range t.pids {
			t.reachLocked(r, pid, m.pid)
		}
	}
}

// tasksLocked keeps m's open children files in line with its threads. A
// single-threaded process needs no listing (its one thread's id is its
// pid); a multi-threaded one lists /proc/PID/task when first seen, again
// when its thread count changed (at most every taskEvery), and every
// 10*taskEvery anyway, for a thread that replaced another one.
func (t *Tracker) tasksLocked(m *member, now time.Time) {
	age := now.Sub(m.tasksAt)
	stale := age >= t.taskEvery &&
		(m.threads != len(m.tasks) || (m.threads > 1 && age >= 10*t.taskEvery))
	if m.tasks != nil && !stale {
		return
	}
	m.tasksAt = now
	tids := []int{m.pid}
	if m.threads > 1 {
		tids = listTasks(t.dir(m.pid))
	}
	kept := m.tasks[:0]
	for _, tk := range m.tasks {
		if slices.Contains(tids, tk.tid) {
			kept = append(kept, tk)
		} else {
			closeFD(tk.fd)
		}
	}
	for _, tid := range tids {
		if slices.ContainsFunc(kept, func(tk task) bool { return tk.tid == tid }) {
			continue
		}
		path := t.dir(m.pid) + "/task/" + strconv.Itoa(tid) + "/children"
		if fd, err := openRead(path); err == nil {
			kept = append(kept, task{tid: tid, fd: fd})
		}
	}
	if kept == nil {
		kept = []task{} // listed, even if no thread's file opened
	}
	m.tasks = kept
}

// openLocked opens a new member's stat and reads its cmdline; nil when the
// process is gone.
func (t *Tracker) openLocked(pid int) *member {
	fd, err := openRead(t.dir(pid) + "/stat")
	if err != nil {
		return nil
	}
	st, ok := t.readStatLocked(fd)
	if !ok {
		closeFD(fd)
		return nil
	}
	m := &member{pid: pid, fd: fd, start: st.start}
	t.setLocked(m, st)
	return m
}

// readLocked re-reads a member's stat once per sample (opening it again if
// its run went cold); false when the process is gone or its pid now names
// another process.
func (t *Tracker) readLocked(m *member) bool {
	if m.read == t.gen {
		return true
	}
	if m.fd < 0 {
		fd, err := openRead(t.dir(m.pid) + "/stat")
		if err != nil {
			return false
		}
		m.fd = fd
	}
	st, ok := t.readStatLocked(m.fd)
	if !ok || st.start != m.start {
		return false
	}
	t.setLocked(m, st)
	return true
}

// coolLocked closes the files of r's members, keeping what they told: a
// later sample opens them again and checks each is the same process.
func (t *Tracker) coolLocked(r *run) {
	for _, m := range r.members {
		if m.fd >= 0 {
			closeFD(m.fd)
			m.fd = -1
		}
		for _, tk := range m.tasks {
			closeFD(tk.fd)
		}
		m.tasks = nil
	}
}

func (t *Tracker) readStatLocked(fd int) (stat, bool) {
	n, err := preadAll(fd, &t.statBuf)
	if err != nil { // ESRCH once the process is reaped
		return stat{}, false
	}
	return parseStat(t.statBuf[:n])
}

// setLocked records a fresh stat, and the command line when comm changed
// (the process was new, or exec'd since: a fork reads its parent's cmdline
// until it execs).
func (t *Tracker) setLocked(m *member, st stat) {
	m.read = t.gen
	if m.state == "" || m.state[0] != st.state {
		m.state = stateString(st.state)
	}
	m.ppid, m.pgid, m.sid, m.threads = st.ppid, st.pgid, st.sid, st.threads
	m.rssBytes = st.rssPages * t.pageSize
	if m.cmd == "" || string(st.comm) != m.comm {
		m.comm = string(st.comm)
		m.cmd = readCmd(t.dir(m.pid), m.comm, t.cmdBuf)
	}
}

// dropLocked closes a member's files and forgets it.
func (t *Tracker) dropLocked(r *run, m *member) {
	if m.fd >= 0 {
		closeFD(m.fd)
	}
	for _, tk := range m.tasks {
		closeFD(tk.fd)
	}
	m.tasks = nil
	delete(r.members, m.pid)
}

// resultLocked builds the sample's answer from r's members.
func (t *Tracker) resultLocked(r *run, now time.Time) {
	procs := make([]program.Process, 0, len(r.members))
	tracking := program.TrackingGroup
	var rss int64
	for _, m := range r.members {
		procs = append(procs, program.Process{
			PID: m.pid, PPID: m.ppid, PGID: m.pgid, Cmd: m.cmd,
			RSSBytes: m.rssBytes, State: m.state,
		})
		rss += m.rssBytes
		if m.sid != r.leader && m.pgid != r.leader {
			tracking = program.TrackingTree
		}
	}
	slices.SortFunc(procs, func(a, b program.Process) int { return cmp.Compare(a.PID, b.PID) })
	r.procs, r.tracking, r.rss, r.at = procs, tracking, rss, now
}

func (t *Tracker) dir(pid int) string {
	return t.root + "/" + strconv.Itoa(pid)
}

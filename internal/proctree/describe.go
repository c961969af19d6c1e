package proctree

import (
	"cmp"
	"slices"

	"github.com/tend-sh/tend/internal/program"
)

// MaxMembers caps how many processes a run's status lists: a run that
// forks without end (a fork bomb) must not make each status read ten
// thousand files, nor the daemon hold them (SPEC 14). A run past it is
// truncated.
const MaxMembers = 1024

// Describe reads what a status says of each of pids (the members of a
// run's cgroup): parent, group, command, RSS, state; pids that are gone by
// the time they are read are left out. Nothing is kept open. At most
// MaxMembers are described; truncated says some were left out. rss is the
// sum of their RSS.
func (t *Tracker) Describe(pids []int) (procs []program.Process, rss int64, truncated bool) {
	if len(pids) > MaxMembers {
		pids, truncated = pids[:MaxMembers], true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	procs = make([]program.Process, 0, len(pids))
	for _, pid := range pids {
		n, err := readOnce(t.dir(pid)+"/stat", &t.statBuf)
		if err != nil {
			continue
		}
		st, ok := parseStat(t.statBuf[:n])
		if !ok {
			continue
		}
		p := program.Process{PID: pid, PPID: st.ppid, PGID: st.pgid, RSSBytes: st.rssPages * t.pageSize, State: stateString(st.state)}
		p.Cmd = readCmd(t.dir(pid), string(st.comm), t.cmdBuf)
		rss += p.RSSBytes
		procs = append(procs, p)
	}
	slices.SortFunc(procs, func(a, b program.Process) int { return cmp.Compare(a.PID, b.PID) })
	return procs, rss, truncated
}

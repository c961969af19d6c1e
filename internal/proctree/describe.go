package proctree

import (
	"cmp"
	"slices"
	"strings"

	"github.com/tend-sh/tend/internal/program"
)

// MaxMembers caps how many processes a run's status lists: a run that
// forks without end (a fork bomb) must not make each status read ten
// thousand files, nor the daemon hold them (docs/trust.md#floods). A run past it is
// truncated.
const MaxMembers = 1024

// Describe reads what a status says of each of pids (the members of a
// run's cgroup): parent, group, command, RSS, state; pids that are gone by
// the time they are read are left out. Nothing is kept open. At most
// MaxMembers are described; truncated says some were left out. rss is the
// sum of their RSS. prev is the last description of the same run (or nil):
// a process in it whose pid and comm are unchanged keeps its command line
// rather than have it read again.
//
// Describe takes no lock (its buffers are its own and the Tracker's fields
// it reads never change), so a listing may describe many runs at once.
func (t *Tracker) Describe(pids []int, prev []program.Process) (procs []program.Process, rss int64, truncated bool) {
	if len(pids) > MaxMembers {
		pids, truncated = pids[:MaxMembers], true
	}
	var statArr [512]byte
	statBuf := statArr[:]
	var cmdBuf []byte // made when a command line must be read
	procs = make([]program.Process, 0, len(pids))
	for _, pid := range pids {
		n, err := readOnce(t.dir(pid)+"/stat", &statBuf)
		if err != nil {
			continue
		}
		st, ok := parseStat(statBuf[:n])
		if !ok {
			continue
		}
		p := program.Process{PID: pid, PPID: st.ppid, PGID: st.pgid, RSSBytes: st.rssPages * t.pageSize, State: stateString(st.state)}
		if i, ok := slices.BinarySearchFunc(prev, pid, func(q program.Process, pid int) int { return cmp.Compare(q.PID, pid) }); ok && sameComm(prev[i].Cmd, st.comm) {
			p.Cmd = prev[i].Cmd
		} else {
			if cmdBuf == nil {
				cmdBuf = make([]byte, maxCmd)
			}
			p.Cmd = readCmd(t.dir(pid), string(st.comm), cmdBuf)
		}
		rss += p.RSSBytes
		procs = append(procs, p)
	}
	slices.SortFunc(procs, func(a, b program.Process) int { return cmp.Compare(a.PID, b.PID) })
	return procs, rss, truncated
}

// sameComm reports whether a command line read earlier still fits comm (the
// kernel's 15-byte name of the executable): an exec since changes it.
func sameComm(cmd string, comm []byte) bool {
	if len(comm) == 0 {
		return false
	}
	first, _, _ := strings.Cut(cmd, " ")
	first = first[strings.LastIndexByte(first, '/')+1:]
	return strings.HasPrefix(first, string(comm)) || cmd == "["+string(comm)+"]"
}

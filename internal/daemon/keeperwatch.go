package daemon

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/keeper"
	"github.com/tend-sh/tend/internal/program"
)

// A keeper that dies (docs/terminal.md#a-keeper-that-dies). The keeper
// reads every tty run's master into its log; a keeper killed outright
// loses what it had read and not yet written (at most a read chunk per
// run: it writes each turn's reads at the end of the turn), and until
// another reads on, the runs block once their terminals are full. So the
// daemon keeps a master of its own of every run it hands the keeper
// (holdLocked), waits on a
// pidfd of the keeper it talks to (watchLocked), and when that keeper
// dies says so (a stderr line, a daemon event with phase keeper_replaced,
// tend_keeper_restarts_total, tend doctor), starts another at once and
// hands it every live run's master again (replaceLocked), as containerd
// does a shim's state: the daemon holds the masters too, so neither
// process alone can lose them.

// holdLocked keeps a copy of fd, the master of run r of instance id, for
// a keeper that replaces one that died; Drop lets it go.
func (k *ttyKeeper) holdLocked(id string, r keeper.Run, fd int, log keeper.LogSpec) {
	own, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return // the keeper still gets its copy; a replacement would not
	}
	k.releaseLocked(id)
	k.masters[id] = own
	k.kept[id] = r
	k.logs[id] = log
	k.wmu.Lock()
	k.bases[id] = log.Base
	k.wmu.Unlock()
}

// releaseLocked closes the daemon's own copy of instance id's master.
func (k *ttyKeeper) releaseLocked(id string) {
	if fd, ok := k.masters[id]; ok {
		unix.Close(fd)
		delete(k.masters, id)
	}
}

// keeperPIDLocked is the pid of the keeper of the connection of the
// moment: the one this daemon started, else the one the state directory
// records (the connection's peer may still be the daemon that made its
// socket, keeper.PIDFile).
func (k *ttyKeeper) keeperPIDLocked() int {
	if k.pid > 0 {
		return k.pid
	}
	if rec := keeper.Recorded(k.d.state.Root); len(rec) > 0 {
		return rec[0]
	}
	return 0
}

// watchLocked waits, on a goroutine of its own, for the keeper the daemon
// now talks to to exit, unless it waits already.
func (k *ttyKeeper) watchLocked() {
	pid := k.keeperPIDLocked()
	if pid <= 0 || pid == k.watched || k.closed || k.stopR < 0 {
		return
	}
	k.watched = pid
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		pidfd = -1 // gone already: said and replaced at once
	}
	stop := k.stopR
	k.watches.Add(1)
	go func() {
		defer k.watches.Done()
		if pidfd >= 0 {
			defer unix.Close(pidfd)
			fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}, {Fd: int32(stop), Events: unix.POLLIN}}
			for {
				_, err := unix.Poll(fds, -1)
				if err == unix.EINTR {
					continue
				}
				if err != nil || fds[1].Revents != 0 || fds[0].Revents == 0 {
					return // the daemon stops
				}
				break
			}
		}
		k.died(pid)
	}()
}

// died replaces keeper pid, which exited, if it is still the one the
// daemon talks to.
func (k *ttyKeeper) died(pid int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed || k.watched != pid {
		return // tend down, or replaced already (a Keep found it gone)
	}
	k.watched = 0
	if k.c != nil {
		k.c.Close()
		k.c = nil
	}
	k.replaceLocked(pid)
}

// lostLocked is Keep's: the connection failed; if the keeper the daemon
// watched is gone, it is replaced now, and lostLocked says whether the new
// one holds every master (this run's among them).
func (k *ttyKeeper) lostLocked() bool {
	pid := k.watched
	if pid <= 0 || k.closed || alive(pid) {
		return false
	}
	k.watched = 0
	return k.replaceLocked(pid)
}

// alive says whether pid has not exited (a zombie not yet reaped has).
func alive(pid int) bool {
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return false
	}
	defer unix.Close(pidfd)
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n == 0
}

// replaceLocked starts a keeper in place of dead and hands it every live
// run's master; it says so, and whether all were handed.
func (k *ttyKeeper) replaceLocked(dead int) bool {
	k.restarts.Add(1)
	ev := &program.DaemonPhase{Phase: program.PhaseKeeperReplaced, PID: dead}
	var failed []string
	k.unheld = true
	err := k.connectLocked()
	if err == nil {
		ev.Keeper = k.watched
		var n int
		n, failed, err = k.rehandLocked()
		ev.Count = &n
	}
	var line string
	switch {
	case ev.Count == nil:
		ev.Error = err.Error()
		line = fmt.Sprintf("keeper pid %d died, and no keeper could be started: %v (tty runs keep their terminals, but nothing reads them: they block once their terminals are full)", dead, err)
	case len(failed) > 0:
		ev.Error = err.Error()
		line = fmt.Sprintf("keeper pid %d died; keeper pid %d replaces it and holds %d tty run(s)' terminals again, but not those of %s: %v", dead, ev.Keeper, *ev.Count, strings.Join(failed, ", "), err)
	default:
		line = fmt.Sprintf("keeper pid %d died; keeper pid %d replaces it and holds %d tty run(s)' terminals again", dead, ev.Keeper, *ev.Count)
	}
	k.d.note("%s", line)
	k.d.log.Publish(program.Event{Kind: program.KindDaemon, Data: ev})
	return ev.Count != nil && len(failed) == 0
}

// rehandLocked hands the keeper of the moment every live run's master,
// and says how many it took and which it did not.
func (k *ttyKeeper) rehandLocked() (n int, failed []string, err error) {
	for id, fd := range k.masters {
		if kerr := k.c.Keep(k.kept[id], k.logs[id], fd); kerr != nil {
			failed, err = append(failed, id), kerr
			continue
		}
		n++
	}
	k.unheld = len(failed) > 0
	return n, failed, err
}

// stopWatches ends the watches (tend down): quit has set closed.
func (k *ttyKeeper) stopWatches() {
	k.mu.Lock()
	r, w := k.stopR, k.stopW
	k.stopR, k.stopW = -1, -1
	k.mu.Unlock()
	if w < 0 {
		return
	}
	unix.Close(w)
	k.watches.Wait()
	unix.Close(r)
}

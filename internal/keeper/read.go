package keeper

import (
	"bytes"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/logfile"
	"github.com/tend-sh/tend/internal/reaper"
	"github.com/tend-sh/tend/internal/statedir"
)

// The keeper's reading: every held master is read whenever the run writes,
// a chunk per turn, and what is read is appended to the run's log at once
// (flushed at the end of the turn), then the daemons are told (wrote).
//
// A log that cannot be written (a full disk, a directory gone): the keeper
// reads on and drops what it cannot write, counts it and tells the daemon
// (failed, then healed once a write works again), which says so out loud
// (docs/terminal.md#the-keeper): a run never blocks on tend's disk, and
// nothing is confirmed that was not written.

// keep starts reading master for run m.Run, if it is the process it says
// it is, into log m.Log.
func (k *keeper) keep(m Keep, master int) {
	r := m.Run
	if h := k.byRun[r]; h != nil {
		unix.Close(master) // read already: a second reader would split its output
		h.spec = m.Log
		if h.log != nil {
			h.log.SetLimits(m.Log.MaxSize, m.Log.MaxFiles)
		}
		return
	}
	// A run whose leader has exited already (a short run: the daemon's
	// reaper was quicker than its keep) is read to its end all the same:
	// its output waits in the terminal. A live pid must be the run's.
	// The master is the run's whatever its pid says (the daemon handed it
	// over); the pid only tells when the run is over. A pid that names
	// another process now (used again) is refused; one whose process went
	// between the two looks (reaped as the keep came: a run that ended at
	// once) is read to its end like one gone already. Refusing that one
	// lost all a quick run wrote (tend run -a --tty of `echo marker`).
	pidfd, err := unix.PidfdOpen(r.PID, 0)
	if err == nil {
		ticks, terr := reaper.StartTicks(r.PID)
		switch {
		case terr != nil:
			unix.Close(pidfd)
			pidfd = -1
		case r.Ticks != 0 && ticks != r.Ticks:
			unix.Close(pidfd)
			unix.Close(master)
			return
		default:
			unix.CloseOnExec(pidfd)
		}
	} else {
		pidfd = -1
	}
	unix.CloseOnExec(master)
	if unix.SetNonblock(master, true) != nil || pidfd >= 0 && k.watch(pidfd) != nil {
		if pidfd >= 0 {
			unix.Close(pidfd)
		}
		unix.Close(master)
		return
	}
	if k.watch(master) != nil {
		if pidfd >= 0 {
			_ = unix.EpollCtl(k.ep, unix.EPOLL_CTL_DEL, pidfd, nil)
			unix.Close(pidfd)
		}
		unix.Close(master)
		return
	}
	h := &held{run: r, master: master, pidfd: pidfd, spec: m.Log}
	k.masters[master], k.byRun[r] = h, h
	if pidfd >= 0 {
		k.pidfds[pidfd] = h
	}
	k.openLog(h)
}

// openLog makes h's log, once state_dir/logs can be opened; until then
// what the run writes is read, counted and said as lost.
func (k *keeper) openLog(h *held) {
	if err := k.openLogs(); err != nil {
		k.fail(h, 0, err)
		return
	}
	h.log = logfile.New(k.logs, h.spec.Base, logfile.Options{MaxSize: h.spec.MaxSize, MaxFiles: h.spec.MaxFiles, Shared: true})
}

// openLogs opens state_dir/logs through the state directory's descriptor,
// as the daemon does (package statedir: no symlink is followed).
func (k *keeper) openLogs() error {
	if k.logs != nil {
		return nil
	}
	fd, err := unix.FcntlInt(uintptr(k.dir), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return err
	}
	path, _ := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", k.dir))
	root, err := statedir.Inherited(fd, path)
	if err != nil {
		unix.Close(fd)
		return err
	}
	defer root.Close()
	k.logs, err = root.Sub("logs")
	return err
}

// read reads one chunk of h's master into its log; EIO (every slave is
// closed) ends it.
// A pty hands out a few KiB a read: the turn reads on while more is
// there, up to ReadChunk, so that a flood costs one write and one wake of
// the daemon per chunk, not per read.
func (k *keeper) read(h *held) {
	off := 0
	for off < len(k.buf) {
		if off > 0 && !readable(h.master) {
			break
		}
		n, err := unix.Read(h.master, k.buf[off:])
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN {
			break
		}
		if err != nil || n == 0 { // EIO: every slave is closed
			k.add(h, k.buf[:off])
			k.flushOne(h)
			k.tell(Ended{h.run})
			k.close(h)
			return
		}
		off += n
	}
	k.add(h, k.buf[:off])
}

// readable says whether fd has something to read now. Only what is there
// is read: another holder of the master may have put it in blocking mode
// (the mode is the open file's, shared by every copy).
func readable(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, _ := unix.Poll(fds, 0)
	return n > 0
}

// add appends one read to h's log as records of stream tty: a record per
// line, the bytes after the last newline a partial one (the stream is
// given back byte for byte: each line, and a newline after each record
// that is not partial).
func (k *keeper) add(h *held, data []byte) {
	if len(data) == 0 {
		return
	}
	h.batch += int64(len(data))
	h.dirty = true
	if h.log == nil && time.Since(h.triedAt) >= time.Second {
		h.triedAt = time.Now() // state_dir/logs may be back
		k.openLog(h)
	}
	if h.log == nil {
		return
	}
	ts := k.now()
	var err error
	for len(data) > 0 {
		r := logfile.Record{TS: ts, Stream: logfile.TTY, Line: data}
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			r.Line, data = data[:i], data[i+1:]
		} else {
			r.Partial, data = true, nil
		}
		if e := h.log.Add(r); e != nil && err == nil {
			err = e
		}
	}
	if err != nil && h.addErr == nil {
		h.addErr = err // said with the turn's flush
	}
}

// drain reads what h's master still holds (the daemon dropped it: its
// run is over), at most 1 MiB: a flood of what the run left behind is not
// waited for, as a terminal the daemon closes is not.
func (k *keeper) drain(h *held) {
	for range 16 {
		if !readable(h.master) {
			break
		}
		var n int
		var err error
		for {
			n, err = unix.Read(h.master, k.buf)
			if err != unix.EINTR {
				break
			}
		}
		if err != nil || n == 0 {
			break
		}
		k.add(h, k.buf[:n])
	}
	k.flushOne(h)
}

// flush writes every log written this turn, and owes each daemon a wrote.
// A log not written this turn has its file closed: the keeper holds a
// log file open only while its run floods, not one per run for good.
// What was lost and not yet said is said within a second or so
// (unsaid: the loop looks again soon).
func (k *keeper) flush() {
	k.unsaid = false
	for _, h := range k.byRun {
		if h.dirty {
			k.flushOne(h)
		} else if h.log != nil && h.log.IsOpen() {
			h.log.CloseFile()
		}
		if h.lost > 0 && time.Since(h.saidAt) >= time.Second {
			k.tell(Failed{ID: h.run.ID, Bytes: h.lost, Err: h.lastErr})
			h.lost, h.saidAt = 0, time.Now()
		}
		k.unsaid = k.unsaid || h.lost > 0
	}
}

func (k *keeper) flushOne(h *held) {
	if !h.dirty {
		return
	}
	batch := h.batch
	h.dirty, h.batch = false, 0
	if h.log == nil {
		k.fail(h, batch, fmt.Errorf("state_dir/logs cannot be opened"))
		return
	}
	err := h.log.Flush()
	if h.addErr != nil {
		err, h.addErr = h.addErr, nil
	}
	if err != nil {
		k.fail(h, batch, err)
		return
	}
	if h.failed {
		if h.lost > 0 {
			k.tell(Failed{ID: h.run.ID, Bytes: h.lost, Err: h.lastErr})
		}
		h.failed, h.lost = false, 0
		k.tell(Healed{ID: h.run.ID})
	}
	for _, ob := range k.conns {
		ob.wrote[h.run.ID] = true
	}
}

// fail counts n bytes of h's output as read and not written, and says so:
// at once the first time, then at most once a second with what was lost
// meanwhile (a flood onto a full disk is not a message a read).
func (k *keeper) fail(h *held, n int64, err error) {
	h.lost += n
	h.lastErr = err.Error()
	if h.failed && time.Since(h.saidAt) < time.Second {
		return
	}
	h.failed, h.saidAt = true, time.Now()
	k.tell(Failed{ID: h.run.ID, Bytes: h.lost, Err: h.lastErr})
	h.lost = 0
}

// leaderExited stops watching the run's leader; its master is read on
// until every slave is closed (what its children write is the run's too).
func (k *keeper) leaderExited(h *held) {
	_ = unix.EpollCtl(k.ep, unix.EPOLL_CTL_DEL, h.pidfd, nil)
	unix.Close(h.pidfd)
	delete(k.pidfds, h.pidfd)
	h.pidfd = -1
}

// close lets h go: its master, its pidfd, its log's file.
func (k *keeper) close(h *held) {
	if h.lost > 0 { // what was lost since failed was last said
		k.tell(Failed{ID: h.run.ID, Bytes: h.lost, Err: h.lastErr})
		h.lost = 0
	}
	_ = unix.EpollCtl(k.ep, unix.EPOLL_CTL_DEL, h.master, nil)
	unix.Close(h.master)
	delete(k.masters, h.master)
	if h.pidfd >= 0 {
		k.leaderExited(h)
	}
	if h.log != nil {
		h.log.CloseFile()
	}
	delete(k.byRun, h.run)
}

// tell owes every connected daemon m.
func (k *keeper) tell(m Message) {
	for conn := range k.conns {
		k.post(conn, m)
	}
}

// post owes conn m, sent at the end of the turn.
func (k *keeper) post(conn int, m Message) {
	if ob := k.conns[conn]; ob != nil {
		ob.q = append(ob.q, m)
	}
}

// owing says whether a daemon is owed a message its socket had no room
// for.
func (k *keeper) owing() bool {
	for _, ob := range k.conns {
		if len(ob.q) > 0 || len(ob.wrote) > 0 {
			return true
		}
	}
	return false
}

// sendOwed sends each daemon what it is owed, never waiting: a daemon
// that is slow to read gets the rest next turn, its wrotes coalesced.
func (k *keeper) sendOwed() {
	for conn, ob := range k.conns {
		for len(ob.q) > 0 {
			if send(conn, ob.q[0], -1, unix.MSG_DONTWAIT) == unix.EAGAIN {
				break
			}
			ob.q = ob.q[1:] // sent, or the daemon is gone (its hang-up is read next)
		}
		if len(ob.q) > 0 {
			continue
		}
		for id := range ob.wrote {
			if send(conn, Wrote{ID: id}, -1, unix.MSG_DONTWAIT) == unix.EAGAIN {
				break
			}
			delete(ob.wrote, id)
		}
	}
}

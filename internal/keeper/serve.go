package keeper

import (
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/reaper"
)

// MaybeServe becomes the keeper, and exits when the keeper is done, when
// this process was started as one (argv[0] "tend-keeper" and the marker
// variable); otherwise it returns at once. main calls it first
// (internal/roles), and so does the TestMain of every test binary that
// starts a keeper: the keeper is that binary, re-executed.
func MaybeServe() {
	if len(os.Args) > 0 && os.Args[0] == Arg0 && os.Getenv(Marker) != "" {
		closeInherited(ListenFD, DirFD)
		os.Exit(serve(ListenFD, DirFD, firstGrace))
	}
}

// firstGrace is how long a keeper with nothing held waits for its first
// daemon (the one that started it connects at once).
const firstGrace = 10 * time.Second

// held is one run's master and the pidfd that says when the run is over.
type held struct {
	run    Run
	master int
	pidfd  int
}

// keeper is the process's state: one goroutine, one epoll set.
type keeper struct {
	ep     int
	listen int
	dir    int           // the state directory, where the socket is (leave)
	conns  map[int]bool  // daemons' connections: the one of the moment, and one dying, whose last words still count
	byFD   map[int]*held // by pidfd (the epoll events' key)
	byRun  map[Run]*held
	quit   bool // a daemon left with quit: exit once nothing is held
}

// serve is the keeper's life; it returns its exit status. listen is the
// socket the daemon made, dir the state directory it is in.
func serve(listen, dir int, grace time.Duration) int {
	// Listening again makes the kernel record the keeper, not the daemon
	// that made the socket, as the listener: every connection from now on
	// gets its pid and uid as its peer's (SO_PEERCRED), and the next
	// daemon talks only to the keeper's.
	if unix.Listen(listen, 4) != nil {
		return 1
	}
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return 1
	}
	k := &keeper{ep: ep, listen: listen, dir: dir, conns: map[int]bool{}, byFD: map[int]*held{}, byRun: map[Run]*held{}}
	unix.CloseOnExec(listen)
	unix.CloseOnExec(dir)
	if k.watch(listen) != nil {
		return 1
	}
	alone := time.Now() // since when no daemon is connected
	events := make([]unix.EpollEvent, 64)
	for {
		idle := len(k.conns) == 0 && len(k.byFD) == 0
		if idle && (k.quit || time.Since(alone) >= grace) {
			k.leave()
			return 0
		}
		wait := -1
		if idle {
			wait = int(max(grace-time.Since(alone), 0)/time.Millisecond) + 1
		}
		n, err := unix.EpollWait(ep, events, wait)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 1
		}
		for _, ev := range events[:n] {
			switch fd := int(ev.Fd); {
			case fd == listen:
				k.accept()
			case k.conns[fd]:
				if !k.receive(fd) {
					k.hangUp(fd)
					alone = time.Now()
				}
			default:
				if h := k.byFD[fd]; h != nil {
					k.drop(h) // the run's leader has exited
				}
			}
		}
	}
}

// leave closes the listening socket and removes its path, unless another
// keeper serves it by now: a daemon that finds no keeper then starts one
// afresh, and tend down leaves no socket behind. The daemon that stops
// cannot do it itself: its probe of the socket would be a connection that
// calls the quit off.
func (k *keeper) leave() {
	unix.Close(k.listen)
	_, _ = RemoveStale(Socket{DirFD: k.dir, Path: SocketName})
}

// closeInherited closes what came in through exec besides the standard
// streams, the socket and the state directory: everything the Go runtime
// opens is close-on-exec, so a descriptor without the flag was inherited.
func closeInherited(listen, dir int) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd <= 2 || fd == listen || fd == dir {
			continue
		}
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && flags&unix.FD_CLOEXEC == 0 {
			unix.Close(fd)
		}
	}
}

func (k *keeper) watch(fd int) error {
	return unix.EpollCtl(k.ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)})
}

// accept takes a daemon's connection. A daemon that died may have left
// words not yet read on its own: both are served until each hangs up.
func (k *keeper) accept() {
	fd, _, err := unix.Accept4(k.listen, unix.SOCK_CLOEXEC)
	if err != nil {
		return
	}
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil || cred.Uid != uint32(os.Geteuid()) && cred.Uid != 0 {
		unix.Close(fd)
		return
	}
	// A daemon that stops reading must not hold the keeper for good.
	tv := unix.NsecToTimeval(int64(5 * time.Second))
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
	if k.watch(fd) != nil {
		unix.Close(fd)
		return
	}
	k.conns[fd], k.quit = true, false
}

func (k *keeper) hangUp(conn int) {
	_ = unix.EpollCtl(k.ep, unix.EPOLL_CTL_DEL, conn, nil)
	unix.Close(conn)
	delete(k.conns, conn)
}

// receive handles one datagram on conn; false when its daemon has gone.
func (k *keeper) receive(conn int) bool {
	var buf [maxMessage]byte
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, _, _, err := unix.Recvmsg(conn, buf[:], oob, unix.MSG_CMSG_CLOEXEC)
	if err == unix.EINTR || err == unix.EAGAIN {
		return true
	}
	if err != nil || n == 0 {
		return false
	}
	fds := rights(oob[:oobn])
	m, err := parse(buf[:n])
	if err != nil || m.verb != "keep" {
		closeAll(fds) // only keep carries a descriptor
	}
	if err != nil {
		return true
	}
	switch m.verb {
	case "keep":
		if len(fds) != 1 {
			closeAll(fds)
			return true
		}
		k.keep(m.run, fds[0])
	case "drop":
		if h := k.byRun[m.run]; h != nil {
			k.drop(h)
		}
	case "list":
		return k.list(conn)
	case "quit":
		k.quit = true
		return false
	}
	return true
}

// keep holds master for run r, if r is the process it says it is.
func (k *keeper) keep(r Run, master int) {
	pidfd, err := unix.PidfdOpen(r.PID, 0)
	if err != nil {
		unix.Close(master)
		return
	}
	if ticks, err := reaper.StartTicks(r.PID); err != nil || ticks != r.Ticks {
		unix.Close(pidfd)
		unix.Close(master)
		return
	}
	unix.CloseOnExec(pidfd)
	if old := k.byRun[r]; old != nil {
		k.drop(old)
	}
	if k.watch(pidfd) != nil {
		unix.Close(pidfd)
		unix.Close(master)
		return
	}
	h := &held{run: r, master: master, pidfd: pidfd}
	k.byFD[pidfd], k.byRun[r] = h, h
}

func (k *keeper) drop(h *held) {
	_ = unix.EpollCtl(k.ep, unix.EPOLL_CTL_DEL, h.pidfd, nil)
	unix.Close(h.pidfd)
	unix.Close(h.master)
	delete(k.byFD, h.pidfd)
	delete(k.byRun, h.run)
}

// list sends the daemon a copy of every master held; false if it has gone.
func (k *keeper) list(conn int) bool {
	for _, h := range k.byFD {
		if send(conn, "held "+h.run.words(), h.master) != nil {
			return false
		}
	}
	return send(conn, "end", -1) == nil
}

// send writes one datagram, with fd when it is not -1.
func send(conn int, text string, fd int) error {
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
	}
	for {
		err := unix.Sendmsg(conn, []byte(text), oob, nil, unix.MSG_NOSIGNAL)
		if err != unix.EINTR {
			return err
		}
	}
}

// rights are the descriptors a datagram carried.
func rights(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if got, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, got...)
		}
	}
	return fds
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

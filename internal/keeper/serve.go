package keeper

import (
	"os"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/logfile"
	"github.com/tend-sh/tend/internal/statedir"
)

// MaybeServe becomes the keeper, and exits when the keeper is done, when
// this process was started as one (argv[0] "tend-keeper" and the marker
// variable); otherwise it returns at once. main calls it first
// (internal/roles), and so does the TestMain of every test binary that
// starts a keeper: the keeper is that binary, re-executed.
func MaybeServe() {
	if len(os.Args) > 0 && os.Args[0] == Arg0 && os.Getenv(Marker) != "" {
		closeInherited(ListenFD, DirFD)
		// Set once, so the runtime stops looking at the CPU limit every
		// second: an idle keeper is not woken (docs/daemon.md#what-wakes-an-idle-daemon).
		runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
		os.Exit(serve(ListenFD, DirFD, firstGrace))
	}
}

// firstGrace is how long a keeper with nothing held waits for its first
// daemon (the one that started it connects at once).
const firstGrace = 10 * time.Second

// held is one run's terminal: its master, read always, the pidfd that
// says when its leader exits, and its log.
type held struct {
	run     Run
	master  int
	pidfd   int // -1 once the leader has exited: the master is read on until EIO
	spec    LogSpec
	log     *logfile.Log // nil when state_dir/logs cannot be opened: what is read is counted as lost
	batch   int64        // bytes added since the last flush
	dirty   bool         // records added since the last flush
	addErr  error        // a record of this turn was not written
	failed  bool         // failed was said, healed not yet
	lost    int64        // bytes lost since failed was last said
	lastErr string       // why, the last time
	saidAt  time.Time    // when failed was last said
	triedAt time.Time    // when the log was last tried, while it cannot be opened
}

// outbox is what the keeper owes a daemon's connection: the messages it
// could not send without blocking, in order, and the wrote of each log
// written since (one, however many turns).
type outbox struct {
	q     []Message
	wrote map[string]bool
}

// keeper is the process's state: one goroutine, one epoll set.
type keeper struct {
	ep      int
	listen  int
	dir     int              // the state directory, where the socket is (leave)
	logs    *statedir.Dir    // state_dir/logs, opened at the first keep
	conns   map[int]*outbox  // daemons' connections: the one of the moment, and one dying, whose last words still count
	masters map[int]*held    // by master (an epoll event's key)
	pidfds  map[int]*held    // by pidfd
	byRun   map[Run]*held    // every run held
	quit    bool             // a daemon left with quit: exit once nothing is held
	unsaid  bool             // output lost and not yet said (flush)
	buf     []byte           // the read chunk
	now     func() time.Time // the records' clock
}

// ReadChunk is what the keeper reads of one terminal per turn at most:
// every terminal with output gets a chunk before any gets a second, so one
// flood cannot starve the others. A keeper killed outright loses at most
// one chunk per terminal (read and not yet written): it flushes every
// turn (docs/terminal.md#a-keeper-that-dies).
const ReadChunk = 64 << 10

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
	k := &keeper{ep: ep, listen: listen, dir: dir, conns: map[int]*outbox{}, masters: map[int]*held{},
		pidfds: map[int]*held{}, byRun: map[Run]*held{}, buf: make([]byte, ReadChunk), now: time.Now}
	unix.CloseOnExec(listen)
	unix.CloseOnExec(dir)
	if k.watch(listen) != nil {
		return 1
	}
	alone := time.Now() // since when no daemon is connected
	events := make([]unix.EpollEvent, 64)
	for {
		idle := len(k.conns) == 0 && len(k.byRun) == 0
		if idle && (k.quit || time.Since(alone) >= grace) {
			k.leave()
			return 0
		}
		wait := -1
		switch {
		case idle:
			wait = int(max(grace-time.Since(alone), 0)/time.Millisecond) + 1
		case k.owing():
			wait = 10 // a daemon's socket was full: try again soon
		case k.unsaid:
			wait = 250
		}
		n, err := unix.EpollWait(ep, events, wait)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 1
		}
		for _, ev := range events[:n] {
			fd := int(ev.Fd)
			if fd == listen {
				k.accept()
			} else if k.conns[fd] != nil {
				if !k.receive(fd) {
					k.hangUp(fd)
					alone = time.Now()
				}
			} else if h := k.masters[fd]; h != nil {
				k.read(h)
			} else if h := k.pidfds[fd]; h != nil {
				k.leaderExited(h)
			}
		}
		k.flush()
		k.sendOwed()
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
	// A daemon that stops reading must not hold the keeper for good (the
	// answers to list are the only messages sent blocking).
	tv := unix.NsecToTimeval(int64(5 * time.Second))
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
	if k.watch(fd) != nil {
		unix.Close(fd)
		return
	}
	k.conns[fd], k.quit = &outbox{wrote: map[string]bool{}}, false
}

func (k *keeper) hangUp(conn int) {
	_ = unix.EpollCtl(k.ep, unix.EPOLL_CTL_DEL, conn, nil)
	unix.Close(conn)
	delete(k.conns, conn)
}

// receive handles one datagram on conn; false when its daemon has gone.
func (k *keeper) receive(conn int) bool {
	var buf [maxMessage + 1]byte
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, _, _, err := unix.Recvmsg(conn, buf[:], oob, unix.MSG_CMSG_CLOEXEC|unix.MSG_DONTWAIT)
	if err == unix.EINTR || err == unix.EAGAIN {
		return true
	}
	if err != nil || n == 0 {
		return false
	}
	fds := rights(oob[:oobn])
	m, err := Parse(buf[:n])
	if keep, ok := m.(Keep); ok && err == nil && len(fds) == 1 {
		k.keep(keep, fds[0])
		return true
	}
	closeAll(fds) // only keep carries a descriptor
	switch m := m.(type) {
	case Hello:
		k.post(conn, Hello{Version: Version})
	case Drop:
		if h := k.byRun[m.Run]; h != nil {
			k.drain(h)
			k.close(h)
		}
		k.post(conn, Dropped(m)) // also for a run it does not hold (ended, or never kept): nothing of it is unwritten
	case List:
		return k.list(conn)
	case Quit:
		k.quit = true
		return false
	}
	return true
}

// list sends the daemon a copy of every master held; false if it has gone.
// The daemon reads the answers as they come: they are sent blocking.
func (k *keeper) list(conn int) bool {
	for _, h := range k.byRun {
		if send(conn, Held{h.run}, h.master, 0) != nil {
			return false
		}
	}
	return send(conn, End{}, -1, 0) == nil
}

// send writes one datagram, with fd when it is not -1.
func send(conn int, m Message, fd int, flags int) error {
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
	}
	for {
		err := unix.Sendmsg(conn, Format(m), oob, nil, unix.MSG_NOSIGNAL|flags)
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

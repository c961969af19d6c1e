package statedir

import (
	"os"
	"strconv"
	"sync"
)

// maxSocketPath is the longest path a unix socket can be bound or reached
// by: sun_path is 108 bytes, and C clients need room for the NUL.
const maxSocketPath = 107

// procFDs is where Linux shows the calling thread's descriptors: a path
// through one of them resolves through the open file, not through a
// path looked up again.
const procFDs = "/proc/thread-self/fd/"

// haveProcFDs reports whether procFDs can be used (/proc is mounted).
var haveProcFDs = sync.OnceValue(func() bool {
	_, err := os.Stat(procFDs)
	return err == nil
})

// Via is the path of name in the directory open as dirfd, for what only
// takes a path: bind and connect of a unix socket. It is
// /proc/thread-self/fd/DIRFD/NAME, which Linux resolves through the open
// descriptor, so a socket is bound and reached where tend's checked
// directory is, whatever has been renamed around it since
// (docs/trust.md#sockets). It is valid in this process only, while dirfd is
// open, on a thread that shares the process's descriptor table: any
// goroutine but the few locked to a thread with a table of its own
// (internal/epoll, internal/spawn). Without /proc, or where the path would
// pass sun_path's limit, it is fallback, the path by name.
func Via(dirfd int, name, fallback string) string {
	p := procFDs + strconv.Itoa(dirfd) + "/" + name
	if len(p) > maxSocketPath || !haveProcFDs() {
		return fallback
	}
	return p
}

// Via is the path of name reached through d's descriptor (see Via).
func (d *Dir) Via(name string) string { return Via(d.fd, name, d.Join(name)) }

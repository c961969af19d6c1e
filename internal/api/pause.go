package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Pausing the API for an upgrade in place (tend upgrade). The listeners
// stay open, and the new daemon serves them from the same descriptors
// (ListenerFDs): a client that connects meanwhile waits in the kernel's
// accept queue and is answered by the new daemon, as if the daemon had
// been slow. Pause stops accepting (every Accept is woken by a deadline
// and then waits at the gate), ends the streams (event and log follows;
// their clients reconnect and resume), closes idle keep-alive connections,
// makes every answer under way close its connection, and waits until the
// requests under way have answered (a reload, a tend stop that waits...).
// Resume undoes it when the upgrade does not happen.

// gate holds the Accepts of every listener while the API is paused.
type gate struct {
	mu      sync.Mutex
	cond    *sync.Cond // signalled when an Accept leaves the kernel call
	paused  bool
	open    chan struct{} // closed while not paused
	inside  int           // Accepts in the kernel's call
	gated   []*gatedListener
	streams chan struct{} // closed by Pause: streaming answers end
}

func newGate() *gate {
	g := &gate{open: make(chan struct{}), streams: make(chan struct{})}
	g.cond = sync.NewCond(&g.mu)
	close(g.open)
	return g
}

// gatedListener is a raw listener (a *net.UnixListener or *net.TCPListener)
// whose Accept waits at the gate while the API is paused.
type gatedListener struct {
	net.Listener
	g    *gate
	name string // its name in the handover: "api.unix", "api.tcp"
}

// gated wraps l, which must have SetDeadline, in the server's gate.
func (s *Server) gated(l net.Listener, name string) net.Listener {
	gl := &gatedListener{Listener: l, g: s.gate, name: name}
	s.gate.mu.Lock()
	s.gate.gated = append(s.gate.gated, gl)
	s.gate.mu.Unlock()
	return gl
}

func (l *gatedListener) Accept() (net.Conn, error) {
	for {
		g := l.g
		g.mu.Lock()
		for g.paused {
			open := g.open
			g.mu.Unlock()
			<-open
			g.mu.Lock()
		}
		g.inside++
		g.mu.Unlock()
		c, err := l.Listener.Accept()
		g.mu.Lock()
		g.inside--
		g.cond.Broadcast()
		g.mu.Unlock()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			continue // woken by Pause: wait at the gate
		}
		return c, err
	}
}

// streamsCut is closed when streaming answers must end (Pause or Close).
func (s *Server) streamsCut() <-chan struct{} {
	s.gate.mu.Lock()
	defer s.gate.mu.Unlock()
	return s.gate.streams
}

// trackConn follows every connection of every server, for Pause.
func (s *Server) trackConn(c net.Conn, st http.ConnState) {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	switch st {
	case http.StateClosed, http.StateHijacked:
		delete(s.conns, c)
		s.connCond.Broadcast()
	default:
		s.conns[c] = st
	}
}

// Pause stops the API taking requests and waits until those under way
// have answered, or ctx ends (then it returns ctx's error, and the caller
// should Resume). See the top of this file.
func (s *Server) Pause(ctx context.Context) error {
	g := s.gate
	g.mu.Lock()
	if !g.paused {
		g.paused, g.open = true, make(chan struct{})
		close(g.streams)
	}
	gated := g.gated
	g.mu.Unlock()
	for _, l := range gated {
		if dl, ok := l.Listener.(interface{ SetDeadline(time.Time) error }); ok {
			_ = dl.SetDeadline(time.Now())
		}
	}
	g.mu.Lock()
	for g.inside > 0 { // an Accept that got a connection first returns it: it is served and waited for below
		g.cond.Wait()
	}
	g.mu.Unlock()
	s.mu.Lock()
	servers := s.servers
	s.mu.Unlock()
	for _, srv := range servers {
		srv.SetKeepAlivesEnabled(false) // closes the idle ones, and each answer under way closes its own
	}
	stop := context.AfterFunc(ctx, func() {
		s.connMu.Lock()
		s.connCond.Broadcast()
		s.connMu.Unlock()
	})
	defer stop()
	s.connMu.Lock()
	defer s.connMu.Unlock()
	for len(s.conns) > 0 {
		if ctx.Err() != nil {
			return fmt.Errorf("%d requests under way did not answer in time: %w", len(s.conns), ctx.Err())
		}
		s.connCond.Wait()
	}
	return nil
}

// Resume takes requests again after Pause.
func (s *Server) Resume() {
	g := s.gate
	g.mu.Lock()
	if !g.paused {
		g.mu.Unlock()
		return
	}
	g.paused = false
	g.streams = make(chan struct{})
	gated := g.gated
	g.mu.Unlock()
	s.mu.Lock()
	for _, srv := range s.servers {
		srv.SetKeepAlivesEnabled(true)
	}
	s.mu.Unlock()
	for _, l := range gated {
		if dl, ok := l.Listener.(interface{ SetDeadline(time.Time) error }); ok {
			_ = dl.SetDeadline(time.Time{})
		}
	}
	g.mu.Lock()
	close(g.open)
	g.mu.Unlock()
}

// ListenerFDs returns a descriptor of each listener in the process's
// table (close-on-exec), by its name in the handover, for the daemon that
// takes over to serve (ServeUnixListener, and AttachTCP on a listener made
// from it).
func (s *Server) ListenerFDs() (map[string]int, error) {
	s.gate.mu.Lock()
	gated := s.gate.gated
	s.gate.mu.Unlock()
	out := map[string]int{}
	for _, l := range gated {
		fd, err := dupOf(l.Listener)
		if err != nil {
			for _, fd := range out {
				unix.Close(fd)
			}
			return nil, fmt.Errorf("api: %s: %w", l.name, err)
		}
		out[l.name] = fd
	}
	return out, nil
}

// dupOf duplicates the descriptor of c, a listener or a connection, into
// a new close-on-exec one. (Not through File and Fd: Fd would make the
// open file description, which the original shares, blocking.)
func dupOf(c any) (int, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return -1, fmt.Errorf("%T has no descriptor", c)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd, derr := -1, error(nil)
	if err := rc.Control(func(u uintptr) { fd, derr = unix.FcntlInt(u, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return -1, err
	}
	return fd, derr
}

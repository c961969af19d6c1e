package terminal

import (
	"golang.org/x/sys/unix"
)

// pump stands in for the keeper in these tests (the daemon's terminals
// are read by it, package keeper): it reads a copy of term's master,
// feeds what it reads to term and to out (when set), and hangs term up
// when every slave is closed. It stops at that, or once term is closed.
func pump(term *Terminal, out func(p []byte)) {
	fd, err := term.Dup()
	if err != nil {
		return
	}
	go func() {
		defer unix.Close(fd)
		buf := make([]byte, 64<<10)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			select {
			case <-term.Done():
				return
			default:
			}
			if _, err := unix.Poll(fds, 100); err != nil && err != unix.EINTR {
				return
			}
			n, err := unix.Read(fd, buf)
			switch {
			case err == unix.EAGAIN || err == unix.EINTR:
				continue
			case err != nil || n == 0:
				term.Hangup()
				return
			}
			term.Feed(buf[:n])
			if out != nil {
				out(buf[:n])
			}
		}
	}()
}

package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// startMany is the floor of "N programs all running": one loop that forks
// and execs prog n times, each child with its stdout and stderr on a pipe of
// its own whose read end this process keeps, as a supervisor capturing
// output would. syscall.ForkExec returns once the child has exec'd (or
// failed to), so when the loop ends every program runs. It returns the
// children and how long the loop took; the caller keeps them until told to
// stop (stopMany).
func startMany(n int, prog string) ([]int, []int, time.Duration, error) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		return nil, nil, 0, err
	}
	defer null.Close()
	pids := make([]int, 0, n)
	reads := make([]int, 0, n)
	argv := []string{prog}
	env := os.Environ()
	t0 := time.Now()
	for range n {
		var p [2]int
		if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
			return pids, reads, time.Since(t0), fmt.Errorf("pipe after %d: %w", len(pids), err)
		}
		pid, err := syscall.ForkExec(prog, argv, &syscall.ProcAttr{Env: env, Files: []uintptr{null.Fd(), uintptr(p[1]), uintptr(p[1])}})
		syscall.Close(p[1])
		if err != nil {
			syscall.Close(p[0])
			return pids, reads, time.Since(t0), fmt.Errorf("fork+exec after %d: %w", len(pids), err)
		}
		pids = append(pids, pid)
		reads = append(reads, p[0])
	}
	return pids, reads, time.Since(t0), nil
}

// stopMany waits for SIGTERM, SIGINT or the end of stdin, then SIGKILLs
// the children and reaps every one of them.
func stopMany(pids, reads []int) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	eof := make(chan struct{})
	go func() {
		var b [1]byte
		for {
			if _, err := os.Stdin.Read(b[:]); err != nil {
				close(eof)
				return
			}
		}
	}()
	select {
	case <-sig:
	case <-eof:
	}
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	for _, pid := range pids {
		var ws syscall.WaitStatus
		for {
			if _, err := syscall.Wait4(pid, &ws, 0, nil); err != syscall.EINTR {
				break
			}
		}
	}
	for _, fd := range reads {
		syscall.Close(fd)
	}
}

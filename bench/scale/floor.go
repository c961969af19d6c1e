package main

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/tend-sh/tend/bench/internal/measure"
)

// Floor is what this machine allows for "N programs all running": one Go
// loop that forks and execs N sleeps, each with its stdout and stderr on a
// pipe of its own whose read end the loop keeps, as a supervisor capturing
// output would. ForkExec returns once the child has exec'd, so when the loop
// ends every sleep runs.
type Floor struct {
	N       int        `json:"n"`
	Started int        `json:"started"`
	Took    measure.Ms `json:"took_ms"`
	Error   string     `json:"error,omitempty"`
}

// measureFloor runs the loop for n sleeps, then kills and reaps them all:
// they are this process's own children, waited for by pid.
func measureFloor(ctx context.Context, n int, sleep string) (Floor, error) {
	f := Floor{N: n}
	null, err := os.Open(os.DevNull)
	if err != nil {
		return f, err
	}
	defer null.Close()
	argv := []string{sleep, "100000"}
	env := os.Environ()
	pids := make([]int, 0, n)
	reads := make([]int, 0, n)
	defer func() {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
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
	}()
	t0 := time.Now()
	for range n {
		if ctx.Err() != nil {
			return f, ctx.Err()
		}
		var p [2]int
		if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
			f.Error = fmt.Sprintf("pipe after %d: %v", len(pids), err)
			break
		}
		pid, err := syscall.ForkExec(sleep, argv, &syscall.ProcAttr{Env: env, Files: []uintptr{null.Fd(), uintptr(p[1]), uintptr(p[1])}})
		syscall.Close(p[1])
		if err != nil {
			syscall.Close(p[0])
			f.Error = fmt.Sprintf("fork+exec after %d: %v", len(pids), err)
			break
		}
		pids = append(pids, pid)
		reads = append(reads, p[0])
	}
	f.Took, f.Started = measure.NewMs(time.Since(t0)), len(pids)
	return f, nil
}

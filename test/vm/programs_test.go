//go:build vmtest

package vm

// The programs tend supervises in the tests: this binary, re-executed with
// TEND_VM_HELPER naming what to be.

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const mib = 1 << 20

func runHelper(name string) {
	switch name {
	case "alloc":
		alloc()
	case "shmem":
		shmem()
	case "stubborn":
		signal.Ignore(syscall.SIGTERM)
		forever()
	case "leaver":
		leaver()
	case "sleep":
		forever()
	default:
		fmt.Fprintf(os.Stderr, "unknown TEND_VM_HELPER %q\n", name)
		os.Exit(2)
	}
}

func forever() {
	for {
		time.Sleep(time.Hour)
	}
}

// waitTrigger waits until the file TEND_VM_TRIGGER exists, then removes
// it, so the next run of the program waits again.
func waitTrigger() {
	path := os.Getenv("TEND_VM_TRIGGER")
	for {
		if err := os.Remove(path); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// held keeps alloc's memory reachable.
var held [][]byte

// alloc, once triggered, allocates and touches memory without end: past
// its cgroup's memory.max the kernel's OOM killer ends it. With
// TEND_VM_ALLOC_MIB it stops at that many MiB and holds them.
func alloc() {
	limit, _ := strconv.Atoi(os.Getenv("TEND_VM_ALLOC_MIB"))
	waitTrigger()
	for total := 0; ; total += 4 {
		if limit > 0 && total >= limit {
			fmt.Printf("holding %d MiB\n", total)
			forever()
		}
		b := make([]byte, 4*mib)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		held = append(held, b)
		if total%16 == 0 {
			fmt.Printf("allocated %d MiB\n", total+4)
		}
		if total > 2048 {
			fmt.Println("2 GiB allocated and no OOM kill: memory.max is not enforced")
			forever()
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// shmem holds TEND_VM_SHMEM_MIB MiB in a memfd it never maps, then, once
// triggered, TEND_VM_SHMEM_MORE_MIB more. The pages are charged to its
// cgroup (memory.current) but are in no process's RSS: only a watchdog
// that reads memory.current sees them.
func shmem() {
	fd, err := unix.MemfdCreate("tend-vm-shmem", unix.MFD_CLOEXEC)
	if err != nil {
		fmt.Fprintln(os.Stderr, "memfd_create:", err)
		os.Exit(1)
	}
	f := os.NewFile(uintptr(fd), "memfd")
	write := func(n int) {
		chunk := make([]byte, mib)
		for i := range chunk {
			chunk[i] = 0xa5
		}
		for range n {
			if _, err := f.Write(chunk); err != nil {
				fmt.Fprintln(os.Stderr, "memfd write:", err)
				os.Exit(1)
			}
		}
	}
	first, _ := strconv.Atoi(os.Getenv("TEND_VM_SHMEM_MIB"))
	more, _ := strconv.Atoi(os.Getenv("TEND_VM_SHMEM_MORE_MIB"))
	write(first)
	fmt.Printf("holding %d MiB in a memfd\n", first)
	waitTrigger()
	write(more)
	fmt.Printf("holding %d MiB in a memfd\n", first+more)
	forever()
}

// leaver starts a child that leaves its session and process group (as a
// daemonizing tool does) and does not wait for it; both then sleep.
func leaver() {
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = append(os.Environ(), "TEND_VM_HELPER=sleep")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "starting the child:", err)
		os.Exit(1)
	}
	fmt.Printf("left child %d behind\n", cmd.Process.Pid)
	forever()
}

// Package soak is tend's soak and chaos test, built only with the soak tag
// so the normal `go test ./...` skips it:
//
//	go test -tags soak -count=1 -timeout 10m ./bench/soak -soak.duration=60s
//
// It runs the real daemon (the test binary re-executed as tend) over 200
// instances — sleepers, chatty shell loops, sd_notify clients with a
// watchdog, and crash loops — and for -soak.duration sends SIGKILLs to
// random runs, operator restarts to random instances, and SIGKILLs the
// daemon itself half-way, starting it again on the same state directory.
// Then it checks what the issue asks: seq has no gap, every spawned run has
// exactly one exited (or is alive), the daemon reaps every orphan, its RSS
// is within 10 % of its level after warm-up, and after tend down no process
// of the fleet is left.
//
// TestDiskSoak (disk_test.go, root: it mounts a 2 MiB tmpfs for the state
// directory) fills and empties that disk at random moments, sends operator
// stops and starts, and SIGKILLs the daemon at random moments, then checks
// that no instance is doubled, no accepted stop is forgotten, seq only
// grows with every missing seq inside a marked gap, and no run lives
// outside tend (docs/daemon.md#when-the-disk-fills):
//
//	go test -tags soak -count=1 ./bench/soak -run TestDiskSoak -soak.disk=20s
package soak

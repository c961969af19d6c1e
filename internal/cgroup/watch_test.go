package cgroup

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// hasInotifyWatch says whether the tree's inotify descriptor still holds
// the kernel watch wd (its fdinfo lists one "inotify wd:N" line each).
func hasInotifyWatch(t *testing.T, tr *Tree, wd int32) bool {
	t.Helper()
	tr.w.mu.Lock()
	fd := tr.w.fd
	tr.w.mu.Unlock()
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", fd))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(b), fmt.Sprintf("inotify wd:%d ", wd))
}

// stop called from fn, which runs on an epoll loop's thread (whose
// descriptor table is not the daemon's), removes the kernel's watch from
// the tree's own inotify descriptor, and the group can be watched again.
func TestRealStopFromFn(t *testing.T) {
	tr := testTree(t)
	g := tr.Group("s-0")
	f, err := g.Prepare(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	stopped := make(chan bool, 1)
	var stop func()
	ready := make(chan struct{}) // holds fn back until the test has read the watch's wd
	stop, err = g.Watch(func(p bool) {
		<-ready
		stop()
		stopped <- p
	})
	if err != nil {
		t.Fatal(err)
	}
	r := startIn(t, g, nil, "exec sleep 1000") // Prepare arms the watch afresh
	r.see([]int{r.cmd.Process.Pid})
	tr.w.mu.Lock()
	wd := tr.w.byPath[g.path].wd
	tr.w.mu.Unlock()
	if wd < 0 || !hasInotifyWatch(t, tr, wd) {
		t.Fatalf("no inotify watch %d for the group", wd)
	}
	close(ready)
	select {
	case p := <-stopped:
		if !p {
			t.Fatal("Watch reported an empty group for a run")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Watch did not report the run")
	}
	deadline := time.Now().Add(30 * time.Second)
	for hasInotifyWatch(t, tr, wd) {
		if time.Now().After(deadline) {
			t.Fatalf("the inotify watch %d outlived stop called from fn", wd)
		}
		time.Sleep(5 * time.Millisecond)
	}

	events := make(chan bool, 4)
	stop2, err := g.Watch(func(p bool) { events <- p })
	if err != nil {
		t.Fatal(err)
	}
	defer stop2()
	if err := g.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-events:
		if p {
			t.Fatal("Watch reported a populated group after the kill")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a second Watch did not report the group emptied")
	}
	r.reap(t)
}

// Package cgroup finds, creates, places into, kills and reads the cgroup v2
// groups that hold tend's runs: one group per instance, "NAME-K", below a
// directory of the daemon's own, so that a run is every process it starts,
// whatever it does with sessions and forks.
//
// Setup decides once, at daemon start, whether runs get groups, and lays
// the tree out by the kernel's delegation rules (cgroup-v2.rst, systemd's
// Delegate=). The daemon's subtree is PARENT/tend-ID, ID naming the state
// directory, so two daemons on one host never share a group and a restarted
// daemon finds its own again; PARENT is tend's own group (cgroup = "auto"),
// where the daemon moves itself into a leaf of its own so that the groups
// above its runs hold no process and may have the memory, cpu and pids
// controllers enabled for them, or, for tend started as a systemd service,
// a scope of its own that systemd makes beside the service (scope.go says
// why), or the directory cgroup = DIR names, in which tend touches nothing
// but its own subtree. A child is placed in its
// group at fork (clone3 with CLONE_INTO_CGROUP, through the directory
// descriptor that Group.Prepare returns), killed as a whole by cgroup.kill,
// and known to be gone when cgroup.events says "populated 0", which the
// Tree watches with one inotify descriptor on the shared epoll loop instead
// of polling.
//
// A run's limits are a Limits, which Prepare writes into its group; whether
// this host can enforce them at all is Unenforceable's answer, asked by the
// daemon at start, at reload and when a program is added. To add a limit
// (a cpu_max or pids_max key, say):
//
//   - give Limits a field, and knobs (limits.go) its row: the config key,
//     the controller that enforces it, the file Prepare writes and how;
//   - have LimitsOf copy it from the program's Spec, where its config key
//     puts it (internal/config decodes the key into a Spec field);
//   - add its case to limitsCases in limits_test.go, which checks that every
//     knob has one.
//
// Prepare, Unenforceable, the daemon and the supervisor need no change.
//
// Only cgroup v2 is supported: tend never writes to a v1 hierarchy.
package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"golang.org/x/sys/unix"
)

// daemonLeaf is the group the daemon moves itself into, beside its runs'.
const daemonLeaf = "daemon"

// wanted are the controllers enabled for runs' groups where available.
var wanted = []string{"cpu", "memory", "pids"}

// Tree is the directory holding one daemon's instance groups. Its fields
// are set by Setup and not changed afterwards; the watcher and made have
// their own locks.
type Tree struct {
	path        string            // PARENT/tend-ID: OWN/tend-ID (auto) or DIR/tend-ID (cgroup = DIR)
	controllers []string          // enabled in path's cgroup.subtree_control
	off         map[string]string // why each wanted controller is not in controllers
	why         string            // what limits the tree ("" when the memory controller is on)
	leaf        string            // the daemon's leaf when Setup moved the daemon there, else ""
	scope       string            // the systemd scope's group that path is in (PARENT), else ""
	w           *watcher
	kept        keptFiles // memory.current of each group, open for MemoryCurrent
	made        madeGroups
	nested      nestedMemo // Nested's last answer
}

// madeGroups are the groups this Tree made that no cgroup.kill has reached
// since: Prepare may hand such a group, empty, to the next run as it is.
type madeGroups struct {
	mu   sync.Mutex // guards dirs
	dirs map[string]bool
}

func (m *madeGroups) set(dir string, clean bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !clean {
		delete(m.dirs, dir)
		return
	}
	if m.dirs == nil {
		m.dirs = map[string]bool{}
	}
	m.dirs[dir] = true
}

func (m *madeGroups) clean(dir string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dirs[dir]
}

// Path returns the directory holding the instance groups.
func (t *Tree) Path() string { return t.path }

// Controllers returns the controllers enabled for the instance groups
// (for example cpu memory pids), as cgroup.subtree_control lists them.
func (t *Tree) Controllers() []string { return slices.Clone(t.controllers) }

// HasMemory reports whether the memory controller is enabled for the
// instance groups: memory.current, memory.max and memory.events exist.
func (t *Tree) HasMemory() bool { return slices.Contains(t.controllers, "memory") }

// Why describes, in one line for tend doctor and the daemon started
// event, what the tree lacks: why the memory controller is not on, or why
// controllers could not be enabled. "" when the memory controller is on.
func (t *Tree) Why() string { return t.why }

// DaemonGroup returns the leaf Setup moved the daemon into, or "" when it
// left the daemon where it was (an explicit directory, a hierarchy root, a
// group without controllers to delegate).
func (t *Tree) DaemonGroup() string { return t.leaf }

// Names returns the instance groups present, sorted: a restarted daemon
// finds its own, and empties and removes those no longer configured. Only
// "NAME-K" directories are listed, never the daemon's leaf; and nothing
// outside the daemon's own subtree, so nothing there is ever removed.
func (t *Tree) Names() ([]string, error) {
	ents, err := os.ReadDir(t.path)
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	var names []string
	for _, e := range ents {
		if e.IsDir() && instanceName(e.Name()) {
			names = append(names, e.Name())
		}
	}
	return names, nil // ReadDir sorts
}

// Close stops watching and closes the files kept open: stop functions of
// earlier Watches still work, later Watches fail. Groups and their
// processes are left as they are.
func (t *Tree) Close() error {
	t.kept.closeAll()
	return t.w.close()
}

// Leave is the daemon's last act on its tree as it stops (or fails to
// start): it removes the daemon's subtree if it is empty and the daemon is
// not in it, and then, in a systemd scope, ends the scope's holder so that
// systemd removes the scope, now empty; then it closes the tree. A run
// still alive keeps its group, the subtree and the scope for the next
// daemon.
func (t *Tree) Leave() error {
	var err error
	if t.leaf == "" {
		if e := unix.Rmdir(t.path); e == nil || e == unix.ENOENT {
			if t.scope != "" {
				err = (&Group{t: t, name: holdLeaf, path: filepath.Join(t.scope, holdLeaf)}).Remove()
			}
		}
	}
	return errors.Join(err, t.Close())
}

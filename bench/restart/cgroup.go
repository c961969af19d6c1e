package main

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/tend-sh/tend/internal/cgroup"
)

// The cgroup variants run with a cgroup.Tree as the daemon gets it, in an
// explicit directory (daemon.cgroup = DIR): with "auto" the tree would move
// this process into a leaf of its own, which a benchmark should not do to
// the shell that started it. Placement, cgroup.kill and the wait for
// "populated 0" are the same either way.

// cgroups is the tree of the cgroup variants and the directory made for it.
type cgroups struct {
	tree *cgroup.Tree
	dir  string
	made bool // dir did not exist before: remove it at the end
}

// openCgroups sets up the tree for mode: "off" for none, "" for a fresh
// directory below this process's own cgroup2 group, else that directory.
// Without a tree it says why, and the cgroup variants are not measured.
func openCgroups(mode string) (*cgroups, string) {
	if mode == "off" {
		return nil, "-cgroup off"
	}
	dir := mode
	if dir == "" {
		base, err := ownCgroup2()
		if err != nil {
			return nil, err.Error()
		}
		dir = filepath.Join(base, fmt.Sprintf("tend-bench-restart-%d", os.Getpid()))
	}
	_, statErr := os.Stat(dir)
	tree, _, err := cgroup.Setup(dir, "")
	if err != nil {
		return nil, err.Error()
	}
	return &cgroups{tree: tree, dir: dir, made: errors.Is(statErr, os.ErrNotExist)}, ""
}

// close removes the instance groups left (each Manager removes its own
// when it shuts down) and the directory, if this run made it.
func (c *cgroups) close() error {
	if c == nil {
		return nil
	}
	var errs []error
	names, err := c.tree.Names()
	errs = append(errs, err)
	for _, n := range names {
		errs = append(errs, c.tree.Group(n).Remove())
	}
	errs = append(errs, c.tree.Close())
	if c.made {
		errs = append(errs, os.Remove(c.dir))
	}
	return errors.Join(errs...)
}

// ownCgroup2 is the directory of this process's cgroup v2 group: its path
// in /proc/self/cgroup ("0::/...") below the mount of /proc/self/mountinfo
// whose root holds it.
func ownCgroup2() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	own := ""
	for line := range strings.SplitSeq(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			own = p
		}
	}
	if !path.IsAbs(own) {
		return "", errors.New("no cgroup v2 entry in /proc/self/cgroup")
	}
	b, err = os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		sep := -1
		for i, x := range f {
			if x == "-" {
				sep = i
				break
			}
		}
		if sep < 5 || sep+1 >= len(f) || f[sep+1] != "cgroup2" {
			continue
		}
		root, point := f[3], f[4]
		if rel, err := filepath.Rel(root, own); err == nil && !strings.HasPrefix(rel, "..") {
			return filepath.Join(point, rel), nil
		}
	}
	return "", errors.New("no cgroup2 mount holds this process's group")
}

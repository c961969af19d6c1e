package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tend-sh/tend/bench/internal/measure"
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
		base, err := measure.CgroupDir("self")
		if err != nil {
			return nil, err.Error()
		}
		dir = filepath.Join(base, fmt.Sprintf("tend-bench-restart-%d", os.Getpid()))
	}
	made := false
	if err := os.Mkdir(dir, 0o755); err == nil {
		made = true
	} else if !errors.Is(err, os.ErrExist) {
		return nil, err.Error()
	}
	tree, _, err := cgroup.Setup(dir, "bench") // the groups go in DIR/tend-bench
	if err != nil {
		if made {
			os.Remove(dir)
		}
		return nil, err.Error()
	}
	return &cgroups{tree: tree, dir: dir, made: made}, ""
}

// close removes the instance groups left (each Manager removes its own
// when it shuts down), the tree's own directory, and the directory, if
// this run made it.
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
	errs = append(errs, c.tree.Close(), os.Remove(c.tree.Path()))
	if c.made {
		errs = append(errs, os.Remove(c.dir))
	}
	return errors.Join(errs...)
}

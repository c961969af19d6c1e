package daemon

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/tend-sh/tend/internal/cgroup"
	"github.com/tend-sh/tend/internal/config"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/statedir"
)

// setupCgroups decides, once, whether runs get cgroups: a daemon.cgroup
// directory that cannot be used is a config error (exit 2), auto falls
// back to process groups and trees and says why. Then the programs'
// limits are checked against what this host can enforce.
func (d *daemon) setupCgroups() error {
	tree, why, err := cgroup.Setup(d.cfg.Daemon.Cgroup, statedir.ID(d.cfg.Daemon.StateDir))
	var bad *cgroup.ConfigError
	if errors.As(err, &bad) {
		return config.Locate(d.cfg, []config.Problem{{Key: "cgroup", Msg: bad.Msg}})
	}
	if err != nil {
		return fmt.Errorf("%s: %w", d.cfg.File, err)
	}
	d.cgroups = tree
	d.tracking, d.trackingWhy = program.TrackingGroup, why
	if tree != nil {
		d.tracking, d.trackingWhy = program.TrackingCgroup, tree.Why()
		if s := tree.Scope(); s != "" {
			d.note("runs are in the systemd scope %s (%s), outside this service's cgroup", s, tree.Path())
		}
	}
	return d.checkLimits(d.cfg, d.cfg.Programs)
}

// checkLimits refuses programs with a cgroup limit (memory_max, ...) that
// this host cannot enforce: a config error naming the key and why, rather
// than a limit silently ignored. cfg is the config the specs come from, nil
// for a program added over the API. At start, at reload and at tend add.
func (d *daemon) checkLimits(cfg *program.Config, specs []program.Spec) error {
	var problems []config.Problem
	for i := range specs {
		for _, r := range cgroup.Unenforceable(d.cgroups, d.trackingWhy, cgroup.LimitsOf(&specs[i])) {
			problems = append(problems, config.Problem{Program: specs[i].Name, Key: r.Key, Msg: "cannot be enforced here: " + r.Why})
		}
	}
	return config.Locate(cfg, problems)
}

// removeStaleGroups empties and removes the groups of instances this
// daemon does not have and whose runs it does not still hold on record
// (removed from the config while no daemon ran, or scaled down): a
// restarted daemon finds its tree again, its runs' groups among them.
func (d *daemon) removeStaleGroups() {
	if d.cgroups == nil {
		return
	}
	names, err := d.cgroups.Names()
	if err != nil {
		return
	}
	have := map[string]bool{}
	keep := func(id string) {
		name, k, _ := program.SplitID(id)
		have[program.InstanceBase(name, k)] = true
	}
	for _, id := range d.mgr.IDs() {
		keep(id)
	}
	// Runs still recorded and not adopted (a program kept aside, a stray
	// being stopped) are left alone, their groups with them.
	for _, r := range d.runs.Records() {
		keep(r.ID)
	}
	for _, n := range names {
		if !have[n] {
			if err := d.cgroups.Group(n).Remove(); err != nil {
				d.note("cgroup: %v", err)
			}
		}
	}
}

// shortDir is the private directory with a short path for the notify
// sockets that cannot live in the state directory (statedir.Runtime), or ""
// when it cannot be had (they then stay in the state directory).
func shortDir(stateDir string) string {
	d, err := statedir.Runtime(statedir.ID(stateDir), os.Geteuid() == 0)
	if err != nil {
		return ""
	}
	defer d.Close()
	return d.Path()
}

// groupOf is the cgroup of instance id, or nil without cgroups.
func (d *daemon) groupOf(id string) *cgroup.Group {
	name, k, ok := program.SplitID(id)
	if d.cgroups == nil || !ok {
		return nil
	}
	return d.cgroups.Group(program.InstanceBase(name, k))
}

// signalStray signals a run left by an earlier daemon for a program no
// longer configured: its process group, and with cgroups every process of
// its group.
func (d *daemon) signalStray(id string, pid int, sig syscall.Signal) {
	_ = d.reaper.Signal(pid, sig, true)
	if g := d.groupOf(id); g != nil {
		_, _ = g.Signal(sig)
	}
}

// removeGroupOf empties and removes the group of instance id, if any.
func (d *daemon) removeGroupOf(id string) {
	if g := d.groupOf(id); g != nil {
		if err := g.Remove(); err != nil {
			d.note("cgroup: %v", err)
		}
	}
}

// tidyAway removes, as the daemon stops, what it made outside the state
// directory and no longer needs: its cgroup subtree (and under systemd its
// scope) and its short-path directory, each only when empty (a group still
// holding a run left alone, a socket of one, stays for the next daemon).
func (d *daemon) tidyAway() {
	if d.cgroups != nil {
		if err := d.cgroups.Leave(); err != nil { // under systemd, the scope goes with the last run
			d.note("cgroup: %v", err)
		}
	}
	if d.shortDir != "" {
		_ = os.Remove(d.shortDir)
	}
}

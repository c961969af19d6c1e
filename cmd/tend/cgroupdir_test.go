package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/statedir"
	"github.com/tend-sh/tend/internal/testutil"
)

// TestTwoDaemonsShareACgroupDir (issue 19): `cgroup = DIR` names a parent.
// Two daemons with different state directories are given one DIR in this
// machine's cgroup2 hierarchy, each with a program of its own and one of
// the same name: each keeps its runs while the other starts, runs and goes
// down; tend down of either removes its own subtree, DIR/tend-ID, and
// never DIR or anything else in it.
func TestTwoDaemonsShareACgroupDir(t *testing.T) {
	cg := testutil.CgroupDir(t)
	tend := tendBinary(t)
	foreign := filepath.Join(cg, "web-0") // a group of DIR's own, named like an instance's
	if err := os.Mkdir(foreign, 0o755); err != nil {
		t.Fatal(err)
	}
	type daemon struct {
		conf, tree string
		c          *client.Client
		runs       map[string]int
	}
	start := func(own string) *daemon {
		dir := t.TempDir()
		d := &daemon{conf: filepath.Join(dir, "tend.toml"), tree: filepath.Join(cg, "tend-"+statedir.ID(filepath.Join(dir, ".tend")))}
		write(t, d.conf, fmt.Sprintf(`[daemon]
cgroup = %q

[program.%s]
command = ["sleep", "100031"]

[program.w]
command = ["sleep", "100032"]
`, cg, own))
		d.c = client.New(filepath.Join(dir, ".tend", "tend.sock"))
		startUp(t, tend, d.conf)
		ids := []string{own + ":0", "w:0"}
		waitRunning(t, d.c, ids...)
		d.runs = pids(t, d.c, ids...)
		return d
	}
	keeps := func(d *daemon, when string) {
		t.Helper()
		for id, pid := range d.runs {
			st, err := d.c.Status(id)
			if err != nil || st.PID == nil || *st.PID != pid || st.Run != 1 || !testutil.Alive(pid) {
				t.Errorf("%s: %s of %s is %+v (%v), want still run 1, pid %d", when, id, d.conf, st, err, pid)
			}
		}
	}
	down := func(d *daemon) {
		t.Helper()
		if code, out, errOut := tendRun(t, tend, "down", "-c", d.conf); code != 0 {
			t.Fatalf("tend down: exit %d: %s%s", code, out, errOut)
		}
		testutil.Eventually(t, "the daemon's subtree removed", func() bool { _, err := os.Stat(d.tree); return os.IsNotExist(err) })
		for id, pid := range d.runs {
			testutil.Eventually(t, id+" gone", func() bool { return !testutil.Alive(pid) })
		}
	}

	a := start("a")
	b := start("b")
	if a.tree == b.tree {
		t.Fatalf("both daemons in %s", a.tree)
	}
	for _, d := range []*daemon{a, b} {
		if got := groupProcs(filepath.Join(d.tree, "w-0")); len(got) != 1 || got[0] != d.runs["w:0"] {
			t.Errorf("%s/w-0 holds %v, want its own run %d", d.tree, got, d.runs["w:0"])
		}
	}
	keeps(a, "after the second daemon started")
	keeps(b, "after it started")

	down(b)
	keeps(a, "after the second daemon's tend down")
	for _, p := range []string{cg, foreign, a.tree} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("after the second daemon's tend down: %v", err)
		}
	}
	down(a)
	if _, err := os.Stat(foreign); err != nil {
		t.Errorf("after both tend downs: %v", err)
	}
}

// A refused start leaves nothing outside the state directory: not the
// daemon's cgroup subtree, not its short-path directory (issue 19). A
// memory_max this host cannot enforce is one such refusal, and a config
// error like any other: file:line: key: why, exit 2.
func TestARefusedMemoryMaxLeavesNothingBehind(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the short-path directory checked is root's, /run/tend/ID")
	}
	tend := tendBinary(t)
	cg := testutil.CgroupDir(t)
	for _, mode := range []string{"auto", cg} {
		t.Run(filepath.Base(mode), func(t *testing.T) {
			dir := t.TempDir()
			conf := filepath.Join(dir, "tend.toml")
			write(t, conf, fmt.Sprintf(`[daemon]
cgroup = %q

[program.w]
command = ["sleep", "100033"]
memory_max = "1GiB"
`, mode))
			stateDir := filepath.Join(dir, ".tend")
			tree := filepath.Join(cg, "tend-"+statedir.ID(stateDir))
			if mode == "auto" {
				tree = autoTree(stateDir)
			}
			code, stderr := upExits(t, tend, conf)
			if code != 2 || !strings.Contains(stderr, conf+":6: program.w.memory_max: cannot be enforced here: ") {
				t.Errorf("tend up: exit %d, stderr:\n%s\nwant exit 2 and %s:6: program.w.memory_max: cannot be enforced here: …", code, stderr, conf)
			}
			if tree != "" {
				if _, err := os.Stat(tree); !os.IsNotExist(err) {
					t.Errorf("the refused start left its cgroup subtree %s (%v)", tree, err)
				}
			}
			short := filepath.Join("/run/tend", statedir.ID(stateDir))
			if _, err := os.Stat(short); !os.IsNotExist(err) {
				t.Errorf("the refused start left its short-path directory %s (%v)", short, err)
			}
			if _, err := os.Stat(cg); err != nil {
				t.Errorf("DIR: %v", err)
			}
		})
	}
}

// A cgroup = DIR that cannot be used is one config error naming the key's
// line, exit 2, and nothing is made: neither DIR nor anything in it.
func TestABadCgroupDirIsAConfigError(t *testing.T) {
	tend := tendBinary(t)
	cg := testutil.CgroupDir(t)
	missing := filepath.Join(cg, "missing")
	notV2 := filepath.Join(t.TempDir(), "groups")
	for _, c := range []struct{ dir, want string }{
		{missing, "daemon.cgroup: " + missing + " does not exist: tend makes its own group inside this directory"},
		{notV2, "daemon.cgroup: " + notV2 + " is not inside a cgroup2 mount"},
		{"relative/dir", `daemon.cgroup: must be "auto", "off" or an absolute directory`},
	} {
		dir := t.TempDir()
		conf := filepath.Join(dir, "tend.toml")
		write(t, conf, fmt.Sprintf("[program.w]\ncommand = [\"true\"]\n\n[daemon]\ncgroup = %q\n", c.dir))
		code, stderr := upExits(t, tend, conf)
		if code != 2 || !strings.Contains(stderr, conf+":5: "+c.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("cgroup = %q: exit %d, stderr:\n%s\nwant exit 2 and one line %s:5: %s…", c.dir, code, stderr, conf, c.want)
		}
	}
	for _, p := range []string{missing, notV2} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s was made (%v)", p, err)
		}
	}
	ents, _ := os.ReadDir(cg)
	for _, e := range ents {
		if e.IsDir() {
			t.Errorf("DIR holds %s", e.Name())
		}
	}
}

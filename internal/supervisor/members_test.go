package supervisor

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/cgroup"
	"github.com/tend-sh/tend/internal/proctree"
	"github.com/tend-sh/tend/internal/testutil"
)

// A run's members as the broker reads them: a listing's sample (maxAge >
// 0) is reused while young and says when it was taken; it finds the
// processes a run moved into a group of its own making (as root it may),
// as a single status's sample does.
func TestMemberCacheSamples(t *testing.T) {
	dir := testutil.CgroupDir(t)
	tr, why, err := cgroup.Setup(dir, "members")
	if err != nil || tr == nil {
		t.Skipf("no cgroups here: %v %s", err, why)
	}
	t.Cleanup(func() { tr.Close() })
	g := tr.Group("nest-0")
	f, err := g.Prepare(cgroup.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", `sleep 1000 & read x; mkdir "$CG/inner" && sh -c 'echo $$ > "$CG/inner/cgroup.procs" && exec sleep 1000' & exec sleep 1000`)
	cmd.Env = append(os.Environ(), "CG="+g.Path())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, UseCgroupFD: true, CgroupFD: int(f.Fd())}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	err = cmd.Start()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = g.Kill()
		_ = cmd.Wait()
	})
	c := &memberCache{g: g, tree: tr, describe: proctree.New()}

	testutil.Eventually(t, "two processes", func() bool {
		return len(c.sample(time.Now(), 0).Procs) == 2
	})
	t0 := time.Now().Add(time.Second) // the single status's sample is too old for it
	m := c.sample(t0, time.Second)
	if len(m.Procs) != 2 || !m.At.Equal(t0) {
		t.Fatalf("listing's sample: %d processes as of %v, want 2 as of %v", len(m.Procs), m.At, t0)
	}
	in.Close() // the run makes nest-0/inner and moves a process there
	testutil.Eventually(t, "the inner group", func() bool {
		b, _ := os.ReadFile(filepath.Join(g.Path(), "inner", "cgroup.procs"))
		return len(b) > 0
	})
	if again := c.sample(t0.Add(500*time.Millisecond), time.Second); !again.At.Equal(t0) || len(again.Procs) != 2 {
		t.Errorf("a sample within maxAge: as of %v with %d processes, want the one of %v", again.At, len(again.Procs), t0)
	}
	for i, maxAge := range []time.Duration{time.Second, 0} {
		asOf := t0.Add(time.Duration(2+i) * time.Second)
		if m := c.sample(asOf, maxAge); len(m.Procs) != 3 || !m.At.Equal(asOf) {
			t.Errorf("maxAge %v: %d processes as of %v, want 3 (one in nest-0/inner) as of %v", maxAge, len(m.Procs), m.At, asOf)
		}
	}
}

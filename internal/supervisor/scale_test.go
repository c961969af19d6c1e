package supervisor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/program"
)

// Scaling a program to zero stops every instance and keeps the program: its
// bare name still names it (resolving to no instance, not to "no such
// program"), and scaling it up again starts new instances.
func TestScaleToZeroKeepsTheProgram(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	s := spec("pool", "/bin/sh", "-c", "exec sleep 1000")
	s.Instances = 2
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	h.waitFor("both running", func() bool {
		return h.status("pool:0").State == program.StateRunning && h.status("pool:1").State == program.StateRunning
	})
	pids := []int{pidOf(h.status("pool:0")), pidOf(h.status("pool:1"))}
	ids, err := h.mgr.Scale(ctx, "pool", 0)
	if err != nil || len(ids) != 0 {
		t.Fatalf("scale to 0: ids %v, err %v", ids, err)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("pid %d alive after scale to 0", pid)
		}
	}
	if sp, ok := h.mgr.Spec("pool"); !ok || sp.Instances != 0 {
		t.Fatalf("the program after scale to 0: %+v, %v", sp, ok)
	}
	if ids, err := h.mgr.Resolve("pool"); err != nil || len(ids) != 0 {
		t.Errorf("resolve of a program at zero: %v, %v", ids, err)
	}
	if out, err := h.mgr.Stop(ctx, "pool", program.ActOptions{Wait: true}); err != nil || len(out) != 0 {
		t.Errorf("stop of a program at zero: %v, %v", out, err)
	}
	if _, err := h.mgr.Resolve("pool:0"); !errors.Is(err, program.ErrNotFound) {
		t.Errorf("resolve of an instance that is gone: %v", err)
	}
	ids, err = h.mgr.Scale(ctx, "pool", 2)
	if err != nil || !slices.Equal(ids, []string{"pool:0", "pool:1"}) {
		t.Fatalf("scale back to 2: ids %v, err %v", ids, err)
	}
	h.waitFor("both running again", func() bool {
		return h.status("pool:0").State == program.StateRunning && h.status("pool:1").State == program.StateRunning
	})
}

// A reload that removes programs scaled to zero answers, and so does the
// next one (the reload's answers once outnumbered the room made for them,
// sized by instances rather than programs).
func TestReloadAnswersAfterProgramsScaledToZero(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	a, b := spec("a", "/bin/sh", "-c", "exec sleep 1000"), spec("b", "/bin/sh", "-c", "exec sleep 1000")
	if _, errs := h.mgr.AddAll([]program.Spec{a, b}); errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	for _, name := range []string{"a", "b"} {
		if err := h.mgr.rescale(ctx, name, 0, true); err != nil { // Scale's own answer is the test above's
			t.Fatalf("scale %s 0: %v", name, err)
		}
	}
	apply := func(specs ...program.Spec) Diff {
		t.Helper()
		type result struct {
			d   Diff
			err error
		}
		done := make(chan result, 1)
		go func() {
			d, err := h.mgr.Apply(ctx, specs)
			done <- result{d, err}
		}()
		select {
		case r := <-done:
			if r.err != nil {
				t.Fatal(r.err)
			}
			return r.d
		case <-time.After(30 * time.Second):
			t.Fatal("the reload never answered")
		}
		return Diff{}
	}
	d := apply(spec("c", "/bin/sh", "-c", "exec sleep 1000"))
	if !slices.Equal(d.Removed, []string{"a", "b"}) || !slices.Equal(d.Added, []string{"c"}) {
		t.Errorf("diff %+v", d)
	}
	if d := apply(); !slices.Equal(d.Removed, []string{"c"}) {
		t.Errorf("the next reload's diff %+v", d)
	}
}

// A reload of a config whose count for a program did not change keeps a
// live tend scale (3 stays 3, the runs untouched), also when the reload
// changes the program otherwise (its runs replaced, 3 of them); a config
// whose count changed decides.
func TestReloadKeepsALiveScale(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	s := spec("pool", "/bin/sh", "-c", "exec sleep 1000")
	if _, err := h.mgr.Add(s); err != nil {
		t.Fatal(err)
	}
	if _, err := h.mgr.Scale(ctx, "pool", 3); err != nil {
		t.Fatal(err)
	}
	running := func(n int) []int {
		t.Helper()
		var pids []int
		h.waitFor(fmt.Sprintf("%d running", n), func() bool {
			ids, _ := h.mgr.Resolve("pool")
			if len(ids) != n {
				return false
			}
			pids = pids[:0]
			for _, id := range ids {
				st := h.status(id)
				if st.State != program.StateRunning {
					return false
				}
				pids = append(pids, pidOf(st))
			}
			return true
		})
		return pids
	}
	before := running(3)
	d, err := h.mgr.Apply(ctx, []program.Spec{s})
	if err != nil || !slices.Equal(d.Unchanged, []string{"pool"}) {
		t.Fatalf("reload of the same file: %+v %v", d, err)
	}
	if after := running(3); !slices.Equal(after, before) {
		t.Errorf("runs %v after the reload, %v before", after, before)
	}
	changed := s
	changed.Env = map[string]string{"X": "1"}
	if d, err := h.mgr.Apply(ctx, []program.Spec{changed}); err != nil || !slices.Equal(d.Changed, []string{"pool"}) {
		t.Fatalf("reload of a changed program: %+v %v", d, err)
	}
	running(3)
	if d, err := h.mgr.Apply(ctx, []program.Spec{changed}); err != nil || !slices.Equal(d.Unchanged, []string{"pool"}) {
		t.Fatalf("the scale was not kept as the operator's across the change: %+v %v", d, err)
	}
	recount := changed
	recount.Instances = 2
	if _, err := h.mgr.Apply(ctx, []program.Spec{recount}); err != nil {
		t.Fatal(err)
	}
	running(2)
}

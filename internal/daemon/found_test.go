package daemon

import "testing"

// A cgroup's or a FIFO's name gives its instance id back, and only a name
// an instance can have does.
func TestIDOfBase(t *testing.T) {
	for base, want := range map[string]string{
		"w-0": "w:0", "my-prog-12": "my-prog:12", "run-2d50e3e5-0": "run-2d50e3e5:0",
		"w": "", "w-": "", "-1": "", "w-x": "", "w-01": "", "all-0": "", "hold": "",
	} {
		got, ok := idOfBase(base)
		if got != want || ok != (want != "") {
			t.Errorf("idOfBase(%q) = %q %v, want %q", base, got, ok, want)
		}
	}
	for name, want := range map[string]string{"w-0.out": "w-0", "w-0.err": "w-0", "w-0.in": "w-0", "w-0": "w-0", "w-0.log": "w-0.log"} {
		if got := fifoBase(name); got != want {
			t.Errorf("fifoBase(%q) = %q, want %q", name, got, want)
		}
	}
}

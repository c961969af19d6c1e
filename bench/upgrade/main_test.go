package main

import (
	"strings"
	"testing"
)

// TestUpgradesProduceNumbers runs the benchmark with a small fleet and two
// upgrades against the real daemon: every upgrade measured, no run
// restarted or lost, the pid kept, and the results render the report; it
// never judges speed. It builds tend, so it is skipped under -short.
func TestUpgradesProduceNumbers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the tend daemon")
	}
	var o results
	o.Settings.Programs, o.Settings.Runs = 20, 2
	if err := run(&o, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if len(o.Upgrades) != 2 {
		t.Fatalf("%d upgrades", len(o.Upgrades))
	}
	for _, u := range o.Upgrades {
		if u.ServingAfter <= 0 || u.RoundTrip <= 0 || u.Restarted != 0 || u.Events != 0 || !u.SamePID || u.From == u.To {
			t.Errorf("upgrade: %+v", u)
		}
	}
	if rep := string(report(&o, "test")); !strings.Contains(rep, "runs restarted or lost: 0") {
		t.Errorf("report:\n%s", rep)
	}
}

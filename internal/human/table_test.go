package human

import (
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/program"
)

// The header is the same whatever the age of the process samples: scripts
// split it on blanks and match it (the age is the JSON's sampled_at).
func TestTableHeaderIgnoresSampleAge(t *testing.T) {
	now := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	pid := 42
	row := func(id string, age time.Duration) program.Status {
		st := program.Status{ID: id, State: program.StateRunning, PID: &pid, RSSBytes: 1 << 20, ComputedAt: program.Time{Time: now}}
		if age >= 0 {
			st.SampledAt = program.Time{Time: now.Add(-age)}
		}
		return st
	}
	for _, tc := range []struct {
		name string
		list []program.Status
		want string
	}{
		{"fresh", []program.Status{row("a:0", 0), row("b:0", 300*time.Millisecond)}, "RSS "},
		{"never sampled", []program.Status{row("a:0", -1)}, "RSS "},
		{"old samples", []program.Status{row("a:0", 2*time.Second), row("b:0", 3900*time.Millisecond), row("c:0", -1)}, "RSS "},
	} {
		var b strings.Builder
		if err := Table(&b, tc.list, 200); err != nil {
			t.Fatal(err)
		}
		header, _, _ := strings.Cut(b.String(), "\n")
		if !strings.Contains(header, tc.want) || strings.Count(header, "RSS") != 1 || len(strings.Fields(header)) != len(Header) {
			t.Errorf("%s: header %q, want it to say %q", tc.name, header, tc.want)
		}
	}
}

package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/logfile"
	"github.com/tend-sh/tend/internal/testutil"
)

// logLine writes one record to the fake daemon's log of id.
func logLine(t *testing.T, d *fakeDaemon, id string, ts time.Time, s logfile.Stream, line string) {
	t.Helper()
	l, err := d.b.Log(id)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Add(logfile.Record{TS: ts, Stream: s, Line: []byte(line)}); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
}

func TestLogsOfANameMergedWithPrefixes(t *testing.T) {
	d := startDaemon(t)
	d.fleet()
	now := time.Now().UTC().Truncate(time.Millisecond)
	logLine(t, d, "web:0", now.Add(-3*time.Hour), logfile.Stdout, "ancient")
	logLine(t, d, "web:1", now.Add(-2*time.Second), logfile.Stderr, "one failed")
	logLine(t, d, "web:0", now.Add(-time.Second), logfile.Stdout, "zero serving")
	logLine(t, d, "web:1", now, logfile.Stdout, "one serving")

	d.tend(t, "logs", "web").want(t, 0, "web:0 | ancient\nweb:1 | one failed\nweb:0 | zero serving\nweb:1 | one serving\n")
	d.tend(t, "logs", "web", "-n", "1").want(t, 0, "web:1 | one serving\n")
	d.tend(t, "logs", "web", "--stderr").want(t, 0, "web:1 | one failed\n")
	d.tend(t, "logs", "web", "--since", "1h").want(t, 0, "web:1 | one failed\nweb:0 | zero serving\nweb:1 | one serving\n")
	d.tend(t, "logs", "web:1", "-n", "1", "--timestamps").want(t, 0, now.Format("2006-01-02T15:04:05.000Z")+" one serving\n")
	d.tend(t, "logs", "web", "--since", "an hour").wantErr(t, 2, "--since")
	d.tend(t, "logs", "nope").wantErr(t, 3, "no such")

	r := d.tend(t, "logs", "web:1", "--json")
	if r.code != 0 || !strings.Contains(r.stdout, `"id":"web:1","stream":"stderr","line":"one failed"`) {
		t.Errorf("--json: %d %q", r.code, r.stdout)
	}

	out, stop := d.runBackground(t, "logs", "web", "-f", "-n", "1")
	testutil.Eventually(t, "the tail", func() bool { return out.String() == "web:1 | one serving\n" })
	logLine(t, d, "web:0", time.Now(), logfile.Stdout, "later")
	testutil.Eventually(t, "the followed line", func() bool { return out.String() == "web:1 | one serving\nweb:0 | later\n" })
	if code := stop(); code != 0 {
		t.Errorf("logs -f ended with %d", code)
	}
}

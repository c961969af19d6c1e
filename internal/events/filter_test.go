package events_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/api"
	"github.com/tend-sh/tend/internal/api/apitest"
	"github.com/tend-sh/tend/internal/events"
	"github.com/tend-sh/tend/internal/program"
)

// A filtered backlog, read back from the audit log, has the events the
// live stream has for the same filter: status_changed too, whose id,
// program and labels are its status object's in the audit line (not the
// event head's), as the broker publishes them.
func TestFilteredBacklogIsTheStreamsEvents(t *testing.T) {
	l, err := events.Open(events.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	srv := api.New(apitest.NewBackend(t.TempDir()), apiEvents{l}, api.Options{Version: "test"})
	ts := httptest.NewServer(srv.Handler())
	defer func() { srv.Close(); ts.Close() }()

	team := map[string]string{"team": "a"}
	status := func(id string, labels map[string]string) program.Event {
		name, k, _ := program.SplitID(id)
		st := program.Status{ID: id, Program: name, Instance: k, Labels: labels, State: program.StateRunning}
		return program.Event{Kind: program.KindStatusChanged, ID: id, Program: name, Data: &st}
	}
	for _, e := range []program.Event{
		{Kind: program.KindDaemon, Data: &program.DaemonPhase{Phase: program.PhaseStarted, PID: 1}},                                         // 1
		{Kind: program.KindTrackedChanged, Data: &program.TrackedChanged{Added: []string{"web:0", "web:1"}, Removed: []string{}, Count: 2}}, // 2
		{Kind: program.KindSpawned, ID: "web:0", Program: "web", Labels: team, Data: &program.Spawned{PID: 7, Run: 1}},                      // 3
		status("web:0", team),     // 4
		status("web:1", nil),      // 5
		status("planner:0", team), // 6
		{Kind: program.KindSpawned, ID: "web:1", Program: "web", Data: &program.Spawned{PID: 8, Run: 1}}, // 7
	} {
		l.Publish(e)
	}
	for _, tc := range []struct {
		query string
		want  []uint64
	}{
		{"id=web", []uint64{3, 4, 5, 7}},
		{"id=web:0", []uint64{3, 4}},
		{"id=all", []uint64{3, 4, 5, 6, 7}},
		{"label=team=a", []uint64{3, 4, 6}},
		{"id=web&label=team=a", []uint64{3, 4}},
		{"kinds=status_changed&id=planner", []uint64{6}},
	} {
		backlog := backlogSeqs(t, ts.URL+"/v1/events?format=json&"+tc.query)
		stream := streamSeqs(t, ts.URL+"/v1/events?"+tc.query, len(tc.want))
		if !slices.Equal(backlog, tc.want) || !slices.Equal(stream, tc.want) {
			t.Errorf("%s: backlog %v, stream %v, want %v", tc.query, backlog, stream, tc.want)
		}
	}
}

func backlogSeqs(t *testing.T, url string) []uint64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var evs []program.Event
	if err := json.NewDecoder(resp.Body).Decode(&evs); err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for _, e := range evs {
		out = append(out, e.Seq)
	}
	return out
}

// streamSeqs reads the seqs of the first n events of a stream (more would
// follow only live, and none is published).
func streamSeqs(t *testing.T, url string, n int) []uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []uint64
	sc := bufio.NewScanner(resp.Body)
	for len(out) < n && sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			seq, _ := strconv.ParseUint(v, 10, 64)
			out = append(out, seq)
		}
	}
	return out
}

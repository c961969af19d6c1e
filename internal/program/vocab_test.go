package program

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// Every kind in the list decodes into a payload of its own, and none is
// listed twice.
func TestKindsDecodeToTheirPayloads(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range Kinds() {
		if seen[k] {
			t.Errorf("%s listed twice", k)
		}
		seen[k] = true
		if _, generic := payloadFor(k).(*map[string]any); generic {
			t.Errorf("%s decodes as an unknown kind", k)
		}
	}
	if _, generic := payloadFor("future_kind").(*map[string]any); !generic {
		t.Error("an unknown kind has a payload type")
	}
	if len(seen) != 13 {
		t.Errorf("%d kinds: %v", len(seen), Kinds())
	}
}

// RestartCauses are exactly the keys of the restarts object, in order,
// and Of reads each one's count.
func TestRestartCausesAreTheRestartsKeys(t *testing.T) {
	r := Restarts{Crash: 1, CleanExit: 2, RSSWatchdog: 3, WedgeRestart: 4, OperatorRestart: 5}
	b, _ := json.Marshal(r)
	var keys []string
	for f := range strings.SplitSeq(strings.Trim(string(b), "{}"), ",") {
		keys = append(keys, strings.Trim(strings.SplitN(f, ":", 2)[0], `"`))
	}
	if !slices.Equal(keys, RestartCauses()) {
		t.Errorf("restarts keys %v, RestartCauses %v", keys, RestartCauses())
	}
	var m map[string]int
	json.Unmarshal(b, &m)
	sum := 0
	for _, c := range RestartCauses() {
		if r.Of(c) != m[c] {
			t.Errorf("Of(%s) = %d, want %d", c, r.Of(c), m[c])
		}
		sum += r.Of(c)
	}
	if sum != r.Total() || r.Of("nope") != 0 {
		t.Errorf("total %d, sum %d", r.Total(), sum)
	}
}

package runs

import (
	"encoding/json"
	"testing"
)

// FuzzParse: whatever runs.json holds, Parse never panics, every record it
// returns names a run, and a file it reads without error survives Format.
func FuzzParse(f *testing.F) {
	f.Add([]byte("[\n{\"id\":\"w:0\",\"pid\":42,\"start_ticks\":7,\"run\":1,\"started_at\":\"2026-12-02T09:00:00Z\"}\n]\n"))
	f.Add([]byte("[\n{\"id\":\"w:0\",\"pid\":42,\"start_ticks\":7,\"run\":1},\n{\"id\":\"w:1\",\"pid\":4"))
	f.Add([]byte("[]"))
	f.Fuzz(func(t *testing.T, b []byte) {
		list, err := Parse(b)
		for _, r := range list {
			if !r.valid() {
				t.Fatalf("invalid record %+v", r)
			}
		}
		if err != nil {
			return
		}
		again, err := Parse(Format(list))
		if err != nil || len(again) != len(list) {
			t.Fatalf("Format did not parse back: %v %d/%d", err, len(again), len(list))
		}
		a, _ := json.Marshal(list)
		b2, _ := json.Marshal(again)
		if string(a) != string(b2) {
			t.Fatalf("round trip: %s != %s", a, b2)
		}
	})
}

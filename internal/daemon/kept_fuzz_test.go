package daemon

import (
	"encoding/json"
	"testing"

	"github.com/tend-sh/tend/internal/program"
)

// FuzzParseKept: whatever programs.json holds, parseKept never panics,
// every entry it returns has a valid name and an object body and a name
// appears once, and a file it reads without error survives formatKept.
func FuzzParseKept(f *testing.F) {
	f.Add([]byte("[\n{\"name\":\"a\",\"body\":{\"name\":\"a\",\"command\":[\"sleep\",\"1\"]}},\n{\"name\":\"b\",\"body\":{\"name\":\"b\",\"shell\":\"x\"},\"instances\":3}\n]\n"))
	f.Add([]byte("[\n{\"name\":\"a\",\"body\":{\"name\":\"a\"}},\n{\"name\":\"b\",\"bo"))
	f.Add([]byte("[]"))
	f.Fuzz(func(t *testing.T, b []byte) {
		list, err := parseKept(b)
		seen := map[string]bool{}
		for _, p := range list {
			if !program.ValidName(p.Name) || len(p.Body) == 0 || seen[p.Name] {
				t.Fatalf("bad entry %+v", p)
			}
			seen[p.Name] = true
		}
		if err != nil {
			return
		}
		again, err := parseKept(formatKept(list))
		if err != nil || len(again) != len(list) {
			t.Fatalf("formatKept did not parse back: %v %d/%d", err, len(again), len(list))
		}
		for i := range list {
			a, _ := json.Marshal(list[i].Body)
			b, _ := json.Marshal(again[i].Body)
			if list[i].Name != again[i].Name || string(a) != string(b) {
				t.Fatalf("round trip: %+v != %+v", list[i], again[i])
			}
		}
	})
}

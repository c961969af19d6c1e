package kept

import (
	"encoding/json"
	"testing"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/statedir"
)

// parse reads programs.json as OpenPrograms does.
func parse(b []byte) ([]entry, error) {
	list, err := statedir.UnmarshalLines[entry](b)
	return clean(list), err
}

// FuzzParsePrograms: whatever programs.json holds, reading it never
// panics, every entry it gives has a valid name and an object body and a
// name appears once, and a file read without error survives being
// written back.
func FuzzParsePrograms(f *testing.F) {
	f.Add([]byte("[\n{\"name\":\"a\",\"body\":{\"name\":\"a\",\"command\":[\"sleep\",\"1\"]}},\n{\"name\":\"b\",\"body\":{\"name\":\"b\",\"shell\":\"x\"},\"instances\":3}\n]\n"))
	f.Add([]byte("[\n{\"name\":\"a\",\"body\":{\"name\":\"a\"}},\n{\"name\":\"b\",\"bo"))
	f.Add([]byte("[]"))
	f.Fuzz(func(t *testing.T, b []byte) {
		list, err := parse(b)
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
		again, err := parse(statedir.MarshalLines(list))
		if err != nil || len(again) != len(list) {
			t.Fatalf("written back, it did not parse: %v %d/%d", err, len(again), len(list))
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

package logfile

import "testing"

// A protocol instance's JSON-RPC lines (stream acp) are left out of its
// log unless raw, and with raw they stand in for its transcript; other
// instances' logs are as they were.
func TestProtocolRecords(t *testing.T) {
	recs := []Record{{Stream: Stdout}, {Stream: Stderr}, {Stream: Tend}, {Stream: Protocol}}
	for _, tc := range []struct {
		stderr, raw, protocol bool
		want                  [4]bool
	}{
		{false, false, true, [4]bool{true, true, true, false}},
		{false, true, true, [4]bool{false, true, true, true}},
		{false, true, false, [4]bool{true, true, true, true}},
		{true, true, true, [4]bool{false, true, false, false}},
	} {
		for i := range recs {
			if got := wants(&recs[i], tc.stderr, tc.raw, tc.protocol); got != tc.want[i] {
				t.Errorf("stderr %v raw %v protocol %v: %s: %v", tc.stderr, tc.raw, tc.protocol, recs[i].Stream, got)
			}
		}
	}
	line := Append(nil, Record{Stream: Protocol, Line: []byte(`{"jsonrpc":"2.0"}`)})
	if r, err := Parse(line[:len(line)-1]); err != nil || r.Stream != Protocol || string(r.Line) != `{"jsonrpc":"2.0"}` {
		t.Errorf("parse %q: %+v %v", line, r, err)
	}
}

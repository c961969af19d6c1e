package client

import (
	"io"
	"slices"
	"strings"
	"testing"
)

func TestReadSSE(t *testing.T) {
	in := ": keepalive\n\n" +
		"id: 1\nevent: spawned\ndata: {\"a\":1}\n\n" +
		"data: line one\ndata: line two\n\n" + // no event: "message"; data lines join
		"event: ignored-without-data\n\n" +
		"id: 2\nevent:cutoff\nretry: 10\ndata:{}\n\n" +
		"event: torn\ndata: {" // a stream cut mid-event delivers nothing
	var got []string
	n, err := readSSE(strings.NewReader(in), func(kind, data string) error {
		got = append(got, kind+"="+data)
		return nil
	})
	want := []string{`spawned={"a":1}`, "message=line one\nline two", "cutoff={}"}
	if !slices.Equal(got, want) || n != 3 {
		t.Errorf("got %q (%d), want %q", got, n, want)
	}
	if err != io.ErrUnexpectedEOF {
		t.Errorf("end of stream = %v, want io.ErrUnexpectedEOF", err)
	}
}

func FuzzReadSSE(f *testing.F) {
	f.Add("id: 1\nevent: spawned\ndata: {}\n\n")
	f.Add(": c\n\ndata\n\n:\n")
	f.Add("\n\n\n")
	f.Fuzz(func(t *testing.T, in string) {
		n, _ := readSSE(strings.NewReader(in), func(kind, data string) error {
			if kind == "" {
				t.Fatal("empty kind")
			}
			return nil
		})
		if n > strings.Count(in, "\n\n")+1 {
			t.Fatalf("%d events from %d blank lines", n, strings.Count(in, "\n\n"))
		}
	})
}

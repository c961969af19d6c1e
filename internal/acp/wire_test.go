package acp

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

// run feeds input through the line reader and dispatcher, as pump does,
// with requests 1 and 2 of this connection's on the wire; it returns what
// reached the SDK, the lines that were not JSON-RPC, the stray ids, and
// why it stopped.
func run(input []byte, max int) (sdkGot []string, notACP []string, stray []string, err error) {
	t := newIDs(1000)
	t.out([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
	t.out([]byte(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{}}`))
	var sdk bytes.Buffer
	lr := newLineReader(bytes.NewReader(input), max)
	h := wireHooks{
		notACP: func(l []byte) { notACP = append(notACP, string(l)) },
		stray:  func(id string) { stray = append(stray, id) },
	}
	for {
		line, e := lr.next()
		if e != nil {
			err = e
			break
		}
		if e := dispatch(line, &sdk, t, h); e != nil {
			err = e
			break
		}
	}
	for _, l := range strings.SplitAfter(sdk.String(), "\n") {
		if l != "" {
			sdkGot = append(sdkGot, l)
		}
	}
	return sdkGot, notACP, stray, err
}

func TestLineReader(t *testing.T) {
	in := "banner: starting up\n" +
		`{"jsonrpc":"2.0","id":1001,"result":{"protocolVersion":1}}` + "\n" +
		"\n" +
		`{"jsonrpc":"2.0","id":7,"result":{}}` + "\n" + // no request of ours
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s"}}` + "\n" +
		`{"jsonrpc":"2.0","id":"x","method":"fs/read_text_file","params":{}}` + "\n" +
		`{"jsonrpc":"1.0","id":1002,"result":{}}` + "\n" +
		`[1,2]` + "\n" +
		`{"jsonrpc":"2.0","id":1001,"result":{}}` + "\n" + // answered already
		`{"jsonrpc":"2.0","id":1002,"error":{"code":-32000,"message":"Authentication required"}}`
	got, bad, stray, err := run([]byte(in), MaxMessage)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("stopped with %v", err)
	}
	if len(got) != 4 {
		t.Fatalf("the SDK got %d lines: %q", len(got), got)
	}
	var first struct {
		ID int `json:"id"`
	}
	if json.Unmarshal([]byte(got[0]), &first); first.ID != 1 {
		t.Errorf("the response's id reached the SDK as %d, not its own 1: %s", first.ID, got[0])
	}
	if !strings.Contains(got[3], `"id":2`) || !strings.Contains(got[3], "Authentication required") {
		t.Errorf("last: %s", got[3])
	}
	if len(bad) != 3 || bad[0] != "banner: starting up" {
		t.Errorf("not acp: %q", bad)
	}
	if len(stray) != 2 || stray[0] != "7" || stray[1] != "1001" {
		t.Errorf("stray: %q", stray)
	}
}

// A line over the bound ends the stream with ErrTooLarge; one at the
// bound passes.
func TestLineReaderBound(t *testing.T) {
	msg := `{"jsonrpc":"2.0","method":"x","params":"` + strings.Repeat("a", 100) + `"}`
	if _, _, _, err := run([]byte(msg+"\n"), len(msg)); !errors.Is(err, io.EOF) {
		t.Errorf("at the bound: %v", err)
	}
	if _, _, _, err := run([]byte(msg+"\n"), len(msg)-1); !errors.Is(err, ErrTooLarge) {
		t.Errorf("over the bound: %v", err)
	}
	big := bytes.Repeat([]byte("x"), MaxMessage+1)
	if _, _, _, err := run(big, MaxMessage); !errors.Is(err, ErrTooLarge) {
		t.Errorf("over 8 MiB without a newline: %v", err)
	}
}

func FuzzACPReader(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1001,"result":{}}` + "\nnot json\n" + `{"jsonrpc":"2.0","method":"m"}`))
	f.Add([]byte("\r\n\n{\"jsonrpc\":\"2.0\",\"id\":1e3,\"result\":1}\n"))
	f.Add([]byte(`{"jsonrpc":"2.0","id":{"a":1},"error":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, bad, stray, err := run(data, 256)
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, ErrTooLarge) {
			t.Fatalf("stopped with %v", err)
		}
		for _, l := range got {
			if !strings.HasSuffix(l, "\n") || strings.Count(l, "\n") != 1 {
				t.Fatalf("the SDK got a line that is not one line: %q", l)
			}
			m, ok := classify([]byte(strings.TrimSpace(l)))
			if !ok {
				t.Fatalf("the SDK got a line that is not JSON-RPC: %q", l)
			}
			if m.Method == "" && string(m.ID) != "1" && string(m.ID) != "2" {
				t.Fatalf("a response to no request of ours reached the SDK: %q", l)
			}
		}
		_ = bad
		_ = stray
	})
}

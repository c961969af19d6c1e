package acp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"

	sdk "github.com/coder/acp-go-sdk"
)

// MaxMessage is the longest line an agent may send: a longer one ends the
// run as a crash (docs/protocol.md#bad-input). The SDK's own reader would
// close the connection past 10 MiB without saying why.
const MaxMessage = 8 << 20

// ErrTooLarge ends a run whose agent sent a message over MaxMessage.
var ErrTooLarge = errors.New("the agent sent a message over 8 MiB")

// The line reader sits between the agent's stdout and the SDK's connection
// (an io.Pipe): the SDK's reader skips a line that is not JSON with a log
// line of its own, cannot be told a size bound, and takes any response id
// for its own. So each line is looked at here first, once:
//
//   - a line longer than MaxMessage ends the connection with ErrTooLarge;
//   - a line that is not a JSON-RPC 2.0 object is counted and handed to
//     NotACP, never to the SDK (a banner an agent prints, a stray log line);
//   - a response whose id this connection did not send is dropped (the
//     answer to a request of an earlier daemon's, docs/protocol.md);
//   - a session/update notification is handed to the update hook, here,
//     in order, and not to the SDK (see below);
//   - every other line goes on to the SDK as it came, with the id of a
//     response translated back (see ids).
//
// Why session/update does not go through the SDK: it is nearly every line
// of a streamed answer, and the SDK's path for it reads each line about a
// dozen times (its envelope, the params, then each of the two unions of
// the update and its content twice, validating the JSON before each
// decode), which made a streamed answer through tend 0.66x as fast as the
// SDK's own client (bench/acp). It also queues notifications without
// bound of its own but 1,024, past which it closes the connection: an
// agent that streams (or replays a session/load) faster than they are
// handled would lose its connection. Here the one decode that classifies
// the line also yields a text chunk's text, and the reader does not read
// the next line before the update is handled, so the pipe holds the agent
// back instead. Every other kind of update is decoded with the SDK's own
// types (sdk.SessionNotification), and everything that is not a
// session/update notification (requests, responses, every other method)
// still goes through the SDK's connection.

// wireMessage is the part of a JSON-RPC message the line reader decodes:
// the envelope, and for a session/update its kind and text, in one pass.
// The envelope's members are raw so that no value of theirs can fail the
// decode: a type error can only come from the params' shape (params an
// array, an update that is not an object), which only makes the line a
// message whose update is decoded the SDK's way.
type wireMessage struct {
	JSONRPC json.RawMessage `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  json.RawMessage `json:"method"`
	Params  struct {
		Update struct {
			Kind    json.RawMessage `json:"sessionUpdate"`
			Content struct {
				Type json.RawMessage `json:"type"`
				Text *string         `json:"text"`
			} `json:"content"`
		} `json:"update"`
	} `json:"params"`
}

// message is what the line reader knows of a JSON-RPC message.
type message struct {
	ID     json.RawMessage // absent for a notification
	Method string          // "" for a response
	// Kind is a session/update's params.update.sessionUpdate, and Text
	// its content's text when the content is a text block (an
	// agent_message_chunk's, the bulk of a streamed answer).
	Kind string
	Text *string
}

// notification says m is a notification: no id (or a null one, as the SDK
// takes it).
func (m *message) notification() bool { return len(m.ID) == 0 || string(m.ID) == "null" }

// classify says what a line is: a message (with its id, method and whether
// it is a response), or not JSON-RPC. It decodes the line once.
func classify(line []byte) (m message, ok bool) {
	if len(line) == 0 || line[0] != '{' {
		return m, false
	}
	var w wireMessage
	if err := json.Unmarshal(line, &w); err != nil {
		var te *json.UnmarshalTypeError
		if !errors.As(err, &te) {
			return m, false
		}
		w.Params.Update.Kind, w.Params.Update.Content.Text = nil, nil
	}
	if v, ok := jsonString(w.JSONRPC); !ok || v != "2.0" {
		return m, false
	}
	if len(w.Method) > 0 {
		if m.Method, ok = jsonString(w.Method); !ok {
			return m, false
		}
	}
	m.ID = w.ID
	if m.Method == "" && len(m.ID) == 0 {
		return m, false // neither a request, a notification nor a response
	}
	m.Kind, _ = jsonString(w.Params.Update.Kind)
	if t, _ := jsonString(w.Params.Update.Content.Type); t == "text" {
		m.Text = w.Params.Update.Content.Text
	}
	return m, true
}

// jsonString is the string a raw JSON value holds; false when it is not a
// string.
func jsonString(raw json.RawMessage) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1]), true // no escapes: the bytes are the string
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// ids numbers the requests this connection sends in a range of its own
// (base plus the SDK's counter), so that a response meant for an earlier
// connection to the same agent (an earlier daemon's, before a kill or an
// upgrade) is never taken for one of this connection's: the SDK numbers
// from 1 every time. Guarded by mu: the writer and the reader both use it.
type ids struct {
	base int64
	mu   sync.Mutex
	sent map[int64]bool // ids on the wire awaiting their response, translated
}

func newIDs(base int64) *ids { return &ids{base: base, sent: map[int64]bool{}} }

// out translates the id of a request the SDK writes (a number) into the
// connection's range; the line is returned unchanged when it is not a
// request.
func (t *ids) out(line []byte) []byte {
	m, ok := classify(bytes.TrimSpace(line))
	if !ok || m.Method == "" || len(m.ID) == 0 {
		return line
	}
	n, err := strconv.ParseInt(string(m.ID), 10, 64)
	if err != nil {
		return line
	}
	wire := t.base + n
	t.mu.Lock()
	t.sent[wire] = true
	t.mu.Unlock()
	return replaceID(line, wire)
}

// in translates the id of a response back to the SDK's; false when no
// request of this connection has that id (or its answer came already).
func (t *ids) in(line []byte, id json.RawMessage) ([]byte, bool) {
	n, err := strconv.ParseInt(string(bytes.TrimSpace(id)), 10, 64)
	if err != nil {
		return nil, false
	}
	t.mu.Lock()
	ok := t.sent[n]
	delete(t.sent, n)
	t.mu.Unlock()
	if !ok {
		return nil, false
	}
	return replaceID(line, n-t.base), true
}

// replaceID re-encodes a message with id set to n; its other members are
// kept as they came.
func replaceID(line []byte, n int64) []byte {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(line, &obj); err != nil {
		return line
	}
	obj["id"] = json.RawMessage(strconv.FormatInt(n, 10))
	b, err := json.Marshal(obj)
	if err != nil {
		return line
	}
	return append(b, '\n')
}

// wireWriter is what the SDK writes to: each line (the SDK writes one
// message per Write) goes to the agent's stdin with its request id
// translated, and to Raw.
type wireWriter struct {
	w   io.Writer
	ids *ids
	raw func(out bool, line []byte)
}

func (w *wireWriter) Write(p []byte) (int, error) {
	line := w.ids.out(p)
	if w.raw != nil {
		w.raw(true, bytes.TrimRight(line, "\n"))
	}
	if _, err := w.w.Write(line); err != nil {
		return 0, err
	}
	return len(p), nil
}

// lineReader reads the agent's stdout a line at a time, at most MaxMessage
// bytes a line.
type lineReader struct {
	r   *bufio.Reader
	max int
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// holdsLine says whether a whole line is buffered: next returns it
// without reading, so without waiting for the agent.
func (l *lineReader) holdsLine() bool {
	n := l.r.Buffered()
	if n == 0 {
		return false
	}
	b, _ := l.r.Peek(n)
	return bytes.IndexByte(b, '\n') >= 0
}

// next returns the next line without its newline. A line longer than max
// is ErrTooLarge; the end of the stream is io.EOF (an unfinished last line
// is returned first).
func (l *lineReader) next() ([]byte, error) {
	var line []byte
	for {
		frag, err := l.r.ReadSlice('\n')
		body := len(line) + len(frag)
		if err == nil {
			body-- // the newline
		}
		if body > l.max {
			return nil, ErrTooLarge
		}
		switch {
		case err == nil && line == nil:
			return bytes.TrimRight(frag, "\r\n"), nil // aliases the buffer until the next call
		case err == nil:
			return bytes.TrimRight(append(line, frag...), "\r\n"), nil
		case errors.Is(err, bufio.ErrBufferFull):
			line = append(line, frag...)
		default:
			if line = append(line, frag...); len(line) > 0 {
				return line, nil
			}
			return nil, err
		}
	}
}

// pump is the line reader's loop: it reads the agent's stdout until it
// ends or fails, hands each JSON-RPC line on to conn (the SDK's), and returns why it
// stopped (io.EOF at the end of the stream).
func pump(src io.Reader, conn io.Writer, t *ids, h wireHooks) error {
	return pumpLines(newLineReader(src, MaxMessage), conn, t, h)
}

// pumpLines is pump over a line reader of any bound (the tests').
func pumpLines(lr *lineReader, conn io.Writer, t *ids, h wireHooks) error {
	for {
		if h.idle != nil && !lr.holdsLine() {
			h.idle() // what was read is handed on before the reader waits
		}
		line, err := lr.next()
		if err != nil {
			if h.idle != nil {
				h.idle()
			}
			return err
		}
		if err := dispatch(line, conn, t, h); err != nil {
			return err
		}
	}
}

// wireHooks are what the line reader tells its connection.
type wireHooks struct {
	raw    func(out bool, line []byte) // every line that came, JSON-RPC or not
	notACP func(line []byte)           // a line that is not JSON-RPC
	stray  func(id string)             // a response to no request of this connection's
	// update handles a session/update notification (line is the whole
	// message, m what classify found of it) before the next line is read;
	// nil hands it to the SDK as any other.
	update func(line []byte, m *message)
	// idle is told when the reader has no whole line in hand and is about
	// to wait for the agent (or its stdout ended), and before a line that
	// goes on to the SDK: what update kept back for a batch goes out.
	idle func()
}

// dispatch handles one line: what is JSON-RPC goes to conn (responses with
// their ids translated), the rest to the hooks.
func dispatch(line []byte, conn io.Writer, t *ids, h wireHooks) error {
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 {
		return nil
	}
	if h.raw != nil {
		h.raw(false, trimmed)
	}
	m, ok := classify(trimmed)
	if !ok {
		if h.notACP != nil {
			h.notACP(trimmed)
		}
		return nil
	}
	if m.Method == sdk.ClientMethodSessionUpdate && m.notification() && h.update != nil {
		h.update(trimmed, &m)
		return nil
	}
	if h.idle != nil {
		h.idle() // the text before it goes first: a response may end the turn
	}
	out := trimmed
	if m.Method == "" { // a response
		var known bool
		if out, known = t.in(trimmed, m.ID); !known {
			if h.stray != nil {
				h.stray(string(m.ID))
			}
			return nil
		}
	} else {
		out = append(append(make([]byte, 0, len(trimmed)+1), trimmed...), '\n')
	}
	if out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	if _, err := conn.Write(out); err != nil {
		return fmt.Errorf("handing a message to the connection: %w", err)
	}
	return nil
}

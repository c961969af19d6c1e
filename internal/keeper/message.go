package keeper

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The protocol between a daemon and its keeper: one datagram per message
// (SOCK_SEQPACKET), words separated by single spaces, a master passed
// beside keep and held (SCM_RIGHTS). Every message is a Go type below;
// Parse and (Message).format are the only places that read or write the
// words (docs/terminal.md#the-keeper).
//
//	daemon → keeper
//	hello V                          the daemon speaks version V; answered by hello V'
//	keep ID PID TICKS BASE MAX N     + master: read it, append to log BASE (max_size MAX, max_files N)
//	drop ID PID TICKS                the run is over: read what is left, close; answered by dropped
//	list                             answered by held … + master, one a run, then end
//	quit                             the daemon stops cleanly
//	keeper → daemon
//	hello V                          the keeper's version
//	held ID PID TICKS                + a copy of the master
//	end                              the last of list's answers
//	dropped ID PID TICKS             all the run wrote is in its log, and the master is closed
//	wrote ID                         ID's log gained records (coalesced: at most one per turn)
//	ended ID PID TICKS               every slave closed; all the run wrote is in its log
//	failed ID BYTES TEXT…            BYTES of ID's output could not be written to its log (TEXT says why)
//	healed ID                        ID's log is written again
//
// A keeper of version 1 (it only held masters) knows hello not and ignores
// it; it answers list with held and end alone, which is how a daemon
// tells it from a keeper that reads (Dial).

// Version is the protocol this keeper and this daemon speak.
const Version = 2

// Message is one datagram of the protocol.
type Message interface{ format() string }

// The messages.
type (
	Hello struct{ Version int }
	Keep  struct {
		Run
		Log LogSpec
	}
	Drop    struct{ Run }
	List    struct{}
	Quit    struct{}
	Held    struct{ Run }
	End     struct{}
	Dropped struct{ Run }
	Wrote   struct{ ID string }
	Ended   struct{ Run }
	Failed  struct {
		ID    string
		Bytes int64
		Err   string
	}
	Healed struct{ ID string }
)

// LogSpec is the log a keeper appends a run's terminal output to: the
// base name of its files in state_dir/logs and their rotation limits.
type LogSpec struct {
	Base     string
	MaxSize  int64
	MaxFiles int
}

func (m Hello) format() string   { return "hello " + strconv.Itoa(m.Version) }
func (m Keep) format() string    { return "keep " + m.Run.words() + " " + m.Log.words() }
func (m Drop) format() string    { return "drop " + m.Run.words() }
func (List) format() string      { return "list" }
func (Quit) format() string      { return "quit" }
func (m Held) format() string    { return "held " + m.Run.words() }
func (End) format() string       { return "end" }
func (m Dropped) format() string { return "dropped " + m.Run.words() }
func (m Wrote) format() string   { return "wrote " + m.ID }
func (m Ended) format() string   { return "ended " + m.Run.words() }
func (m Failed) format() string {
	return "failed " + m.ID + " " + strconv.FormatInt(m.Bytes, 10) + " " + oneLine(m.Err)
}
func (m Healed) format() string { return "healed " + m.ID }

func (l LogSpec) words() string {
	return l.Base + " " + strconv.FormatInt(l.MaxSize, 10) + " " + strconv.Itoa(l.MaxFiles)
}

// oneLine keeps an error's text within one message: words of printable
// bytes separated by single spaces, at most maxText bytes.
func oneLine(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c <= ' ' || c == 0x7f {
			b[i] = ' '
		}
	}
	var words []string
	for _, w := range strings.Split(string(b[:min(len(b), maxText)]), " ") {
		if w != "" {
			words = append(words, w)
		}
	}
	s = strings.Join(words, " ")
	if s == "" {
		s = "-"
	}
	return s
}

// maxText bounds the text of a failed.
const maxText = maxMessage / 2

// maxMessage bounds a datagram: a verb, an id of at most 63+1+5 bytes, a
// base name as long, numbers, an error's text (cut).
const maxMessage = 512

// ErrBadMessage is wrapped by Parse's error for a datagram that is no
// message of the protocol; ErrUnknownVerb, by one whose verb is unknown
// (a keeper of another version's).
var (
	ErrBadMessage  = errors.New("keeper: bad message")
	ErrUnknownVerb = fmt.Errorf("%w: unknown verb", ErrBadMessage)
)

// Parse reads a datagram.
func Parse(b []byte) (Message, error) {
	if len(b) > maxMessage {
		return nil, fmt.Errorf("%w: %d bytes", ErrBadMessage, len(b))
	}
	verb, rest, _ := strings.Cut(string(b), " ")
	f := strings.Split(rest, " ")
	if rest == "" {
		f = nil
	}
	bad := func() (Message, error) { return nil, fmt.Errorf("%w: %q", ErrBadMessage, b) }
	for _, w := range f {
		if !text(w) {
			return bad() // words are separated by single spaces
		}
	}
	want := func(n int) bool { return len(f) == n }
	switch verb {
	case "hello":
		if !want(1) {
			return bad()
		}
		v, err := strconv.Atoi(f[0])
		if err != nil || v <= 0 {
			return bad()
		}
		return Hello{Version: v}, nil
	case "keep":
		if !want(6) {
			return bad()
		}
		r, ok := parseRun(f[:3])
		maxSize, err1 := strconv.ParseInt(f[4], 10, 64)
		maxFiles, err2 := strconv.Atoi(f[5])
		if !ok || !word(f[3]) || err1 != nil || err2 != nil || maxSize < 0 || maxFiles < 0 {
			return bad()
		}
		return Keep{Run: r, Log: LogSpec{Base: f[3], MaxSize: maxSize, MaxFiles: maxFiles}}, nil
	case "drop", "held", "dropped", "ended":
		if !want(3) {
			return bad()
		}
		r, ok := parseRun(f)
		if !ok {
			return bad()
		}
		switch verb {
		case "drop":
			return Drop{r}, nil
		case "held":
			return Held{r}, nil
		case "dropped":
			return Dropped{r}, nil
		}
		return Ended{r}, nil
	case "list", "quit", "end":
		if !want(0) {
			return bad()
		}
		switch verb {
		case "list":
			return List{}, nil
		case "quit":
			return Quit{}, nil
		}
		return End{}, nil
	case "wrote", "healed":
		if !want(1) || !word(f[0]) {
			return bad()
		}
		if verb == "wrote" {
			return Wrote{ID: f[0]}, nil
		}
		return Healed{ID: f[0]}, nil
	case "failed":
		if len(f) < 3 || !word(f[0]) {
			return bad()
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		e := strings.Join(f[2:], " ")
		if err != nil || n < 0 || len(e) > maxText {
			return bad()
		}
		return Failed{ID: f[0], Bytes: n, Err: e}, nil
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownVerb, verb)
}

// parseRun reads ID PID TICKS.
func parseRun(f []string) (Run, bool) {
	pid, err1 := strconv.Atoi(f[1])
	ticks, err2 := strconv.ParseUint(f[2], 10, 64)
	if err1 != nil || err2 != nil || pid <= 0 || !word(f[0]) {
		return Run{}, false
	}
	return Run{ID: f[0], PID: pid, Ticks: ticks}, true
}

// text says whether s is a word of an error's text: printable bytes.
func text(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

// word says whether s is a word of a message: not empty, no space, no
// control byte, no slash (an id or a log's base name is one path
// component).
func word(s string) bool {
	if s == "" || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == 0x7f || c == '/' {
			return false
		}
	}
	return true
}

// Format is the datagram of m.
func Format(m Message) []byte { return []byte(m.format()) }

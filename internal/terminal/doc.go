// Package terminal is a run's pseudo-terminal seen from tend's end: the
// master side of the pty, the screen its bytes draw, input with tmux's key
// names, and the clients attached to it. It knows nothing of supervisors:
// a caller makes a Terminal per run, gives the slave to the child, and
// asks the Terminal what it shows.
//
// # A run's terminal
//
// Open makes a pty of Options.Size (ParseSize reads "120x40" and checks
// the bounds, 10x2 to 1000x500) and returns the Terminal and the slave.
// The caller starts the child with the slave as its stdin, stdout and
// stderr and SysProcAttr() (a new session, the slave its controlling
// terminal), then closes its own copy of the slave. Adopt does the same
// for a master descriptor tend already holds (one a keeper process handed
// back), with a screen that Options.Replay (the tail of the run's log)
// draws. Dup is a copy of the master, for such a keeper.
//
// The Terminal does not read the master. The terminal keeper (package
// keeper), a small process of tend's that outlives the daemon, reads every
// run's master always and appends what it reads to the run's log, so a
// program never blocks on a terminal nobody watches and a daemon that is
// killed loses nothing; the daemon follows that log and hands each byte,
// in order, once, to Feed, which draws it on the screen, sends it to every
// attached client and types the screen's answers to the program's queries
// back into the master (docs/terminal.md#the-keeper). An idle terminal
// costs no goroutine of this package and no read buffer, only its
// descriptor and its screen: about 44 KiB of heap at 120x40 (see
// BenchmarkIdleTerminal). Hangup says every copy of the slave is closed
// (Done is closed then); Close closes the master, keeping the screen.
//
// Resize sets the pty's size (the program gets SIGWINCH) and the
// screen's; whoever resizes last wins, and a 0x0 size (a client whose
// terminal reports none) leaves the size as it is.
//
// # The screen
//
// Screen keeps what a terminal of its size shows, byte by byte: cursor
// motion, erasures, scroll regions, insert and delete, the alternate
// screen, wide and combining characters, colours and attributes, line
// drawing, tab stops, the title. The bytes are parsed by the maintained
// VT500 state machine of github.com/charmbracelet/x/ansi; Screen carries
// out what they mean, on a grid of 8-byte cells (a character, a style
// number, a width) with per-screen tables of styles and multi-rune
// characters, as tmux's grid keeps its extended cells apart. Any input is
// safe: invalid UTF-8 is dropped, sequences may be cut anywhere between
// two writes, and the work per byte and the memory are bounded
// (FuzzFeed). Where terminals disagree, tmux is the reference: its
// capture-pane is what Text must equal (the tests run bash, python3, vim,
// less and top under both). One deliberate difference: DEC line drawing
// shows as the lines (┌─┐), where tmux's capture prints the ASCII the
// program sent (lqk).
//
// Text is the screen as plain text, one line per row, trailing spaces
// trimmed, as `tmux capture-pane -p` prints a pane; ANSI adds colours
// and attributes; Snapshot is the API's object {"cols", "rows",
// "cursor": {"x", "y"}, "lines", "title", "changed_at"}. ChangedAt is when
// the content last changed: characters, erasures, scrolling, the
// alternate screen, the title, the size. The cursor moving, blinking or
// hiding is no change, nor is repainting what was there: a screen that
// changes is an agent in a turn. BracketedPaste and AppCursor are the
// modes input depends on. The screen answers the queries a program makes
// of its terminal (cursor position, device attributes, mode reports), as
// tmux does, so programs that wait for an answer start without a client.
//
// Redraw is the byte sequence that paints the screen on a terminal
// whatever that showed before: both screens, the scroll region, the
// modes a program's input depends on, the title, the saved cursor, the
// cursor and the pen.
//
// # Input
//
// Input is text, then tmux's key names (KeyBytes: Enter, Escape, Tab,
// BTab, BSpace, Space, arrows, Home, End, PageUp, PageDown, IC, DC,
// F1…F12, C-a…C-z, M-x, S-/C-/M- on the named keys, KP0…KP9), then
// Enter. Text goes in as a bracketed paste when the program turned that
// mode on, unless Literal (keystrokes, as send-keys -l); arrows follow its
// cursor key mode, byte for byte as tmux's send-keys, and an item that is
// no key name is typed as it is written, as send-keys types it. Text and
// keys over MaxInput (64 KiB) are ErrInputTooLarge; Write gives up with
// ErrInputStalled after a few seconds of a program that reads no input.
//
// # Clients
//
// A Client is an attached viewer (tend attach, a browser). Attach queues
// the screen's redraw, then the client gets every byte the program writes
// through Next, from its own goroutine. A client that falls more than its
// bound behind (Options.ClientBuffer, 1 MiB) is sent a fresh redraw
// instead of what it missed: it never slows the reader or the others.
// Notice sends the clients a line of tend's own ("[tend] planner:0
// exited: …"), not part of the screen; MoveClients hands them to the next
// run's Terminal, which sends its own screen; CloseClients ends them.
//
// # TextLines
//
// TextLines turns the raw bytes into log lines: control sequences removed
// (also when cut between writes), a carriage return overwriting its line
// as on a terminal (a progress bar leaves its last state), one line per
// newline.
//
// # Locking
//
// A Terminal's mu guards its screen and its set of clients; the epoll
// handler takes it for each read. A Client's mu guards its queue and is
// taken after a Terminal's, never before. Output and the replies to the
// program's queries are handled outside mu.
package terminal

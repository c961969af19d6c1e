// Package terminal is a run's pseudo-terminal seen from tend's end: the
// master side of the pty, read on the shared epoll loops into a screen of
// package vt (the pure emulator), input, and the clients attached to it.
// It knows nothing of supervisors: a caller makes a Terminal per run,
// gives the slave to the child, and asks the Terminal what it shows; a
// Session is an instance's terminal across its runs.
//
// # A run's terminal
//
// Open makes a pty of Options.Size (a vt.Size, 10x2 to 1000x500) and
// returns the Terminal and the slave. The caller starts the child with
// the slave as its stdin, stdout and stderr and SysProcAttr() (a new
// session, the slave its controlling terminal), then closes its own copy
// of the slave. Adopt does the same
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
// # The screen and input
//
// The emulator is package vt (internal/terminal/vt): a Terminal feeds
// every read to its vt.Screen under its lock, writes the screen's
// answers to the program's queries back to it, and serves the screen's
// Text, ANSI and Snapshot. Send types a vt.Input, encoded in the modes
// the program set; Write types bytes as they are. Write gives up with
// ErrInputStalled after a few seconds of a program that reads no input.
// Neither bounds the input: the 64 KiB cap is checked where input enters
// tend (docs/terminal.md).
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
// # An instance's terminal across runs
//
// A Session (session.go) holds an instance's current and last Terminal,
// the size (the latest sizing client's, else tty_size: sessionsize.go),
// the clients attached from run to run until the instance comes to rest
// (sessionclient.go), the follower that feeds the current Terminal from
// the log (sessionfollow.go), and the last screen of a run that ended
// before this daemon (sessionended.go). The instance (package supervisor)
// calls it when a run starts (Open, Started, Adopt, Lost), ends (End,
// Notice) and when it comes to rest (Rest); what it needs of the
// instance comes in a SessionConfig: its id, its log's reading functions,
// and a function to tell it the number of clients changed.
//
// # Locking
//
// A Terminal's mu guards its screen and its set of clients; the epoll
// handler takes it for each read. A Client's mu guards its queue and is
// taken after a Terminal's, never before. Output and the replies to the
// program's queries are handled outside mu. A Session's mu is taken
// before a Terminal's (it resizes the current one and moves the clients
// under it), never after, and never across the disk or a callback.
package terminal

// Command notifier is the program bench/scale supervises to time the path
// from an sd_notify STATUS= message to the daemon's status API. Every -every
// it sends
//
//	STATUS=t=UNIXNANO n=N
//
// to $NOTIFY_SOCKET, where UNIXNANO is the wall-clock time taken just before
// the send and N counts up from 1. The benchmark runs on the same machine and
// reads the time back from status_text, so the shared CLOCK_REALTIME is the
// clock of both ends.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

func main() {
	every := flag.Duration("every", 50*time.Millisecond, "time between two STATUS= messages")
	flag.Parse()
	if *every <= 0 {
		fmt.Fprintln(os.Stderr, "notifier: -every must be positive")
		os.Exit(2)
	}
	// Without a socket every send would be a silent no-op.
	if os.Getenv("NOTIFY_SOCKET") == "" {
		fmt.Fprintln(os.Stderr, "notifier: NOTIFY_SOCKET is not set")
		os.Exit(1)
	}
	tick := time.NewTicker(*every)
	defer tick.Stop()
	for n := 1; ; n++ {
		<-tick.C
		msg := fmt.Sprintf("STATUS=t=%d n=%d", time.Now().UnixNano(), n)
		if _, err := daemon.SdNotify(false, msg); err != nil {
			fmt.Fprintln(os.Stderr, "notifier:", err)
			os.Exit(1)
		}
	}
}

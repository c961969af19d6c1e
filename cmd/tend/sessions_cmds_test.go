package main

import (
	"errors"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/tend-sh/tend/internal/client"
)

// goneCmd runs `gone NAME`: waits (a minute at most) until the daemon no
// longer has program NAME, as an --rm program once it has ended.
func goneCmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: gone NAME")
	}
	c := scriptClient(ts)
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := c.Statuses(args[0])
		var apiErr *client.APIError
		if errors.As(err, &apiErr) && apiErr.Status == 404 {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("%s is still there after a minute (%v)", args[0], err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

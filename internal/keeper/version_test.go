package keeper

import (
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/tend-sh/tend/internal/testutil"
)

// A keeper of version 1 only held masters: it ignores hello and answers
// list. Dial takes its masters and says it is old; Retire tells it to let
// them go and to quit.
func TestDialMeetsAKeeperOfVersion1(t *testing.T) {
	sd := testutil.StateDir(t)
	sock := At(sd)
	lfd, err := Listen(sock) // this process plays the old keeper
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(lfd)
	m, s, err := os.Pipe() // a descriptor to hand back, as a master
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	defer s.Close()
	r := Run{ID: "agent:0", PID: os.Getpid(), Ticks: 7}
	heard := make(chan []string, 1)
	go func() {
		conn, _, err := unix.Accept4(lfd, unix.SOCK_CLOEXEC)
		if err != nil {
			heard <- nil
			return
		}
		defer unix.Close(conn)
		var words []string
		for {
			buf := make([]byte, maxMessage)
			n, err := unix.Read(conn, buf)
			if err != nil || n == 0 {
				heard <- words
				return
			}
			words = append(words, string(buf[:n]))
			switch string(buf[:n]) { // as version 1 did: hello is no message of its
			case "list":
				send(conn, Held{r}, int(m.Fd()), 0)
				send(conn, End{}, -1, 0)
			case "quit":
				heard <- words
				return
			}
		}
	}()
	c, held, err := Dial(sock, Notices{}, os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !c.Old() || c.Version() != 1 || len(held) != 1 || held[0].Run != r {
		t.Fatalf("old %v version %d, held %+v", c.Old(), c.Version(), held)
	}
	unix.Close(held[0].FD)
	c.Retire([]Run{r})
	got := <-heard
	want := []string{"hello 2", "list", "drop agent:0 " + strconv.Itoa(r.PID) + " 7", "quit"}
	if len(got) != len(want) {
		t.Fatalf("the old keeper heard %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("the old keeper heard %q, want %q", got, want)
		}
	}
}

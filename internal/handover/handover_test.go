package handover

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The child side of TestHandoverAcrossExec: this test binary, started with
// the handover in its environment, takes it and reports what it got.
func TestMain(m *testing.M) {
	if os.Getenv("TEND_HANDOVER_TEST_CHILD") != "" {
		child()
	}
	os.Exit(m.Run())
}

func child() {
	in, err := Take()
	if err != nil || in == nil {
		println("take:", err)
		os.Exit(1)
	}
	if _, ok := os.LookupEnv(EnvVar); ok {
		println("the variable is still set")
		os.Exit(1)
	}
	var st struct{ Word string }
	if err := in.State(&st); err != nil {
		println("state:", err.Error())
		os.Exit(1)
	}
	fd, ok := in.FD("pipe")
	if !ok {
		println("no pipe")
		os.Exit(1)
	}
	if flags, _ := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); flags&unix.FD_CLOEXEC == 0 {
		println("the pipe is not close-on-exec once taken")
		os.Exit(1)
	}
	unix.Write(fd, []byte(st.Word))
	unix.Close(fd)
	if rest := in.CloseRest(); len(rest) != 1 || rest[0] != "other" {
		println("rest:", strings.Join(rest, ","))
		os.Exit(1)
	}
	os.Exit(0)
}

// A descriptor handed over reaches the next program at its number, with
// the state; one not handed over (close-on-exec) does not; Undo makes
// them close-on-exec again.
func TestHandoverAcrossExec(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	kept, err := unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(kept)
	other, _ := unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	out := NewOut()
	defer out.Close()
	out.Add("pipe", p[1])
	out.Add("other", other)
	if err := out.Add("pipe", other); err == nil {
		t.Error("a name given twice")
	}
	env, err := out.Prepare(struct{ Word string }{"hello"})
	if err != nil {
		t.Fatal(err)
	}
	// os/exec passes on every descriptor that is not close-on-exec, as an
	// exec of the process itself does.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env, "TEND_HANDOVER_TEST_CHILD=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out.Undo()
	out.Close() // p[1] among them: the child's copy is its own
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v %s", err, stderr.String())
	}
	b := make([]byte, 16)
	n, _ := unix.Read(p[0], b)
	if string(b[:n]) != "hello" {
		t.Errorf("through the pipe handed over: %q", b[:n])
	}
	if flags, _ := unix.FcntlInt(uintptr(kept), unix.F_GETFD, 0); flags&unix.FD_CLOEXEC == 0 {
		t.Error("a descriptor not handed over lost close-on-exec")
	}
}

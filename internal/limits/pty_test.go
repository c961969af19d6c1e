package limits

import (
	"strings"
	"testing"
)

func TestPTYAdvice(t *testing.T) {
	for _, c := range []struct {
		p    PTYs
		ttys int
		want string // a part of the advice; "" = none
	}{
		{PTYs{Max: 4096}, 0, ""},
		{PTYs{Max: 4096}, 100, ""},
		{PTYs{Max: 4096, InUse: 3000}, 100, ""}, // busy, but the fleet is small: the doctor's line says it
		{PTYs{Max: 4096}, 3700, "nearly fill the kernel's 4096"},
		{PTYs{Max: 4096}, 10000, "the fleet has 10000 tty instances but the kernel allows 4096"},
		{PTYs{Max: 0}, 10000, ""}, // not known
	} {
		got := c.p.Advice(c.ttys)
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%+v.Advice(%d) = %q, want %q", c.p, c.ttys, got, c.want)
		}
		if got != "" && !strings.Contains(got, "sysctl -w kernel.pty.max=") {
			t.Errorf("%+v.Advice(%d) = %q: no fix named", c.p, c.ttys, got)
		}
	}
	if got := (PTYs{Max: 4096, InUse: 3700}).InUseAdvice(); !strings.Contains(got, "3700 of the kernel's 4096") {
		t.Errorf("InUseAdvice = %q", got)
	}
	if got := (PTYs{Max: 4096, InUse: 100}).InUseAdvice(); got != "" {
		t.Errorf("InUseAdvice = %q, want none", got)
	}
}

func TestReadPTYs(t *testing.T) {
	p, err := ReadPTYs()
	if err != nil {
		t.Skipf("no /proc/sys/kernel/pty here: %v", err)
	}
	if p.Max <= 0 || p.InUse < 0 || p.InUse > p.Max {
		t.Fatalf("ReadPTYs = %+v", p)
	}
}

package cgroup

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

const sampleMountinfo = `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/vda rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime shared:13 - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,nsdelegate
50 22 0:38 /system.slice/tend.service /mnt/my\040cg rw master:4 propagate_from:2 - cgroup2 none rw
`

func TestParseMountinfo(t *testing.T) {
	ms, err := parseMountinfo([]byte(sampleMountinfo))
	if err != nil {
		t.Fatal(err)
	}
	want := []mount{
		{"/", "/", "ext4", "/dev/vda", []string{"rw"}},
		{"/", "/sys/fs/cgroup", "tmpfs", "tmpfs", []string{"rw", "mode=755"}},
		{"/", "/sys/fs/cgroup/memory", "cgroup", "cgroup", []string{"rw", "memory"}},
		{"/", "/sys/fs/cgroup/systemd", "cgroup", "cgroup", []string{"rw", "xattr", "name=systemd"}},
		{"/", "/sys/fs/cgroup/unified", "cgroup2", "cgroup2", []string{"rw", "nsdelegate"}},
		{"/system.slice/tend.service", "/mnt/my cg", "cgroup2", "none", []string{"rw"}},
	}
	if !reflect.DeepEqual(ms, want) {
		t.Errorf("parseMountinfo =\n%+v\nwant\n%+v", ms, want)
	}
	for _, c := range []struct{ path, point string }{
		{"/sys/fs/cgroup/unified/tend", "/sys/fs/cgroup/unified"},
		{"/sys/fs/cgroup/unified", "/sys/fs/cgroup/unified"},
		{"/sys/fs/cgroup/unifiedx", "/sys/fs/cgroup"},
		{"/sys/fs/cgroup/memory/a/b", "/sys/fs/cgroup/memory"},
		{"/home", "/"},
		{"/mnt/my cg/x", "/mnt/my cg"},
	} {
		if m, ok := mountOf(ms, c.path); !ok || m.Point != c.point {
			t.Errorf("mountOf(%s) = %s, %v; want %s", c.path, m.Point, ok, c.point)
		}
	}
	if cs := v1Controllers(ms[3]); !slices.Equal(cs, []string{"name=systemd"}) {
		t.Errorf("v1Controllers = %v", cs)
	}
	for _, bad := range []string{
		"22 1 8:1 / / rw,relatime shared:1 ext4 /dev/vda rw\n", // no separator
		"22 1 8:1 / / rw - ext4\n",                             // no source
		"22 1 8:1\n",
	} {
		if _, err := parseMountinfo([]byte(bad)); err == nil {
			t.Errorf("parseMountinfo(%q): no error", bad)
		}
	}
}

func TestUnescapeOctal(t *testing.T) {
	for in, want := range map[string]string{
		`/a\040b`:   "/a b",
		`/tab\011x`: "/tab\tx",
		`/back\134`: `/back\`,
		`/bad\09`:   `/bad\09`,
		`/end\04`:   `/end\04`,
		`/big\777`:  `/big\777`,
		`\`:         `\`,
	} {
		if got := unescapeOctal(in); got != want {
			t.Errorf("unescapeOctal(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseSelfCgroup(t *testing.T) {
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{"0::/\n", "/", true},
		{"12:memory:/x\n1:name=systemd:/user.slice\n0::/user.slice/user-0.slice/session-1.scope\n", "/user.slice/user-0.slice/session-1.scope", true},
		{"4:memory:/process_api/5d\n", "", false},
		{"", "", false},
		{"0::/a b\n", "/a b", true},
	} {
		got, ok := parseSelfCgroup([]byte(c.in))
		if got != c.want || ok != c.ok {
			t.Errorf("parseSelfCgroup(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestKeyed(t *testing.T) {
	const events = "low 0\nhigh 0\nmax 0\noom 3\noom_kill 2\noom_group_kill 0\n"
	for _, c := range []struct {
		data, key string
		want      uint64
		ok, err   bool
	}{
		{"populated 1\nfrozen 0\n", "populated", 1, true, false},
		{"populated 0\nfrozen 1", "populated", 0, true, false},
		{"frozen 0\n", "populated", 0, false, false},
		{events, "oom_kill", 2, true, false},
		{events, "oom", 3, true, false},
		{events, "oom_group_kill", 0, true, false},
		{"usage_usec 18446744073709551615\nuser_usec 5\n", "usage_usec", 1<<64 - 1, true, false},
		{"usage_usec 18446744073709551616\n", "usage_usec", 0, false, true},
		{"populated x\n", "populated", 0, false, true},
		{"populated\n", "populated", 0, false, false},
		{"", "populated", 0, false, false},
	} {
		v, ok, err := keyed([]byte(c.data), c.key)
		if v != c.want || ok != c.ok || (err != nil) != c.err {
			t.Errorf("keyed(%q, %s) = %d, %v, %v", c.data, c.key, v, ok, err)
		}
	}
}

func TestParseBytes(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		err  bool
	}{
		{"max\n", 0, false},
		{"0\n", 0, false},
		{"1073741824\n", 1 << 30, false},
		{"9223372036854775807\n", 1<<63 - 1, false},
		{"18446744073709551615\n", 1<<63 - 1, false}, // clamped
		{"-1\n", 0, true},
		{"", 0, true},
		{"1 2\n", 0, true},
	} {
		got, err := parseBytes([]byte(c.in))
		if got != c.want || (err != nil) != c.err {
			t.Errorf("parseBytes(%q) = %d, %v", c.in, got, err)
		}
	}
}

func TestParseProcs(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
		err  bool
	}{
		{"", nil, false},
		{"1\n", []int{1}, false},
		{"42\n4242\n424242\n", []int{42, 4242, 424242}, false},
		{"42\n\n", []int{42}, false},
		{"0\n", nil, true},
		{"x\n", nil, true},
		{"99999999\n", nil, true},
	} {
		got, err := parseProcs([]byte(c.in))
		if !slices.Equal(got, c.want) || (err != nil) != c.err {
			t.Errorf("parseProcs(%q) = %v, %v", c.in, got, err)
		}
	}
}

func TestNames(t *testing.T) {
	for name, want := range map[string]bool{
		"web-0": true, "a-b-12": true, "x-": false, "-1": false, "daemon": false,
		"web": false, "web-1a": false, "../web-0": false, "cgroup.procs-1": false, ".": false,
	} {
		if got := instanceName(name); got != want {
			t.Errorf("instanceName(%q) = %v", name, got)
		}
	}
}

func FuzzParseMountinfo(f *testing.F) {
	f.Add(sampleMountinfo)
	f.Add("1 0 0:1 / / rw - ext4 /dev/root rw\n")
	f.Add("1 0 0:1 /\\040 /\\ rw a:b c:d - cgroup2 none\n")
	f.Fuzz(func(t *testing.T, s string) {
		ms, err := parseMountinfo([]byte(s))
		if err != nil {
			return
		}
		for _, m := range ms {
			if m.FSType == "" || strings.Contains(m.FSType, " ") {
				t.Fatalf("mount %+v from %q", m, s)
			}
			_, _ = mountOf(ms, "/sys/fs/cgroup/x")
		}
	})
}

func FuzzParseSelfCgroup(f *testing.F) {
	f.Add("0::/\n")
	f.Add("12:memory:/x\n0::/user.slice\n")
	f.Add("0::")
	f.Fuzz(func(t *testing.T, s string) {
		p, ok := parseSelfCgroup([]byte(s))
		if ok && (strings.Contains(p, "\n") || !strings.Contains(s, "0::"+p)) {
			t.Fatalf("parseSelfCgroup(%q) = %q", s, p)
		}
	})
}

func FuzzKeyed(f *testing.F) {
	f.Add("populated 1\nfrozen 0\n", "populated")
	f.Add("low 0\nhigh 0\nmax 0\noom 3\noom_kill 2\n", "oom_kill")
	f.Add("usage_usec 18446744073709551615\n", "usage_usec")
	f.Fuzz(func(t *testing.T, s, key string) {
		v, ok, err := keyed([]byte(s), key)
		if err != nil && ok {
			t.Fatalf("keyed(%q, %q) = %d, ok and %v", s, key, v, err)
		}
		if !ok && v != 0 {
			t.Fatalf("keyed(%q, %q) = %d, not found", s, key, v)
		}
		_, _ = parseBytes([]byte(s))
	})
}

func FuzzParseProcs(f *testing.F) {
	f.Add("1\n2\n3\n")
	f.Add("")
	f.Add("4194304\n")
	f.Fuzz(func(t *testing.T, s string) {
		pids, err := parseProcs([]byte(s))
		if err != nil {
			return
		}
		for _, p := range pids {
			if p <= 0 || p > 1<<22 {
				t.Fatalf("parseProcs(%q) gave pid %d", s, p)
			}
		}
	})
}

func TestKernelAtLeast(t *testing.T) {
	for rel, want := range map[string]bool{
		"6.18.44-fc-v1098": true, "5.7.0": true, "5.6.19-generic": false, "4.19.0": false,
		"5.10": true, "10.0.1": true, "weird": true,
	} {
		if got := kernelAtLeast(rel, 5, 7); got != want {
			t.Errorf("kernelAtLeast(%q, 5, 7) = %v", rel, got)
		}
	}
}

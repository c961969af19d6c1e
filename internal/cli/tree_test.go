package cli

import (
	"bytes"
	"slices"
	"testing"
)

// TestVerbTable: verbs names every command of the tree by its own name.
func TestVerbTable(t *testing.T) {
	e := &env{ctx: t.Context()}
	var names []string
	for _, v := range e.verbs() {
		if got := v.make().Name(); got != v.name {
			t.Errorf("the verb listed as %q builds %q", v.name, got)
		}
		names = append(names, v.name)
	}
	for _, c := range e.rootCmd("").Commands() {
		if !slices.Contains(names, c.Name()) {
			t.Errorf("%s is in the tree but not in verbs", c.Name())
		}
	}
}

func TestSoleVerb(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "web:0", "--json"}, "status"},
		{[]string{"--socket", "/s", "status", "web:0"}, "status"},
		{[]string{"--socket=/s", "-c", "tend.toml", "ps"}, "ps"},
		{[]string{"-ctend.toml", "--config", "x.toml", "logs", "-f"}, "logs"},
		{[]string{"--config=x.toml", "nosuch"}, "nosuch"},
		{[]string{"-h"}, ""},
		{[]string{"--help", "ps"}, ""},
		{[]string{"help", "ps"}, ""},
		{[]string{"__complete", "st"}, ""},
		{[]string{"completion", "bash"}, ""},
		{[]string{"-c", "x.toml", "man", "/tmp/m"}, ""},
		{[]string{"--socket"}, ""},
		{nil, ""},
	} {
		if got := soleVerb(c.args); got != c.want {
			t.Errorf("soleVerb(%q) = %q, want %q", c.args, got, c.want)
		}
	}
}

// TestSoleTreeReadsTheSame: a verb's help and its refusal of a bad flag
// read the same from the tree of that verb alone as from the whole tree.
func TestSoleTreeReadsTheSame(t *testing.T) {
	for _, v := range (&env{}).verbs() {
		for _, args := range [][]string{{v.name, "--help"}, {v.name, "--no-such-flag"}} {
			var outs [2]string
			for i, only := range []string{v.name, ""} {
				var out, errb bytes.Buffer
				e := &env{ctx: t.Context(), stdout: &out, stderr: &errb}
				root := e.rootCmd(only)
				root.SetArgs(args)
				_, err := root.ExecuteC()
				outs[i] = out.String() + errb.String() + errString(err)
			}
			if outs[0] != outs[1] {
				t.Errorf("tend %q from %s's tree alone:\n%s\nfrom the whole tree:\n%s", args, v.name, outs[0], outs[1])
			}
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

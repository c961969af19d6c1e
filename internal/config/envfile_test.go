package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseEnvFile(t *testing.T) {
	in := strings.Join([]string{
		"# comment",
		"",
		"PLAIN=value",
		"SPACED = padded value  ",
		"export EXPORTED=1",
		`DOUBLE="a \"quoted\"\n line # not a comment"`,
		`SINGLE='literal \n # kept'`,
		"INLINE=value # a comment",
		"EMPTY=",
		"HASH=a#b",
		"CRLF=x\r",
	}, "\n")
	got, err := ParseEnvFile(".env", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"PLAIN": "value", "SPACED": "padded value", "EXPORTED": "1",
		"DOUBLE": "a \"quoted\"\n line # not a comment", "SINGLE": `literal \n # kept`,
		"INLINE": "value", "EMPTY": "", "HASH": "a#b", "CRLF": "x",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestParseEnvFileErrors(t *testing.T) {
	for _, tc := range []struct{ in, msg string }{
		{"JUST_A_NAME", `.env:1: "JUST_A_NAME" is not KEY=VALUE`},
		{"\n1BAD=x", `.env:2: invalid variable name "1BAD"`},
		{`Q="open`, ".env:1: Q: the double quote is not closed"},
		{`Q='open`, ".env:1: Q: the single quote is not closed"},
		{"A B=c", `invalid variable name "A B"`},
	} {
		_, err := ParseEnvFile(".env", []byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%q: error %v, want %q", tc.in, err, tc.msg)
		}
	}
}

// FuzzParseEnvFile: any input gives variables or an error naming the file,
// never a panic; names are valid and values hold no NUL.
func FuzzParseEnvFile(f *testing.F) {
	for _, s := range []string{"A=1\n", "export B='x'\n# c\n", `C="a\"b\n"`, "D=e # f\n", "=x", `E="`, "F='\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		vars, err := ParseEnvFile("f.env", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.env:") {
				t.Fatalf("error without the file: %v", err)
			}
			return
		}
		for k, v := range vars {
			if !validEnvName(k) || strings.ContainsRune(v, 0) {
				t.Fatalf("bad variable %q=%q", k, v)
			}
		}
	})
}

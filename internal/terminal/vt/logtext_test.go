package vt

import (
	"strings"
	"testing"
)

func textLines(chunks ...string) []string {
	var out []string
	l := NewTextLines(0)
	emit := func(line []byte) { out = append(out, string(line)) }
	for _, c := range chunks {
		l.Write([]byte(c), emit)
	}
	l.Flush(emit)
	return out
}

func TestTextLines(t *testing.T) {
	for _, tc := range []struct {
		name   string
		chunks []string
		want   []string
	}{
		{"plain", []string{"a\r\nb\nc"}, []string{"a", "b", "c"}},
		{"colours", []string{"\x1b[1;31mred\x1b[0m and \x1b[38;2;1;2;3mrgb\x1b[m\r\n"}, []string{"red and rgb"}},
		{"progress bar", []string{"10% [#   ]\r20% [##  ]\r100% [####]\r\n"}, []string{"100% [####]"}},
		{"shorter overwrite", []string{"downloading...\rdone\x1b[K\r\n"}, []string{"done"}},
		{"overwrite keeps the rest", []string{"abcdef\rXY\n"}, []string{"XYcdef"}},
		{"erase line", []string{"junk\x1b[2Kclean\n"}, []string{"clean"}},
		{"backspace", []string{"abc\b\bX\n"}, []string{"aXc"}},
		{"osc and dcs", []string{"\x1b]0;title\x07a\x1bPq#0\x1b\\b\x1b]8;;http://x\x1b\\c\n"}, []string{"abc"}},
		{"split sequences", []string{"\x1b", "[3", "1mre", "d\x1b]0;ti", "tle\x07!\r", "\n"}, []string{"red!"}},
		{"split utf-8", []string{"\xe4\xb8", "\xad\xe6\x96\x87\n"}, []string{"中文"}},
		{"tabs", []string{"a\tb\t\tc\n"}, []string{"a       b               c"}},
		{"moves along the line", []string{"a\x1b[10Gb\x1b[20Gc\n"}, []string{"a        b         c"}},
		{"hpa and hpr", []string{"a\x1b[5`b\x1b[2ac\n"}, []string{"a   b  c"}},
		{"cht and cbt", []string{"a\x1b[2Ib\x1b[2Zc\n"}, []string{"a       c       b"}},
		{"words placed by moves", []string{"\u276f hello\x1b[9Gclaude\x1b[16Gfrom\x1b[21Gattach\r\n"}, []string{"\u276f hello claude from attach"}},
		{"wide characters take two columns", []string{"\u4e2d\u6587\x1b[6Gx\n"}, []string{"\u4e2d\u6587 x"}},
		{"a pasted line redrawn", []string{"\x1b[?2004htend$ \x1b[7mecho hi\x1b[27m\r\x1b[C\x1b[C\x1b[C\x1b[C\x1b[C\x1b[Cecho hi\r\n\x1b[?2004l\rhi\r\n"}, []string{"tend$ echo hi", "hi"}},
		{"cursor forward past the end", []string{"ab\x1b[3Cc\x1b[2D\x1b[Dx\n"}, []string{"ab x c"}},
		{"cursor keys and modes", []string{"\x1b[?1049h\x1b[?25l\x1b[Hscreen\x1b[5;1Hmore\n"}, []string{"screenmore"}},
		{"unfinished line", []string{"partial"}, []string{"partial"}},
		{"empty lines", []string{"\n\n"}, []string{"", ""}},
		{"c1 controls", []string{"a\u009b2Jb\u009d0;t\u0007c\u0085d\x9b31me\n"}, []string{"a2Jb0;tcde"}}, // as the screen drops them
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := textLines(tc.chunks...)
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestTextLinesCutsLongLines(t *testing.T) {
	var out []string
	l := NewTextLines(10)
	l.Write([]byte(strings.Repeat("x", 25)+"\n"), func(line []byte) { out = append(out, string(line)) })
	if strings.Join(out, "|") != "xxxxxxxxxx|xxxxxxxxxx|xxxxx" {
		t.Fatalf("got %q", out)
	}
}

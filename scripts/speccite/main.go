// Command speccite keeps the tree's comments pointing at the project's own
// reference pages (docs/) rather than at the numbered sections of the
// contract tend was first written against, a document the repository does
// not ship.
//
//	go run ./scripts/speccite            list every citation left; exit 1 if any
//	go run ./scripts/speccite -rewrite   rewrite them in place, then list what is left
//	go run ./scripts/speccite -map       print which page each section became
//
// scripts/spec-citations.sh runs it from the repository's root. The rewrite
// changes only the citation on each line ("(SPEC 12)" becomes
// "(docs/containment.md)"; in Markdown outside code blocks, a link), so it
// can be run again after a merge brings more of them.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// pages says which page of docs/ covers each numbered section.
var pages = map[int]string{
	1:  "README.md#words",
	2:  "config.md",
	3:  "restarts.md",
	4:  "reaping.md",
	5:  "events.md",
	6:  "status.md",
	7:  "notify.md",
	8:  "cli.md",
	9:  "api.md",
	10: "daemon.md",
	11: "events.md",
	12: "containment.md",
	13: "operations.md",
	14: "trust.md",
	15: "terminal.md",
	16: "sessions.md",
}

// anchor narrows a citation to a section of its page when the line it is
// on says what the citation is about. The first rule of a section whose
// pattern matches the line wins.
type anchor struct {
	section int
	when    *regexp.Regexp
	to      string
}

var anchors = []anchor{
	{3, regexp.MustCompile(`(?i)\brows?\b`), "#the-four-rows"},
	{3, regexp.MustCompile(`daemon_resources`), "#daemon-resources"},
	{3, regexp.MustCompile(`(?i)restart policies`), "#restart-policies"},
	{3, regexp.MustCompile(`(?i)likely[ _]cause`), "#likely-causes"},
	{3, regexp.MustCompile(`(?i)backoff`), "#the-crash-backoff"},
	{5, regexp.MustCompile(`(?i)kinds`), "#kinds"},
	{5, regexp.MustCompile(`(?i)at most one each`), "#status_changed-is-coalesced"},
	{6, regexp.MustCompile(`(?i)turn`), "#agents-and-their-turns"},
	{6, regexp.MustCompile(`(?i)lifecycle|fine state`), "#state-and-lifecycle"},
	{6, regexp.MustCompile(`(?i)unknown|names no instance`), "#asking"},
	{7, regexp.MustCompile(`(?i)assignment`), "#fields"},
	{8, regexp.MustCompile(`(?i)exit status`), "#exit-status"},
	{8, regexp.MustCompile(`(?i)socket|upwards`), "#finding-the-daemon"},
	{8, regexp.MustCompile(`(?i)wait|gone`), "#verbs-that-wait"},
	{9, regexp.MustCompile(`(?i)readyz`), "#readyz"},
	{9, regexp.MustCompile(`(?i)whole surface`), "#routes"},
	{9, regexp.MustCompile(`(?i)\bTCP\b|unix socket`), "#who-may-call"},
	{10, regexp.MustCompile(`(?i)recorded|runs\.json`), "#runsjson"},
	{10, regexp.MustCompile(`(?i)daemon restart|adopt|crash`), "#after-a-crash"},
	{11, regexp.MustCompile(`(?i)order`), "#order"},
	{12, regexp.MustCompile(`(?i)memory`), "#memory"},
	{12, regexp.MustCompile(`(?i)modes? of`), "#the-cgroup-setting"},
	{13, regexp.MustCompile(`(?i)turn`), "#turn-aware-stop"},
	{13, regexp.MustCompile(`env_file|stops the load`), "#env_file"},
	{14, regexp.MustCompile(`(?i)login`), "#dashboard-login"},
	{14, regexp.MustCompile(`(?i)\bTCP\b`), "#tcp"},
	{14, regexp.MustCompile(`(?i)state directory|symlink`), "#state-directory"},
	{14, regexp.MustCompile(`(?i)inherited close-on-exec`), "#descriptors"},
	{14, regexp.MustCompile(`(?i)big fleet|\blimits?\b`), "#limits"},
	{14, regexp.MustCompile(`(?i)thousand files|fork bomb`), "#floods"},
}

// phrase is a wording that a plain substitution would not read well in.
// Its replacement names sections with ref.
type phrase struct {
	re *regexp.Regexp
	to string
}

var phrases = []phrase{
	{regexp.MustCompile(`\bSPEC 3 row 4 as amended`), ref(3, "#the-crash-backoff") + ", row 4"},
	{regexp.MustCompile(`\bSPEC 12's fallback`), ref(12, "#without-cgroups")},
	{regexp.MustCompile(`\bSPEC 7, last paragraph`), ref(7, "#tend-under-systemd")},
	{regexp.MustCompile(`\bSPEC 3, daemon_resources`), ref(3, "#daemon-resources")},
	{regexp.MustCompile(`\bSPEC (\d+) (rows? )`), "SPEC $1, $2"},
	{regexp.MustCompile(`\bSPEC (defaults?)\b`), "documented $1 (" + ref(2, "") + ")"},
	{regexp.MustCompile(`\ba SPEC change\b`), "a change to that behaviour"},
	{regexp.MustCompile(`\bSPEC section (\d+)`), "SPEC $1"},
}

// A section to render is marked in the line as \x01N\x02ANCHOR\x03 while
// the line is being rewritten: no text of the tree has those bytes. ANCHOR
// "" is the one the line's context picks, "-" none.
var (
	citation = regexp.MustCompile(`\bSPEC\b`)
	numbered = regexp.MustCompile(`\bSPEC (\d+)((?:, \d+)*)('s)?`)
	marked   = regexp.MustCompile("\x01(\\d+)\x02([^\x03]*)\x03")
	results  = regexp.MustCompile(`^bench/[^/]+/results/`)
)

// ref marks section n (with anchor, "" to let the line's context choose).
func ref(n int, anchor string) string {
	return "\x01" + strconv.Itoa(n) + "\x02" + anchor + "\x03"
}

// skip are the files left as they are: this program and its wrapper, which
// must name what they look for, and the recorded output of past benchmark
// runs, which stays as it was written.
func skip(path string) bool {
	return strings.HasPrefix(path, "scripts/speccite/") || path == "scripts/spec-citations.sh" ||
		results.MatchString(path)
}

// rewriter rewrites the citations of one file.
type rewriter struct {
	path     string // from the repository's root
	markdown bool   // a .md file: citations outside code blocks become links
}

// line rewrites the citations of one line; inCode says the line is in a
// Markdown code block (or the file is not Markdown).
func (rw rewriter) line(s string, inCode bool) string {
	if !citation.MatchString(s) {
		return s
	}
	ctx := s
	for _, p := range phrases {
		s = p.re.ReplaceAllString(s, p.to)
	}
	s = numbered.ReplaceAllStringFunc(s, func(m string) string {
		sub := numbered.FindStringSubmatch(m)
		at := ""
		if sub[3] != "" {
			at = "-" // "page.md#anchor's" reads badly: the page alone
		}
		refs := []string{}
		for n := range strings.SplitSeq(sub[1]+sub[2], ",") {
			k, _ := strconv.Atoi(strings.TrimSpace(n))
			refs = append(refs, ref(k, at))
		}
		return strings.Join(refs, ", ") + sub[3]
	})
	return marked.ReplaceAllStringFunc(s, func(m string) string {
		sub := marked.FindStringSubmatch(m)
		n, _ := strconv.Atoi(sub[1])
		page, ok := pages[n]
		if !ok {
			return "SPEC " + sub[1] // a section this map does not know: left, and listed
		}
		at := sub[2]
		switch {
		case at == "-" || strings.Contains(page, "#"):
			at = ""
		case at == "":
			at = anchorFor(n, ctx)
		}
		return rw.render(page+at, inCode)
	})
}

// anchorFor is the section of page n the line ctx speaks of, or "".
func anchorFor(n int, ctx string) string {
	for _, a := range anchors {
		if a.section == n && a.when.MatchString(ctx) {
			return a.to
		}
	}
	return ""
}

// render names docs/page (with its anchor): the path from the root in
// code and plain text, a link relative to the file in Markdown.
func (rw rewriter) render(page string, inCode bool) string {
	file, at, _ := strings.Cut(page, "#")
	if at != "" {
		at = "#" + at
	}
	target := "docs/" + file
	if !rw.markdown || inCode {
		return target + at
	}
	dir := filepath.Dir(rw.path)
	href, err := filepath.Rel(dir, target)
	if err != nil {
		href = "/" + target
	}
	text := target
	if dir == "docs" {
		text = file
	}
	return "[" + text + "](" + filepath.ToSlash(href) + at + ")"
}

// rewrite returns data with its citations rewritten.
func (rw rewriter) rewrite(data []byte) []byte {
	var out bytes.Buffer
	inCode := !rw.markdown
	for _, l := range strings.SplitAfter(string(data), "\n") {
		body := strings.TrimRight(l, "\r\n")
		if rw.markdown && strings.HasPrefix(strings.TrimSpace(body), "```") {
			inCode = !inCode
			out.WriteString(l)
			continue
		}
		out.WriteString(rw.line(body, inCode))
		out.WriteString(l[len(body):])
	}
	return out.Bytes()
}

// files lists the tree's text files, from the repository's root: what git
// tracks or would track (ignored files aside).
func files() ([]string, error) {
	out, err := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files: %w", err)
	}
	var list []string
	seen := map[string]bool{}
	for p := range strings.SplitSeq(string(out), "\x00") {
		if p != "" && !seen[p] && !skip(p) {
			seen[p] = true
			list = append(list, p)
		}
	}
	return list, nil
}

// text reads path, or reports false for a binary file or one that is gone.
func text(path string) ([]byte, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, false
	}
	return b, !bytes.Contains(b[:min(len(b), 8000)], []byte{0})
}

func main() {
	rewrite := flag.Bool("rewrite", false, "rewrite the citations in place, then list what is left")
	showMap := flag.Bool("map", false, "print which page each section became")
	flag.Parse()
	if *showMap {
		for n := 1; n <= len(pages); n++ {
			fmt.Printf("SPEC %d\tdocs/%s\n", n, pages[n])
		}
		return
	}
	list, err := files()
	if err != nil {
		fmt.Fprintln(os.Stderr, "speccite:", err)
		os.Exit(2)
	}
	left := 0
	for _, path := range list {
		data, ok := text(path)
		if !ok || !citation.Match(data) {
			continue
		}
		if *rewrite {
			rw := rewriter{path: path, markdown: strings.HasSuffix(path, ".md")}
			if out := rw.rewrite(data); !bytes.Equal(out, data) {
				mode := fs.FileMode(0o644)
				if fi, err := os.Stat(path); err == nil {
					mode = fi.Mode().Perm()
				}
				if err := os.WriteFile(path, out, mode); err != nil {
					fmt.Fprintln(os.Stderr, "speccite:", err)
					os.Exit(2)
				}
				data = out
			}
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 1<<20)
		for n := 1; sc.Scan(); n++ {
			if citation.Match(sc.Bytes()) {
				fmt.Printf("%s:%d: %s\n", path, n, strings.TrimSpace(sc.Text()))
				left++
			}
		}
	}
	if left > 0 {
		fmt.Fprintf(os.Stderr, "speccite: %d citations of the outside contract left; cite docs/ instead (-rewrite does the mechanical part, -map shows where each section went)\n", left)
		os.Exit(1)
	}
}

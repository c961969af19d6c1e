package main

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestLine(t *testing.T) {
	code := rewriter{path: "internal/x/x.go"}
	for _, c := range []struct{ in, want string }{
		{"// Containment (SPEC 12): a run is every process", "// Containment (docs/containment.md): a run is every process"},
		{"// (SPEC section 2), a Procfile", "// (docs/config.md), a Procfile"},
		{"// Access over TCP (SPEC 9, 14). The unix", "// Access over TCP (docs/api.md#who-may-call, docs/trust.md#tcp). The unix"},
		{"// the API (SPEC 8, 9).", "// the API (docs/cli.md, docs/api.md)."},
		{"// in SPEC 8's order: --socket", "// in docs/cli.md's order: --socket"},
		{"// Without cgroups (SPEC 12's fallback), a stop", "// Without cgroups (docs/containment.md#without-cgroups), a stop"},
		{"// tend under systemd (SPEC 7, last paragraph): when", "// tend under systemd (docs/notify.md#tend-under-systemd): when"},
		{"// clean exit (row 3 of SPEC 3).", "// clean exit (row 3 of docs/restarts.md#the-four-rows)."},
		{"// Memory (SPEC 3, row 2)", "// Memory (docs/restarts.md#the-four-rows, row 2)"},
		{"// TestBackoffCountsFromTheRunsStart (SPEC 3 row 4): with", "// TestBackoffCountsFromTheRunsStart (docs/restarts.md#the-four-rows, row 4): with"},
		{"// budget (SPEC 3 rows 3, 4).", "// budget (docs/restarts.md#the-four-rows, rows 3, 4)."},
		{"// could not make the run (SPEC 3, daemon_resources): not", "// could not make the run (docs/restarts.md#daemon-resources): not"},
		{"internal/restart/   the pure restart policy (SPEC 3), table-tested", "internal/restart/   the pure restart policy (docs/restarts.md), table-tested"},
		{"// Restart policies (SPEC 2, 3).", "// Restart policies (docs/config.md, docs/restarts.md#restart-policies)."},
		{"// the events in SPEC 11's order: exited", "// the events in docs/events.md's order: exited"},
		{"	// SPEC 3 row 4 as amended: the backoff spaces starts.", "	// docs/restarts.md#the-crash-backoff, row 4: the backoff spaces starts."},
		{"// once the agent's turn ends (turn_grace, SPEC 13) unless now.", "// once the agent's turn ends (turn_grace, docs/operations.md#turn-aware-stop) unless now."},
		{"// zero value and nil are \"no [defaults]\": the SPEC defaults only.", "// zero value and nil are \"no [defaults]\": the documented defaults (docs/config.md) only."},
		{"// every key at its SPEC default; Name", "// every key at its documented default (docs/config.md); Name"},
		{"daemon-side ends. Two would take a SPEC change (one", "daemon-side ends. Two would take a change to that behaviour (one"},
		{"// NamePattern is the pattern every program name must match (SPEC 1):", "// NamePattern is the pattern every program name must match (docs/README.md#words):"},
		{"// unknown section (SPEC 99)", "// unknown section (SPEC 99)"},
		{"// no citation: the spec of a program", "// no citation: the spec of a program"},
	} {
		if got := code.line(c.in, true); got != c.want {
			t.Errorf("line(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
	}
}

func TestMarkdown(t *testing.T) {
	in := "**Containment** (SPEC 12). Text\n```\ninternal/restart/  the policy (SPEC 3), tested\n```\n## Memory (SPEC 3, row 2)\n"
	want := "**Containment** ([docs/containment.md](docs/containment.md)). Text\n```\ninternal/restart/  the policy (docs/restarts.md), tested\n```\n" +
		"## Memory ([docs/restarts.md](docs/restarts.md#the-four-rows), row 2)\n"
	if got := string(rewriter{path: "README.md", markdown: true}.rewrite([]byte(in))); got != want {
		t.Errorf("README.md:\n got %q\nwant %q", got, want)
	}
	if got := (rewriter{path: "bench/peers/README.md", markdown: true}).line("a crash (SPEC 3, row 4),", false); got != "a crash ([docs/restarts.md](../../docs/restarts.md#the-four-rows), row 4)," {
		t.Errorf("bench/peers/README.md: got %q", got)
	}
	if got := (rewriter{path: "docs/config.md", markdown: true}).line("each (SPEC 12): auto", false); got != "each ([containment.md](containment.md)): auto" {
		t.Errorf("docs/config.md: got %q", got)
	}
}

// TestAnchorsExist checks that every page and anchor the map names is a
// page of docs/ with such a heading.
func TestAnchorsExist(t *testing.T) {
	var targets []string
	for _, p := range pages {
		targets = append(targets, p)
	}
	for _, a := range anchors {
		targets = append(targets, pages[a.section]+a.to)
	}
	for _, p := range phrases {
		for _, m := range marked.FindAllStringSubmatch(p.to, -1) {
			targets = append(targets, pageOf(m[1])+m[2])
		}
	}
	for _, target := range targets {
		file, at, _ := strings.Cut(target, "#")
		b, err := os.ReadFile("../../docs/" + file)
		if err != nil {
			if file == "terminal.md" || file == "sessions.md" {
				continue // written on their own branches
			}
			t.Errorf("%s: %v", target, err)
			continue
		}
		if at != "" && !hasAnchor(string(b), at) {
			t.Errorf("docs/%s has no heading for #%s", file, at)
		}
	}
}

func pageOf(n string) string {
	k, _ := strconv.Atoi(n)
	return pages[k]
}

// hasAnchor reports whether a heading of doc gets the anchor a Markdown
// renderer such as GitHub's gives it: lower case, punctuation dropped
// (hyphens and underscores kept), spaces made hyphens.
func hasAnchor(doc, anchor string) bool {
	drop := regexp.MustCompile(`[^\p{L}\p{N} _-]`)
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(l, "#"))
		h = strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(h), ""), " ", "-")
		if h == anchor {
			return true
		}
	}
	return false
}

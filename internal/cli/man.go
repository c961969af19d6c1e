package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The man pages are generated from the cobra tree, one per verb, by the
// hidden verb `tend man DIR` (go generate ./cmd/tend writes docs/man).
// Plain roff written here: cobra/doc would bring in a Markdown converter
// for text that is not Markdown.

func (e *env) manCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "man DIR",
		Short:  "write tend's man pages (tend.1, tend-VERB.1) into DIR",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: e.run(func(cmd *cobra.Command, args []string) error {
			return writeManPages(cmd.Root(), args[0])
		}),
	}
}

// manPages renders every page of root's tree, by file name.
func manPages(root *cobra.Command) map[string]string {
	pages := map[string]string{"tend.1": rootPage(root)}
	for _, cmd := range manVerbs(root) {
		pages["tend-"+cmd.Name()+".1"] = verbPage(cmd)
	}
	return pages
}

// writeManPages writes the pages into dir, removing stale tend*.1 files.
func writeManPages(root *cobra.Command, dir string) error {
	pages := manPages(root)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, _ := filepath.Glob(filepath.Join(dir, "tend*.1"))
	for _, p := range old {
		if _, ok := pages[filepath.Base(p)]; !ok {
			if err := os.Remove(p); err != nil {
				return err
			}
		}
	}
	for name, text := range pages {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// manVerbs are the verbs with a page: not hidden, not cobra's own.
func manVerbs(root *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	for _, cmd := range root.Commands() {
		if cmd.IsAvailableCommand() && cmd.Name() != "help" {
			out = append(out, cmd)
		}
	}
	slices.SortFunc(out, func(a, b *cobra.Command) int { return strings.Compare(a.Name(), b.Name()) })
	return out
}

func rootPage(root *cobra.Command) string {
	var b strings.Builder
	th(&b, "tend")
	fmt.Fprintf(&b, ".SH NAME\ntend \\- %s\n", roff(strings.TrimPrefix(root.Short, "tend ")))
	b.WriteString(".SH SYNOPSIS\n.B tend\nVERB [ARGS] [\\-\\-socket PATH | \\-c FILE]\n")
	b.WriteString(".SH DESCRIPTION\n")
	paragraphs(&b, root.Long)
	b.WriteString(".SH VERBS\n")
	for _, cmd := range manVerbs(root) {
		fmt.Fprintf(&b, ".TP\n\\fBtend\\-%s\\fR(1)\n%s\n", roff(cmd.Name()), roff(cmd.Short))
	}
	b.WriteString(".SH OPTIONS\n")
	flags(&b, root.PersistentFlags())
	b.WriteString(`.SH ENVIRONMENT
.TP
.B TEND_SOCKET
the daemon's socket, when neither \-\-socket nor \-c is given
.TP
.B TEND_CONFIG
the config file whose state_dir has the socket (after TEND_SOCKET); also the file
.B tend up
runs
`)
	b.WriteString(exitStatusSection)
	b.WriteString(".SH SEE ALSO\n")
	var refs []string
	for _, cmd := range manVerbs(root) {
		refs = append(refs, "\\fBtend\\-"+roff(cmd.Name())+"\\fR(1)")
	}
	b.WriteString(strings.Join(refs, ",\n") + "\n")
	return b.String()
}

const exitStatusSection = `.SH EXIT STATUS
.TP
.B 0
done
.TP
.B 1
failed (an instance that did not get where it was asked, a timeout)
.TP
.B 2
bad usage or config
.TP
.B 3
no such program or instance
.TP
.B 4
no daemon reachable
`

func verbPage(cmd *cobra.Command) string {
	var b strings.Builder
	th(&b, "tend-"+cmd.Name())
	fmt.Fprintf(&b, ".SH NAME\ntend\\-%s \\- %s\n", roff(cmd.Name()), roff(cmd.Short))
	use := strings.TrimPrefix(cmd.Use, cmd.Name())
	fmt.Fprintf(&b, ".SH SYNOPSIS\n.B tend %s\n%s\n", roff(cmd.Name()), roff(strings.TrimSpace(use)))
	b.WriteString(".SH DESCRIPTION\n")
	long := cmd.Long
	if long == "" {
		long = strings.ToUpper(cmd.Short[:1]) + cmd.Short[1:] + "."
	}
	paragraphs(&b, long)
	if fs := cmd.NonInheritedFlags(); hasFlags(fs) {
		b.WriteString(".SH OPTIONS\n")
		flags(&b, fs)
	}
	b.WriteString(".SH GLOBAL OPTIONS\n")
	flags(&b, cmd.Root().PersistentFlags())
	b.WriteString(exitStatusSection)
	b.WriteString(".SH SEE ALSO\n\\fBtend\\fR(1)\n")
	return b.String()
}

// th is a page's title line. No date: the pages must come out the same
// from the same tree, for the test that they are up to date.
func th(b *strings.Builder, name string) {
	fmt.Fprintf(b, ".TH \"%s\" \"1\" \"\" \"tend\" \"tend manual\"\n", roff(strings.ToUpper(name)))
}

// paragraphs writes text: blank lines part paragraphs, which roff fills;
// a paragraph whose lines start with spaces (examples) is kept as is.
func paragraphs(b *strings.Builder, text string) {
	for i, p := range strings.Split(strings.TrimSpace(text), "\n\n") {
		if i > 0 {
			b.WriteString(".PP\n")
		}
		lines := strings.Split(p, "\n")
		if strings.HasPrefix(lines[0], " ") {
			b.WriteString(".nf\n.RS 2\n")
			for _, l := range lines {
				b.WriteString(roffLine(strings.TrimSpace(l)) + "\n")
			}
			b.WriteString(".RE\n.fi\n")
			continue
		}
		for _, l := range lines {
			b.WriteString(roffLine(strings.TrimSpace(l)) + "\n")
		}
	}
}

func hasFlags(fs *pflag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(f *pflag.Flag) {
		if !f.Hidden && f.Name != "help" {
			n++
		}
	})
	return n > 0
}

// flags writes one .TP entry per flag, in name order.
func flags(b *strings.Builder, fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Name == "help" {
			return
		}
		b.WriteString(".TP\n")
		if f.Shorthand != "" {
			fmt.Fprintf(b, "\\fB\\-%s\\fR, ", roff(f.Shorthand))
		}
		fmt.Fprintf(b, "\\fB\\-\\-%s\\fR", roff(f.Name))
		varname, usage := pflag.UnquoteUsage(f)
		if varname != "" && f.Value.Type() != "bool" {
			fmt.Fprintf(b, " \\fI%s\\fR", roff(varname))
		}
		b.WriteString("\n" + roffLine(usage))
		switch f.DefValue {
		case "", "false", "0", "0s", "[]":
		default:
			fmt.Fprintf(b, " (default %s)", roff(f.DefValue))
		}
		b.WriteString("\n")
	})
}

// roff escapes text for roff: backslashes and hyphens.
func roff(s string) string {
	return strings.NewReplacer(`\`, `\e`, "-", `\-`).Replace(s)
}

// roffLine escapes one line of text, which must not start as a request.
func roffLine(s string) string {
	s = roff(s)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

package readme_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// sections are the README's sections a new user follows, in order; each of
// their ```sh blocks runs. A section renamed or gone fails the test, so the
// list here follows the README rather than silently running less of it.
var sections = []string{"Try it", "Terminal agents", "Protocol agents", "Agents started on demand"}

// A special is a README command that cannot run unattended as the others
// do (each exits 0), or that the setup already did. Each row must match a
// README line: a row that matches none is stale, and fails the test.
type special struct {
	section string
	match   *regexp.Regexp // against the command without its trailing comment
	why     string
	// run replaces the plain run: it runs the command (or not) and judges it.
	run func(t *testing.T, s *shell, cmd string)
}

var specials = []special{
	{"Try it", regexp.MustCompile(`^CGO_ENABLED=0 go build -o tend \./cmd/tend-lean && CGO_ENABLED=0 go build -o tend-daemon \./cmd/tend$`),
		"the setup builds tend and tend-daemon where the snippets expect them (../tend from examples/)",
		func(*testing.T, *shell, string) {}},
	{"Try it", regexp.MustCompile(`^cd examples$`),
		"the shell starts in the copy's examples/ (the setup's copy of the demo)",
		func(*testing.T, *shell, string) {}},
	{"", regexp.MustCompile(`tend attach `),
		"no terminal on stdin: attach refuses with exit 2, as docs/cli.md says",
		func(t *testing.T, s *shell, cmd string) {
			if out, rc := s.run(t, cmd); rc != 2 {
				t.Errorf("%s: exit %d, want 2 (stdin is not a terminal)\n%s", cmd, rc, out)
			}
		}},
	{"", regexp.MustCompile(` -f( |$)`),
		"follows forever: run under timeout 5, which ends it (exit 124)",
		func(t *testing.T, s *shell, cmd string) {
			out, rc := s.run(t, "timeout 5 bash -c "+shellQuote(cmd))
			if rc != 124 && rc != 0 {
				t.Errorf("%s: exit %d, want 124 (ended by timeout 5)\n%s", cmd, rc, out)
			}
		}},
	{"", regexp.MustCompile(`tend dashboard$`),
		"prints the dashboard's address and a one-time login code",
		func(t *testing.T, s *shell, cmd string) {
			out, rc := s.run(t, cmd)
			if rc != 0 || !regexp.MustCompile(`https?://\S+`).MatchString(out) ||
				!regexp.MustCompile(`(?i)code: \S+`).MatchString(out) {
				t.Errorf("%s: exit %d, want 0 with a URL and a login code\n%s", cmd, rc, out)
			}
		}},
}

// A step is what the test does around one README command that needs the
// state an earlier one started (before) or that tells the user what they
// will see (after). The command itself is never rewritten.
type step struct {
	section string
	match   *regexp.Regexp
	before  func(t *testing.T, d *demo)
	after   func(t *testing.T, d *demo, out string)
}

// demoPrograms are the programs of examples/tend.toml.
var demoPrograms = []string{"batch", "coder", "crasher", "drainer", "helper", "hung", "planner", "stubborn", "worker"}

var steps = []step{
	{section: "Try it", match: regexp.MustCompile(`^\.\./tend ps$`),
		after: func(t *testing.T, _ *demo, out string) {
			for _, w := range append([]string{"ID", "STATE", "LIFECYCLE", "WHY"}, demoPrograms...) {
				if !strings.Contains(out, w) {
					t.Errorf("tend ps does not show %q:\n%s", w, out)
				}
			}
		}},
	{section: "Terminal agents", match: regexp.MustCompile(`^\.\./tend screen coder$`),
		// The text reaches the screen after the fake agent echoes it.
		before: func(t *testing.T, d *demo) {
			testutil.Eventually(t, "coder's screen to show what tend send typed", func() bool {
				out, _ := d.tend("screen", "coder")
				return strings.Contains(out, "fix the failing test")
			})
		},
		after: func(t *testing.T, _ *demo, out string) {
			if !strings.Contains(out, "fix the failing test") {
				t.Errorf("tend screen coder does not show the text sent:\n%s", out)
			}
		}},
	{section: "Protocol agents", match: regexp.MustCompile(`^\.\./tend prompt helper `),
		// helper is `go run`, which may still be building the agent.
		before: func(t *testing.T, d *demo) {
			d.waitHelper(t, "helper to be running and ready", func(s program.Status) bool {
				return s.State == "running" && s.Ready
			})
		}},
	{section: "Protocol agents", match: regexp.MustCompile(`^\.\./tend ps$`),
		// The permission request comes a second or two after the prompt.
		before: func(t *testing.T, d *demo) {
			d.waitHelper(t, "helper to wait on a permission request", func(s program.Status) bool {
				return s.Waiting != nil
			})
		},
		after: func(t *testing.T, _ *demo, out string) {
			if !regexp.MustCompile(`helper:0 .*waiting`).MatchString(out) {
				t.Errorf("tend ps does not show helper:0 waiting:\n%s", out)
			}
		}},
	{section: "Protocol agents", match: regexp.MustCompile(`^\.\./tend status helper$`),
		after: func(t *testing.T, _ *demo, out string) {
			if !strings.Contains(out, "allow") {
				t.Errorf("tend status helper does not show the request's options:\n%s", out)
			}
		}},
	{section: "Protocol agents", match: regexp.MustCompile(`^\.\./tend logs helper$`),
		after: func(t *testing.T, _ *demo, out string) {
			if !strings.Contains(out, "hello") {
				t.Errorf("tend logs helper does not show the conversation's prompt:\n%s", out)
			}
		}},
	{section: "Agents started on demand", match: regexp.MustCompile(`^for role in`),
		after: func(t *testing.T, d *demo, out string) {
			d.added = regexp.MustCompile(`"name":"(run-[0-9a-f]+)"`).FindAllString(out, -1)
			if len(d.added) != 2 {
				t.Errorf("the loop added %d programs, want 2:\n%s", len(d.added), out)
			}
			ps, _ := d.tend("ps", "-l", "session=s-42")
			for _, a := range d.added {
				if name := strings.TrimSuffix(strings.TrimPrefix(a, `"name":"`), `"`); !strings.Contains(ps, name) {
					t.Errorf("tend ps -l session=s-42 does not show %s:\n%s", name, ps)
				}
			}
		}},
	{section: "Agents started on demand", match: regexp.MustCompile(`-X DELETE`),
		after: func(t *testing.T, d *demo, _ string) {
			for _, a := range d.added {
				name := strings.TrimSuffix(strings.TrimPrefix(a, `"name":"`), `"`)
				testutil.Eventually(t, name+" to be gone from tend ps", func() bool {
					out, rc := d.tend("ps")
					return rc == 0 && !strings.Contains(out, name)
				})
			}
		}},
}

// TestREADME runs the README's snippets as a new user would: the demo
// fleet up (the README's first command), then each command of each block
// of the sections above, in one bash session in examples/.
func TestREADME(t *testing.T) {
	for _, tool := range []string{"go", "python3", "bash", "curl", "timeout"} {
		testutil.NeedTool(t, tool)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	readme := filepath.Join(root, "README.md")
	blocks := readmeBlocks(t, readme)
	// The setup starts the README's first command against the copy.
	if b, _ := os.ReadFile(readme); !strings.Contains(string(b), "\n"+upCommand+"\n") {
		t.Fatalf("README.md no longer says %q, which startDemo does: update it", upCommand)
	}

	d := startDemo(t, root)
	s := startShell(t, filepath.Join(d.dir, "examples"))

	used := make([]bool, len(specials))
	for _, sec := range sections {
		for _, block := range blocks[sec] {
			for _, cmd := range commands(t, block) {
				bare := stripComment(cmd)
				if bare == "" {
					continue
				}
				for _, st := range steps {
					if st.section == sec && st.match.MatchString(bare) && st.before != nil {
						st.before(t, d)
					}
				}
				out, ran := "", false
				for i, sp := range specials {
					if (sp.section == "" || sp.section == sec) && sp.match.MatchString(bare) {
						used[i] = true
						t.Logf("%s: %s (%s)", sec, bare, sp.why)
						sp.run(t, s, cmd)
						ran = true
						break
					}
				}
				if !ran {
					t.Logf("%s: %s", sec, bare)
					var rc int
					out, rc = s.run(t, cmd)
					if rc != 0 {
						t.Errorf("README %q, %q: exit %d\n%s", sec, bare, rc, out)
					}
				}
				for _, st := range steps {
					if st.section == sec && st.match.MatchString(bare) && st.after != nil {
						st.after(t, d, out)
					}
				}
			}
			// What a block left in the background (tend prompt ... &) ended well.
			if out := s.backgroundFailures(t); out != "" {
				t.Errorf("README %q: a command run with & failed: %s", sec, out)
			}
		}
	}
	for i, sp := range specials {
		if !used[i] {
			t.Errorf("no README line matches %q (%s): the README changed; update the table", sp.match, sp.why)
		}
	}
}

// readmeBlocks returns the ```sh blocks of each of sections, by the README's
// "## " headings; a section missing is a failure.
func readmeBlocks(t *testing.T, path string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[string][]string{}
	seen := map[string]bool{}
	section, inBlock, sh := "", false, false
	var cur strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case inBlock && strings.TrimSpace(line) == "```":
			if sh {
				blocks[section] = append(blocks[section], cur.String())
			}
			inBlock, sh = false, false
			cur.Reset()
		case inBlock:
			cur.WriteString(line + "\n")
		case strings.HasPrefix(line, "```"):
			inBlock, sh = true, strings.TrimSpace(strings.TrimPrefix(line, "```")) == "sh"
		case strings.HasPrefix(line, "## "):
			section = strings.TrimSpace(strings.TrimPrefix(line, "## "))
			seen[section] = true
		}
	}
	for _, sec := range sections {
		if !seen[sec] {
			t.Fatalf("README.md has no section %q: renamed? update sections in %s", sec, "test/readme")
		}
		if len(blocks[sec]) == 0 {
			t.Fatalf("README.md section %q has no ```sh block", sec)
		}
	}
	return blocks
}

// commands splits a block into the commands a shell reads: a line, or the
// lines of one construct (a for loop, a string across lines), joined until
// bash -n finds them complete.
func commands(t *testing.T, block string) []string {
	t.Helper()
	var out []string
	var acc []string
	for _, line := range strings.Split(strings.TrimRight(block, "\n"), "\n") {
		acc = append(acc, line)
		text := strings.Join(acc, "\n")
		if exec.Command("bash", "-n", "-c", text).Run() == nil {
			out = append(out, text)
			acc = nil
		}
	}
	if len(acc) > 0 {
		t.Fatalf("README block ends inside a shell construct:\n%s", strings.Join(acc, "\n"))
	}
	return out
}

// stripComment is cmd's first line without its trailing "# comment" and
// spaces, what the tables match (a comment after a quote is rare enough in
// the README to ignore here: bash itself reads the comments when it runs).
func stripComment(cmd string) string {
	first, _, _ := strings.Cut(cmd, "\n")
	if i := strings.Index(first, " #"); i >= 0 {
		first = first[:i]
	}
	if strings.HasPrefix(strings.TrimSpace(first), "#") {
		first = ""
	}
	return strings.TrimSpace(first)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// demo is the demo fleet of a copy of examples/ in dir, with dir/tend.
type demo struct {
	dir   string
	bin   string
	added []string // the on-demand loop's "name":"run-..." answers
}

// upCommand is the README's first command, the demo fleet in the
// foreground, from the repository root.
const upCommand = "go run ./cmd/tend up -c examples/tend.toml"

// startDemo sets up what the README assumes (the repository's examples/
// and a tend built from it, ../tend from examples/), starts the README's
// first command against the copy and waits until tend ps answers. The
// daemon is brought down at the end, and killed if it does not go.
func startDemo(t *testing.T, root string) *demo {
	t.Helper()
	dir := t.TempDir()
	d := &demo{dir: dir, bin: filepath.Join(dir, "tend")}
	if out, err := exec.Command("cp", "-r", filepath.Join(root, "examples"), dir).CombinedOutput(); err != nil {
		t.Fatalf("cp -r examples: %v\n%s", err, out)
	}
	// A developer's own demo state (examples/.tend, a live socket perhaps)
	// is not the copy's.
	if err := os.RemoveAll(filepath.Join(dir, "examples", ".tend")); err != nil {
		t.Fatal(err)
	}
	// helper is `go run github.com/coder/acp-go-sdk/example/agent`, which
	// resolves through the repository's module in a checkout; the copy
	// gets the module's go.mod and go.sum beside it, as examples/ has them
	// in the repository.
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// As the README builds them: the lean CLI as tend, the whole tend
	// beside it as tend-daemon, which tend up runs (docs/cli.md#two-files).
	for out, pkg := range map[string]string{d.bin: "./cmd/tend-lean", filepath.Join(dir, "tend-daemon"): "./cmd/tend"} {
		build := exec.Command("go", "build", "-o", out, pkg)
		build.Dir, build.Env = root, append(os.Environ(), "CGO_ENABLED=0")
		if b, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, b)
		}
	}

	logPath := filepath.Join(dir, "up.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	up := exec.Command(d.bin, "up", "-c", filepath.Join(dir, "examples", "tend.toml"))
	up.Dir = dir
	up.Stdout, up.Stderr = logf, logf
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- up.Wait() }()
	t.Cleanup(func() {
		if out, rc := d.tend("down"); rc != 0 {
			t.Errorf("tend down: exit %d\n%s", rc, out)
		}
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			t.Errorf("tend up still running 30s after tend down; killing pid %d", up.Process.Pid)
			_ = up.Process.Signal(syscall.SIGKILL)
			<-exited
		}
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			if len(b) > 8000 {
				b = b[len(b)-8000:]
			}
			t.Logf("tend up's output (its end):\n%s", b)
		}
	})
	testutil.Eventually(t, "tend ps to answer", func() bool {
		select {
		case err := <-exited:
			exited <- err
			b, _ := os.ReadFile(logPath)
			t.Fatalf("tend up exited: %v\n%s", err, b)
		default:
		}
		_, rc := d.tend("ps")
		return rc == 0
	})
	return d
}

// tend runs d's tend from examples/, as the README does, and returns its
// output and exit status.
func (d *demo) tend(args ...string) (string, int) {
	c := exec.Command(d.bin, args...)
	c.Dir = filepath.Join(d.dir, "examples")
	out, err := c.CombinedOutput()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		}
		return string(out) + err.Error(), -1
	}
	return string(out), 0
}

// waitHelper waits until helper:0's status satisfies cond.
func (d *demo) waitHelper(t *testing.T, what string, cond func(program.Status) bool) {
	t.Helper()
	var last string
	testutil.Eventually(t, what, func() bool {
		out, rc := d.tend("status", "helper:0", "--json")
		last = out
		var s program.Status
		return rc == 0 && json.Unmarshal([]byte(out), &s) == nil && cond(s)
	}, testutil.Within(2*time.Minute), testutil.Explain(func() string { return last }))
}

// shell is one bash session, as a user's terminal is: variables, the
// working directory and background jobs carry from one command to the next.
type shell struct {
	in    io.WriteCloser
	lines chan string
	token string
	n     int
}

// startShell starts bash in dir; at the end its stdin is closed and it is
// waited for (killed if it does not end).
func startShell(t *testing.T, dir string) *shell {
	t.Helper()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command("bash", "--noprofile", "--norc")
	c.Dir = dir
	c.Stdout, c.Stderr = pw, pw
	in, err := c.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	s := &shell{in: in, lines: make(chan string, 1024), token: fmt.Sprintf("__readme_test_%d_rc", time.Now().UnixNano())}
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		close(s.lines)
		pr.Close()
	}()
	exited := make(chan struct{})
	go func() { _ = c.Wait(); close(exited) }()
	t.Cleanup(func() {
		in.Close()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = c.Process.Signal(syscall.SIGKILL)
			<-exited
		}
	})
	return s
}

// run runs cmd in the session, its stdin /dev/null (so it cannot read the
// commands that follow), and returns what it printed and its exit status.
func (s *shell) run(t *testing.T, cmd string) (string, int) {
	t.Helper()
	s.n++
	mark := fmt.Sprintf("%s_%d", s.token, s.n)
	// $! changes when cmd starts a job in the background: its pid is kept in
	// __readme_bg, for backgroundFailures.
	script := "__readme_last=$!\n{ " + cmd + "\n} </dev/null\n__readme_rc=$?\n" +
		"[ \"$!\" = \"$__readme_last\" ] || __readme_bg=\"$__readme_bg $!\"\n" +
		"printf '\\n" + mark + " %d\\n' \"$__readme_rc\"\n"
	if _, err := io.WriteString(s.in, script); err != nil {
		t.Fatalf("writing to bash: %v", err)
	}
	var out strings.Builder
	timeout := time.After(90 * time.Second)
	for {
		select {
		case line, ok := <-s.lines:
			if !ok {
				t.Fatalf("bash ended during %q:\n%s", cmd, out.String())
			}
			if rest, found := strings.CutPrefix(line, mark+" "); found {
				var rc int
				if _, err := fmt.Sscan(rest, &rc); err != nil {
					t.Fatalf("bash's status line %q: %v", line, err)
				}
				return strings.TrimSuffix(out.String(), "\n"), rc
			}
			out.WriteString(line + "\n")
		case <-timeout:
			t.Fatalf("%q still running after 90s:\n%s", cmd, out.String())
		}
	}
}

// backgroundFailures waits for the jobs the commands so far started with &
// and says which did not exit 0 ("" when all did).
func (s *shell) backgroundFailures(t *testing.T) string {
	t.Helper()
	// What the jobs print lands here too: only the lines of the loop count.
	out, _ := s.run(t, `for p in $__readme_bg; do wait "$p" || echo "__readme_bgfail pid $p: exit $?"; done; __readme_bg=`)
	var failed []string
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, "__readme_bgfail "); ok {
			failed = append(failed, rest)
		}
	}
	return strings.Join(failed, "; ")
}

// Package readme_test runs the README's snippets as written, so a README
// that drifts from the product fails the tests (issue 31).
//
// Every ```sh block of the sections a new user follows ("Try it", "Terminal
// agents", "Protocol agents", "Agents started on demand", found by their
// "## " headings; one missing fails) runs against the demo fleet of a copy
// of examples/ in a temporary directory, with tend built beside it
// (../tend from examples/) and started as the README's first command does.
//
// The commands run in one bash session, as in the user's terminal, so
// variables (sock=...), the directory and jobs started with & carry from
// one to the next. A command is a line, or the lines of one shell construct
// (the curl for-loop), joined until bash -n finds them complete; each is
// judged by its own exit status: 0, except the few that cannot run
// unattended, named in one table with why (tend attach without a terminal
// exits 2, -f follows forever and runs under timeout 5, tend dashboard
// prints a URL and a code). Where a command needs the state an earlier one
// started (the protocol agent's permission request), the test waits for it
// before the command; it never rewrites one. A few checks of what the
// README says the user will see follow their commands.
package readme_test

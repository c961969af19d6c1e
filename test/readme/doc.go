// Package readme_test runs the README's snippets as written: every ```sh
// block of the sections a new user follows ("Try it", "Terminal agents",
// "Protocol agents", "Agents started on demand") runs, line by line, in one
// bash session against the demo fleet of a copy of examples/, so a README
// that drifts from the product fails the tests (issue 31).
package readme_test

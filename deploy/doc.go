// Package deploy holds no code: its directories are what runs tend
// elsewhere (systemd/tend.service, prometheus/tend-rules.yaml with its unit
// tests, kubernetes/tend.yaml, docker/tend.toml). Its tests check each file
// with the real tool (systemd-analyze verify, promtool) where installed,
// and against tend's own config loader and metrics, so an example cannot
// drift from the code.
package deploy

#!/usr/bin/env bash
# One CLI exec against its floor (issue 34), in pairs (bench/cli/pairs.py):
#   tend status ID --json   beside a Go hello world    (target: hello + 1 ms)
#   tend version            beside the same hello      (target: <= 8 ms)
#   tend screen ID          beside tmux capture-pane -p of the same program in a tmux pane
#                                                       (target: capture-pane + 1 ms)
# tend is built static (CGO_ENABLED=0) and installed as shipped (README,
# docs/cli.md#two-files): the lean CLI as tend beside the whole tend as
# tend-daemon; one more pair times the whole tend's own status (the one-file
# build) beside the same hello world. The daemon runs 100
# sleeps and one tty program, tmux the same program in an 80x24 pane. Wall and CPU
# time of each exec; the results go to bench/cli/results/STAMP/ (a JSON per pair
# with every sample, summary.txt).
#
# usage: bench/cli/run.sh [-quick]      (-quick: 40 pairs each instead of 200)
set -euo pipefail
cd "$(dirname "$0")/../.."
n=200
[ "${1:-}" = "-quick" ] && n=40
stamp=$(date -u +%Y%m%dT%H%M%SZ)
out=bench/cli/results/$stamp
work=$(mktemp -d /tmp/tend-benchcli-XXXXXX)
sock=$work/st/tend.sock
tmuxsock=tend-benchcli-$$
cleanup() {
	"$work/tend" --socket "$sock" down >/dev/null 2>&1 || true
	tmux -L "$tmuxsock" kill-server >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
CGO_ENABLED=0 go build -o "$work/tend" ./cmd/tend-lean
CGO_ENABLED=0 go build -o "$work/tend-daemon" ./cmd/tend
CGO_ENABLED=0 go build -o "$work/hello" ./bench/scale/hello
prog='seq 1 30; exec sleep 100000'
{
	printf '[daemon]\nstate_dir = "%s/st"\n\n' "$work"
	printf '[program.sleeper]\ncommand = ["sleep", "100000"]\ninstances = 100\n\n'
	printf '[program.screen]\ncommand = ["/bin/bash", "-c", "%s"]\ntty = true\ntty_size = "80x24"\n' "$prog"
} >"$work/tend.toml"
setsid "$work/tend" up -c "$work/tend.toml" >"$work/up.log" 2>&1 &
tmux -L "$tmuxsock" new-session -d -s screen -x 80 -y 24 "bash -c '$prog'"
for _ in $(seq 100); do
	"$work/tend" --socket "$sock" status screen:0 >/dev/null 2>&1 && break
	sleep 0.1
done
sleep 2
mkdir -p "$out"
p() { python3 bench/cli/pairs.py -n "$n" --label "$1" --out "$out/$1.json" -- "${@:2}"; }
{
	echo "commit $(git describe --always --dirty 2>/dev/null || echo '?'), $(go version), $(nproc) cores, n=$n pairs each"
	p status "$work/tend" --socket "$sock" status sleeper:0 --json --vs "$work/hello"
	p status-whole "$work/tend-daemon" --socket "$sock" status sleeper:0 --json --vs "$work/hello"
	p version "$work/tend" version --vs "$work/hello"
	p screen "$work/tend" --socket "$sock" screen screen:0 --vs tmux -L "$tmuxsock" capture-pane -p -t screen
} | tee "$out/summary.txt"
echo "results: $out"

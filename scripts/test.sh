#!/usr/bin/env bash
# Runs every check and test of tend: formatting, vet, staticcheck, and the
# whole test suite under the race detector. CI (.ci/run) runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

staticcheck=$(go env GOPATH)/bin/staticcheck
if [ ! -x "$staticcheck" ]; then
	go install honnef.co/go/tools/cmd/staticcheck@v0.8.2
fi

echo "== gofmt"
unformatted=$(gofmt -l cmd internal bench 2>/dev/null || true)
if [ -n "$unformatted" ]; then
	echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
echo "== tracked files"
# No build output in git: nothing over 1 MiB is tracked but vendored assets.
big=$(git ls-files -z 2>/dev/null | xargs -0 -r stat -c '%s %n' 2>/dev/null |
	awk '$1 > 1048576 && $2 !~ /^internal\/dashboard\/static\/vendor\// { print $2 " (" $1 " bytes)" }')
if [ -n "$big" ]; then
	echo "tracked files over 1 MiB:"; echo "$big"; exit 1
fi
echo "== go vet"
go vet ./...
echo "== staticcheck"
"$staticcheck" ./...
echo "== go test -race"
# A race-enabled binary sleeps 1 s at exit by default; the tests re-execute
# themselves and run tend many times.
export GORACE="${GORACE:-atexit_sleep_ms=10}"
go test -race -count=1 -timeout 20m ./...
# The soak/chaos test (bench/soak, build tag soak), its 60-second version; not under -race, which would make it several times as costly.
go test -tags soak -count=1 -timeout 10m ./bench/soak -soak.duration=60s

#!/bin/bash
# kill -> fork, main vs wp-fork, in one session: bench/peers/bench_latency.py
# with tend (zero backoff, cgroup auto), runit, and tend in its default
# config (section 1b), once per binary, alternating (main, branch, main, ...).
# TEND_DIR holds tend-main and tend-branch (go build -o of ./cmd/tend at the
# commits README.md names); RUNS the run numbers (default "1 2"); $1, the
# results directory, an absolute path.
set -u
out=$1
TEND_DIR=${TEND_DIR:?}
mkdir -p "$out"
cd "$(dirname "$0")/../../../peers"
for i in ${RUNS:-1 2}; do
  for v in main branch; do
    { date -u +%FT%TZ; uptime; } >> "$out/uptime.txt"
    echo "== $v run $i" | tee -a "$out/console.txt"
    TEND_BIN=$TEND_DIR/tend-$v python3 bench_latency.py --tools tend,runit --default-tools tend \
      --out "$out/latency-$v-$i.json" --deadline 900 2>&1 | tee -a "$out/console.txt"
  done
done
{ date -u +%FT%TZ; uptime; } >> "$out/uptime.txt"
echo done >> "$out/console.txt"

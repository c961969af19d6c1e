#!/usr/bin/env bash
# Run every measurement sequentially (never two at once: 2-core machine) and
# render RESULTS.md.  Results land in results/<UTC timestamp>/.
# Env knobs: TMPDIR (where every supervisor's working directory goes; default /tmp),
#            TOOLS, LAT_DEFAULT_TOOLS, SCALE_TOOLS, SCALE10K_TOOLS (comma lists of adapters),
#            TEND_BIN, REPS, CLI_REPS, DEFAULT_REPS, BG_OTHERS, MASS_N, MASS_RUNS, CRASH_RUNS,
#            SCALE_NS, SCALE_RUNS, SCALE_IDLE, SCALE_LISTS, UP_TIMEOUT_10K, FLOOR_RUNS,
#            TEND_NS, TEND_UPGRADE_NS, TEND_TTY_NS, TEND_RUNS, AUDIT_DURATION, AUDIT_TOTAL, PTY_MAX (raise|keep),
#            TEND_SAMPLE_AGE (s; cold = 2x it), VM_LANE_CMD, SEED, SKIP (space list of
#            floor latency crashloop scale scale10k tini tend).
# Must run as root (kernel proc connector; drop_caches; fs.nr_open).  Wall time with the
# defaults on a quiet 2-vCPU VM: about 7-8 hours (README.md says how it adds up); a quiet
# machine is part of the method: rows measured above load 2 are marked.
set -euo pipefail
cd "$(dirname "$0")"
PY=/usr/bin/python3
TOOLS="${TOOLS:-tend,tend-nocgroup,supervisord,pm2,s6,s6-noready,runit}"
LAT_DEFAULT_TOOLS="${LAT_DEFAULT_TOOLS:-tend,tend-nocgroup}"
SCALE_TOOLS="${SCALE_TOOLS:-tend,tend-nocgroup,supervisord,pm2,s6,runit,go-floor}"
SCALE10K_TOOLS="${SCALE10K_TOOLS:-tend,tend-nocgroup,s6,runit,supervisord,pm2,go-floor}"
REPS="${REPS:-200}"; CLI_REPS="${CLI_REPS:-10}"; DEFAULT_REPS="${DEFAULT_REPS:-20}"; CRASH_RUNS="${CRASH_RUNS:-3}"
BG_OTHERS="${BG_OTHERS:-1000}"; MASS_N="${MASS_N:-1000}"; MASS_RUNS="${MASS_RUNS:-3}"
SCALE_NS="${SCALE_NS:-100,1000}"; SCALE_RUNS="${SCALE_RUNS:-3}"; SCALE_IDLE="${SCALE_IDLE:-150}"
SCALE_LISTS="${SCALE_LISTS:-5}"; UP_TIMEOUT_10K="${UP_TIMEOUT_10K:-600}"; FLOOR_RUNS="${FLOOR_RUNS:-3}"
TEND_NS="${TEND_NS:-1000,10000}"; TEND_UPGRADE_NS="${TEND_UPGRADE_NS:-10000}"; TEND_TTY_NS="${TEND_TTY_NS:-10000}"
TEND_RUNS="${TEND_RUNS:-3}"; AUDIT_DURATION="${AUDIT_DURATION:-1h}"; AUDIT_TOTAL="${AUDIT_TOTAL:-100000}"; PTY_MAX="${PTY_MAX:-raise}"
SEED="${SEED:-$(date +%s)}"   # every script's order is shuffled from it (recorded in env.txt and the JSON)
SKIP="${SKIP:-}"
[ "$(id -u)" = 0 ] || { echo "run as root (proc connector needs CAP_NET_ADMIN)"; exit 1; }
./setup.sh
out="results/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$out"
bins="$(mktemp -d /tmp/peers-bin-XXXXXX)"
trap 'rm -rf "$bins"' EXIT
# The program every tool runs (programs/sleeper.c) and the go-floor loop, built once.
gcc -O2 -Wall -o "$bins/sleeper" programs/sleeper.c
export PEERS_SLEEPER="$bins/sleeper"
(cd floor/go && GOTOOLCHAIN=local GOFLAGS=-mod=mod go build -o "$bins/peersfloor" .)
export PEERS_FLOOR_BIN="$bins/peersfloor"
# tend: build the binary once for every script (unless TEND_BIN is given)
if [[ ",$TOOLS,$SCALE_TOOLS,$SCALE10K_TOOLS," == *,tend* ]] && [ -z "${TEND_BIN:-}" ]; then
  # static and two files, as shipped (README, docs/cli.md#two-files)
  (cd ../.. && CGO_ENABLED=0 go build -o "$bins/tend" ./cmd/tend-lean && CGO_ENABLED=0 go build -o "$bins/tend-daemon" ./cmd/tend)
  export TEND_BIN="$bins/tend"
  export TEND_REV="$(git -C ../.. describe --always --dirty 2>/dev/null || echo '?')"
fi
{
  echo "date: $(date -u +%FT%TZ)"
  echo "kernel: $(uname -r)   cpus: $(nproc)   mem: $(free -g | awk '/Mem:/{print $2}') GiB"
  grep -m1 'model name' /proc/cpuinfo || true
  echo "debian: $(cat /etc/debian_version)"
  for p in supervisor s6 libskarnet2.13 execline runit tini hyperfine gcc-12 nodejs; do
    printf '%s %s\n' "$p" "$(dpkg-query -W -f='${Version}' "$p" 2>/dev/null || echo -)"; done
  echo "pm2 $(node -p "require('${PEERS_PM2_DIR:-/tmp/peers-pm2}/node_modules/pm2/package.json').version") node $(node --version)"
  [ -n "${TEND_BIN:-}" ] && echo "tend: $("$TEND_BIN" version) ${TEND_REV:+built from $TEND_REV}"
  echo "python3 $($PY --version 2>&1)   $(go version)"
  echo "program: programs/sleeper.c (sha256 $(sha256sum programs/sleeper.c | cut -c1-12)), gcc -O2"
  echo "pid_max: $(cat /proc/sys/kernel/pid_max)   descriptors: $(ulimit -Sn)/$(ulimit -Hn)"
  echo "fs.nr_open: $(cat /proc/sys/fs/nr_open)   kernel.pty.max: $(cat /proc/sys/kernel/pty/max)   CapEff: $(awk '/CapEff/{print $2}' /proc/self/status)"
  echo "tend sample age: ${TEND_SAMPLE_AGE:-10} s (cold calls after twice that, page cache dropped)"
  echo "knobs: TOOLS=$TOOLS LAT_DEFAULT_TOOLS=$LAT_DEFAULT_TOOLS SCALE_TOOLS=$SCALE_TOOLS SCALE10K_TOOLS=$SCALE10K_TOOLS"
  echo "       REPS=$REPS CLI_REPS=$CLI_REPS DEFAULT_REPS=$DEFAULT_REPS BG_OTHERS=$BG_OTHERS MASS_N=$MASS_N MASS_RUNS=$MASS_RUNS"
  echo "       CRASH_RUNS=$CRASH_RUNS SCALE_NS=$SCALE_NS SCALE_RUNS=$SCALE_RUNS SCALE_IDLE=$SCALE_IDLE SCALE_LISTS=$SCALE_LISTS"
  echo "       UP_TIMEOUT_10K=$UP_TIMEOUT_10K TEND_NS=$TEND_NS TEND_UPGRADE_NS=$TEND_UPGRADE_NS TEND_TTY_NS=$TEND_TTY_NS"
  echo "       TEND_RUNS=$TEND_RUNS AUDIT_DURATION=$AUDIT_DURATION AUDIT_TOTAL=$AUDIT_TOTAL PTY_MAX=$PTY_MAX SEED=$SEED SKIP=$SKIP"
  echo "       VM_LANE_CMD=${VM_LANE_CMD:-(unset: the VM row is not run)}"
  work="${TMPDIR:-/tmp}"
  fs="$(findmnt -no SOURCE,FSTYPE,OPTIONS -T "$work" 2>/dev/null || echo '?')"
  journal=""
  if [[ "$fs" == *" ext4 "* ]]; then
    dev="${fs%% *}"
    if compgen -G "/proc/fs/jbd2/${dev##*/}-*" >/dev/null; then
      journal=" (journal)"; else journal=" (NO journal: recently deleted inodes slow every create)"; fi
  fi
  echo "working directories: $work on $fs$journal"
  echo "loadavg at start: $(cat /proc/loadavg)"
} > "$out/env.txt"
cat "$out/env.txt"
skip() { [[ " $SKIP " == *" $1 "* ]]; }
skip floor     || floor/run_floor.sh "$out/floor.jsonl" "$FLOOR_RUNS" 5 500
skip latency   || $PY bench_latency.py --tools "$TOOLS" --reps "$REPS" --cli-reps "$CLI_REPS" \
                    --default-tools "$LAT_DEFAULT_TOOLS" --default-reps "$DEFAULT_REPS" \
                    --background "$BG_OTHERS" --mass "$MASS_N" --mass-runs "$MASS_RUNS" --seed "$SEED" \
                    --out "$out/latency.json"
skip crashloop || $PY bench_crashloop.py --tools "$TOOLS" --runs "$CRASH_RUNS" --seed "$SEED" --out "$out/crashloop.json"
skip tini      || $PY bench_tini.py --reps "$REPS" --out "$out/tini.json"
if ! skip scale; then
  $PY bench_scale.py --tools "$SCALE_TOOLS" --ns "$SCALE_NS" --runs "$SCALE_RUNS" --idle "$SCALE_IDLE" \
    --lists "$SCALE_LISTS" --seed "$SEED" --deadline 43200 --out "$out/scale_${SCALE_NS//,/_}.json"
fi
# N=10,000: SCALE_RUNS runs per tool, 10 minutes for every program to run (else the cell
# says "did not finish in 10 min"), 3 listings cold and 3 warm (s6's is one s6-svstat
# exec per service).
if ! skip scale10k && [ -n "$SCALE10K_TOOLS" ]; then
  $PY bench_scale.py --tools "$SCALE10K_TOOLS" --ns 10000 --runs "$SCALE_RUNS" --idle "$SCALE_IDLE" --lists 3 \
    --up-timeout "$UP_TIMEOUT_10K" --seed "$SEED" --deadline 43200 --out "$out/scale_10000.json"
fi
# The rows only tend has: recovery after the daemon's SIGKILL, the upgrade's pause seen
# by a client, 10,000 tty runs, audit growth under churn, the VM lane's start (hook).
skip tend || $PY bench_tend.py --ns "$TEND_NS" --upgrade-ns "$TEND_UPGRADE_NS" --tty-ns "$TEND_TTY_NS" \
               --runs "$TEND_RUNS" --pty-max "$PTY_MAX" --audit-duration "$AUDIT_DURATION" --audit-total "$AUDIT_TOTAL" --seed "$SEED" \
               --out "$out/tend.json"
echo "finished: $(date -u +%FT%TZ)   loadavg: $(cat /proc/loadavg)" >> "$out/env.txt"
notes=()
[ -f NOTES.md ] && notes=(--notes NOTES.md)
$PY report.py "$out" RESULTS.md "${notes[@]}"

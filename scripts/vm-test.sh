#!/usr/bin/env bash
# The VM lane: tend under a real systemd (PID 1) with a real memory
# controller (pure cgroup v2), which the development machines cannot give.
#
#   scripts/vm-test.sh [-run PATTERN] [-skip PATTERN] [-v] [-hold]
#
# Builds a Debian bookworm root filesystem once with debootstrap (cached in
# ${XDG_CACHE_HOME:-~/.cache}/tend-vm, keyed by what goes into it), then per
# run: a static tend, the shipped unit (deploy/systemd/tend.service) and the
# guest tests (test/vm, a Go test binary) on a second disk; boots the image
# under qemu (the root disk as a throwaway snapshot); the guest installs tend
# as a user would and runs the tests as a systemd unit; their output comes
# back on a third disk and is printed here. The guest has podman: the tests
# also run tend as PID 1 of a container and deploy/kubernetes/tend.yaml with
# podman kube play. -hold keeps the guest up after the tests and runs the
# scripts dropped into a shared directory (test/vm/README.md, "By hand").
# test/vm/README.md says more.
#
# Exit status: 0 every test passed, 1 a test failed, 2 bad usage, 3 a
# prerequisite is missing (a tool, root for the image build, disk space),
# 4 the lane itself failed (image build, no boot, a phase out of time).
# Nothing is installed here: .ci/run installs the tools with apt.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

# Bounds of each phase, in seconds; generous, for TCG on a busy machine.
BUILD_TIMEOUT=${TEND_VM_BUILD_TIMEOUT:-1200} # debootstrap and the image
KVM_PROBE=${TEND_VM_KVM_PROBE:-20}           # kvm: the kernel's first line must show by then
BOOT_TIMEOUT=${TEND_VM_BOOT_TIMEOUT:-420}    # qemu start to the guest runner's first line
TEST_TIMEOUT=${TEND_VM_TEST_TIMEOUT:-1080}   # the runner's first line to its results
ACCEL=${TEND_VM_ACCEL:-auto}                 # auto (kvm, else tcg) | kvm | tcg
MEM=${TEND_VM_MEM:-1536}                     # MiB of guest memory
CACHE=${TEND_VM_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/tend-vm}

SUITE=bookworm
# What the guest needs: systemd as PID 1, a kernel with its initrd, udev and
# kmod for the kernel's devices and modules, procps for ps in failure notes;
# podman and what it needs to run containers and pods (crun, its networks,
# catatonit for the pods' pause image, dbus or crun "cannot open sd-bus"),
# and busybox-static for the container images the tests build.
PACKAGES=(systemd systemd-sysv udev kmod procps linux-image-amd64 initramfs-tools
	podman crun netavark aardvark-dns catatonit iptables dbus busybox-static)

run_pattern=.
skip_pattern=
verbose=0
hold=0
usage() { echo "usage: scripts/vm-test.sh [-run PATTERN] [-skip PATTERN] [-v] [-hold]  (see test/vm/README.md)" >&2; exit 2; }
while [ $# -gt 0 ]; do
	case $1 in
	-run | --run) [ $# -ge 2 ] || usage; run_pattern=$2; shift 2 ;;
	-run=* | --run=*) run_pattern=${1#*=}; shift ;;
	-skip | --skip) [ $# -ge 2 ] || usage; skip_pattern=$2; shift 2 ;;
	-skip=* | --skip=*) skip_pattern=${1#*=}; shift ;;
	-v | --verbose) verbose=1; shift ;;
	-hold | --hold) hold=1; shift ;;
	-h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
	*) usage ;;
	esac
done

say() { echo "vm-test: $*"; }
die() { local code=$1; shift; echo "vm-test: $*" >&2; exit "$code"; }
# die_console CODE MESSAGE: die, with the console's last lines after the verdict.
die_console() {
	echo "vm-test: $2" >&2
	echo "vm-test: the console's last lines:" >&2
	tail -n 25 "$run/console.log" | tr -d '\r' | sed 's/^/  | /' >&2
	exit "$1"
}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# --- prerequisites: say which is missing, in one line, and stop (exit 3).
need=(qemu-system-x86_64 mkfs.ext4 go flock timeout)
missing=()
for tool in "${need[@]}"; do
	command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
[ ${#missing[@]} -eq 0 ] || die 3 "missing ${missing[*]} (Debian: apt-get install qemu-system-x86 debootstrap e2fsprogs; go from go.dev)"

# free_mib DIR: MiB available on DIR's file system (DIR or its nearest existing parent).
free_mib() {
	local d=$1
	while [ ! -d "$d" ]; do d=$(dirname "$d"); done
	df -Pk "$d" | awk 'NR == 2 { print int($4 / 1024) }'
}

# mirror: the Debian mirror apt is configured with (deb822 .sources or
# one-line sources.list), else deb.debian.org; TEND_VM_MIRROR overrides.
mirror() {
	if [ -n "${TEND_VM_MIRROR:-}" ]; then echo "$TEND_VM_MIRROR"; return; fi
	local m
	m=$(awk -v suite="$SUITE" '
		function flush() {
			if (!found && types ~ /(^|[ \t])deb([ \t]|$)/ && (" " suites " ") ~ (" " suite " ") && uris != "") {
				split(uris, u, " "); print u[1]; found = 1; exit
			}
			uris = ""; suites = ""; types = ""
		}
		FNR == 1 { flush() }
		/^[ \t]*$/ { flush(); next }
		/^Types:/ { $1 = ""; types = $0 }
		/^URIs:/ { $1 = ""; uris = $0 }
		/^Suites:/ { $1 = ""; suites = $0 }
		END { flush() }
	' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1 | tr -d ' ')
	if [ -z "$m" ]; then
		m=$(awk -v suite="$SUITE" '$1 == "deb" { i = 2; if ($2 ~ /^\[/) while ($i !~ /\]$/) i++; if ($2 ~ /^\[/) i++; if ($(i + 1) == suite) { print $i; exit } }' \
			/etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | head -1)
	fi
	echo "${m:-http://deb.debian.org/debian}"
}

# configure_tree TREE: what the guest needs beyond the packages. Part of the
# image's cache key (its text is hashed), so a change here rebuilds the image.
configure_tree() {
	local t=$1
	echo tend-vm >"$t/etc/hostname"
	# The root disk is a throwaway snapshot: no fsck, nothing to keep.
	echo '/dev/vda / ext4 rw,relatime 0 0' >"$t/etc/fstab"
	# Nothing but the lane on the console, and no timers that wake up mid-test.
	systemctl --root="$t" mask serial-getty@ttyS0.service getty@tty1.service \
		apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer \
		dpkg-db-backup.timer systemd-tmpfiles-clean.timer >/dev/null 2>&1
	systemctl --root="$t" set-default multi-user.target >/dev/null 2>&1
	# The one hook the image holds: run the payload disk's run.sh (the
	# payload changes every run, the image does not).
	cat >"$t/etc/systemd/system/tend-vm.service" <<-'EOF'
		[Unit]
		Description=tend VM lane: install tend from the payload disk and run the guest tests
		[Service]
		Type=exec
		ExecStart=/bin/sh -c 'mkdir -p /run/tend-vm/payload && mount -o ro /dev/vdb /run/tend-vm/payload && exec /bin/bash /run/tend-vm/payload/run.sh'
		StandardOutput=journal+console
		StandardError=journal+console
		[Install]
		WantedBy=multi-user.target
	EOF
	systemctl --root="$t" enable tend-vm.service >/dev/null 2>&1
}

# build_image DIR: debootstrap, configure, and write the root file system
# into DIR/root.img with the kernel and initrd beside it. Built in a
# temporary directory and renamed, so a half-built image is never used.
build_image() {
	local dir=$1 tmp=$1.tmp.$$ m
	m=$(mirror)
	[ "$(id -u)" = 0 ] || die 3 "the image is not cached yet and building it (debootstrap) needs root"
	command -v debootstrap >/dev/null || die 3 "missing debootstrap (Debian: apt-get install debootstrap)"
	[ "$(free_mib "$CACHE")" -ge 3072 ] || die 3 "not enough disk space in $CACHE to build the image: $(free_mib "$CACHE") MiB free, 3072 needed"
	rm -rf "$tmp"
	mkdir -p "$tmp"
	say "building the $SUITE image from $m (once; cached in $dir)"
	# shellcheck disable=SC2064
	trap "umount_tree '$tmp/tree'; rm -rf '$tmp'" EXIT
	if ! timeout --kill-after=10 "$BUILD_TIMEOUT" debootstrap --variant=minbase \
		--include="$(IFS=,; echo "${PACKAGES[*]}")" "$SUITE" "$tmp/tree" "$m" >"$tmp/debootstrap.log" 2>&1; then
		tail -n 15 "$tmp/debootstrap.log" >&2
		cp "$tmp/debootstrap.log" "$CACHE/debootstrap-failed.log" 2>/dev/null || true
		die 4 "debootstrap failed or took over ${BUILD_TIMEOUT}s (log: $CACHE/debootstrap-failed.log)"
	fi
	umount_tree "$tmp/tree"
	configure_tree "$tmp/tree"
	cp "$tmp"/tree/boot/vmlinuz-* "$tmp/vmlinuz"
	cp "$tmp"/tree/boot/initrd.img-* "$tmp/initrd.img"
	mkfs.ext4 -q -F -L tend-vm-root -d "$tmp/tree" "$tmp/root.img" 3G >/dev/null
	rm -rf "$tmp/tree" "$tmp/debootstrap.log"
	mv "$tmp" "$dir"
	trap - EXIT
}

# umount_tree TREE: anything debootstrap left mounted inside it.
umount_tree() {
	local mp
	[ -d "$1" ] || return 0
	awk -v t="$1" '$2 == t || index($2, t "/") == 1 { print $2 }' /proc/mounts | sort -r | while read -r mp; do
		umount -l "$mp" 2>/dev/null || true
	done
}

# --- the image: cached by the hash of everything that goes into it.
t_start=$(now)
key=$( { echo "$SUITE ${PACKAGES[*]}"; declare -f configure_tree build_image; } | sha256sum | cut -c1-16)
img=$CACHE/image-$key
mkdir -p "$CACHE"
# One builder at a time, and no image removed while a run boots it: the
# lock is exclusive while the image is looked at or built, shared after.
exec 9>"$CACHE/.lock"
if ! flock -w "$BUILD_TIMEOUT" 9; then
	die 4 "another vm-test.sh has held $CACHE/.lock for ${BUILD_TIMEOUT}s"
fi
if [ -f "$img/root.img" ]; then
	image_note="cached"
	say "image $img (cached)"
else
	build_image "$img"
	image_note="built"
	# Older images are of inputs that no longer apply.
	find "$CACHE" -maxdepth 1 -name 'image-*' ! -name "image-$key" -exec rm -rf {} +
fi
flock -s 9
t_image=$(since "$t_start")
say "image: $image_note in ${t_image}s"

# --- this run's disks: the payload (tend, the unit, the tests) and the results.
[ "$(free_mib "${TMPDIR:-/tmp}")" -ge 1024 ] || die 3 "not enough disk space in ${TMPDIR:-/tmp} for a run: $(free_mib "${TMPDIR:-/tmp}") MiB free, 1024 needed"
run=$(mktemp -d "${TMPDIR:-/tmp}/tend-vm.XXXXXX")
qpid=""
cleanup() {
	local rc=$?
	if [ -n "$qpid" ] && kill -0 "$qpid" 2>/dev/null; then
		kill "$qpid" 2>/dev/null || true
		sleep 1
		kill -KILL "$qpid" 2>/dev/null || true
		wait "$qpid" 2>/dev/null || true
	fi
	rm -f "$run"/*.img
	if [ "$rc" = 0 ] && [ -z "${TEND_VM_KEEP:-}" ]; then
		rm -rf "$run"
	elif [ -d "$run" ]; then
		echo "vm-test: console log and build output kept in $run" >&2
	fi
	exit "$rc"
}
trap cleanup EXIT INT TERM

t_build=$(now)
pay=$run/payload
mkdir -p "$pay"
version=$(git -C "$repo" describe --always --dirty 2>/dev/null || echo dev)
ld="-X github.com/tend-sh/tend/internal/cli.Version"
# Static binaries: the guest has no Go and may have another libc.
if ! (
	export CGO_ENABLED=0
	go vet -tags vmtest ./test/vm &&
		go build -trimpath -ldflags "$ld=$version-vm" -o "$pay/tend" ./cmd/tend &&
		go build -trimpath -ldflags "$ld=$version-vm-next" -o "$pay/tend-next" ./cmd/tend &&
		go test -c -tags vmtest -trimpath -o "$pay/vm.test" ./test/vm
) >"$run/build.log" 2>&1; then
	cat "$run/build.log" >&2
	die 1 "building tend or the guest tests failed"
fi
install -m 0644 deploy/systemd/tend.service "$pay/tend.service"
install -m 0755 test/vm/guest/run.sh "$pay/run.sh"
# The container tests: the image's recipe and the shipped pod manifest.
mkdir -p "$pay/container"
install -m 0644 test/vm/container/Containerfile test/vm/container/tend.toml "$pay/container/"
install -m 0755 test/vm/container/python3 test/vm/container/curl "$pay/container/"
install -m 0644 deploy/kubernetes/tend.yaml "$pay/tend.yaml"
printf '%s\n' "$run_pattern" >"$pay/run-pattern"
printf '%s\n' "$skip_pattern" >"$pay/skip-pattern"
# -hold: the guest runs the tests, then stays up running what is dropped
# into the shared directory (test/vm/README.md, "By hand").
share=$run/share
share_args=()
if [ "$hold" = 1 ]; then
	mkdir -p "$share/in" "$share/out"
	touch "$pay/hold"
	share_args=(-virtfs "local,path=$share,mount_tag=tend-vm-share,security_model=none")
fi
# The tests' own bound, inside the runner's: a hung test still reports.
printf '%ss\n' "$((TEST_TIMEOUT - 60))" >"$pay/test-timeout"
mkfs.ext4 -q -F -L tend-vm-payload -d "$pay" "$run/payload.img" 256M >/dev/null
truncate -s 16M "$run/results.img"
say "tend $version and the guest tests built in $(since "$t_build")s"

# --- boot. kvm when /dev/kvm opens and the kernel shows within KVM_PROBE,
# else TCG: a nested kvm here opens but can hang after the BIOS.
boot() { # boot ACCEL: starts qemu in the background, sets qpid
	local accel=$1 cpu=max
	[ "$accel" = kvm ] && cpu=host
	: >"$run/console.log"
	TMPDIR=$run qemu-system-x86_64 -name tend-vm -accel "$accel" -cpu "$cpu" -m "$MEM" -smp 2 \
		-nodefaults -no-user-config -display none -monitor none -nic none -no-reboot \
		-serial "file:$run/console.log" \
		-kernel "$img/vmlinuz" -initrd "$img/initrd.img" \
		-append "root=/dev/vda rw console=ttyS0 systemd.unified_cgroup_hierarchy=1 panic=-1" \
		-drive "file=$img/root.img,format=raw,if=virtio,snapshot=on" \
		-drive "file=$run/payload.img,format=raw,if=virtio,readonly=on" \
		-drive "file=$run/results.img,format=raw,if=virtio" \
		"${share_args[@]}" \
		>"$run/qemu.log" 2>&1 &
	qpid=$!
}
stop_qemu() {
	kill "$qpid" 2>/dev/null || true
	wait "$qpid" 2>/dev/null || true
	qpid=""
}
# wait_for PATTERN SECONDS: until the console shows PATTERN (0), qemu exits
# (1) or the time is up (2). With -v, the console is copied here meanwhile.
shown=0
wait_for() {
	local pattern=$1 deadline=$(($(date +%s) + $2))
	while :; do
		if [ "$verbose" = 1 ]; then
			local n
			n=$(wc -l <"$run/console.log")
			[ "$n" -gt "$shown" ] && sed -n "$((shown + 1)),${n}p" "$run/console.log" | tr -d '\r' | sed 's/^/  | /'
			shown=$n
		fi
		grep -aq -- "$pattern" "$run/console.log" && return 0
		kill -0 "$qpid" 2>/dev/null || return 1
		[ "$(date +%s)" -lt "$deadline" ] || return 2
		sleep 1
	done
}

t_boot=$(now)
accel=$ACCEL
# A kvm that hung or failed once on this host (same host kernel) is not tried again.
kvm_hung=$CACHE/kvm-hangs
if [ "$accel" = auto ]; then
	accel=tcg
	if [ -r /dev/kvm ] && [ -w /dev/kvm ]; then accel=kvm; fi
	if [ "$accel" = kvm ] && [ "$(cat "$kvm_hung" 2>/dev/null)" = "$(uname -r)" ]; then
		say "kvm failed here before ($kvm_hung); using TCG (TEND_VM_ACCEL=kvm tries it)"
		accel=tcg
	fi
fi
if [ "$accel" = kvm ]; then
	boot kvm
	if wait_for "Linux version" "$KVM_PROBE"; then
		rm -f "$kvm_hung"
	else
		why="qemu exited: $(tail -n 1 "$run/qemu.log")"
		if [ -n "$qpid" ] && kill -0 "$qpid" 2>/dev/null; then
			why="no kernel output within ${KVM_PROBE}s"
		fi
		# Hung or aborted (a nested kvm here now fails an assertion at
		# once): either way not tried again on this host kernel.
		uname -r >"$kvm_hung"
		stop_qemu
		if [ "$ACCEL" = kvm ]; then die 4 "kvm: $why"; fi
		say "kvm: $why; falling back to TCG"
		accel=tcg
	fi
fi
if [ "$accel" = tcg ]; then
	boot tcg
fi
say "booting under $accel (bound ${BOOT_TIMEOUT}s)"
rc=0
wait_for "TEND-VM-BOOTED" "$BOOT_TIMEOUT" || rc=$?
case $rc in
0) ;;
1) die_console 4 "the guest did not boot: qemu exited ($(tail -n 1 "$run/qemu.log"))" ;;
*) die_console 4 "the guest did not boot within ${BOOT_TIMEOUT}s under $accel" ;;
esac
t_booted=$(since "$t_boot")
say "guest up in ${t_booted}s ($(grep -a -m1 -o 'TEND-VM-BOOTED.*' "$run/console.log" | tr -d '\r'))"

# --- the tests, then the results disk.
t_tests=$(now)
if [ "$hold" = 1 ]; then
	say "holding the guest: write a script to $share/in/NAME.sh; the guest runs it as root and writes $share/out/NAME.out and NAME.rc; $share/in/poweroff ends it"
	TEST_TIMEOUT=${TEND_VM_HOLD_TIMEOUT:-7200}
fi
rc=0
wait_for "TEND-VM-END" "$TEST_TIMEOUT" || rc=$?
if [ "$rc" = 2 ]; then
	die_console 4 "the guest tests did not finish within ${TEST_TIMEOUT}s"
fi
# The guest powers off once its results are written; give it a moment.
for _ in $(seq 1 60); do kill -0 "$qpid" 2>/dev/null || break; sleep 1; done
stop_qemu
t_ran=$(since "$t_tests")

tr -d '\000' <"$run/results.img" >"$run/results.txt"
if ! grep -aq '^TEND-VM-END rc=' "$run/results.txt"; then
	die_console 4 "the guest wrote no results"
fi
grep -av '^TEND-VM-END' "$run/results.txt"
guest_rc=$(sed -n 's/^TEND-VM-END rc=\([0-9]*\).*/\1/p' "$run/results.txt" | tail -n 1)
passed=$(grep -ac '^--- PASS' "$run/results.txt" || true)
failed=$(grep -ac '^--- FAIL' "$run/results.txt" || true)
skipped=$(grep -ac '^--- SKIP' "$run/results.txt" || true)
say "times: image ${t_image}s ($image_note), build ${t_build:+$(awk -v a="$t_build" -v b="$t_boot" 'BEGIN { printf "%.1f", b - a }')}s, boot ${t_booted}s ($accel), tests ${t_ran}s, total $(since "$t_start")s"
echo "vm: $passed passed, $failed failed, $skipped skipped"
if [ "$guest_rc" != 0 ] || [ "$failed" != 0 ]; then
	[ "$failed" != 0 ] || say "the guest test binary exited $guest_rc"
	exit 1
fi
if [ "$passed" = 0 ]; then
	die 1 "no guest test ran (-run '$run_pattern' -skip '$skip_pattern')"
fi

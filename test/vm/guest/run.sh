#!/bin/bash
# The guest side of the VM lane, started by the image's tend-vm.service from
# the payload disk (/dev/vdb): installs tend as a user would (the binary,
# the shipped unit), runs the guest tests (vm.test) with their output on the
# serial console, writes that output and the exit status to the results
# disk (/dev/vdc, raw text ending in "TEND-VM-END rc=N"), and powers off.
set -u
payload=/run/tend-vm/payload
console=/dev/ttyS0
out=/run/tend-vm/results.txt

echo "TEND-VM-BOOTED uptime=$(cut -d' ' -f1 /proc/uptime)s kernel=$(uname -r) $(systemctl --version | head -n 1)" >"$console"

finish() {
	local rc=$1
	echo "TEND-VM-END rc=$rc" >>"$out"
	dd if="$out" of=/dev/vdc bs=1M conv=fsync status=none
	echo "TEND-VM-END rc=$rc" >"$console"
	sync
	systemctl --force --force poweroff
}

{
	install -m 0755 "$payload/tend" /usr/local/bin/tend &&
		install -D -m 0755 "$payload/tend-next" /usr/local/lib/tend-vm/tend-next &&
		install -D -m 0755 "$payload/vm.test" /usr/local/lib/tend-vm/vm.test &&
		install -m 0644 "$payload/tend.service" /etc/systemd/system/tend.service &&
		systemctl daemon-reload &&
		systemctl enable --quiet tend.service # as the unit's header says; the tests start it
} >"$out" 2>&1 || finish 4

# Boot must be over before the tests start and stop units of their own.
timeout 120 systemctl is-system-running --wait >/dev/null 2>&1
echo "guest: $(systemctl is-system-running 2>&1); cgroup2 controllers: $(cat /sys/fs/cgroup/cgroup.controllers)" >>"$out"

cd /usr/local/lib/tend-vm || finish 4
# The test binary's own -test.timeout is below this one, so a hung test is
# reported with its stack; this one bounds the rest.
limit=$(cat "$payload/test-timeout")
timeout --kill-after=10s "$((${limit%s} + 30))s" ./vm.test -test.v -test.timeout "$limit" \
	-test.run "$(cat "$payload/run-pattern")" -test.skip "$(cat "$payload/skip-pattern")" 2>&1 | tee -a "$out" >"$console"
rc=${PIPESTATUS[0]}

# scripts/vm-test.sh -hold: stay up and run each script the host drops into
# the shared directory (a 9p mount), one at a time, until it asks for the end.
if [ -e "$payload/hold" ]; then
	share=/run/tend-vm/share
	mkdir -p "$share"
	if mount -t 9p -o trans=virtio,version=9p2000.L,cache=none tend-vm-share "$share"; then
		echo "TEND-VM-HOLD tests rc=$rc; running $share/in/*.sh" >"$console"
		while [ ! -e "$share/in/poweroff" ]; do
			for f in "$share"/in/*.sh; do
				[ -e "$f" ] || continue
				name=$(basename "$f" .sh)
				mv "$f" "$share/in/$name.running"
				(cd /root && timeout 1800 bash "$share/in/$name.running") >"$share/out/$name.out" 2>&1
				echo $? >"$share/out/$name.rc"
				rm -f "$share/in/$name.running"
			done
			sleep 1
		done
	else
		echo "TEND-VM-HOLD: cannot mount the share" >"$console"
	fi
fi
finish "$rc"

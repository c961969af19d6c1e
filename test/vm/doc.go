// Package vm holds the guest tests of the VM lane (scripts/vm-test.sh):
// tend under a real systemd as PID 1, with a real memory controller, in a
// Debian guest booted under qemu. They are built with the build tag vmtest
// (go test -c -tags vmtest) and run only inside that guest, as root: they
// start and stop the system's tend.service, write /etc/tend and
// /var/lib/tend, and kill processes. See test/vm/README.md.
package vm

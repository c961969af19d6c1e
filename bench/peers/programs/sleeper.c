/* sleeper: the program every supervisor runs in bench/peers (latency and scale).
 *
 * It sleeps until it is killed, like `sleep 100000`, but takes no arguments, so
 * that runit's and s6's ./run can be the program itself (a symlink to this
 * binary): runsv and s6-supervise exec ./run with no arguments, and a run script
 * that passes them would put a shell (or execlineb, or a launcher) between the
 * supervisor's fork and the program.  Every tool execs this same binary directly.
 *
 * Readiness, s6 style: when $SLEEPER_NOTIFY_FD names a descriptor (s6's
 * notification-fd, set only in the s6 column's environment), it writes the
 * newline that tells s6-supervise the service is ready and closes it, as an
 * s6-aware daemon does.  Elsewhere the variable is unset and it does nothing.
 *
 * Build: gcc -O2 -o sleeper sleeper.c  (dynamically linked, like /bin/sleep). */
#include <stdlib.h>
#include <unistd.h>

int main(void) {
	const char *fd = getenv("SLEEPER_NOTIFY_FD");
	if (fd != NULL && *fd != '\0') {
		int n = atoi(fd);
		if (write(n, "\n", 1) == 1)
			close(n);
	}
	for (;;)
		pause();
}

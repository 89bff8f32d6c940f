/* sock_uring.c - does this process hold an io_uring instance? */
#include "sock_uring.h"

#include <dirent.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "proc_id.h"

/* A scan reads the link of every fd: a server holding 10,000 sockets
 * spends 20-50 ms on one, and it looked every 100 ms while it accepted.
 * The next scan comes 100 ms after this one, or 50 times as long as this
 * one took, whichever is later (at most 2% of a core), but within a
 * second (a scan that was preempted for long must not put the next one
 * off by minutes). */
#define RECHECK_NS 100000000ull
#define RECHECK_MAX_NS 1000000000ull
#define COST_SHARE 50

static _Atomic uint64_t next_ns;
static _Atomic int seen;

static int scan(void)
{
	char path[300], link[64];
	struct dirent *d;
	DIR *dir = opendir("/proc/self/fd");
	int found = 0;

	if (!dir)
		return 0;
	while (!found && (d = readdir(dir))) {
		ssize_t n;

		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%s", d->d_name);
		n = readlink(path, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = '\0';
		found = strstr(link, "io_uring") != NULL;
	}
	closedir(dir);
	return found;
}

int cxls_uring_in_use(void)
{
	uint64_t now = cxls_now_ns(), next = atomic_load(&next_ns), wait;

	/* once seen, for good: the ring may outlive our next look */
	if (atomic_load(&seen))
		return 1;
	if (now < next || !atomic_compare_exchange_strong(&next_ns, &next, now + RECHECK_NS))
		return 0; /* not yet, or another thread scans */
	if (scan())
		atomic_store(&seen, 1);
	wait = (cxls_now_ns() - now) * COST_SHARE; /* this scan's time, its share */
	if (wait > RECHECK_NS)
		atomic_store(&next_ns, now + (wait < RECHECK_MAX_NS ? wait : RECHECK_MAX_NS));
	return atomic_load(&seen);
}

/* sock_uring.c - does this process hold an io_uring instance? */
#include "sock_uring.h"

#include <dirent.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "proc_id.h"

#define RECHECK_NS 100000000ull

static _Atomic uint64_t checked_ns;
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
	uint64_t now = cxls_now_ns();

	/* once seen, for good: the ring may outlive our next look */
	if (atomic_load(&seen))
		return 1;
	if (now - atomic_load(&checked_ns) < RECHECK_NS)
		return 0;
	atomic_store(&checked_ns, now);
	if (scan())
		atomic_store(&seen, 1);
	return atomic_load(&seen);
}

/* sock_private_fd.c - fds the shim holds for itself (sock_private_fd.h). */
#include "sock_private_fd.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"

#define SLOTS 64
#define FLOOR_MAX 1024

/* -1: free; a slot is taken by compare-and-swap, given back by a store */
static _Atomic int slot[SLOTS] = { [0 ... SLOTS - 1] = -1 };
/* slots taken: every close asks cxls_private_is(), mostly of none */
static _Atomic int taken;

static int floor_of_limit(void)
{
	struct rlimit r;

	if (getrlimit(RLIMIT_NOFILE, &r) || r.rlim_cur == RLIM_INFINITY)
		return FLOOR_MAX;
	return r.rlim_cur / 4 < FLOOR_MAX ? (int)(r.rlim_cur / 4) : FLOOR_MAX;
}

static void note(int fd)
{
	for (int i = 0; i < SLOTS; i++) {
		int none = -1;

		if (atomic_compare_exchange_strong(&slot[i], &none, fd)) {
			atomic_fetch_add(&taken, 1);
			return;
		}
	}
	CXLS_INFO("fd %d: more than %d private fds: a close_range over it would close it", fd,
		  SLOTS);
}

int cxls_private_dup(int fd)
{
	int copy = (int)syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, floor_of_limit());

	/* every number from the floor up is taken: any will do */
	if (copy < 0 && errno == EMFILE)
		copy = (int)syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, 0);
	if (copy >= 0)
		note(copy);
	return copy;
}

void cxls_private_close(int fd)
{
	for (int i = 0; i < SLOTS; i++) {
		int was = fd;

		if (atomic_compare_exchange_strong(&slot[i], &was, -1)) {
			atomic_fetch_sub(&taken, 1);
			break;
		}
	}
	syscall(SYS_close, fd);
}

int cxls_private_is(int fd)
{
	if (fd < 0 || !atomic_load_explicit(&taken, memory_order_relaxed))
		return 0;
	for (int i = 0; i < SLOTS; i++)
		if (atomic_load(&slot[i]) == fd)
			return 1;
	return 0;
}

static int ascending(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

int cxls_private_in(unsigned lo, unsigned hi, int *out, int max)
{
	int n = 0;

	for (int i = 0; i < SLOTS && n < max; i++) {
		int fd = atomic_load(&slot[i]);

		if (fd >= 0 && (unsigned)fd >= lo && (unsigned)fd <= hi)
			out[n++] = fd;
	}
	qsort(out, (size_t)n, sizeof(*out), ascending);
	return n;
}

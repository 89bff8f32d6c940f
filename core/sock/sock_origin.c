/* sock_origin.c - see sock_origin.h.  fd -> fork epoch, two levels like
 * the fd table (sock_fdtab.c), read without a lock. */
#include "sock_origin.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#define CHUNK_BITS 10
#define CHUNK (1u << CHUNK_BITS)
#define NCHUNKS 1024u /* fds up to 1M */

/* Process-wide by nature: one fd space and one fork history per process. */
static _Atomic(_Atomic uint32_t *) chunks[NCHUNKS];
static pthread_mutex_t grow_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint32_t epoch = 1; /* 0 in an entry: not made here */

#define NOT_TCP UINT32_MAX /* made here, but no TCP socket */

static _Atomic uint32_t *entry(int fd, int create)
{
	unsigned c = (unsigned)fd >> CHUNK_BITS;
	_Atomic uint32_t *e;

	if (fd < 0 || c >= NCHUNKS)
		return NULL;
	e = atomic_load_explicit(&chunks[c], memory_order_acquire);
	if (!e && create) {
		pthread_mutex_lock(&grow_lock);
		e = atomic_load(&chunks[c]);
		if (!e) {
			e = calloc(CHUNK, sizeof(*e));
			atomic_store_explicit(&chunks[c], e, memory_order_release);
		}
		pthread_mutex_unlock(&grow_lock);
	}
	return e ? &e[(unsigned)fd & (CHUNK - 1)] : NULL;
}

void cxls_sock_origin_new(int fd, int tcp)
{
	_Atomic uint32_t *e = entry(fd, 1);

	if (e)
		atomic_store(e, tcp ? atomic_load(&epoch) : NOT_TCP);
}

void cxls_sock_origin_accepted(int lfd, int fd)
{
	_Atomic uint32_t *l = entry(lfd, 0), *e = entry(fd, 1);

	if (e)
		atomic_store(e, l && atomic_load(l) == NOT_TCP ? NOT_TCP : atomic_load(&epoch));
}

int cxls_sock_origin_socket(int fd)
{
	_Atomic uint32_t *e = entry(fd, 0);

	return e && atomic_load(e) != 0;
}

void cxls_sock_origin_dup(int oldfd, int newfd)
{
	_Atomic uint32_t *o = entry(oldfd, 0), *n;
	uint32_t v = o ? atomic_load(o) : 0;

	n = entry(newfd, v != 0);
	if (n)
		atomic_store(n, v);
}

void cxls_sock_origin_close(int fd)
{
	_Atomic uint32_t *e = entry(fd, 0);

	if (e)
		atomic_store(e, 0);
}

void cxls_sock_origin_fork(void)
{
	atomic_fetch_add(&epoch, 1);
}

int cxls_sock_origin_private(int fd)
{
	_Atomic uint32_t *e = entry(fd, 0);

	return e && atomic_load(e) == atomic_load(&epoch);
}

int cxls_sock_origin_shared(int fd)
{
	_Atomic uint32_t *e = entry(fd, 0);
	uint32_t v = e ? atomic_load(e) : 0;

	return v != NOT_TCP && v != atomic_load(&epoch);
}

/* sock_fdtab.c - fd number to followed socket, two levels, grown on use. */
#include "sock_conn.h"

#include <pthread.h>
#include <stdlib.h>

#define CHUNK_BITS 10
#define CHUNK (1u << CHUNK_BITS)
#define NCHUNKS 1024u /* fds up to 1M */

_Atomic int cxls_fdtab_count;

/* Process-wide by nature: one fd space per process. */
static struct cxls_sconn **chunks[NCHUNKS];
static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;

static struct cxls_sconn **slot_of(int fd, int create)
{
	unsigned c = (unsigned)fd >> CHUNK_BITS;

	if (fd < 0 || c >= NCHUNKS)
		return NULL;
	if (!chunks[c] && create)
		chunks[c] = calloc(CHUNK, sizeof(*chunks[c]));
	return chunks[c] ? &chunks[c][(unsigned)fd & (CHUNK - 1)] : NULL;
}

struct cxls_sconn *cxls_fdtab_get(int fd)
{
	struct cxls_sconn **s, *c = NULL;

	if (cxls_fdtab_empty() || fd < 0)
		return NULL;
	pthread_rwlock_rdlock(&lock);
	s = slot_of(fd, 0);
	if (s && *s) {
		c = *s;
		cxls_sconn_hold(c);
	}
	pthread_rwlock_unlock(&lock);
	return c;
}

int cxls_fdtab_set(int fd, struct cxls_sconn *c)
{
	struct cxls_sconn **s, *old = NULL;

	pthread_rwlock_wrlock(&lock);
	s = slot_of(fd, 1);
	if (!s) {
		pthread_rwlock_unlock(&lock);
		return -1;
	}
	old = *s;
	cxls_sconn_hold(c);
	atomic_fetch_add(&c->fds, 1);
	*s = c;
	if (!old)
		atomic_fetch_add(&cxls_fdtab_count, 1);
	else
		atomic_fetch_sub(&old->fds, 1);
	pthread_rwlock_unlock(&lock);
	if (old)
		cxls_sconn_put(old);
	return 0;
}

struct cxls_sconn *cxls_fdtab_take(int fd)
{
	struct cxls_sconn **s, *c = NULL;

	if (cxls_fdtab_empty() || fd < 0)
		return NULL;
	pthread_rwlock_wrlock(&lock);
	s = slot_of(fd, 0);
	if (s && *s) {
		c = *s;
		*s = NULL;
		atomic_fetch_sub(&c->fds, 1);
		atomic_fetch_sub(&cxls_fdtab_count, 1);
	}
	pthread_rwlock_unlock(&lock);
	return c;
}

void cxls_fdtab_each(void (*fn)(int fd, struct cxls_sconn *c, void *arg), void *arg)
{
	for (unsigned i = 0; i < NCHUNKS; i++) {
		if (!chunks[i])
			continue;
		for (unsigned j = 0; j < CHUNK; j++)
			if (chunks[i][j])
				fn((int)(i * CHUNK + j), chunks[i][j], arg);
	}
}

void cxls_fdtab_lock(void)
{
	pthread_rwlock_wrlock(&lock);
}

void cxls_fdtab_unlock(void)
{
	pthread_rwlock_unlock(&lock);
}

/* The child of fork has another thread id than the writer that locked:
 * it starts over with a fresh lock (it has one thread). */
void cxls_fdtab_reinit(void)
{
	pthread_rwlock_init(&lock, NULL);
}

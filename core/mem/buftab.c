/* buftab.c - chained hash of owned buffers, one lock.
 *
 * Allocation and free are rare next to the copies that use the buffers,
 * so one mutex is enough; fork handlers keep a child from inheriting it
 * locked by a thread that does not exist there.
 */
#include "buftab.h"

#include <pthread.h>

#define NBUCKETS 1024

static struct cxls_buf *buckets[NBUCKETS];
static size_t count;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void before_fork(void)
{
	pthread_mutex_lock(&lock);
}

static void after_fork(void)
{
	pthread_mutex_unlock(&lock);
}

static void install_fork_handlers(void)
{
	pthread_atfork(before_fork, after_fork, after_fork);
}

static size_t bucket(const void *p)
{
	uintptr_t v = (uintptr_t)p >> 12;

	return (size_t)((v * 0x9e3779b97f4a7c15ull) >> 54) % NBUCKETS;
}

int cxls_buftab_insert(struct cxls_buf *b)
{
	size_t i = bucket(b->base);
	int rc = 0;

	pthread_once(&fork_once, install_fork_handlers);
	pthread_mutex_lock(&lock);
	for (struct cxls_buf *e = buckets[i]; e; e = e->next)
		if (e->base == b->base)
			rc = -1;
	if (!rc) {
		b->next = buckets[i];
		buckets[i] = b;
		count++;
	}
	pthread_mutex_unlock(&lock);
	return rc;
}

struct cxls_buf *cxls_buftab_remove(const void *base, int kind)
{
	struct cxls_buf **pp, *b = NULL;

	pthread_mutex_lock(&lock);
	for (pp = &buckets[bucket(base)]; *pp; pp = &(*pp)->next) {
		if ((*pp)->base == base && (*pp)->kind == kind) {
			b = *pp;
			*pp = b->next;
			count--;
			break;
		}
	}
	pthread_mutex_unlock(&lock);
	return b;
}

int cxls_buftab_overlaps(const void *p, size_t len)
{
	uintptr_t a = (uintptr_t)p;
	int hit = 0;

	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < NBUCKETS && !hit; i++)
		for (struct cxls_buf *e = buckets[i]; e && !hit; e = e->next)
			hit = a < (uintptr_t)e->map + e->len && (uintptr_t)e->map < a + len;
	pthread_mutex_unlock(&lock);
	return hit;
}

int cxls_buftab_holds(const void *p, int kind, unsigned *memf)
{
	uintptr_t a = (uintptr_t)p;
	int hit = 0;

	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < NBUCKETS && !hit; i++)
		for (struct cxls_buf *e = buckets[i]; e && !hit; e = e->next)
			if ((hit = e->kind == kind && a - (uintptr_t)e->map < e->len) && memf)
				*memf = e->memf;
	pthread_mutex_unlock(&lock);
	return hit;
}

size_t cxls_buftab_count(void)
{
	size_t n;

	pthread_mutex_lock(&lock);
	n = count;
	pthread_mutex_unlock(&lock);
	return n;
}

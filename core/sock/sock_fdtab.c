/* sock_fdtab.c - fd number to followed socket, two levels, grown on use. */
#include "sock_conn.h"
#include "sock_vfork.h"

#include <sched.h>
#include <stdlib.h>

#define CHUNK_BITS 10
#define CHUNK (1u << CHUNK_BITS)
#define NCHUNKS 1024u /* fds up to 1M */

_Atomic int cxls_fdtab_count;

/* Process-wide by nature: one fd space per process. */
static struct cxls_sconn **chunks[NCHUNKS];

/* The table's lock.  Every interposed call on a socket while the table is
 * not empty looks an fd up (a pooled read or write: one lookup each), and
 * only socket(), connect(), close() and dup() change it.  A reader counts
 * itself in with one atomic add and out with one; a writer sets WRITER,
 * which turns new readers away, and waits for the readers inside to leave.
 * pthread's rwlock took about 120 instructions per lookup, every one
 * emulated under QEMU TCG (bench/README.md, "Shim instructions per pooled
 * round trip").
 *
 * Ordering: a reader's add (acquire) either comes after a writer's
 * release of WRITER in the word's modification order, and then sees what
 * that writer stored, or before the writer's CAS, which then counts it:
 * the writer touches nothing until it has seen the reader's release
 * (its subtract), so the reader's loads happened before the writer's
 * stores.  Every change of the word is a read-modify-write, so a release
 * reaches any later acquire through the others' changes. */
#define WRITER (1u << 31)

static _Atomic uint32_t lock_word;

static void read_lock(void)
{
	while (atomic_fetch_add_explicit(&lock_word, 1, memory_order_acquire) & WRITER) {
		/* turned away: it read nothing, no ordering to give */
		atomic_fetch_sub_explicit(&lock_word, 1, memory_order_relaxed);
		while (atomic_load_explicit(&lock_word, memory_order_relaxed) & WRITER)
			sched_yield();
	}
}

static void read_unlock(void)
{
	atomic_fetch_sub_explicit(&lock_word, 1, memory_order_release);
}

static void write_lock(void)
{
	uint32_t v = atomic_load_explicit(&lock_word, memory_order_relaxed);

	for (;;) {
		if (v & WRITER) {
			sched_yield();
			v = atomic_load_explicit(&lock_word, memory_order_relaxed);
		} else if (atomic_compare_exchange_weak_explicit(&lock_word, &v, v | WRITER,
								 memory_order_acquire,
								 memory_order_relaxed)) {
			break;
		}
	}
	/* readers inside leave within a lookup; those turned away come and go */
	while (atomic_load_explicit(&lock_word, memory_order_acquire) != WRITER)
		sched_yield();
}

static void write_unlock(void)
{
	atomic_fetch_and_explicit(&lock_word, ~WRITER, memory_order_release);
}

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

	/* a child of vfork: these are its parent's fds (sock_vfork.h) */
	if (cxls_fdtab_empty() || fd < 0 || cxls_sock_borrowed())
		return NULL;
	read_lock();
	s = slot_of(fd, 0);
	if (s && *s) {
		c = *s;
		cxls_sconn_hold(c);
	}
	read_unlock();
	return c;
}

int cxls_fdtab_set(int fd, struct cxls_sconn *c)
{
	struct cxls_sconn **s, *old = NULL;

	write_lock();
	s = slot_of(fd, 1);
	if (!s) {
		write_unlock();
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
	write_unlock();
	if (old)
		cxls_sconn_put(old);
	return 0;
}

struct cxls_sconn *cxls_fdtab_take(int fd)
{
	struct cxls_sconn **s, *c = NULL;

	if (cxls_fdtab_empty() || fd < 0)
		return NULL;
	write_lock();
	s = slot_of(fd, 0);
	if (s && *s) {
		c = *s;
		*s = NULL;
		atomic_fetch_sub(&c->fds, 1);
		atomic_fetch_sub(&cxls_fdtab_count, 1);
	}
	write_unlock();
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
	write_lock();
}

void cxls_fdtab_unlock(void)
{
	write_unlock();
}

/* The child of fork has one thread, the one that locked in the parent's
 * prepare handler: it starts over with a free lock. */
void cxls_fdtab_reinit(void)
{
	atomic_store_explicit(&lock_word, 0, memory_order_relaxed);
}

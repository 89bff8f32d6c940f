/* late.c - "synchronous" copies and memsets that complete late.
 *
 * CUDA lets a "synchronous" copy from pageable host memory to the
 * device, a device-to-device copy and a memset of device memory return
 * before they completed (the "API synchronization behavior" section); a
 * caller that then reads the memory from a non-blocking stream without
 * synchronising races with the copy. To make that race lose every time
 * instead of by chance, such an op is submitted "late" to the legacy stream
 * and its worker holds it at the head of the queue until something orders
 * after it: another op of the stream, a synchronize or barrier wait on the
 * stream (kick_seq), a free of memory (emu_late_flush), process exit; or,
 * failing all that, CUDAEMU_LATE_US after it was submitted, so that a
 * program that never synchronises still sees its data, only later.
 *
 * stream.c holds a late op at the head of its queue and runs it when
 * kicked; this file snapshots pageable sources, keeps the registry of
 * legacy streams that held late ops, and flushes them all (before memory
 * is freed, and at exit).
 */
#include "emu.h"

#include <stdlib.h>
#include <string.h>

/* Late ops submitted and not yet run, all streams: emu_late_flush's fast
 * path. */
static atomic_ulong late_pending;

/* Legacy streams that ever held a late op, for emu_late_flush. No
 * references: a context forgets its legacy stream before releasing it. */
static pthread_mutex_t late_lock = PTHREAD_MUTEX_INITIALIZER;
static struct CUstream_st **late_streams;
static size_t late_n, late_cap;

/* The source of a pageable copy, copied now: the caller may reuse its
 * buffer as soon as the call returns, as CUDA's staging copy allows. */
int emu_late_snapshot(struct emu_qop *q)
{
	void *buf = malloc(q->op.u.copy.bytes);

	if (!buf)
		return -1;
	memcpy(buf, q->op.u.copy.src, q->op.u.copy.bytes);
	q->op.u.copy.src = buf;
	q->op.u.copy.owned = buf;
	return 0;
}

/* Makes s known to emu_late_flush. */
int emu_late_register(struct CUstream_st *s)
{
	struct CUstream_st **p;
	size_t i;
	int err = 0;

	pthread_mutex_lock(&late_lock);
	for (i = 0; i < late_n; i++)
		if (late_streams[i] == s)
			goto out;
	if (late_n == late_cap) {
		p = realloc(late_streams,
			    (late_cap ? late_cap * 2 : 8) * sizeof(*p));
		if (!p) {
			err = -1;
			goto out;
		}
		late_streams = p;
		late_cap = late_cap ? late_cap * 2 : 8;
	}
	late_streams[late_n++] = s;
out:
	pthread_mutex_unlock(&late_lock);
	return err;
}

void emu_late_forget(struct CUstream_st *s)
{
	size_t i;

	pthread_mutex_lock(&late_lock);
	for (i = 0; i < late_n; i++)
		if (late_streams[i] == s) {
			late_streams[i] = late_streams[--late_n];
			break;
		}
	pthread_mutex_unlock(&late_lock);
}

void emu_late_queued(void)
{
	atomic_fetch_add(&late_pending, 1);
}

void emu_late_ran(void)
{
	atomic_fetch_sub(&late_pending, 1);
}

/* Runs the late ops of every registered stream and waits for them, until
 * `deadline` if not NULL. */
static void late_flush(const struct timespec *deadline)
{
	struct CUstream_st **list;
	size_t i, n;

	if (!atomic_load(&late_pending))
		return;
	pthread_mutex_lock(&late_lock);
	n = late_n;
	list = malloc((n ? n : 1) * sizeof(*list));
	if (list) {
		/* registered legacy streams are alive: their context
		 * forgets them before it lets them go */
		for (i = 0; i < n; i++) {
			list[i] = late_streams[i];
			emu_obj_get(&list[i]->obj);
		}
	}
	pthread_mutex_unlock(&late_lock);
	if (!list)
		return;
	for (i = 0; i < n; i++) {
		emu_stream_wait_late(list[i], deadline);
		emu_obj_put(&list[i]->obj);
	}
	free(list);
}

void emu_late_flush(void)
{
	late_flush(NULL);
}

/* At exit (or unload), late ops still held run before the process goes,
 * as a GPU finishes queued copies: device memory may be shared (a
 * registered MAP_SHARED region) and read by another process. Bounded, so
 * a late op stuck behind a wait that never ends cannot hang the exit. */
__attribute__((destructor))
static void late_flush_at_exit(void)
{
	struct timespec deadline = emu_ns_to_ts(emu_now_ns() + 1000000000u);

	late_flush(&deadline);
}

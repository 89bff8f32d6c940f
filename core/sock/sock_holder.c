/* sock_holder.c - see sock_holder.h. */
#include "sock_holder.h"

#include <unistd.h>

#include "proc_id.h"

/* The entry h is id's now: its start time and exec count.  Until they
 * are written a reader sees 0 for both (a free entry has them 0): a start
 * time it cannot tell, and no exec, which both count the holder in. */
static void took(struct cxls_sock_holder *h, const struct cxls_proc_id *id, uint32_t execs)
{
	h->start_time = id->start_time;
	atomic_store(&h->execs, execs);
}

/* pid's entry, or -1: a process has one at most (cxls_holder_add_id). */
static int entry_of(const struct cxls_sock_holder *h, int n, uint32_t pid)
{
	for (int i = 0; i < n; i++)
		if (atomic_load(&h[i].pid) == pid)
			return i;
	return -1;
}

int cxls_holder_add_id(struct cxls_sock_holder *h, int n, const struct cxls_proc_id *id,
		       uint32_t execs)
{
	int i = entry_of(h, n, id->pid);

	if (i >= 0) {
		/* the number of one that died without closing, reused: its
		 * start time would make this holder look dead */
		if (id->start_time && h[i].start_time && h[i].start_time != id->start_time)
			took(&h[i], id, execs);
		return 0;
	}
	for (i = 0; i < n; i++) {
		uint32_t zero = 0;

		if (atomic_compare_exchange_strong(&h[i].pid, &zero, id->pid)) {
			took(&h[i], id, execs);
			return 0;
		}
	}
	/* full: a holder that died without closing (a child that exec'd a
	 * program that exited) gives its entry up; holders are of one host */
	for (i = 0; i < n; i++) {
		struct cxls_proc_id old = { atomic_load(&h[i].pid), id->boot_hash, h[i].start_time };

		if (old.pid && cxls_proc_alive(&old) == 0 &&
		    atomic_compare_exchange_strong(&h[i].pid, &old.pid, id->pid)) {
			took(&h[i], id, execs);
			return 0;
		}
	}
	return -1;
}

int cxls_holder_add(struct cxls_sock_holder *h, int n)
{
	struct cxls_proc_id self;

	cxls_proc_self(&self);
	return cxls_holder_add_id(h, n, &self, 0);
}

int cxls_holder_remove(struct cxls_sock_holder *h, int n)
{
	struct cxls_proc_id self;
	int left = 0;

	cxls_proc_self(&self);
	for (int i = 0; i < n; i++) {
		if (atomic_load(&h[i].pid) == self.pid) {
			h[i].start_time = 0;
			atomic_store(&h[i].execs, 0);
			atomic_store(&h[i].pid, 0);
		}
		left += atomic_load(&h[i].pid) != 0;
	}
	return left;
}

void cxls_holder_exec(struct cxls_sock_holder *h, int n, int delta)
{
	int i = entry_of(h, n, (uint32_t)getpid());

	if (i >= 0)
		atomic_fetch_add(&h[i].execs, (uint32_t)delta);
}

uint32_t cxls_holder_execs(const struct cxls_sock_holder *h, int n)
{
	int i = entry_of(h, n, (uint32_t)getpid());

	return i >= 0 ? atomic_load(&h[i].execs) : 0;
}

int cxls_holder_left(const struct cxls_sock_holder *h, int n, uint64_t boot_hash)
{
	int recorded, alive = cxls_holder_alive(h, n, boot_hash, &recorded);

	return alive == 0 ? 0 : recorded;
}

int cxls_holder_alive(const struct cxls_sock_holder *h, int n, uint64_t boot_hash,
		      int *recorded)
{
	int alive = 0;

	*recorded = 0;
	for (int i = 0; i < n; i++) {
		struct cxls_proc_id id = { atomic_load(&h[i].pid), boot_hash, h[i].start_time };

		if (!id.pid)
			continue;
		(*recorded)++;
		alive += cxls_proc_alive(&id) != 0;
	}
	return alive;
}

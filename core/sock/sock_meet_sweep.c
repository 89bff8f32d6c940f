/* sock_meet_sweep.c - the records of closed or dead connections freed,
 * with the buffers they held: by a sweep of the whole table (a claim that
 * found it full, a writer out of buffers, `cxlshim pool clean`) or by the
 * close of an end (cxls_meet_free_rec()).
 */
#include "sock_meet_int.h"

#include "coherence.h"
#include "log.h"
#include "pool.h"

/* ABANDONED and REFUSED records stay this long so that a late peer finds
 * them and stays on TCP without waiting, then the sweep frees them; when
 * the table is full, the sweep that a claim makes frees them after
 * FULL_STALE_NS: under connection churn a full table is mostly records
 * whose peers went by already (a server that had no slot for its own
 * leaves nothing to find), and kept full it keeps every new connection
 * on TCP.  A peer later than that makes its own record, which the other
 * end's first TCP byte ends at once (a server that speaks first waits
 * its window). */
#define STALE_NS (10ull * 1000000000ull)
#define FULL_STALE_NS (20ull * 1000000ull)

static int sweep(const struct cxls_sock_region *r, uint64_t stale_ns);

/* A sweep looks at every record, each holder's /proc/PID/stat: when one
 * found the table full of live connections, the claims of the next
 * FULL_RESWEEP_NS stay on TCP without sweeping again (a server taking
 * hundreds of connections a second swept at every one of them). */
#define FULL_RESWEEP_NS (20ull * 1000000ull)

int cxls_meet_sweep_full(const struct cxls_sock_region *r)
{
	static _Atomic uint64_t fruitless; /* when the last one freed nothing */
	uint64_t now = cxls_now_ns(), t = atomic_load(&fruitless);
	int freed;

	if (t && now - t < FULL_RESWEEP_NS)
		return 0;
	freed = sweep(r, FULL_STALE_NS);
	atomic_store(&fruitless, freed ? 0 : now);
	return freed;
}

/* Frees the record (one CAS: one winner) and the buffers its references
 * still held. */
int cxls_meet_free_rec(const struct cxls_sock_region *r, struct cxls_sock_rec *rec, uint32_t slot,
		       uint64_t sg)
{
	cxls_refresh(r->pool->flush_mode, &rec->sg, CXLS_LINE);
	if (!atomic_compare_exchange_strong(&rec->sg, &sg, CXLS_SG(CXLS_SG_GEN(sg), CXLS_SK_FREE)))
		return 0;
	cxls_publish(r->pool->flush_mode, &rec->sg, CXLS_LINE);
	cxls_buf_reclaim(&r->bufs, CXLS_BUF_OWNER(CXLS_SG_GEN(sg), slot));
	return 1;
}

void cxls_sock_sweep_starved(const struct cxls_sock_region *r)
{
	static _Atomic uint64_t last; /* process-wide: one sweep a second is plenty */
	uint64_t now = cxls_now_ns(), t = atomic_load(&last);

	if ((t && now - t < 1000000000ull) || !atomic_compare_exchange_strong(&last, &t, now))
		return;
	if (r && cxls_buf_lent(&r->bufs) >= r->bufs.total)
		cxls_sock_sweep(r);
}

int cxls_sock_sweep(const struct cxls_sock_region *r)
{
	return sweep(r, STALE_NS);
}

static int sweep(const struct cxls_sock_region *r, uint64_t stale_ns)
{
	uint64_t now = cxls_now_ns();
	int freed = 0;

	cxls_proc_memo_begin(); /* a few processes hold all the records */
	for (uint32_t i = 0; i < r->nslots; i++) {
		struct cxls_sock_rec *rec = cxls_sock_rec(r, i);
		uint64_t sg;
		uint32_t st;
		int done;

		cxls_refresh(r->pool->flush_mode, rec, offsetof(struct cxls_sock_rec, end));
		sg = atomic_load(&rec->sg);
		st = CXLS_SG_STATE(sg);
		switch (st) {
		case CXLS_SK_FREE:
			continue;
		case CXLS_SK_CLAIMING: /* microseconds long, unless its claimer died */
			done = cxls_meet_claim_stale(rec, sg);
			break;
		case CXLS_SK_WAITING:
			done = cxls_meet_end_finished(r, &rec->end[rec->creator & 1]);
			break;
		case CXLS_SK_JOINED:
			done = cxls_meet_end_finished(r, &rec->end[0]) &&
			       cxls_meet_end_finished(r, &rec->end[1]);
			break;
		default: /* REFUSED, ABANDONED: only the creator ever held it */
			done = now - rec->created_ns > stale_ns ||
			       cxls_meet_end_finished(r, &rec->end[rec->creator & 1]);
			break;
		}
		if (done)
			freed += cxls_meet_free_rec(r, rec, i, sg);
	}
	cxls_proc_memo_end();
	if (freed)
		CXLS_INFO("socket sweep: %d records of closed or dead connections freed", freed);
	return freed;
}

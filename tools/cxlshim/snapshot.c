/* snapshot.c - copy and validate a pool's metadata, read-only. */
#include "snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "comm_table.h"
#include "layout.h"
#include "pool.h"
#include "proc_id.h"
#include "seq_record.h"

const char *snap_phase_name(uint32_t phase)
{
	static const char *const names[] = { "free", "joining", "ready", "failed" };

	return phase < 4 ? names[phase] : "invalid";
}

const char *snap_rank_state_name(uint32_t state)
{
	static const char *const names[] = { "empty", "joined", "left" };

	return state < 3 ? names[state] : "invalid";
}

const char *snap_abort_name(uint32_t reason)
{
	static const char *const names[] = { "none", "ncclCommAbort", "a rank died or left",
					     "a collective timed out", "mismatched collectives" };

	return reason < 5 ? names[reason] : "invalid";
}

/* One descriptor, whatever number it holds, read as op_desc.c does. */
static void copy_desc(const struct cxls_op_desc *p, struct snap_desc *d)
{
	uint32_t seq = atomic_load_explicit(&p->seq, memory_order_acquire);

	memset(d, 0, sizeof(*d));
	d->seq = seq;
	d->kind = atomic_load_explicit(&p->kind, memory_order_relaxed);
	d->count = atomic_load_explicit(&p->count, memory_order_relaxed);
	d->type = atomic_load_explicit(&p->type, memory_order_relaxed);
	d->redop = atomic_load_explicit(&p->redop, memory_order_relaxed);
	d->root = atomic_load_explicit(&p->root, memory_order_relaxed);
	d->rounds = atomic_load_explicit(&p->rounds, memory_order_relaxed);
	d->enq_ns = atomic_load_explicit(&p->enq_ns, memory_order_relaxed);
	d->queue = atomic_load_explicit(&p->queue, memory_order_relaxed);
	d->valid = seq && seq_record_end(&p->seq, seq) && d->kind > CXLS_OP_NONE &&
		   d->kind < CXLS_OP_KINDS && d->type < 32;
}

static void copy_rank(const struct cxls_comm_view *v, const struct cxls_comm_rec *hdr, uint32_t r,
		      int flags, struct snap_rank *o)
{
	const struct cxls_rank_rec *rr = &v->ranks[r];
	struct cxls_rank_rec copy;

	o->state = atomic_load(&rr->state);
	memcpy(&copy, rr, sizeof(copy));
	if (o->state != CXLS_RANK_EMPTY && !cxls_rank_rec_ok(hdr, &copy, r))
		o->corrupt = "rank record fails its checksum";
	o->pid = rr->pid;
	o->device = rr->device;
	o->boot_hash = rr->boot_hash;
	o->start_time = rr->start_time;
	o->heartbeat = atomic_load(&rr->heartbeat);
	o->enq = atomic_load(&rr->ops_enqueued);
	o->done = atomic_load(&v->done[r].seq);
	o->pub = atomic_load(&v->pub[r].seq);
	o->ack = atomic_load(&v->ack[r].seq);
	o->alive = 0;
	if ((flags & SNAP_LIVENESS) && o->state == CXLS_RANK_JOINED && !o->corrupt) {
		struct cxls_proc_id id = { o->pid, o->boot_hash, o->start_time };

		o->alive = cxls_proc_alive(&id);
	}
	for (uint32_t i = 0; i < CXLS_DESC_RING; i++)
		copy_desc(&v->desc[(size_t)r * CXLS_DESC_RING + i], &o->desc[i]);
}

/* The last message number posted on one side of a channel. */
static uint32_t last_msg(const struct cxls_p2p_msg *r)
{
	uint32_t last = 0;

	for (int i = 0; i < CXLS_P2P_MSG_RING; i++) {
		uint32_t seq = atomic_load_explicit(&r->m[i].seq, memory_order_acquire);

		if (seq > last)
			last = seq;
	}
	return last;
}

/* Message seq of ring r, read as p2p_match.c's peek() does. */
static void copy_msg(const struct cxls_p2p_msg *r, uint32_t seq, struct snap_p2p_msg *o)
{
	const __typeof__(r->m[0]) *e = &r->m[(seq - 1) % CXLS_P2P_MSG_RING];

	memset(o, 0, sizeof(*o));
	if (!seq || seq_record_begin(&e->seq, seq) != 1)
		return;
	o->bytes = atomic_load_explicit(&e->bytes, memory_order_relaxed);
	o->chunk0 = atomic_load_explicit(&e->chunk0, memory_order_relaxed);
	o->valid = seq_record_end(&e->seq, seq);
}

/* The chunk count at which message m is through, 0 when unknown. */
static uint32_t msg_end(const struct snap_p2p_msg *m, uint64_t chunk)
{
	return m->valid && chunk ? m->chunk0 + (uint32_t)((m->bytes + chunk - 1) / chunk) : 0;
}

static void copy_channel(const struct cxls_comm_view *v, uint32_t src, uint32_t dst,
			 uint64_t chunk, struct snap_p2p *o)
{
	size_t i = (size_t)src * v->max_ranks + dst;
	uint32_t s_end, r_end;

	o->src = src;
	o->dst = dst;
	o->sent = last_msg(&v->p2p_smsg[i]);
	o->recvd = last_msg(&v->p2p_rmsg[i]);
	o->pub = atomic_load(&cxls_p2p_pub(v, (int)src, (int)dst)->seq);
	o->ack = atomic_load(&cxls_p2p_ack(v, (int)src, (int)dst)->seq);
	copy_msg(&v->p2p_smsg[i], o->sent, &o->smsg);
	copy_msg(&v->p2p_rmsg[i], o->recvd, &o->rmsg);
	s_end = msg_end(&o->smsg, chunk);
	r_end = msg_end(&o->rmsg, chunk);
	o->busy = o->sent != o->recvd || (s_end && o->pub - s_end > (1u << 31)) ||
		  (r_end && o->ack - r_end > (1u << 31));
}

/* Busy channels, and every other channel with messages of the ranks at
 * their ends (what else their groups did).  Counted, then copied: on a
 * live pool what does not fit the first count is left out.  0, or -1
 * when out of memory. */
static int copy_p2p(const struct cxls_comm_view *v, struct snap_comm *o)
{
	uint32_t n = o->nranks, cap = 0;
	uint8_t *busy = calloc(n, 1);
	struct snap_p2p ch;

	if (!busy)
		return -1;
	for (uint32_t src = 0; src < n; src++)
		for (uint32_t dst = 0; dst < n; dst++) {
			if (src == dst)
				continue;
			copy_channel(v, src, dst, o->p2p_chunk, &ch);
			if (ch.busy)
				busy[src] = busy[dst] = 1;
		}
	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t src = 0; src < n; src++)
			for (uint32_t dst = 0; dst < n; dst++) {
				if (src == dst || !(busy[src] || busy[dst]))
					continue;
				copy_channel(v, src, dst, o->p2p_chunk, &ch);
				if (!ch.busy && !ch.sent && !ch.recvd)
					continue;
				if (!pass)
					cap++;
				else if (o->np2p < cap)
					o->p2p[o->np2p++] = ch;
			}
		if (!pass && (!cap || !(o->p2p = calloc(cap, sizeof(*o->p2p)))))
			break;
	}
	free(busy);
	return cap && !o->p2p ? -1 : 0;
}

/* Header fields, each checked against the geometry. */
static int copy_comm(const struct cxls_pool *p, uint32_t slot, int flags, struct snap_comm *o)
{
	struct cxls_comm_view v;
	struct cxls_comm_rec hdr;
	struct cxls_layout lay;
	uint64_t st;

	cxls_comm_view_of(p, slot, &v);
	st = atomic_load(&v.rec->state);
	memcpy(&hdr, v.rec, sizeof(hdr)); /* checked and hashed as one copy */
	memset(o, 0, sizeof(*o));
	o->slot = slot;
	o->phase = CXLS_PHASE(st);
	o->joined = CXLS_JOINED(st);
	if (o->phase == CXLS_COMM_FREE)
		return 0;
	o->key_hash = cxls_hash64((const void *)&hdr, 2 * sizeof(uint64_t));
	o->nranks = hdr.nranks;
	o->created_ns = hdr.created_ns;
	o->abort_reason = atomic_load(&v.rec->abort_reason);
	o->abort_rank = atomic_load(&v.rec->abort_rank);
	o->chunk = hdr.chunk;
	o->slots = hdr.slots;
	if (o->phase > CXLS_COMM_FAILED)
		o->corrupt = "unknown phase";
	else if (o->nranks < 1 || o->nranks > p->sb->max_ranks)
		o->corrupt = "rank count outside the pool's max_ranks";
	else if (o->joined > o->nranks)
		o->corrupt = "more ranks joined than the record holds";
	else if (hdr.lane != slot)
		o->corrupt = "lane does not match the slot";
	else if (!cxls_comm_rec_ok(&hdr))
		o->corrupt = "record fails its checksum";
	if (o->corrupt)
		return 1;
	o->ranks = calloc(o->nranks, sizeof(*o->ranks));
	if (!o->ranks) {
		o->corrupt = "out of memory";
		return 1;
	}
	for (uint32_t r = 0; r < o->nranks; r++) {
		copy_rank(&v, &hdr, r, flags, &o->ranks[r]);
		o->bad_ranks += o->ranks[r].corrupt != NULL;
	}
	if (cxls_layout_init(&lay, p->sb, slot, o->nranks, hdr.chunk, hdr.slots,
			     (int)hdr.interleave, hdr.window) == 0)
		o->p2p_chunk = lay.p2p_chunk;
	if (copy_p2p(&v, o))
		o->corrupt = "out of memory";
	return 1;
}

int snap_take(const void *base, size_t size, int flags, struct pool_snap *out)
{
	struct cxls_pool p = { .fd = -1 };
	int err;

	memset(out, 0, sizeof(*out));
	if (size < sizeof(struct cxls_super))
		return CXLS_POOL_ESIZE;
	memcpy(&out->sb, base, sizeof(out->sb));
	out->lock_owner = atomic_load(&((const struct cxls_super *)base)->table_lock);
	err = cxls_super_check(&out->sb, size);
	if (err)
		return err;
	out->map_size = size;
	/* views are computed from the validated copy, never the live bytes */
	p.base = (uint8_t *)base;
	p.size = size;
	p.sb = &out->sb;
	p.geo = out->sb;
	out->comms = calloc(out->sb.max_comms, sizeof(*out->comms));
	if (!out->comms)
		return CXLS_POOL_ESYS;
	for (uint32_t s = 0; s < out->sb.max_comms; s++) {
		if (copy_comm(&p, s, flags, &out->comms[out->ncomms]))
			out->ncomms++;
		else
			out->nfree++;
	}
	if (snap_take_socks(base, flags, out) || snap_take_bufs(base, out))
		return CXLS_POOL_ESYS;
	return 0;
}

void snap_free(struct pool_snap *s)
{
	for (uint32_t i = 0; i < s->ncomms; i++) {
		free(s->comms[i].ranks);
		free(s->comms[i].p2p);
	}
	free(s->comms);
	free(s->listeners);
	free(s->socks);
	for (int k = 0; k < s->nbufclasses; k++)
		free(s->bufclass[k].lent);
	memset(s, 0, sizeof(*s));
}

static int dax_size(const struct stat *st, size_t *size)
{
	char sys[128];
	unsigned long long v = 0;
	FILE *f;

	snprintf(sys, sizeof(sys), "/sys/dev/char/%u:%u/size", major(st->st_rdev),
		 minor(st->st_rdev));
	f = fopen(sys, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%llu", &v) != 1)
		v = 0;
	fclose(f);
	*size = (size_t)v;
	return v ? 0 : -1;
}

int snap_map_open(const char *path, struct snap_map *m)
{
	struct stat st;
	void *p;
	int fd, saved;

	memset(m, 0, sizeof(*m));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st))
		goto fail;
	if (S_ISCHR(st.st_mode)) {
		if (dax_size(&st, &m->size))
			goto fail;
	} else if (S_ISREG(st.st_mode)) {
		m->size = (size_t)st.st_size;
	} else {
		errno = EINVAL;
		goto fail;
	}
	if (m->size < CXLS_PAGE) {
		errno = EINVAL;
		goto fail;
	}
	p = mmap(NULL, m->size, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		goto fail;
	close(fd);
	m->base = p;
	return 0;
fail:
	saved = errno;
	close(fd);
	errno = saved;
	return -1;
}

void snap_map_close(struct snap_map *m)
{
	if (m->base)
		munmap((void *)m->base, m->size);
	m->base = NULL;
}

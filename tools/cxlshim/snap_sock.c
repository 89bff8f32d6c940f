/* snap_sock.c - the socket region of a pool snapshot (snapshot.h): the
 * listeners the pool advertises and the connections it carries, each
 * number checked against the validated geometry before it is shown. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "proc_id.h"
#include "sock_claim.h"
#include "snapshot.h"

const char *snap_sock_state_name(uint32_t state)
{
	static const char *const names[] = { "free", "claiming", "waiting", "joined",
					     "refused", "abandoned", "denied" };

	return state < sizeof(names) / sizeof(names[0]) ? names[state] : "invalid";
}

const char *snap_listener_state_name(uint32_t state)
{
	static const char *const names[] = { "free", "claiming", "live" };

	return state < 3 ? names[state] : "invalid";
}

void snap_addr(char *buf, unsigned long len, uint16_t family, const uint8_t *addr,
	       uint16_t port)
{
	char a[INET6_ADDRSTRLEN] = "?";

	if (family == AF_INET6) {
		inet_ntop(AF_INET6, addr, a, sizeof(a));
		snprintf(buf, len, "[%s]:%u", a, port);
	} else {
		inet_ntop(AF_INET, addr, a, sizeof(a));
		snprintf(buf, len, "%s:%u", a, port);
	}
}

/* Holders as recorded; liveness asked of the kernel when flags say so
 * (a holder of another host is -1, never declared dead from here). */
static uint32_t copy_holders(const struct cxls_sock_holder *h, int n, uint64_t boot_hash,
			     int flags, struct snap_holder *o)
{
	uint32_t k = 0;

	for (int i = 0; i < n; i++) {
		struct cxls_proc_id id = { atomic_load(&h[i].pid), boot_hash, h[i].start_time };

		if (!id.pid)
			continue;
		o[k].pid = id.pid;
		o[k].start_time = id.start_time;
		o[k].alive = (flags & SNAP_LIVENESS) ? cxls_proc_alive(&id) : 0;
		k++;
	}
	return k;
}

/* The claimer of a CLAIMING record, from its tagged identity. */
static void copy_claim(uint64_t sg, const _Atomic uint32_t *claim_gen, uint64_t boot_hash,
		       const struct cxls_sock_holder *h, int n, int flags, struct snap_claim *o)
{
	o->who = CXLS_CLAIMER_UNKNOWN;
	if (atomic_load(claim_gen) != CXLS_SG_GEN(sg))
		return;
	o->pid = atomic_load(&h[0].pid);
	if (flags & SNAP_LIVENESS)
		o->who = cxls_claimer_of(sg, claim_gen, boot_hash, h, n);
}

static void copy_listener(const struct cxls_sock_listener *l, uint32_t idx, int flags,
			  struct snap_listener *o)
{
	uint64_t sg = atomic_load_explicit(&l->sg, memory_order_acquire);

	memset(o, 0, sizeof(*o));
	o->idx = idx;
	o->state = CXLS_SG_STATE(sg);
	o->gen = CXLS_SG_GEN(sg);
	if (o->state == CXLS_LST_CLAIMING)
		copy_claim(sg, &l->claim_gen, l->boot_hash, l->holder, CXLS_LISTENER_HOLDERS,
			   flags, &o->claim);
	o->port = ntohs(l->port);
	o->family = l->family;
	memcpy(o->addr, l->addr, sizeof(o->addr));
	o->uid = l->uid;
	o->untracked = l->untracked;
	o->forking = atomic_load(&l->forking);
	o->nholders = copy_holders(l->holder, CXLS_LISTENER_HOLDERS, l->boot_hash, flags,
				   o->holder);
}

static void copy_end(const struct cxls_sock_end *e, int flags, struct snap_sock_end *o)
{
	o->flags = atomic_load(&e->flags);
	o->forking = atomic_load(&e->forking);
	o->uid = e->uid;
	o->nholders = copy_holders(e->holder, CXLS_SOCK_HOLDERS, e->boot_hash, flags, o->holder);
}

/* What a record may hold, whatever wrote it: the ring size a power of two
 * within the pool's, each direction's cursors at most one ring apart. */
static const char *sock_check(const struct cxls_super *sb, const struct cxls_sock_rec *rec,
			      struct snap_sock *o)
{
	if (o->state > CXLS_SK_DENIED)
		return "unknown state";
	if (o->state == CXLS_SK_CLAIMING)
		return NULL; /* being written right now */
	if (o->creator > CXLS_SERVER)
		return "creator is neither client nor server";
	if (o->tuple.family != AF_INET && o->tuple.family != AF_INET6)
		return "address family is neither IPv4 nor IPv6";
	if (o->cap < CXLS_SOCK_RING_MIN || o->cap > sb->sock_ring || (o->cap & (o->cap - 1)))
		return "ring size out of range";
	for (int d = 0; d < 2; d++) {
		uint64_t cons = atomic_load(&rec->ring[d].cons);
		uint64_t prod = atomic_load(&rec->ring[d].prod);

		if (prod - cons > o->cap)
			return "ring cursors further apart than the ring";
		o->fill[d] = prod - cons;
	}
	return NULL;
}

static void copy_sock(const struct cxls_super *sb, const struct cxls_sock_rec *rec, uint32_t slot,
		      uint64_t sg, int flags, struct snap_sock *o)
{
	memset(o, 0, sizeof(*o));
	o->slot = slot;
	o->state = CXLS_SG_STATE(sg);
	o->gen = CXLS_SG_GEN(sg);
	o->creator = rec->creator;
	o->cap = rec->cap;
	memcpy(&o->tuple, &rec->tuple, sizeof(o->tuple));
	o->created_ns = rec->created_ns;
	if (o->state == CXLS_SK_CLAIMING) {
		const struct cxls_sock_end *e = &rec->end[rec->creator & 1];

		copy_claim(sg, &e->claim_gen, e->boot_hash, e->holder, CXLS_SOCK_HOLDERS, flags,
			   &o->claim);
	}
	o->corrupt = sock_check(sb, rec, o);
	if (o->corrupt)
		return;
	copy_end(&rec->end[CXLS_CLIENT], flags, &o->end[CXLS_CLIENT]);
	copy_end(&rec->end[CXLS_SERVER], flags, &o->end[CXLS_SERVER]);
}

int snap_take_socks(const uint8_t *base, int flags, struct pool_snap *out)
{
	const struct cxls_super *sb = &out->sb;
	const struct cxls_sock_listener *lst;
	const uint8_t *recs;

	if (!sb->sock_slots)
		return 0;
	/* validated geometry: the region lies inside the pool */
	lst = (const void *)(base + sb->sock_offset);
	recs = base + sb->sock_offset + (uint64_t)sb->sock_listeners * CXLS_SOCK_LISTENER_SIZE;
	out->listeners = calloc(sb->sock_listeners, sizeof(*out->listeners));
	out->socks = calloc(sb->sock_slots, sizeof(*out->socks));
	if (!out->listeners || !out->socks)
		return -1;
	for (uint32_t i = 0; i < sb->sock_listeners; i++) {
		if (CXLS_SG_STATE(atomic_load(&lst[i].sg)) == CXLS_LST_FREE)
			continue;
		copy_listener(&lst[i], i, flags, &out->listeners[out->nlisteners++]);
	}
	for (uint32_t i = 0; i < sb->sock_slots; i++) {
		const struct cxls_sock_rec *rec = (const void *)(recs + (uint64_t)i * CXLS_SOCK_REC_SIZE);
		uint64_t sg = atomic_load_explicit(&rec->sg, memory_order_acquire);

		if (CXLS_SG_STATE(sg) == CXLS_SK_FREE) {
			out->nsock_free++;
			continue;
		}
		copy_sock(sb, rec, i, sg, flags, &out->socks[out->nsocks++]);
	}
	return 0;
}

/* status_text.c - `cxlshim pool status` for people (status.h). */
#include "status.h"

#include <arpa/inet.h>

#include "names.h"
#include "sock_claim.h"

static const char *alive_name(int alive)
{
	return alive > 0 ? "alive" : alive == 0 ? "DEAD" : "remote";
}

static void print_uuid(FILE *out, const uint8_t *u)
{
	for (int i = 0; i < 16; i++)
		fprintf(out, "%02x%s", u[i], i == 3 || i == 5 || i == 7 || i == 9 ? "-" : "");
}

static void print_rank(FILE *out, const struct snap_comm *c, uint32_t r, int verbose)
{
	const struct snap_rank *k = &c->ranks[r];
	const char *alive = k->corrupt ? "CORRUPT" : k->state != CXLS_RANK_JOINED ? "-" :
			    alive_name(k->alive);

	fprintf(out, "    rank %-4u %-6s pid %-8u %-6s dev %-3u enq %-6u done %-6u pub %-8u "
		"ack %-8u hb %llu\n", r, snap_rank_state_name(k->state), k->pid, alive, k->device,
		k->enq, k->done, k->pub, k->ack, (unsigned long long)k->heartbeat);
	if (k->corrupt)
		fprintf(out, "      CORRUPT: %s (not trusted; pool clean reclaims it once no "
			"holder is alive)\n", k->corrupt);
	if (!verbose)
		return;
	for (uint32_t i = 0; i < CXLS_DESC_RING; i++) {
		const struct snap_desc *d = &k->desc[i];
		char call[128];

		if (!d->valid)
			continue;
		name_call(call, sizeof(call), d->kind, d->count, d->type, d->redop, d->root);
		fprintf(out, "      op %-6u %s, %u rounds\n", d->seq, call, d->rounds);
	}
}

static void print_comm(FILE *out, const struct snap_comm *c, int verbose)
{
	fprintf(out, "  slot %-4u %-8s id %016llx  ranks %u, joined %u", c->slot,
		snap_phase_name(c->phase), (unsigned long long)c->key_hash, c->nranks, c->joined);
	if (c->corrupt) {
		fprintf(out, "  CORRUPT: %s (pool clean reclaims it)\n", c->corrupt);
		return;
	}
	fprintf(out, ", chunk %llu x %u slots", (unsigned long long)c->chunk, c->slots);
	if (c->abort_reason)
		fprintf(out, ", failed by rank %u: %s", c->abort_rank,
			snap_abort_name(c->abort_reason));
	if (c->bad_ranks)
		fprintf(out, ", %u CORRUPT rank record%s", c->bad_ranks, c->bad_ranks > 1 ? "s" : "");
	fprintf(out, "\n");
	for (uint32_t r = 0; r < c->nranks; r++)
		if (c->ranks[r].state != CXLS_RANK_EMPTY || verbose)
			print_rank(out, c, r, verbose);
}

static void print_holders(FILE *out, const struct snap_holder *h, uint32_t n)
{
	if (!n)
		fprintf(out, " none");
	for (uint32_t i = 0; i < n; i++)
		fprintf(out, "%s pid %u %s", i ? "," : "", h[i].pid, alive_name(h[i].alive));
}

/* A record stuck in CLAIMING is lost to every later job until swept. */
static void print_claim(FILE *out, const struct snap_claim *c)
{
	if (c->who == CXLS_CLAIMER_ALIVE)
		fprintf(out, "by pid %u alive (being written)\n", c->pid);
	else if (c->who == CXLS_CLAIMER_DEAD)
		fprintf(out, "by pid %u DEAD: `pool clean` reclaims it\n", c->pid);
	else
		fprintf(out, "by a process not known yet or of another host: reclaimed %u s "
			"after a sweep first sees it\n", CXLS_CLAIM_LEASE_S);
}

static void print_listener(FILE *out, const struct snap_listener *l)
{
	char addr[64];

	if (l->state == CXLS_LST_CLAIMING) {
		fprintf(out, "  listener %-4u claiming ", l->idx);
		print_claim(out, &l->claim);
		return;
	}
	snap_addr(addr, sizeof(addr), l->family, l->addr, l->port);
	fprintf(out, "  listener %-4u %-8s %-24s uid %u, held by", l->idx,
		snap_listener_state_name(l->state), addr, l->uid);
	print_holders(out, l->holder, l->nholders);
	if (l->untracked)
		fprintf(out, " (and untracked forks)");
	fprintf(out, "\n");
}

static void print_end(FILE *out, const char *role, const struct snap_sock_end *e)
{
	fprintf(out, "      %s end:", role);
	print_holders(out, e->holder, e->nholders);
	if (e->flags & CXLS_END_SHUT_WR)
		fprintf(out, ", shut down for writing");
	if (e->flags & CXLS_END_CLOSED)
		fprintf(out, ", closed");
	if (e->flags & CXLS_END_RESET)
		fprintf(out, ", reset");
	fprintf(out, "\n");
}

static void print_sock(FILE *out, const struct snap_sock *k)
{
	const struct cxls_sock_tuple *t = &k->tuple;
	char c[64], srv[64];

	if (k->state == CXLS_SK_CLAIMING) {
		fprintf(out, "  conn slot %-4u claiming  ", k->slot);
		print_claim(out, &k->claim);
		return;
	}
	snap_addr(c, sizeof(c), t->family, t->caddr, ntohs(t->cport));
	snap_addr(srv, sizeof(srv), t->family, t->saddr, ntohs(t->sport));
	fprintf(out, "  conn slot %-4u %-9s %s -> %s", k->slot, snap_sock_state_name(k->state), c,
		srv);
	if (k->corrupt) {
		fprintf(out, "  CORRUPT: %s\n", k->corrupt);
		return;
	}
	fprintf(out, ", ring fill c->s %llu/%u s->c %llu/%u, made by the %s\n",
		(unsigned long long)k->fill[0], k->cap, (unsigned long long)k->fill[1], k->cap,
		k->creator == CXLS_CLIENT ? "client" : "server");
	print_end(out, "client", &k->end[CXLS_CLIENT]);
	print_end(out, "server", &k->end[CXLS_SERVER]);
}

static void print_bufclass(FILE *out, const struct snap_bufclass *c)
{
	fprintf(out, "  buffers of %u bytes: %u, %u lent\n", c->size, c->count, c->in_use);
	for (uint32_t i = 0; i < c->in_use; i++) {
		const struct snap_buf *b = &c->lent[i];

		fprintf(out, "    buffer %-5u ", b->idx);
		if (!b->conn)
			fprintf(out, "ORPHAN: lent to slot %u generation %u, which no connection "
				"holds (pool clean gives it back)\n", b->slot, b->gen);
		else
			fprintf(out, "lent to conn slot %u (%s), %s\n", b->slot,
				snap_sock_state_name(b->conn->state),
				b->conn->corrupt ? "CORRUPT record" :
				b->alive > 0 ? "holder alive" : b->alive ? "holders remote" :
				"holders DEAD");
	}
}

void status_text(FILE *out, const char *path, const struct pool_snap *s, int verbose)
{
	const struct cxls_super *sb = &s->sb;

	fprintf(out, "pool %s: %llu bytes, uuid ", path, (unsigned long long)sb->pool_size);
	print_uuid(out, sb->uuid);
	fprintf(out, "\n  %u devices of %llu bytes, %s, %u communicator slots (%u in use, %u free), "
		"up to %u ranks each\n", sb->ndev, (unsigned long long)sb->dev_size,
		sb->coherence ? "flush" : "coherent", sb->max_comms, s->ncomms, s->nfree,
		sb->max_ranks);
	if (s->lock_owner)
		fprintf(out, "  table lock held by pid %u\n", (unsigned)s->lock_owner);
	for (uint32_t i = 0; i < s->ncomms; i++)
		print_comm(out, &s->comms[i], verbose);
	if (!sb->sock_slots) {
		fprintf(out, "sockets: this pool has no socket region\n");
	} else {
		fprintf(out, "sockets: %u connection slots (%u in use, %u free), %u listener slots "
			"(%u in use), rings of %llu bytes\n", sb->sock_slots, s->nsocks, s->nsock_free,
			sb->sock_listeners, s->nlisteners, (unsigned long long)sb->sock_ring);
		for (uint32_t i = 0; i < s->nlisteners; i++)
			print_listener(out, &s->listeners[i]);
		for (uint32_t i = 0; i < s->nsocks; i++)
			print_sock(out, &s->socks[i]);
		for (int k = 0; k < s->nbufclasses; k++)
			print_bufclass(out, &s->bufclass[k]);
	}
	fprintf(out, "host memory: %s\n", STATUS_HOSTMEM_NOTE);
}

/* status_json.c - `cxlshim pool status --json` for scripts (status.h).
 *
 * One object; numbers as numbers, names as the text report spells them,
 * pids with "alive": true, false or null (another host).  Every string
 * comes from the tool's own tables or from inet_ntop, never from pool
 * bytes, so only the fixed names need escaping (none do). */
#include "status.h"

#include <arpa/inet.h>

#include "json_str.h"
#include "names.h"
#include "sock_claim.h"

static void jalive(FILE *out, int alive)
{
	fputs(alive > 0 ? "true" : alive == 0 ? "false" : "null", out);
}

static void jstr_or_null(FILE *out, const char *s)
{
	if (s)
		fprintf(out, "\"%s\"", s);
	else
		fputs("null", out);
}

static void json_ops(FILE *out, const struct snap_rank *k)
{
	const char *sep = "";

	fputs("\"ops\": [", out);
	for (uint32_t i = 0; i < CXLS_DESC_RING; i++) {
		const struct snap_desc *d = &k->desc[i];

		if (!d->valid)
			continue;
		fprintf(out, "%s{\"seq\": %u, \"kind\": \"%s\", \"count\": %llu, \"type\": \"%s\", "
			"\"root\": %d, \"rounds\": %u}", sep, d->seq, name_kind(d->kind),
			(unsigned long long)d->count, name_type(d->type), d->root, d->rounds);
		sep = ", ";
	}
	fputs("]", out);
}

static void json_rank(FILE *out, uint32_t r, const struct snap_rank *k)
{
	fprintf(out, "{\"rank\": %u, \"state\": \"%s\", \"pid\": %u, \"alive\": ", r,
		snap_rank_state_name(k->state), k->pid);
	if (k->state == CXLS_RANK_JOINED && !k->corrupt)
		jalive(out, k->alive);
	else
		fputs("false", out);
	fprintf(out, ", \"device\": %u, \"enqueued\": %u, \"done\": %u, \"pub\": %u, \"ack\": %u, "
		"\"heartbeat\": %llu, \"corrupt\": ", k->device, k->enq, k->done, k->pub, k->ack,
		(unsigned long long)k->heartbeat);
	jstr_or_null(out, k->corrupt);
	fputs(", ", out);
	json_ops(out, k);
	fputs("}", out);
}

static void json_comm(FILE *out, const struct snap_comm *c)
{
	fprintf(out, "{\"slot\": %u, \"phase\": \"%s\", \"id\": \"%016llx\", \"nranks\": %u, "
		"\"joined\": %u, \"corrupt\": ", c->slot, snap_phase_name(c->phase),
		(unsigned long long)c->key_hash, c->nranks, c->joined);
	jstr_or_null(out, c->corrupt);
	if (c->corrupt) {
		fputs(", \"ranks\": []}", out);
		return;
	}
	fprintf(out, ", \"chunk\": %llu, \"chunk_slots\": %u, \"failed\": ",
		(unsigned long long)c->chunk, c->slots);
	if (c->abort_reason)
		fprintf(out, "{\"by_rank\": %u, \"reason\": \"%s\"}", c->abort_rank,
			snap_abort_name(c->abort_reason));
	else
		fputs("null", out);
	fprintf(out, ", \"corrupt_ranks\": %u, \"ranks\": [", c->bad_ranks);
	for (uint32_t r = 0, n = 0; r < c->nranks; r++) {
		if (c->ranks[r].state == CXLS_RANK_EMPTY)
			continue;
		fputs(n++ ? ", " : "", out);
		json_rank(out, r, &c->ranks[r]);
	}
	fputs("]}", out);
}

static void json_holders(FILE *out, const struct snap_holder *h, uint32_t n)
{
	fputs("[", out);
	for (uint32_t i = 0; i < n; i++) {
		fprintf(out, "%s{\"pid\": %u, \"alive\": ", i ? ", " : "", h[i].pid);
		jalive(out, h[i].alive);
		fputs("}", out);
	}
	fputs("]", out);
}

static void json_claim(FILE *out, const struct snap_claim *c)
{
	static const char *const who[] = { "alive", "dead", "unknown" };

	fprintf(out, "\"claimer\": {\"pid\": %u, \"state\": \"%s\"}", c->pid, who[c->who]);
}

static void json_listener(FILE *out, const struct snap_listener *l)
{
	char addr[64];

	if (l->state == CXLS_LST_CLAIMING) {
		fprintf(out, "{\"index\": %u, \"state\": \"claiming\", \"generation\": %u, ",
			l->idx, l->gen);
		json_claim(out, &l->claim);
		fputs("}", out);
		return;
	}
	snap_addr(addr, sizeof(addr), l->family, l->addr, l->port);
	fprintf(out, "{\"index\": %u, \"state\": \"%s\", \"address\": \"%s\", \"port\": %u, "
		"\"uid\": %u, \"untracked\": %s, \"holders\": ", l->idx,
		snap_listener_state_name(l->state), addr, l->port, l->uid,
		l->untracked ? "true" : "false");
	json_holders(out, l->holder, l->nholders);
	fputs("}", out);
}

static void json_end(FILE *out, const struct snap_sock_end *e)
{
	fprintf(out, "{\"shut_wr\": %s, \"closed\": %s, \"reset\": %s, \"uid\": %u, \"holders\": ",
		e->flags & CXLS_END_SHUT_WR ? "true" : "false",
		e->flags & CXLS_END_CLOSED ? "true" : "false",
		e->flags & CXLS_END_RESET ? "true" : "false", e->uid);
	json_holders(out, e->holder, e->nholders);
	fputs("}", out);
}

static void json_sock(FILE *out, const struct snap_sock *k)
{
	const struct cxls_sock_tuple *t = &k->tuple;
	char c[64], srv[64];

	if (k->state == CXLS_SK_CLAIMING) {
		fprintf(out, "{\"slot\": %u, \"state\": \"claiming\", \"generation\": %u, ",
			k->slot, k->gen);
		json_claim(out, &k->claim);
		fputs("}", out);
		return;
	}
	snap_addr(c, sizeof(c), t->family, t->caddr, ntohs(t->cport));
	snap_addr(srv, sizeof(srv), t->family, t->saddr, ntohs(t->sport));
	fprintf(out, "{\"slot\": %u, \"state\": \"%s\", \"generation\": %u, \"client\": \"%s\", "
		"\"server\": \"%s\", \"corrupt\": ", k->slot, snap_sock_state_name(k->state), k->gen,
		c, srv);
	jstr_or_null(out, k->corrupt);
	if (k->corrupt) {
		fputs("}", out);
		return;
	}
	fprintf(out, ", \"creator\": \"%s\", \"ring\": %u, \"fill_c2s\": %llu, \"fill_s2c\": %llu, "
		"\"client_end\": ", k->creator == CXLS_CLIENT ? "client" : "server", k->cap,
		(unsigned long long)k->fill[0], (unsigned long long)k->fill[1]);
	json_end(out, &k->end[CXLS_CLIENT]);
	fputs(", \"server_end\": ", out);
	json_end(out, &k->end[CXLS_SERVER]);
	fputs("}", out);
}

static void json_bufclass(FILE *out, const struct snap_bufclass *c)
{
	fprintf(out, "{\"size\": %u, \"count\": %u, \"in_use\": %u, \"lent\": [", c->size,
		c->count, c->in_use);
	for (uint32_t i = 0; i < c->in_use; i++) {
		const struct snap_buf *b = &c->lent[i];

		fprintf(out, "%s{\"index\": %u, \"slot\": %u, \"generation\": %u, "
			"\"connection\": %s, \"alive\": ", i ? ", " : "", b->idx, b->slot, b->gen,
			b->conn ? "true" : "false");
		if (b->conn)
			jalive(out, b->alive);
		else
			fputs("false", out);
		fputs("}", out);
	}
	fputs("]}", out);
}

static void json_socks(FILE *out, const struct pool_snap *s)
{
	fprintf(out, "\"sockets\": {\"slots\": %u, \"in_use\": %u, \"free\": %u, "
		"\"listener_slots\": %u, \"ring\": %llu, \"listeners\": [", s->sb.sock_slots,
		s->nsocks, s->nsock_free, s->sb.sock_listeners, (unsigned long long)s->sb.sock_ring);
	for (uint32_t i = 0; i < s->nlisteners; i++) {
		fputs(i ? ", " : "", out);
		json_listener(out, &s->listeners[i]);
	}
	fputs("], \"connections\": [", out);
	for (uint32_t i = 0; i < s->nsocks; i++) {
		fputs(i ? ", " : "", out);
		json_sock(out, &s->socks[i]);
	}
	fputs("], \"buffers\": [", out);
	for (int k = 0; k < s->nbufclasses; k++) {
		fputs(k ? ", " : "", out);
		json_bufclass(out, &s->bufclass[k]);
	}
	fputs("]}", out);
}

void status_json(FILE *out, const char *path, const struct pool_snap *s)
{
	const struct cxls_super *sb = &s->sb;

	fputs("{\"path\": ", out);
	json_str(out, path); /* the one string from outside */
	fprintf(out, ", \"version\": %u, \"size\": %llu, \"uuid\": \"", sb->version,
		(unsigned long long)sb->pool_size);
	for (int i = 0; i < 16; i++)
		fprintf(out, "%02x%s", sb->uuid[i], i == 3 || i == 5 || i == 7 || i == 9 ? "-" : "");
	fprintf(out, "\", \"devices\": %u, \"device_size\": %llu, \"coherence\": \"%s\", "
		"\"comm_slots\": %u, \"comms_in_use\": %u, \"comms_free\": %u, \"max_ranks\": %u, "
		"\"comm_offset\": %llu, \"comm_stride\": %llu, \"comm_header\": %zu, "
		"\"sock_offset\": %llu, \"table_lock_pid\": ", sb->ndev,
		(unsigned long long)sb->dev_size, sb->coherence ? "flush" : "coherent",
		sb->max_comms, s->ncomms, s->nfree, sb->max_ranks,
		(unsigned long long)sb->comm_offset, (unsigned long long)sb->comm_stride,
		sizeof(struct cxls_comm_rec), (unsigned long long)sb->sock_offset);
	if (s->lock_owner)
		fprintf(out, "%u", (unsigned)s->lock_owner);
	else
		fputs("null", out);
	fputs(", \"comms\": [", out);
	for (uint32_t i = 0; i < s->ncomms; i++) {
		fputs(i ? ", " : "", out);
		json_comm(out, &s->comms[i]);
	}
	fputs("], ", out);
	json_socks(out, s);
	fprintf(out, ", \"host_allocations\": {\"in_pool\": false, \"note\": \"%s\"}}\n",
		STATUS_HOSTMEM_NOTE);
}

/* doctor.c - find the first operation a job is stuck on (doctor.h). */
#include "doctor.h"

#include <stdlib.h>
#include <string.h>

#include "doctor_wait.h"
#include "names.h"

static void add_culprit(char *buf, size_t len, uint32_t rank, uint32_t pid, const char *what)
{
	size_t n = strlen(buf);

	if (n + 1 < len)
		snprintf(buf + n, len - n, "%srank %u (pid %u) %s", n ? ", " : "", rank, pid, what);
}

static void blame(struct diag *d, uint32_t rank, uint32_t pid, const char *what)
{
	d->root = 1;
	add_culprit(d->culprits, sizeof(d->culprits), rank, pid, what);
}

static int member(const struct snap_rank *r)
{
	return r->state == CXLS_RANK_JOINED || r->state == CXLS_RANK_LEFT;
}

const struct snap_desc *desc_of(const struct snap_rank *r, uint32_t seq)
{
	const struct snap_desc *d = &r->desc[seq % CXLS_DESC_RING];

	return d->valid && d->seq == seq ? d : NULL;
}

static void analyse(const struct snap_comm *c, struct diag *d)
{
	uint32_t min_done = UINT32_MAX, max_enq = 0;

	memset(d, 0, sizeof(*d));
	d->c = c;
	if (c->corrupt || c->bad_ranks || c->phase != CXLS_COMM_READY)
		return;
	for (uint32_t r = 0; r < c->nranks; r++) {
		const struct snap_rank *k = &c->ranks[r];

		if (!member(k))
			continue;
		if (k->done < min_done)
			min_done = k->done;
		if (k->enq > max_enq)
			max_enq = k->enq;
		if (k->state == CXLS_RANK_JOINED && k->alive == 0)
			d->dead++;
	}
	if (min_done == UINT32_MAX || max_enq <= min_done)
		return;
	d->stuck = 1;
	d->seq = min_done + 1;
	for (uint32_t r = 0; r < c->nranks; r++) {
		const struct snap_desc *x = desc_of(&c->ranks[r], d->seq);

		if (!x || c->ranks[r].enq < d->seq)
			continue;
		if (!d->desc)
			d->desc = x;
		if (!d->since_ns || x->enq_ns < d->since_ns)
			d->since_ns = x->enq_ns;
	}
}

int same_proc(const struct snap_rank *a, const struct snap_rank *b)
{
	return a->pid == b->pid && a->boot_hash == b->boot_hash;
}

uint64_t queue_of(const struct snap_rank *r, uint32_t seq)
{
	const struct snap_desc *d = desc_of(r, seq);

	return d ? d->queue : 0;
}

/* An op whose queue is not recorded may be on any. */
static int on_queue(const struct snap_desc *x, uint64_t q)
{
	return !q || !x || !x->queue || x->queue == q;
}

void active_op(const struct diag *all, uint32_t n, const struct snap_rank *k, uint64_t q,
	       struct act *out)
{
	uint64_t best = UINT64_MAX;

	memset(out, 0, sizeof(*out));
	for (uint32_t i = 0; i < n; i++) {
		const struct snap_comm *c = all[i].c;

		if (c->corrupt || c->bad_ranks || !c->ranks || c->phase != CXLS_COMM_READY)
			continue;
		for (uint32_t r = 0; r < c->nranks; r++) {
			const struct snap_rank *o = &c->ranks[r];
			const struct snap_desc *x;
			uint64_t when;

			if (o->state != CXLS_RANK_JOINED || !same_proc(o, k) || o->enq == o->done)
				continue;
			x = desc_of(o, o->done + 1);
			if (!on_queue(x, q))
				continue;
			when = x ? x->enq_ns : UINT64_MAX - 1; /* ring overwritten: late */
			if (out->d && when >= best)
				continue;
			best = when;
			out->d = &all[i];
			out->rank = r;
			out->seq = o->done + 1;
			out->desc = x;
			out->queue = x ? x->queue : 0;
		}
	}
}

void act_call(const struct act *a, char *buf, size_t len)
{
	if (a->desc)
		name_call(buf, len, a->desc->kind, a->desc->count, a->desc->type,
			  a->desc->redop, a->desc->root);
	else
		snprintf(buf, len, "(no valid descriptor)");
}

/* 1 when rank k, which called op seq of d's communicator, is in it on
 * its queue (so it does not hold that op up: it waits like the others). */
static int in_this_op(const struct diag *all, uint32_t n, const struct diag *d,
		      const struct snap_rank *k, uint32_t seq)
{
	struct act a;

	active_op(all, n, k, queue_of(k, seq), &a);
	return a.d == d && a.seq == seq;
}

static void describe_op(const struct diag *d, char *buf, size_t len)
{
	if (d->desc)
		name_call(buf, len, d->desc->kind, d->desc->count, d->desc->type, d->desc->redop,
			  d->desc->root);
	else
		snprintf(buf, len, "(no valid descriptor)");
}

static int p2p_busy(const struct snap_comm *c)
{
	for (uint32_t i = 0; i < c->np2p; i++)
		if (c->p2p[i].busy)
			return 1;
	return 0;
}

static const char *liveness(int alive)
{
	return alive > 0 ? "alive" : alive == 0 ? "DEAD" : "on another host";
}

static void print_waiting(const struct diag *d, const struct diag *all, uint32_t n, FILE *out)
{
	const struct snap_comm *c = d->c;
	const char *sep = "";

	fprintf(out, "  waiting in op %u:", d->seq);
	for (uint32_t r = 0; r < c->nranks; r++) {
		const struct snap_rank *k = &c->ranks[r];

		if (member(k) && k->enq >= d->seq && k->done < d->seq &&
		    (k->state != CXLS_RANK_JOINED || in_this_op(all, n, d, k, d->seq))) {
			fprintf(out, "%s rank %u", sep, r);
			sep = ",";
		}
	}
	fprintf(out, "%s\n", *sep ? "" : " none");
}

/* Lists the ranks that hold op seq up: those that have not called it,
 * and those that called it but are still in an earlier op of another
 * communicator (it is queued behind that one).  Marks d->root when one of
 * them is idle, dead or gone, i.e. not itself waiting elsewhere. */
static void print_missing(struct diag *d, const struct diag *all, uint32_t n, FILE *out)
{
	const struct snap_comm *c = d->c;

	for (uint32_t r = 0; r < c->nranks; r++) {
		const struct snap_rank *k = &c->ranks[r];
		struct act a;
		char op[128];

		if (!member(k) || k->done >= d->seq)
			continue;
		if (k->state == CXLS_RANK_LEFT) {
			if (k->enq >= d->seq)
				continue;
			fprintf(out, "  rank %u (pid %u) left the communicator after op %u without "
				"calling op %u\n", r, k->pid, k->enq, d->seq);
			blame(d, r, k->pid, "left without calling it");
			continue;
		}
		/* called it: behind the active op of its queue; not called:
		 * held, if at all, by whatever its process waits in */
		active_op(all, n, k, k->enq >= d->seq ? queue_of(k, d->seq) : 0, &a);
		if (a.d == d && a.seq == d->seq)
			continue; /* waiting in it like the others */
		if (a.d && k->alive != 0) {
			act_call(&a, op, sizeof(op));
			if (k->enq >= d->seq)
				fprintf(out, "  rank %u (pid %u, %s) called op %u, queued behind its "
					"active op %u %s of comm slot %u\n", r, k->pid,
					liveness(k->alive), d->seq, a.seq, op, a.d->c->slot);
			else
				fprintf(out, "  rank %u (pid %u, %s) has not called op %u: it waits in "
					"op %u %s of comm slot %u\n", r, k->pid, liveness(k->alive),
					d->seq, a.seq, op, a.d->c->slot);
			continue;
		}
		if (k->enq >= d->seq)
			continue; /* in it, dead: reported below */
		fprintf(out, "  rank %u (pid %u, %s) has not called op %u (it enqueued %u ops)\n", r,
			k->pid, liveness(k->alive), d->seq, k->enq);
		blame(d, r, k->pid, k->alive == 0 ? "died before calling it" : "has not called it");
	}
}

static void print_comm(struct diag *d, const struct diag *all, uint32_t n, uint64_t now,
		       FILE *out)
{
	const struct snap_comm *c = d->c;
	char op[128];

	fprintf(out, "comm slot %u (id %016llx, %u ranks, %s)", c->slot,
		(unsigned long long)c->key_hash, c->nranks, snap_phase_name(c->phase));
	if (c->corrupt) {
		fprintf(out, ": CORRUPT record (%s)\n", c->corrupt);
		return;
	}
	if (c->bad_ranks) {
		fprintf(out, ": CORRUPT rank record of rank");
		for (uint32_t r = 0; r < c->nranks; r++)
			if (c->ranks[r].corrupt)
				fprintf(out, " %u", r);
		fprintf(out, " (fails its checksum): its holder and progress are not trusted\n");
		return;
	}
	if (c->phase == CXLS_COMM_JOINING) {
		fprintf(out, ": rendezvous incomplete, %u of %u ranks joined; missing:", c->joined,
			c->nranks);
		for (uint32_t r = 0; r < c->nranks; r++)
			if (c->ranks[r].state == CXLS_RANK_EMPTY)
				fprintf(out, " %u", r);
		fprintf(out, "\n");
		return;
	}
	if (c->phase == CXLS_COMM_FAILED) {
		fprintf(out, ": FAILED by rank %u: %s\n", c->abort_rank,
			snap_abort_name(c->abort_reason));
		return;
	}
	if (!d->stuck) {
		fprintf(out, ": %s, every rank completed its %u collectives%s\n",
			p2p_busy(c) ? "send/receive in flight or unmatched" : "idle",
			c->nranks ? c->ranks[0].done : 0, d->dead ? " (but some ranks died)" : "");
		return;
	}
	describe_op(d, op, sizeof(op));
	fprintf(out, ": op %u %s not complete", d->seq, op);
	if (d->since_ns && now > d->since_ns)
		fprintf(out, ", pending for %.1f s", (double)(now - d->since_ns) / 1e9);
	fprintf(out, "\n");
	print_waiting(d, all, n, out);
	print_missing(d, all, n, out);
	for (uint32_t r = 0; r < c->nranks; r++)
		if (c->ranks[r].state == CXLS_RANK_JOINED && c->ranks[r].alive == 0) {
			fprintf(out, "  rank %u (pid %u) is DEAD\n", r, c->ranks[r].pid);
			if (c->ranks[r].enq >= d->seq)
				blame(d, r, c->ranks[r].pid, "died in it");
		}
}

/* Bytes of message m through a channel counter standing at `at` chunks
 * (the chunks before m do not count; a counter short of m's first chunk
 * moved none of it). */
static uint64_t moved(const struct snap_p2p_msg *m, uint32_t at, uint64_t chunk)
{
	uint32_t k = at - m->chunk0;
	uint64_t b;

	if (!m->valid || !chunk || k > (1u << 31))
		return 0;
	b = (uint64_t)k * chunk;
	return b < m->bytes ? b : m->bytes;
}

/* "message 2: 1048576 of 9437201 bytes sent, 0 received" */
static void print_progress(FILE *out, const struct snap_p2p *p, uint64_t chunk)
{
	const struct snap_p2p_msg *m = p->sent >= p->recvd ? &p->smsg : &p->rmsg;

	if (!m->valid || !chunk) {
		fprintf(out, "; bytes moved unknown");
		return;
	}
	fprintf(out, "; message %u: %llu of %llu bytes sent, %llu received",
		p->sent >= p->recvd ? p->sent : p->recvd, (unsigned long long)moved(m, p->pub, chunk),
		(unsigned long long)m->bytes, (unsigned long long)moved(m, p->ack, chunk));
}

/* One line per busy channel: who has not posted its side, how far the
 * last message got. */
static void print_channel(struct diag *d, const struct snap_p2p *p, FILE *out)
{
	const struct snap_comm *c = d->c;
	int fwd = p->sent > p->recvd; /* the sender is ahead */
	uint32_t late = fwd ? p->dst : p->src, early = fwd ? p->src : p->dst;
	const struct snap_rank *k = &c->ranks[late];
	char what[64];

	fprintf(out, "  send/receive rank %u -> rank %u: ", p->src, p->dst);
	if (p->sent == p->recvd) {
		fprintf(out, "both sides posted message %u, in flight", p->sent);
		print_progress(out, p, c->p2p_chunk);
		fputc('\n', out);
		return;
	}
	fprintf(out, "rank %u posted message %u, rank %u (pid %u, %s) has not called its %s (it "
		"posted %u)", early, fwd ? p->sent : p->recvd, late, k->pid,
		k->state == CXLS_RANK_JOINED ? liveness(k->alive) : "left", fwd ? "Recv" : "Send",
		fwd ? p->recvd : p->sent);
	print_progress(out, p, c->p2p_chunk);
	fputc('\n', out);
	snprintf(what, sizeof(what), "has not called %s rank %u", fwd ? "Recv from" : "Send to",
		 early);
	add_culprit(d->p2p_culprits, sizeof(d->p2p_culprits), late, k->pid, what);
	d->p2p = 1;
}

/* A rank's side of one channel, in its group: the last message it posted
 * there and whether its part of it is done. */
static void print_side(FILE *out, const struct snap_p2p *p, int send, uint64_t chunk, int *first)
{
	const struct snap_p2p_msg *m = send ? &p->smsg : &p->rmsg;
	uint32_t msg = send ? p->sent : p->recvd;
	uint64_t mine, theirs;

	if (!msg)
		return;
	fprintf(out, "%s%s rank %u message %u", *first ? "" : "; ", send ? "Send to" : "Recv from",
		send ? p->dst : p->src, msg);
	*first = 0;
	if (!m->valid || !chunk) {
		fprintf(out, " (bytes unknown)");
		return;
	}
	mine = moved(m, send ? p->pub : p->ack, chunk);
	theirs = send ? moved(m, p->ack, chunk) : 0;
	if (send)
		fprintf(out, ": %llu of %llu bytes sent, %llu received by rank %u: %s",
			(unsigned long long)mine, (unsigned long long)m->bytes,
			(unsigned long long)theirs, p->dst,
			theirs == m->bytes ? "done" : mine == m->bytes ? "sent, not received" :
			"WAITING");
	else
		fprintf(out, ": %llu of %llu bytes received: %s", (unsigned long long)mine,
			(unsigned long long)m->bytes, mine == m->bytes ? "done" : "WAITING");
}

/* Per rank with a busy channel, what its last send/receive group holds:
 * every channel's last message, done or waiting. */
static void print_groups(const struct snap_comm *c, FILE *out)
{
	for (uint32_t r = 0; r < c->nranks; r++) {
		const struct snap_rank *k = &c->ranks[r];
		int busy = 0, first = 1;

		for (uint32_t i = 0; i < c->np2p; i++)
			busy |= c->p2p[i].busy && (c->p2p[i].src == r || c->p2p[i].dst == r);
		if (!busy)
			continue;
		fprintf(out, "  rank %u (pid %u, %s) send/receive: ", r, k->pid,
			k->state == CXLS_RANK_JOINED ? liveness(k->alive) : "left");
		for (uint32_t i = 0; i < c->np2p; i++) {
			if (c->p2p[i].src == r)
				print_side(out, &c->p2p[i], 1, c->p2p_chunk, &first);
			if (c->p2p[i].dst == r)
				print_side(out, &c->p2p[i], 0, c->p2p_chunk, &first);
		}
		fprintf(out, "%s\n", first ? "no Send or Recv posted" : "");
	}
}

/* Send/receive groups are not collectives: they post no descriptor, only
 * each channel's messages (size and first chunk) and its chunk counters.
 * A channel on which one side posted more messages than the other is
 * waiting for the other's Send or Recv; one whose last message is not
 * through is in flight (a snapshot: it may move an instant later, like
 * any op in flight). */
static void print_p2p(struct diag *d, FILE *out)
{
	const struct snap_comm *c = d->c;

	if (c->corrupt || c->bad_ranks || !c->ranks || c->phase != CXLS_COMM_READY)
		return;
	for (uint32_t i = 0; i < c->np2p; i++)
		if (c->p2p[i].busy && c->p2p[i].src < c->nranks && c->p2p[i].dst < c->nranks)
			print_channel(d, &c->p2p[i], out);
	print_groups(c, out);
}

int doctor_report(const struct pool_snap *s, FILE *out, uint64_t now_real_ns)
{
	struct diag *all = calloc(s->ncomms ? s->ncomms : 1, sizeof(*all));
	int problems = 0, roots = 0, cycles;
	char op[128];

	if (!all)
		return -1;
	for (uint32_t i = 0; i < s->ncomms; i++)
		analyse(&s->comms[i], &all[i]);
	fprintf(out, "%u communicators in use, %u free\n", s->ncomms, s->nfree);
	for (uint32_t i = 0; i < s->ncomms; i++) {
		const struct snap_comm *c = all[i].c;

		print_comm(&all[i], all, s->ncomms, now_real_ns, out);
		print_p2p(&all[i], out);
		if (c->corrupt || c->bad_ranks || c->phase == CXLS_COMM_FAILED || all[i].stuck ||
		    all[i].dead || all[i].p2p ||
		    c->phase == CXLS_COMM_JOINING)
			problems++;
	}
	cycles = doctor_cycles(all, s->ncomms, out);
	for (uint32_t i = 0; i < s->ncomms; i++) {
		if (!all[i].stuck || !all[i].root)
			continue;
		describe_op(&all[i], op, sizeof(op));
		fprintf(out, "first cause: op %u %s on comm slot %u: %s\n", all[i].seq, op,
			all[i].c->slot, all[i].culprits);
		roots++;
	}
	for (uint32_t i = 0; i < s->ncomms; i++) {
		if (!all[i].p2p)
			continue;
		fprintf(out, "first cause: send/receive on comm slot %u: %s\n", all[i].c->slot,
			all[i].p2p_culprits);
		roots++;
	}
	if (cycles > 0) {
		fprintf(out, "first cause: the wait cycle%s above: no rank in %s can go on\n",
			cycles > 1 ? "s" : "", cycles > 1 ? "them" : "it");
		roots += cycles;
	}
	if (problems && !roots)
		fprintf(out, "no first cause among stuck operations (failed, joining or corrupt "
			"records above)\n");
	if (!problems)
		fprintf(out, "nothing is stuck\n");
	free(all);
	return problems;
}

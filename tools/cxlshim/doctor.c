/* doctor.c - find the first operation a job is stuck on (doctor.h). */
#include "doctor.h"

#include <stdlib.h>
#include <string.h>

#include "names.h"

/* What one communicator waits for. */
struct diag {
	const struct snap_comm *c;
	int stuck;                    /* op `seq` is not complete everywhere */
	uint32_t seq;
	const struct snap_desc *desc; /* how some rank described op seq */
	uint64_t since_ns;            /* earliest enqueue of op seq (realtime) */
	int dead;                     /* ranks whose process died */
	int root;                     /* a missing rank is idle or dead here */
	char culprits[160];           /* "rank 2 (pid 123) has not called it" */
};

static void blame(struct diag *d, uint32_t rank, uint32_t pid, const char *what)
{
	size_t n = strlen(d->culprits);

	d->root = 1;
	if (n + 1 < sizeof(d->culprits))
		snprintf(d->culprits + n, sizeof(d->culprits) - n, "%srank %u (pid %u) %s",
			 n ? ", " : "", rank, pid, what);
}

static int member(const struct snap_rank *r)
{
	return r->state == CXLS_RANK_JOINED || r->state == CXLS_RANK_LEFT;
}

static const struct snap_desc *desc_of(const struct snap_rank *r, uint32_t seq)
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

/* The communicator (other than `self`) where the process holding rank k
 * has an operation in flight, and that operation's number. */
static const struct diag *busy_elsewhere(const struct diag *all, uint32_t n,
					 const struct diag *self, const struct snap_rank *k,
					 uint32_t *seq)
{
	for (uint32_t i = 0; i < n; i++) {
		const struct snap_comm *c = all[i].c;

		if (&all[i] == self || c->corrupt || !c->ranks)
			continue;
		for (uint32_t r = 0; r < c->nranks; r++) {
			const struct snap_rank *o = &c->ranks[r];

			if (o->state == CXLS_RANK_JOINED && o->pid == k->pid &&
			    o->boot_hash == k->boot_hash && o->enq != o->done) {
				*seq = o->done + 1;
				return &all[i];
			}
		}
	}
	return NULL;
}

static void describe_op(const struct diag *d, char *buf, size_t len)
{
	if (d->desc)
		name_call(buf, len, d->desc->kind, d->desc->count, d->desc->type, d->desc->redop,
			  d->desc->root);
	else
		snprintf(buf, len, "(no valid descriptor)");
}

static const char *liveness(int alive)
{
	return alive > 0 ? "alive" : alive == 0 ? "DEAD" : "on another host";
}

static void print_waiting(const struct diag *d, FILE *out)
{
	const struct snap_comm *c = d->c;
	const char *sep = "";

	fprintf(out, "  waiting in op %u:", d->seq);
	for (uint32_t r = 0; r < c->nranks; r++) {
		const struct snap_rank *k = &c->ranks[r];

		if (member(k) && k->enq >= d->seq && k->done < d->seq) {
			fprintf(out, "%s rank %u", sep, r);
			sep = ",";
		}
	}
	fprintf(out, "%s\n", *sep ? "" : " none");
}

/* Lists the ranks that have not called op seq; marks d->root when one of
 * them is not busy on another communicator (or is dead). */
static void print_missing(struct diag *d, const struct diag *all, uint32_t n, FILE *out)
{
	const struct snap_comm *c = d->c;

	for (uint32_t r = 0; r < c->nranks; r++) {
		const struct snap_rank *k = &c->ranks[r];
		const struct diag *other;
		uint32_t oseq = 0;

		if (!member(k) || k->enq >= d->seq)
			continue;
		if (k->state == CXLS_RANK_LEFT) {
			fprintf(out, "  rank %u (pid %u) left the communicator after op %u without "
				"calling op %u\n", r, k->pid, k->enq, d->seq);
			blame(d, r, k->pid, "left without calling it");
			continue;
		}
		other = busy_elsewhere(all, n, d, k, &oseq);
		if (other && k->alive != 0) {
			char op[128] = "";
			const struct snap_rank *ok = NULL;

			for (uint32_t q = 0; q < other->c->nranks; q++)
				if (other->c->ranks[q].pid == k->pid)
					ok = &other->c->ranks[q];
			if (ok && desc_of(ok, oseq))
				name_call(op, sizeof(op), desc_of(ok, oseq)->kind,
					  desc_of(ok, oseq)->count, desc_of(ok, oseq)->type,
					  desc_of(ok, oseq)->redop, desc_of(ok, oseq)->root);
			fprintf(out, "  rank %u (pid %u, %s) has not called op %u: it waits in op %u "
				"%s of comm slot %u\n", r, k->pid, liveness(k->alive), d->seq, oseq, op,
				other->c->slot);
			continue;
		}
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
		fprintf(out, ": idle, every rank completed its %u ops%s\n",
			c->nranks ? c->ranks[0].done : 0, d->dead ? " (but some ranks died)" : "");
		return;
	}
	describe_op(d, op, sizeof(op));
	fprintf(out, ": op %u %s not complete", d->seq, op);
	if (d->since_ns && now > d->since_ns)
		fprintf(out, ", pending for %.1f s", (double)(now - d->since_ns) / 1e9);
	fprintf(out, "\n");
	print_waiting(d, out);
	print_missing(d, all, n, out);
	for (uint32_t r = 0; r < c->nranks; r++)
		if (c->ranks[r].state == CXLS_RANK_JOINED && c->ranks[r].alive == 0) {
			fprintf(out, "  rank %u (pid %u) is DEAD\n", r, c->ranks[r].pid);
			if (c->ranks[r].enq >= d->seq)
				blame(d, r, c->ranks[r].pid, "died in it");
		}
}

int doctor_report(const struct pool_snap *s, FILE *out, uint64_t now_real_ns)
{
	struct diag *all = calloc(s->ncomms ? s->ncomms : 1, sizeof(*all));
	int problems = 0, roots = 0;
	char op[128];

	if (!all)
		return -1;
	for (uint32_t i = 0; i < s->ncomms; i++)
		analyse(&s->comms[i], &all[i]);
	fprintf(out, "%u communicators in use, %u free\n", s->ncomms, s->nfree);
	for (uint32_t i = 0; i < s->ncomms; i++) {
		const struct snap_comm *c = all[i].c;

		print_comm(&all[i], all, s->ncomms, now_real_ns, out);
		if (c->corrupt || c->bad_ranks || c->phase == CXLS_COMM_FAILED || all[i].stuck ||
		    all[i].dead ||
		    c->phase == CXLS_COMM_JOINING)
			problems++;
	}
	for (uint32_t i = 0; i < s->ncomms; i++) {
		if (!all[i].stuck || !all[i].root)
			continue;
		describe_op(&all[i], op, sizeof(op));
		fprintf(out, "first cause: op %u %s on comm slot %u: %s\n", all[i].seq, op,
			all[i].c->slot, all[i].culprits);
		roots++;
	}
	if (problems && !roots)
		fprintf(out, "no first cause among stuck operations (failed, joining or corrupt "
			"records above)\n");
	if (!problems)
		fprintf(out, "nothing is stuck\n");
	free(all);
	return problems;
}

/* doctor_cycle.c - wait cycles across communicators (doctor_wait.h).
 *
 * A node is a queue (a stream of a process) with an operation in flight,
 * at its active op (the earliest it enqueued and did not complete).  It
 * waits for every other rank of that op's communicator that has not
 * completed the op and is not in that very op itself: a rank that called
 * the op is queued behind the active op of the op's queue, one that did
 * not is held by what its process waits in, if anything (or it is idle or
 * dead, which ends the chain: that is a first cause, reported by
 * doctor.c).  A cycle in this graph is a deadlock no rank can leave: rank
 * 0 in comm A's op waits for rank 1, which is in comm B's op waiting for
 * rank 0.  Two ops of one process on two streams are two nodes: they
 * wait for nobody but their peers, and form no cycle by themselves.
 */
#include <stdlib.h>
#include <string.h>

#include "doctor_wait.h"

struct node {
	const struct snap_rank *k; /* one of the process's rank records */
	uint64_t q;                /* the queue, 0: not recorded (any) */
	struct act a;
	int color;                 /* 0 unvisited, 1 on the path, 2 done */
	int next_q;                /* next rank of a's communicator to try */
	uint32_t via;              /* rank (in a's comm) through which the path left */
};

struct graph {
	struct node *v;
	uint32_t n;
	int *path;
	const struct diag *all;
	uint32_t ndiag;
	FILE *out;
	int cycles;
};

static int node_of(const struct graph *g, const struct snap_rank *k, uint64_t q)
{
	for (uint32_t i = 0; i < g->n; i++)
		if (same_proc(g->v[i].k, k) && g->v[i].q == q)
			return (int)i;
	return -1;
}

/* The node that holds rank k of an op's communicator back from op seq:
 * when it called it, the queue of its next op there (seq, or an earlier
 * one it has not completed: a communicator's ops complete in order); when
 * it did not, the queue of whatever its process is in; -1 when that is
 * nothing. */
static int holder_node(const struct graph *g, const struct snap_rank *k, uint32_t seq)
{
	struct act a;

	if (k->enq >= seq)
		return node_of(g, k, queue_of(k, k->done + 1));
	active_op(g->all, g->ndiag, k, 0, &a);
	return a.d ? node_of(g, k, a.queue) : -1;
}

/* A rank record that may stand for its process. */
static int usable(const struct snap_rank *k)
{
	return k->state == CXLS_RANK_JOINED && !k->corrupt;
}

/* Nodes for every queue with an op in flight of the process holding k:
 * one per queue of the next op of each of its communicators. */
static void add_process(struct graph *g, const struct snap_rank *k)
{
	for (uint32_t i = 0; i < g->ndiag; i++) {
		const struct snap_comm *c = g->all[i].c;

		if (!c->ranks || c->corrupt)
			continue;
		for (uint32_t r = 0; r < c->nranks; r++) {
			const struct snap_rank *o = &c->ranks[r];
			struct node *nd = &g->v[g->n];
			uint64_t q;

			if (!usable(o) || !same_proc(o, k) || o->enq == o->done)
				continue;
			q = queue_of(o, o->done + 1);
			if (node_of(g, o, q) >= 0)
				continue;
			active_op(g->all, g->ndiag, o, q, &nd->a);
			if (!nd->a.d)
				continue;
			nd->k = o;
			nd->q = q;
			g->n++;
		}
	}
}

/* Processes in the order their first rank record comes (communicator
 * slots, then ranks), so that the walks, and the cycles they print, start
 * from the same place whatever the queues. */
static int collect(struct graph *g)
{
	uint32_t cap = 0;

	for (uint32_t i = 0; i < g->ndiag; i++)
		if (g->all[i].c->ranks && !g->all[i].c->corrupt)
			cap += g->all[i].c->nranks;
	g->v = calloc(cap ? cap : 1, sizeof(*g->v));
	g->path = calloc(cap ? cap : 1, sizeof(*g->path));
	if (!g->v || !g->path)
		return -1;
	for (uint32_t i = 0; i < g->ndiag; i++) {
		const struct snap_comm *c = g->all[i].c;

		if (!c->ranks || c->corrupt)
			continue;
		for (uint32_t r = 0; r < c->nranks; r++) {
			const struct snap_rank *k = &c->ranks[r];
			int known = 0;

			if (!usable(k))
				continue;
			for (uint32_t j = 0; j < g->n && !known; j++)
				known = same_proc(g->v[j].k, k);
			if (!known)
				add_process(g, k);
		}
	}
	return 0;
}

/* The next node i waits for, from rank next_q on; -1 when none. */
static int next_succ(struct graph *g, int i)
{
	struct node *nd = &g->v[i];
	const struct snap_comm *c = nd->a.d->c;

	while ((uint32_t)nd->next_q < c->nranks) {
		uint32_t q = (uint32_t)nd->next_q++;
		const struct snap_rank *k = &c->ranks[q];
		int j;

		if (q == nd->a.rank || k->state != CXLS_RANK_JOINED || k->corrupt ||
		    k->done >= nd->a.seq)
			continue;
		j = holder_node(g, k, nd->a.seq);
		if (j < 0 || (g->v[j].a.d == nd->a.d && g->v[j].a.seq == nd->a.seq))
			continue; /* idle or dead (a first cause), or in this op too */
		nd->via = q;
		return j;
	}
	return -1;
}

static void hop_name(const struct node *nd, char *buf, size_t len)
{
	snprintf(buf, len, "rank%u@slot%u#%u", nd->a.rank, nd->a.d->c->slot, nd->a.seq);
}

/* The path from position `from` to its end, back to its start. */
static void print_cycle(struct graph *g, int from, int depth)
{
	char name[64], op[128];

	fprintf(g->out, "cycle:");
	for (int p = from; p < depth; p++) {
		hop_name(&g->v[g->path[p]], name, sizeof(name));
		fprintf(g->out, " %s ->", name);
	}
	hop_name(&g->v[g->path[from]], name, sizeof(name));
	fprintf(g->out, " %s\n", name);
	for (int p = from; p < depth; p++) {
		const struct node *a = &g->v[g->path[p]];
		const struct node *b = &g->v[g->path[p + 1 < depth ? p + 1 : from]];
		char op2[128];

		act_call(&a->a, op, sizeof(op));
		act_call(&b->a, op2, sizeof(op2));
		fprintf(g->out, "  rank %u (pid %u) in op %u %s of comm slot %u waits for its rank %u "
			"(pid %u), which is in op %u %s of comm slot %u\n", a->a.rank, a->k->pid,
			a->a.seq, op, a->a.d->c->slot, a->via, b->k->pid, b->a.seq, op2,
			b->a.d->c->slot);
	}
	g->cycles++;
}

/* Depth-first from node s, without recursion: path[] is the gray chain. */
static void walk(struct graph *g, int s)
{
	int depth = 0;

	g->path[depth++] = s;
	g->v[s].color = 1;
	while (depth) {
		int i = g->path[depth - 1], j = next_succ(g, i);

		if (j < 0) {
			g->v[i].color = 2;
			depth--;
			continue;
		}
		if (g->v[j].color == 1) {
			int from = depth - 1;

			while (from > 0 && g->path[from] != j)
				from--;
			print_cycle(g, from, depth);
		} else if (g->v[j].color == 0) {
			g->v[j].color = 1;
			g->path[depth++] = j;
		}
	}
}

int doctor_cycles(const struct diag *all, uint32_t n, FILE *out)
{
	struct graph g = { .all = all, .ndiag = n, .out = out };

	if (collect(&g)) {
		free(g.v);
		free(g.path);
		return -1;
	}
	for (uint32_t i = 0; i < g.n; i++)
		if (!g.v[i].color)
			walk(&g, (int)i);
	free(g.v);
	free(g.path);
	return g.cycles;
}

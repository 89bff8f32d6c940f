/* stats.c - where a stream worker's time goes (CUDAEMU_STATS=1).
 *
 * Each stream counts, on its worker thread, the ops it ran by kind and the
 * time they took, the bytes it copied, how its value waits ended (while
 * spinning, or after sleeping in the kernel), how many of its value writes
 * woke a sleeper, how long it sat idle with an empty queue and how long an
 * op submitted to an idle worker waited for the worker to wake (the
 * hand-off).  The blocks are kept until exit, when each prints one line to
 * stderr, so a stream destroyed early still reports.  Off (the default),
 * the only cost is a test of a NULL pointer per op.
 */
#include "emu.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* clang-format off */
static const char *const kind_names[] = {
	[EMU_OP_COPY] = "copy",
	[EMU_OP_MEMSET] = "memset",
	[EMU_OP_WRITE_VALUE] = "write",
	[EMU_OP_WAIT_VALUE] = "wait",
	[EMU_OP_FENCE] = "fence",
	[EMU_OP_HOST_FN] = "hostfn",
	[EMU_OP_CALLBACK] = "callback",
	[EMU_OP_EVENT_RECORD] = "record",
	[EMU_OP_EVENT_WAIT] = "evwait",
	[EMU_OP_GRAPH] = "graph",
	[EMU_OP_STREAM_WAIT] = "barrier",
};
/* clang-format on */

static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
static struct emu_stats *list;
static unsigned nstreams;

_Thread_local struct emu_stats *emu_stats_self;

static void print_one(const struct emu_stats *st)
{
	char line[1024];
	int n = 0;
	double busy = 0;

	for (unsigned k = 0; k < EMU_OP_KINDS; k++)
		busy += (double)st->ns[k];
	n += snprintf(line + n, sizeof(line) - (size_t)n,
		      "cudaemu stats: pid %d stream %u: busy %.3f ms, idle %.3f ms,"
		      " hand-offs %llu (%.1f us each), cpu %.3f ms, runnable %.3f ms",
		      (int)getpid(), st->id, busy / 1e6, (double)st->idle_ns / 1e6,
		      (unsigned long long)st->handoffs,
		      st->handoffs ? (double)st->handoff_ns / 1e3 / (double)st->handoffs : 0.0,
		      (double)st->cpu_ns / 1e6, (double)st->runq_ns / 1e6);
	for (unsigned k = 0; k < EMU_OP_KINDS && n < (int)sizeof(line); k++) {
		if (!st->n[k])
			continue;
		n += snprintf(line + n, sizeof(line) - (size_t)n, "; %s %llu %.3f ms",
			      kind_names[k], (unsigned long long)st->n[k], (double)st->ns[k] / 1e6);
		if (k == EMU_OP_COPY && st->ns[k])
			n += snprintf(line + n, sizeof(line) - (size_t)n, " (%.2f GB/s)",
				      (double)st->copy_bytes / (double)st->ns[k]);
		if (k == EMU_OP_WAIT_VALUE)
			n += snprintf(line + n, sizeof(line) - (size_t)n,
				      " (met at once %llu, spinning %llu, yielding %llu,"
				      " after %llu sleeps)",
				      (unsigned long long)st->waits_ready,
				      (unsigned long long)st->waits_spun,
				      (unsigned long long)st->waits_yielded,
				      (unsigned long long)st->sleeps);
		if (k == EMU_OP_WRITE_VALUE)
			n += snprintf(line + n, sizeof(line) - (size_t)n, " (%llu woke a sleeper)",
				      (unsigned long long)st->wakes);
	}
	fprintf(stderr, "%s\n", line);
}

static void print_all(void)
{
	struct emu_stats self = {0};

	/* the thread that exits, usually the one that enqueued everything */
	emu_stats_sched(&self);
	fprintf(stderr, "cudaemu stats: pid %d exiting thread: cpu %.3f ms, runnable %.3f ms\n",
		(int)getpid(), (double)self.cpu_ns / 1e6, (double)self.runq_ns / 1e6);
	pthread_mutex_lock(&list_lock);
	for (const struct emu_stats *st = list; st; st = st->next)
		print_one(st);
	pthread_mutex_unlock(&list_lock);
}

struct emu_stats *emu_stats_new(void)
{
	struct emu_stats *st;

	if (!emu_config.stats)
		return NULL;
	st = calloc(1, sizeof(*st));
	if (!st)
		return NULL;
	pthread_mutex_lock(&list_lock);
	if (!list)
		atexit(print_all);
	st->id = nstreams++;
	st->next = list;
	list = st;
	pthread_mutex_unlock(&list_lock);
	return st;
}

void emu_stats_sched(struct emu_stats *st)
{
	unsigned long long cpu, runq;
	FILE *f = fopen("/proc/thread-self/schedstat", "r");

	if (!f)
		return;
	if (fscanf(f, "%llu %llu", &cpu, &runq) == 2) {
		st->cpu_ns = cpu;
		st->runq_ns = runq;
	}
	fclose(f);
}

void emu_stats_op(struct emu_stats *st, const struct emu_op *op, uint64_t t0, uint64_t t1)
{
	if ((unsigned)op->kind >= EMU_OP_KINDS)
		return;
	st->n[op->kind]++;
	st->ns[op->kind] += t1 - t0;
	if (op->kind == EMU_OP_COPY)
		st->copy_bytes += op->u.copy.bytes;
}

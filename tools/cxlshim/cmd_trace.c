/* cmd_trace.c - `cxlshim trace`: trace files (core/trace/trace_format.h)
 * to a Chrome/Perfetto trace-event JSON timeline and a per-collective
 * summary table.
 *
 * Timeline: one process per traced process ("host pid"), and per
 * communicator four tracks: the host's enqueue spans, the op from its
 * start on the streams to its completion, and (level stages) the publish
 * and fetch spans of the write and read streams.  Times are aligned on
 * wall-clock time through each file's (monotonic, realtime) pair.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "json_str.h"
#include "names.h"
#include "pool_format.h"
#include "trace_format.h"

struct tfile {
	struct cxls_trace_hdr h;
	struct cxls_trace_rec *recs;
	uint64_t n;
	int64_t offset;  /* realtime - monotonic of the writer */
};

static void help(FILE *out)
{
	fprintf(out, "usage: cxlshim trace [-o TIMELINE.json] FILE...\n"
		     "  reads trace files written by the shim (trace.file, cxlshim run -t DIR),\n"
		     "  prints a per-collective summary and, with -o, writes a Chrome/Perfetto\n"
		     "  trace-event timeline (open it in ui.perfetto.dev or chrome://tracing)\n");
}

static int load(const char *path, struct tfile *f)
{
	FILE *in = fopen(path, "rb");
	long size;

	memset(f, 0, sizeof(*f));
	if (!in) {
		fprintf(stderr, "cxlshim trace: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (fread(&f->h, sizeof(f->h), 1, in) != 1 || f->h.magic != CXLS_TRACE_MAGIC ||
	    f->h.version != CXLS_TRACE_VERSION || f->h.rec_size != sizeof(struct cxls_trace_rec))
		goto bad;
	if (fseek(in, 0, SEEK_END) || (size = ftell(in)) < 0 || fseek(in, sizeof(f->h), SEEK_SET))
		goto bad;
	/* never trust nrec beyond what the file holds */
	if (f->h.nrec > ((uint64_t)size - sizeof(f->h)) / sizeof(struct cxls_trace_rec))
		goto bad;
	f->recs = calloc(f->h.nrec ? f->h.nrec : 1, sizeof(*f->recs));
	if (!f->recs || fread(f->recs, sizeof(*f->recs), f->h.nrec, in) != f->h.nrec)
		goto bad;
	f->n = f->h.nrec;
	f->h.host[sizeof(f->h.host) - 1] = '\0';
	f->offset = (int64_t)(f->h.real_ns - f->h.mono_ns);
	fclose(in);
	return 0;
bad:
	fprintf(stderr, "cxlshim trace: %s: not a cxlshim trace file (or truncated)\n", path);
	free(f->recs);
	f->recs = NULL;
	fclose(in);
	return -1;
}

static int usable(const struct cxls_trace_rec *r)
{
	return r->id && r->t[CXLS_TS_CALL] && r->kind < CXLS_OP_KINDS;
}

/* ---- summary ------------------------------------------------------------ */

struct stat_row {
	uint64_t calls, incomplete, bytes;
	double enq_us, *lat_us;
	uint64_t nlat;
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double pct(const struct stat_row *s, double p)
{
	size_t i = (size_t)(p * (double)(s->nlat - 1) + 0.5);

	return s->nlat ? s->lat_us[i] : 0;
}

static void summary(const struct tfile *f, int nf, FILE *out)
{
	struct stat_row rows[CXLS_OP_KINDS] = { 0 };
	uint64_t total = 0;

	for (int i = 0; i < nf; i++)
		total += f[i].n;
	for (int k = 0; k < CXLS_OP_KINDS; k++)
		rows[k].lat_us = calloc(total ? total : 1, sizeof(double));
	for (int i = 0; i < nf; i++) {
		for (uint64_t j = 0; j < f[i].n; j++) {
			const struct cxls_trace_rec *r = &f[i].recs[j];
			struct stat_row *s;

			if (!usable(r))
				continue;
			s = &rows[r->kind];
			s->calls++;
			s->bytes += r->bytes;
			if (r->t[CXLS_TS_ENQUEUED] >= r->t[CXLS_TS_CALL])
				s->enq_us += (double)(r->t[CXLS_TS_ENQUEUED] - r->t[CXLS_TS_CALL]) / 1e3;
			if (!r->t[CXLS_TS_DONE] || r->t[CXLS_TS_DONE] < r->t[CXLS_TS_CALL])
				s->incomplete++;
			else if (s->lat_us)
				s->lat_us[s->nlat++] =
					(double)(r->t[CXLS_TS_DONE] - r->t[CXLS_TS_CALL]) / 1e3;
		}
	}
	fprintf(out, "%-14s %8s %12s %10s %11s %11s %11s %11s %10s\n", "collective", "calls",
		"avg bytes", "enq us", "mean us", "p50 us", "p99 us", "max us", "incomplete");
	for (int k = 1; k < CXLS_OP_KINDS; k++) {
		struct stat_row *s = &rows[k];
		double mean = 0;

		if (!s->calls)
			goto next;
		qsort(s->lat_us, s->nlat, sizeof(double), cmp_double);
		for (uint64_t i = 0; i < s->nlat; i++)
			mean += s->lat_us[i];
		mean = s->nlat ? mean / (double)s->nlat : 0;
		fprintf(out, "%-14s %8llu %12llu %10.1f %11.1f %11.1f %11.1f %11.1f %10llu\n",
			name_kind((uint32_t)k), (unsigned long long)s->calls,
			(unsigned long long)(s->bytes / s->calls), s->enq_us / (double)s->calls, mean,
			pct(s, 0.5), pct(s, 0.99), s->nlat ? s->lat_us[s->nlat - 1] : 0,
			(unsigned long long)s->incomplete);
next:
		free(s->lat_us);
	}
}

/* ---- timeline ----------------------------------------------------------- */

enum { TRACK_HOST = 1, TRACK_OP, TRACK_PUB, TRACK_FETCH, TRACKS = 8 };

static double us(const struct tfile *f, uint64_t t, int64_t base)
{
	return (double)((int64_t)t + f->offset - base) / 1e3;
}

static void event(FILE *out, int *first, const char *name, const struct tfile *f,
		  const struct cxls_trace_rec *r, int track, uint64_t t0, uint64_t t1,
		  int64_t base)
{
	char call[128];
	int incomplete = !t1;

	if (!t1)
		t1 = f->h.mono_ns;
	if (t1 < t0)
		t1 = t0;
	name_call(call, sizeof(call), r->kind, r->count, r->type, r->redop, r->root);
	fprintf(out,
		"%s\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,"
		"\"pid\":%u,\"tid\":%u,\"args\":{\"call\":\"%s\",\"comm\":\"%016llx\",\"seq\":%u,"
		"\"rank\":%u,\"nranks\":%u,\"bytes\":%llu,\"rounds\":%u%s}}",
		*first ? "" : ",", name, name_kind(r->kind), us(f, t0, base), (double)(t1 - t0) / 1e3,
		f->h.pid, r->slot * TRACKS + (unsigned)track, call, (unsigned long long)r->comm,
		r->seq, r->rank, r->nranks, (unsigned long long)r->bytes, r->rounds,
		incomplete ? ",\"incomplete\":true" : "");
	*first = 0;
}

static void meta(FILE *out, int *first, const char *what, uint32_t pid, uint32_t tid,
		 const char *name)
{
	fprintf(out, "%s\n{\"name\":\"%s\",\"ph\":\"M\",\"ts\":0,\"pid\":%u,\"tid\":%u,"
		"\"args\":{\"name\":", *first ? "" : ",", what, pid, tid);
	json_str(out, name); /* a host name, as the trace file holds it */
	fputs("}}", out);
	*first = 0;
}

static void tracks(FILE *out, int *first, const struct tfile *f,
		   const struct cxls_trace_rec *r)
{
	static const char *const names[TRACKS] = { [TRACK_HOST] = "enqueue", [TRACK_OP] = "op",
						    [TRACK_PUB] = "publish (write stream)",
						    [TRACK_FETCH] = "fetch (read stream)" };
	char name[128];

	for (int t = TRACK_HOST; t <= TRACK_FETCH; t++) {
		snprintf(name, sizeof(name), "comm %08llx rank %u: %s",
			 (unsigned long long)(r->comm >> 32), r->rank, names[t]);
		meta(out, first, "thread_name", f->h.pid, r->slot * TRACKS + (unsigned)t, name);
	}
}

static void timeline(const struct tfile *f, int nf, FILE *out)
{
	int64_t base = INT64_MAX;
	int first = 1;
	char name[160];

	for (int i = 0; i < nf; i++)
		for (uint64_t j = 0; j < f[i].n; j++)
			if (usable(&f[i].recs[j]) &&
			    (int64_t)f[i].recs[j].t[CXLS_TS_CALL] + f[i].offset < base)
				base = (int64_t)f[i].recs[j].t[CXLS_TS_CALL] + f[i].offset;
	fprintf(out, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[");
	for (int i = 0; i < nf; i++) {
		uint64_t seen_slots = 0;

		snprintf(name, sizeof(name), "%s pid %u", f[i].h.host, f[i].h.pid);
		meta(out, &first, "process_name", f[i].h.pid, 0, name);
		for (uint64_t j = 0; j < f[i].n; j++) {
			const struct cxls_trace_rec *r = &f[i].recs[j];
			const uint64_t *t = r->t;
			uint64_t start = t[CXLS_TS_START] ? t[CXLS_TS_START] : t[CXLS_TS_CALL];

			if (!usable(r))
				continue;
			if (r->slot < 64 && !(seen_slots & (1ull << r->slot))) {
				seen_slots |= 1ull << r->slot;
				tracks(out, &first, &f[i], r);
			}
			snprintf(name, sizeof(name), "%s #%u", name_kind(r->kind), r->seq);
			if (t[CXLS_TS_ENQUEUED])
				event(out, &first, name, &f[i], r, TRACK_HOST, t[CXLS_TS_CALL],
				      t[CXLS_TS_ENQUEUED], base);
			event(out, &first, name, &f[i], r, TRACK_OP, start, t[CXLS_TS_DONE], base);
			if (t[CXLS_TS_START] && t[CXLS_TS_PUBLISHED])
				event(out, &first, "publish", &f[i], r, TRACK_PUB, t[CXLS_TS_START],
				      t[CXLS_TS_PUBLISHED], base);
			if (t[CXLS_TS_START] && t[CXLS_TS_FETCHED])
				event(out, &first, "fetch", &f[i], r, TRACK_FETCH, t[CXLS_TS_START],
				      t[CXLS_TS_FETCHED], base);
		}
	}
	fprintf(out, "\n]}\n");
}

int cmd_trace(int argc, char **argv)
{
	static const struct option opts[] = { { "output", required_argument, NULL, 'o' },
					      { "help", no_argument, NULL, 'h' },
					      { NULL, 0, NULL, 0 } };
	const char *json = NULL;
	struct tfile *files;
	int c, nf = 0, rc = EXIT_OK;

	while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'o': json = optarg; break;
		case 'h': help(stdout); return EXIT_OK;
		default: help(stderr); return EXIT_USAGE;
		}
	}
	if (optind == argc) {
		help(stderr);
		return EXIT_USAGE;
	}
	files = calloc((size_t)(argc - optind), sizeof(*files));
	if (!files)
		return EXIT_FAIL;
	for (int i = optind; i < argc; i++)
		if (load(argv[i], &files[nf]) == 0)
			nf++;
		else
			rc = EXIT_FAIL;
	summary(files, nf, stdout);
	if (json) {
		FILE *out = fopen(json, "w");

		if (!out) {
			fprintf(stderr, "cxlshim trace: %s: %s\n", json, strerror(errno));
			rc = EXIT_FAIL;
		} else {
			timeline(files, nf, out);
			if (fclose(out))
				rc = EXIT_FAIL;
		}
	}
	for (int i = 0; i < nf; i++)
		free(files[i].recs);
	free(files);
	return rc;
}

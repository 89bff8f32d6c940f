/* cmd_pool.c - `cxlshim pool create|status|clean`.
 *
 * status reads the pool through a read-only mapping and a validated
 * snapshot (snapshot.h): it cannot disturb a running job.  create and
 * clean go through the library's own code (pool.c, comm_table.c), so the
 * tool formats and reclaims exactly as the ranks do.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"
#include "comm_table.h"
#include "file_users.h"
#include "pool.h"
#include "pool_format.h"
#include "snapshot.h"
#include "sock_meet.h"
#include "sock_region.h"
#include "sock_sweep.h"
#include "status.h"

struct pool_opts {
	const char *policy, *path;
	const char *size, *devices, *mode, *comms, *ranks;
	int verbose, json, replace;
};

static void help(FILE *out)
{
	fprintf(out,
		"usage: cxlshim pool create [-c POLICY] [-p PATH] [-s SIZE] [-d DEVICES] [-m MODE]\n"
		"                           [--max-comms N] [--max-ranks N] [--replace]\n"
		"       cxlshim pool status [-c POLICY] [-p PATH] [-v] [--json]\n"
		"       cxlshim pool clean  [-c POLICY] [-p PATH]\n"
		"  create  format a new pool file (or an all-zero DAX device); --replace:\n"
		"          an existing pool file too (another release's, a damaged one),\n"
		"          unless a process of this host has it open or mapped\n"
		"  status  communicators, ranks, sequence numbers, socket listeners and\n"
		"          connections (ring fill, holders), owners and which are dead;\n"
		"          --json: the same as one JSON object\n"
		"  clean   reclaim the communicator records of jobs whose ranks all died\n"
		"          (or that fail their checksum), the socket records of closed or\n"
		"          dead connections with their buffers, listener records of dead\n"
		"          processes, and buffers lent to no connection\n"
		"PATH defaults to the policy's pool.path; SIZE takes K/M/G suffixes.\n");
}

static int parse(int argc, char **argv, struct pool_opts *o)
{
	static const struct option opts[] = {
		{ "policy", required_argument, NULL, 'c' }, { "path", required_argument, NULL, 'p' },
		{ "size", required_argument, NULL, 's' },   { "devices", required_argument, NULL, 'd' },
		{ "mode", required_argument, NULL, 'm' },   { "max-comms", required_argument, NULL, 'C' },
		{ "max-ranks", required_argument, NULL, 'R' }, { "verbose", no_argument, NULL, 'v' },
		{ "json", no_argument, NULL, 'j' },         { "help", no_argument, NULL, 'h' },
		{ "replace", no_argument, NULL, 'r' },
		{ NULL, 0, NULL, 0 }
	};
	int c;

	memset(o, 0, sizeof(*o));
	while ((c = getopt_long(argc, argv, "c:p:s:d:m:vh", opts, NULL)) != -1) {
		switch (c) {
		case 'c': o->policy = optarg; break;
		case 'p': o->path = optarg; break;
		case 's': o->size = optarg; break;
		case 'd': o->devices = optarg; break;
		case 'm': o->mode = optarg; break;
		case 'C': o->comms = optarg; break;
		case 'R': o->ranks = optarg; break;
		case 'v': o->verbose = 1; break;
		case 'j': o->json = 1; break;
		case 'r': o->replace = 1; break;
		case 'h': help(stdout); exit(EXIT_OK);
		default: return -1;
		}
	}
	return optind == argc ? 0 : -1;
}

/* Options of `create` become environment overrides, so that the policy
 * code parses and validates them like any other setting: EXIT_FAIL when
 * the policy itself is wrong, EXIT_USAGE when an option's value is (the
 * policy code then named it by its variable, and this says which option
 * that is). */
static int apply(const struct pool_opts *o, struct cxls_config *cfg)
{
	const char *const set[][3] = {
		{ "CXLSHIM_POOL_PATH", o->path, "-p" },       { "CXLSHIM_POOL_SIZE", o->size, "-s" },
		{ "CXLSHIM_POOL_DEVICES", o->devices, "-d" }, { "CXLSHIM_POOL_MODE", o->mode, "-m" },
		{ "CXLSHIM_POOL_MAX_COMMS", o->comms, "--max-comms" },
		{ "CXLSHIM_POOL_MAX_RANKS", o->ranks, "--max-ranks" },
	};
	const size_t n = sizeof(set) / sizeof(set[0]);

	/* the policy alone first, without the variables the options replace */
	for (size_t i = 0; i < n; i++)
		if (set[i][1])
			unsetenv(set[i][0]);
	if (tool_policy(o->policy, cfg))
		return EXIT_FAIL;
	for (size_t i = 0; i < n; i++)
		if (set[i][1] && setenv(set[i][0], set[i][1], 1))
			return EXIT_FAIL;
	if (tool_policy(o->policy, cfg) == 0)
		return EXIT_OK;
	fprintf(stderr, "cxlshim pool create: bad option value (");
	for (size_t i = 0, k = 0; i < n; i++)
		if (set[i][1])
			fprintf(stderr, "%s%s is %s", k++ ? ", " : "", set[i][2], set[i][0]);
	fprintf(stderr, ")\n");
	return EXIT_USAGE;
}

static void print_pids(const pid_t *pid, int n)
{
	for (int i = 0; i < n && i < CXLS_FILE_USERS_MAX; i++)
		fprintf(stderr, "%s%d", i ? ", " : "", (int)pid[i]);
	if (n > CXLS_FILE_USERS_MAX)
		fprintf(stderr, " and %d more", n - CXLS_FILE_USERS_MAX);
}

/* The start of a file: whether it could be opened, whether it is a
 * regular file, and its first bytes (n: how many, -1 when the read
 * failed). */
struct head {
	int opened, regular;
	ssize_t n;
	union {
		unsigned char bytes[4096];
		struct cxls_super sb;
	} u;
};

static void read_head(const char *path, struct head *h)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	memset(h, 0, sizeof(*h));
	h->n = -1;
	if (fd < 0)
		return;
	h->opened = fstat(fd, &st) == 0;
	h->regular = h->opened && S_ISREG(st.st_mode);
	/* a DAX device cannot be read(): its head is not looked at */
	if (h->regular)
		h->n = pread(fd, h->u.bytes, sizeof(h->u.bytes), 0);
	close(fd);
}

static int has_magic(const struct head *h)
{
	return h->n >= (ssize_t)sizeof(h->u.sb.magic) && h->u.sb.magic == CXLS_POOL_MAGIC;
}

/* A regular file without a pool's magic: what a failed create leaves. */
static int blank_file(const char *path)
{
	struct head h;

	read_head(path, &h);
	return h.regular && !has_magic(&h);
}

/* A pool file, of any release (its magic), or one with none written yet
 * (all zero at its start: a format that never finished). */
static int pool_or_blank(const char *path)
{
	struct head h;
	int zero = 1;

	read_head(path, &h);
	if (has_magic(&h))
		return 1;
	for (ssize_t i = 0; i < h.n; i++)
		zero &= !h.u.bytes[i];
	return h.n >= 0 && zero;
}

/* Unlinks an existing pool file that no process of this host holds.  The
 * name goes, not the memory: a process this scan could not inspect, or a
 * job that raced it, keeps the old file through its mapping, undisturbed
 * (no truncation, no SIGBUS); only processes that open the path from now
 * on get the new pool. */
static int replace_file(const char *path, const struct stat *st)
{
	struct cxls_file_users u;
	struct stat now;

	if (!S_ISREG(st->st_mode)) {
		fprintf(stderr, "cxlshim pool create: %s is not a regular file: --replace only "
			"replaces pool files (other hosts' users of a device cannot be seen)\n",
			path);
		return -1;
	}
	if (!pool_or_blank(path)) {
		fprintf(stderr, "cxlshim pool create: %s is not a cxlshim pool: --replace only "
			"replaces pool files (remove it yourself if it is no longer needed)\n", path);
		return -1;
	}
	if (cxls_file_users(st, &u)) {
		fprintf(stderr, "cxlshim pool create: %s: cannot read /proc to see who uses it: "
			"not replaced\n", path);
		return -1;
	}
	if (u.n) {
		fprintf(stderr, "cxlshim pool create: %s is in use by pid ", path);
		print_pids(u.pid, u.n);
		fprintf(stderr, ": not replaced\n");
		return -1;
	}
	if (u.unknown) {
		fprintf(stderr, "cxlshim pool create: could not inspect pid ");
		print_pids(u.unknown_pid, u.unknown);
		fprintf(stderr, " (if one uses %s, it keeps the old file)\n", path);
	}
	/* the name may have been given to another file during the scan */
	if (stat(path, &now) || now.st_ino != st->st_ino || now.st_dev != st->st_dev) {
		fprintf(stderr, "cxlshim pool create: %s changed while it was looked at: not "
			"replaced\n", path);
		return -1;
	}
	if (unlink(path)) {
		fprintf(stderr, "cxlshim pool create: %s: %s\n", path, strerror(errno));
		return -1;
	}
	printf("removed the old %s\n", path);
	return 0;
}


/* Whether the file at path is the pool this process just formatted: a
 * concurrent create that failed may unlink the name between its look and
 * the format here (blank_file() saw no magic yet), leaving this pool on a
 * file nobody can open.  A DAX device is not unlinked, nor read(). */
static int path_holds(const char *path, const struct cxls_pool *pool)
{
	struct head h;

	read_head(path, &h);
	if (h.opened && !h.regular)
		return 1;
	return h.n >= (ssize_t)sizeof(h.u.sb) && has_magic(&h) &&
	       !memcmp(h.u.sb.uuid, pool->geo.uuid, sizeof(h.u.sb.uuid));
}

static int pool_create(const struct pool_opts *o)
{
	struct cxls_config cfg;
	struct cxls_pool pool;
	struct stat st;
	int err, existed;

	if ((err = apply(o, &cfg)))
		return err;
	existed = stat(cfg.pool_path, &st) == 0;
	if (existed && o->replace) {
		if (replace_file(cfg.pool_path, &st))
			return EXIT_FAIL;
		existed = 0;
	}
	if (existed && S_ISREG(st.st_mode) && st.st_size) {
		fprintf(stderr, "cxlshim pool create: %s exists (pool status shows it; remove it "
			"to start over)\n", cfg.pool_path);
		return EXIT_FAIL;
	}
	for (int tries = 0;; tries++) {
		err = cxls_pool_open(&pool, &cfg);
		if (err) {
			fprintf(stderr, "cxlshim pool create: %s: %s\n", cfg.pool_path,
				cxls_pool_strerror(err));
			/* leave no half-made pool file of ours behind, but never
			 * one another creator formatted meanwhile */
			if (!existed && blank_file(cfg.pool_path))
				unlink(cfg.pool_path);
			return EXIT_FAIL;
		}
		if (!pool.formatted) {
			fprintf(stderr, "cxlshim pool create: %s was created meanwhile by another "
				"process (pool status shows it)\n", cfg.pool_path);
			cxls_pool_close(&pool);
			return EXIT_FAIL;
		}
		if (path_holds(cfg.pool_path, &pool))
			break;
		cxls_pool_close(&pool);
		if (tries == 2) {
			fprintf(stderr, "cxlshim pool create: %s kept being removed while it was "
				"made\n", cfg.pool_path);
			return EXIT_FAIL;
		}
	}
	printf("created %s: %zu bytes, %u devices of %llu bytes, %u communicator slots of up "
	       "to %u ranks, %s, mode 0%o\n", pool.path, pool.size, pool.sb->ndev,
	       (unsigned long long)pool.sb->dev_size, pool.sb->max_comms, pool.sb->max_ranks,
	       pool.sb->coherence ? "flush" : "coherent", cfg.pool_mode);
	cxls_pool_close(&pool);
	return EXIT_OK;
}

static int pool_status(const struct pool_opts *o)
{
	struct cxls_config cfg;
	struct snap_map m;
	struct pool_snap s;
	const char *path;

	if (tool_policy(o->policy, &cfg))
		return EXIT_FAIL;
	path = tool_pool_path(o->path, &cfg);
	if (tool_snapshot("pool status", path, SNAP_LIVENESS, &m, &s))
		return EXIT_FAIL;
	if (o->json)
		status_json(stdout, path, &s);
	else
		status_text(stdout, path, &s, o->verbose);
	snap_free(&s);
	snap_map_close(&m);
	return EXIT_OK;
}

/* The library's own sweeps (sock_meet_sweep.c, sock_sweep.c) over the pool's
 * socket region: connection records of closed or dead connections (and
 * the buffers they held), listener records of dead processes, buffers
 * lent to no connection. */
static void sweep_sockets(struct cxls_pool *pool, const struct cxls_config *cfg)
{
	struct cxls_sock_region r;
	int n;

	cxls_sock_region_of(&r, pool, cfg);
	n = cxls_sock_sweep(&r);
	printf("reclaimed %d socket record%s of closed or dead connections\n", n,
	       n == 1 ? "" : "s");
	n = cxls_listener_sweep(&r);
	printf("reclaimed %d listener record%s of dead processes\n", n, n == 1 ? "" : "s");
	n = cxls_buf_sweep_orphans(&r);
	printf("reclaimed %d socket buffer%s lent to no connection\n", n, n == 1 ? "" : "s");
}

static int pool_clean(const struct pool_opts *o)
{
	struct cxls_config cfg;
	struct cxls_pool pool;
	struct stat st;
	int err, n;

	if (tool_policy(o->policy, &cfg))
		return EXIT_FAIL;
	if (o->path)
		snprintf(cfg.pool_path, sizeof(cfg.pool_path), "%s", o->path);
	/* never create, size, format or chmod a pool just to clean it */
	if (stat(cfg.pool_path, &st)) {
		fprintf(stderr, "cxlshim pool clean: %s: %s\n", cfg.pool_path, strerror(errno));
		return EXIT_FAIL;
	}
	err = cxls_pool_attach(&pool, &cfg);
	if (err) {
		fprintf(stderr, "cxlshim pool clean: %s: %s\n", cfg.pool_path,
			cxls_pool_strerror(err));
		return EXIT_FAIL;
	}
	n = cxls_comm_reclaim(&pool);
	printf("reclaimed %d communicator record%s left by dead jobs or damaged\n", n,
	       n == 1 ? "" : "s");
	if (pool.geo.sock_slots) /* flush pools too, as the library's own sweep */
		sweep_sockets(&pool, &cfg);
	cxls_pool_close(&pool);
	return EXIT_OK;
}

/* Each verb takes only its own options: one of another verb was ignored
 * (pool status -s 1G --replace, pool clean -m 0660 did nothing). */
static int options_fit(const char *verb, const struct pool_opts *o)
{
	int create_only = o->size || o->devices || o->mode || o->comms || o->ranks || o->replace;

	if (!strcmp(verb, "create"))
		return !o->verbose && !o->json;
	if (!strcmp(verb, "status"))
		return !create_only;
	if (!strcmp(verb, "clean"))
		return !create_only && !o->verbose && !o->json;
	return 1;
}

int cmd_pool(int argc, char **argv)
{
	struct pool_opts o;
	const char *verb = argc > 1 ? argv[1] : "";

	if (!strcmp(verb, "-h") || !strcmp(verb, "--help")) {
		help(stdout);
		return EXIT_OK;
	}
	if (parse(argc - 1, argv + 1, &o) || !options_fit(verb, &o)) {
		help(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(verb, "create"))
		return pool_create(&o);
	if (!strcmp(verb, "status"))
		return pool_status(&o);
	if (!strcmp(verb, "clean"))
		return pool_clean(&o);
	help(stderr);
	return EXIT_USAGE;
}

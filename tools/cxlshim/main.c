/* main.c - `cxlshim SUBCOMMAND ...`: run a job under the shim, inspect
 * and clean its pool, check a policy, turn traces into timelines, and
 * diagnose a hung job.  One file per subcommand; this one dispatches. */
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "pool.h"

struct subcommand {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *usage;
};

static const struct subcommand subcommands[] = {
	{ "run", cmd_run, "run [-c POLICY] [-t DIR] [-d LEVEL] [-e] -- PROGRAM ARGS..." },
	{ "pool", cmd_pool, "pool create|status|clean [-c POLICY] [-p PATH] ..." },
	{ "policy", cmd_policy, "policy check FILE" },
	{ "trace", cmd_trace, "trace [-o TIMELINE.json] FILE..." },
	{ "doctor", cmd_doctor, "doctor [-c POLICY] [-p PATH]" },
	{ "topo", cmd_topo, "topo [-c POLICY]" },
};

#define NSUB (sizeof(subcommands) / sizeof(subcommands[0]))

static void usage(FILE *out)
{
	fprintf(out, "usage: cxlshim SUBCOMMAND [ARGS]\n\n");
	for (size_t i = 0; i < NSUB; i++)
		fprintf(out, "  cxlshim %s\n", subcommands[i].usage);
	fprintf(out, "\n`cxlshim SUBCOMMAND --help` for details; man cxlshim(1).\n");
}

int tool_policy(const char *file, struct cxls_config *cfg)
{
	struct cxls_config_error err;

	if (!file)
		file = getenv("CXLSHIM_CONF");
	if (cxls_config_load(cfg, file, &err) == 0)
		return 0;
	if (err.line)
		fprintf(stderr, "cxlshim: %s:%d: %s%s%s\n", err.file, err.line, err.key,
			*err.key ? ": " : "", err.msg);
	else
		fprintf(stderr, "cxlshim: %s: %s%s%s\n", err.file, err.key, *err.key ? ": " : "",
			err.msg);
	return -1;
}

const char *tool_pool_path(const char *path, const struct cxls_config *cfg)
{
	return path ? path : cfg->pool_path;
}

int tool_snapshot(const char *cmd, const char *path, int flags, struct snap_map *m,
		  struct pool_snap *s)
{
	char why[256];
	int err;

	if (snap_map_open(path, m)) {
		fprintf(stderr, "cxlshim %s: %s: %s\n", cmd, path, strerror(errno));
		return -1;
	}
	err = snap_take(m->base, m->size, flags, s);
	if (!err)
		return 0;
	cxls_pool_explain(why, sizeof(why), err,
			  m->size >= sizeof(struct cxls_super) ? m->base : NULL);
	fprintf(stderr, "cxlshim %s: %s: %s\n", cmd, path, why);
	snap_map_close(m);
	return -1;
}

int tool_self_dir(char *buf, unsigned long len)
{
	ssize_t n = readlink("/proc/self/exe", buf, len - 1);
	char *d;

	if (n <= 0)
		return -1;
	buf[n] = '\0';
	d = dirname(buf);
	memmove(buf, d, strlen(d) + 1);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return EXIT_OK;
	}
	for (size_t i = 0; i < NSUB; i++)
		if (!strcmp(argv[1], subcommands[i].name))
			return subcommands[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "cxlshim: unknown subcommand '%s'\n", argv[1]);
	usage(stderr);
	return EXIT_USAGE;
}

/* cmd_doctor.c - `cxlshim doctor`: which operation a running or hung job
 * waits on, and which ranks have not joined it (doctor.h). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cmd.h"
#include "doctor.h"
#include "pool.h"
#include "snapshot.h"

static void help(FILE *out)
{
	fprintf(out, "usage: cxlshim doctor [-c POLICY] [-p PATH]\n"
		     "  reads the pool (read-only) and names, per communicator, the first\n"
		     "  operation not every rank completed, the ranks waiting in it and the\n"
		     "  ranks that have not called it (or died).  Exit 0: nothing stuck,\n"
		     "  3: something is stuck or failed, 1: the pool cannot be read.\n");
}

int cmd_doctor(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "policy", required_argument, NULL, 'c' }, { "path", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },         { NULL, 0, NULL, 0 }
	};
	const char *policy = NULL, *path = NULL;
	struct cxls_config cfg;
	struct snap_map m;
	struct pool_snap s;
	struct timespec now;
	int c, problems;

	while ((c = getopt_long(argc, argv, "c:p:h", opts, NULL)) != -1) {
		switch (c) {
		case 'c': policy = optarg; break;
		case 'p': path = optarg; break;
		case 'h': help(stdout); return EXIT_OK;
		default: help(stderr); return EXIT_USAGE;
		}
	}
	if (optind != argc) {
		help(stderr);
		return EXIT_USAGE;
	}
	if (tool_policy(policy, &cfg))
		return EXIT_FAIL;
	path = tool_pool_path(path, &cfg);
	if (tool_snapshot("doctor", path, SNAP_LIVENESS, &m, &s))
		return EXIT_FAIL;
	clock_gettime(CLOCK_REALTIME, &now);
	printf("pool %s: ", path);
	problems = doctor_report(&s, stdout,
				 (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec);
	snap_free(&s);
	snap_map_close(&m);
	return problems < 0 ? EXIT_FAIL : problems ? EXIT_FOUND : EXIT_OK;
}

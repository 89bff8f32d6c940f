/* cmd_run.c - `cxlshim run`: set the environment up and exec the program.
 *
 * It only sets variables and execs, so it nests anywhere a launcher runs
 * a command: `cxlshim run -- torchrun ...` (every worker inherits the
 * preload), `mpirun -np 8 cxlshim run -- ./train`, `srun cxlshim run --
 * ./train`.  The policy is checked first, so a typo fails the launch
 * instead of silently passing every call to the real NCCL.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"

static void help(FILE *out)
{
	fprintf(out,
		"usage: cxlshim run [OPTIONS] -- PROGRAM [ARGS...]\n"
		"  -c, --policy FILE   policy file (sets CXLSHIM_CONF; checked first)\n"
		"  -t, --trace DIR     write every process's trace to DIR/HOST-PID.trace\n"
		"  -s, --stages        trace stream stage times too (trace.level=stages)\n"
		"  -d, --debug LEVEL   CXLSHIM_DEBUG: WARN, INFO or TRACE\n"
		"  -e, --emulate       use the CPU emulation of CUDA shipped with cxlshim\n"
		"  -n, --dry-run       print the environment instead of running\n"
		"The library is $CXLSHIM_LIB, or libcxlshim.so next to this program or in\n"
		"../lib.  Works under torchrun, mpirun and srun (it only sets the environment).\n");
}

static int exists(const char *p)
{
	return access(p, R_OK) == 0;
}

/* dir + tail into out; 0 when it fits and names a readable file or dir */
static int probe(char *out, size_t len, const char *dir, const char *tail, const char *file)
{
	char full[PATH_MAX + 64];
	int n = snprintf(out, len, "%s%s", dir, tail);

	if (n < 0 || (size_t)n >= len)
		return -1;
	n = snprintf(full, sizeof(full), "%s%s", out, file);
	return n < 0 || (size_t)n >= sizeof(full) || !exists(full) ? -1 : 0;
}

/* $CXLSHIM_LIB, DIR/libcxlshim.so (build tree), DIR/../lib/libcxlshim.so */
static int find_lib(char *out, size_t len)
{
	char dir[PATH_MAX];
	const char *env = getenv("CXLSHIM_LIB");

	if (env && *env) {
		snprintf(out, len, "%s", env);
		return exists(out) ? 0 : -1;
	}
	if (tool_self_dir(dir, sizeof(dir)))
		return -1;
	if (probe(out, len, dir, "/libcxlshim.so", "") == 0)
		return 0;
	return probe(out, len, dir, "/../lib/libcxlshim.so", "");
}

/* The emulator's libcuda.so.1: build/emu or PREFIX/lib/cxlshim/emu. */
static int find_emu(const char *lib, char *out, size_t len)
{
	char base[PATH_MAX];
	char *slash;

	snprintf(base, sizeof(base), "%s", lib);
	slash = strrchr(base, '/');
	if (!slash)
		return -1;
	*slash = '\0';
	if (probe(out, len, base, "/emu", "/libcuda.so.1") == 0)
		return 0;
	return probe(out, len, base, "/cxlshim/emu", "/libcuda.so.1");
}

/* Puts `item` first in the colon list `var`, once: a run nested in another
 * (`cxlshim run -- torchrun ... cxlshim run -- ./train`) moves it to the
 * front instead of listing it twice. */
static int prepend(const char *var, const char *item)
{
	const char *old = getenv(var), *p, *end;
	size_t len = strlen(item), n;
	char *buf, *out;
	int rc;

	if (!old || !*old)
		return setenv(var, item, 1);
	buf = malloc(len + strlen(old) + 2);
	if (!buf)
		return -1;
	out = buf + sprintf(buf, "%s", item);
	for (p = old; *p; p = *end ? end + 1 : end) {
		end = strchrnul(p, ':');
		n = (size_t)(end - p);
		if (n == len && !strncmp(p, item, n))
			continue;
		out += sprintf(out, ":%.*s", (int)n, p);
	}
	rc = setenv(var, buf, 1);
	free(buf);
	return rc;
}

static int mkdir_p(const char *dir)
{
	char buf[PATH_MAX];

	snprintf(buf, sizeof(buf), "%s", dir);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) && errno != EEXIST)
			return -1;
		*p = '/';
	}
	return mkdir(buf, 0755) && errno != EEXIST ? -1 : 0;
}

static int set_trace(const char *dir, int stages)
{
	char pat[PATH_MAX + 16], abs[PATH_MAX];

	if (mkdir_p(dir) || !realpath(dir, abs)) {
		fprintf(stderr, "cxlshim run: trace directory %s: %s\n", dir, strerror(errno));
		return -1;
	}
	snprintf(pat, sizeof(pat), "%s/%%h-%%p.trace", abs);
	return setenv("CXLSHIM_TRACE_FILE", pat, 1) ||
	       (stages && setenv("CXLSHIM_TRACE_LEVEL", "stages", 1));
}

static int set_policy(const char *file)
{
	struct cxls_config cfg;
	char abs[PATH_MAX];

	if (file) {
		if (!realpath(file, abs)) {
			fprintf(stderr, "cxlshim run: policy %s: %s\n", file, strerror(errno));
			return -1;
		}
		if (setenv("CXLSHIM_CONF", abs, 1))
			return -1;
	}
	return tool_policy(NULL, &cfg);
}

int cmd_run(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "policy", required_argument, NULL, 'c' }, { "trace", required_argument, NULL, 't' },
		{ "stages", no_argument, NULL, 's' },       { "debug", required_argument, NULL, 'd' },
		{ "emulate", no_argument, NULL, 'e' },      { "dry-run", no_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },         { NULL, 0, NULL, 0 }
	};
	const char *policy = NULL, *trace = NULL;
	char lib[PATH_MAX], emu[PATH_MAX];
	int c, emulate = 0, dry = 0, stages = 0;

	while ((c = getopt_long(argc, argv, "+c:t:sd:enh", opts, NULL)) != -1) {
		switch (c) {
		case 'c': policy = optarg; break;
		case 't': trace = optarg; break;
		case 's': stages = 1; break;
		case 'd': setenv("CXLSHIM_DEBUG", optarg, 1); break;
		case 'e': emulate = 1; break;
		case 'n': dry = 1; break;
		case 'h': help(stdout); return EXIT_OK;
		default: help(stderr); return EXIT_USAGE;
		}
	}
	if (optind >= argc && !dry) {
		help(stderr);
		return EXIT_USAGE;
	}
	if (find_lib(lib, sizeof(lib))) {
		fprintf(stderr, "cxlshim run: libcxlshim.so not found (set CXLSHIM_LIB)\n");
		return EXIT_FAIL;
	}
	if (set_policy(policy) || (trace && set_trace(trace, stages)))
		return EXIT_FAIL;
	if (emulate && (find_emu(lib, emu, sizeof(emu)) || prepend("LD_LIBRARY_PATH", emu))) {
		fprintf(stderr, "cxlshim run: the CUDA emulation is not installed next to %s\n", lib);
		return EXIT_FAIL;
	}
	if (prepend("LD_PRELOAD", lib))
		return EXIT_FAIL;
	if (dry) {
		static const char *const vars[] = { "LD_PRELOAD", "LD_LIBRARY_PATH", "CXLSHIM_CONF",
						    "CXLSHIM_DEBUG", "CXLSHIM_TRACE_FILE",
						    "CXLSHIM_TRACE_LEVEL" };

		for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
			if (getenv(vars[i]))
				printf("%s=%s\n", vars[i], getenv(vars[i]));
		return EXIT_OK;
	}
	execvp(argv[optind], argv + optind);
	fprintf(stderr, "cxlshim run: %s: %s\n", argv[optind], strerror(errno));
	return errno == ENOENT ? 127 : 126;
}

/* fuzz_policy.c - libFuzzer target: the policy parser (policy/config.c)
 * on arbitrary file contents.  Every input must either load or come back
 * with an error naming a file, line and key, never crash or overrun. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config.h"

static int fd = -1;
static char path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	extern char **environ;

	(void)argc;
	(void)argv;
	/* only the file under test decides */
	for (char **e = environ; *e;) {
		if (!strncmp(*e, "CXLSHIM_", 8)) {
			char name[128];

			snprintf(name, sizeof(name), "%.*s", (int)strcspn(*e, "="), *e);
			unsetenv(name);
		} else {
			e++;
		}
	}
	fd = memfd_create("policy", 0);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	return fd < 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cxls_config cfg;
	struct cxls_config_error err;
	FILE *devnull;

	if (ftruncate(fd, 0) || pwrite(fd, data, size, 0) != (ssize_t)size)
		abort();
	if (cxls_config_load(&cfg, path, &err)) {
		if (!memchr(err.msg, '\0', sizeof(err.msg)) || !memchr(err.key, '\0', sizeof(err.key)))
			abort(); /* the error must be a terminated string */
		return 0;
	}
	/* a loaded policy prints, and prints back into the same policy */
	devnull = fopen("/dev/null", "w");
	if (devnull) {
		cxls_config_print(&cfg, devnull);
		fclose(devnull);
	}
	if (cfg.pool_devices < 1 || cfg.pool_devices > 64 || cfg.cccl_chunks < 1 ||
	    cfg.pool_size < (16ull << 20))
		abort(); /* validate() let an invalid value through */
	return 0;
}

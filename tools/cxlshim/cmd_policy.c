/* cmd_policy.c - `cxlshim policy check FILE`: validate a policy and print
 * the configuration a job would run with (file + environment). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"

extern char **environ;

static void help(FILE *out)
{
	fprintf(out, "usage: cxlshim policy check FILE\n"
		     "  validates FILE, applies the CXLSHIM_<SECTION>_<KEY> variables set now,\n"
		     "  and prints the effective policy; exit 1 with file:line: key: error\n");
}

int cmd_policy(int argc, char **argv)
{
	struct cxls_config cfg;
	int any = 0;

	if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		help(stdout);
		return EXIT_OK;
	}
	if (argc != 3 || strcmp(argv[1], "check")) {
		help(stderr);
		return EXIT_USAGE;
	}
	if (tool_policy(argv[2], &cfg))
		return EXIT_FAIL;
	for (char **e = environ; *e; e++) {
		if (strncmp(*e, "CXLSHIM_", 8))
			continue;
		printf("%s %s\n", any ? ";  " : "; environment:", *e);
		any = 1;
	}
	cxls_config_print(&cfg, stdout);
	return EXIT_OK;
}

/* cmd_topo.c - `cxlshim topo`: the DRAM and CXL nodes, memory tiers and
 * GPUs the pinned-memory rules see (core/mem/topo.c, with the policy's
 * overrides), and the pool's emulated devices. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "topo.h"

int cmd_topo(int argc, char **argv)
{
	struct cxls_config cfg;
	const char *policy = NULL;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-c") && i + 1 < argc) {
			policy = argv[++i];
		} else {
			fprintf(stderr, "usage: cxlshim topo [-c POLICY]\n");
			return !strcmp(argv[i], "--help") || !strcmp(argv[i], "-h") ? EXIT_OK :
											 EXIT_USAGE;
		}
	}
	if (tool_policy(policy, &cfg))
		return EXIT_FAIL;
	/* the topology reads its overrides from the process's policy */
	if (policy)
		setenv("CXLSHIM_CONF", policy, 1);
	cxls_topo_print(stdout);
	printf("pool: %s, %llu bytes as %u emulated CXL devices, %s\n", cfg.pool_path,
	       (unsigned long long)cfg.pool_size, cfg.pool_devices,
	       cfg.pool_coherence == CXLS_FLUSH ? "flush (non-coherent)" : "coherent");
	return EXIT_OK;
}

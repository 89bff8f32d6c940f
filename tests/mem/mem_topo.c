/* mem_topo.c - prints what the shim sees (the `cxlshim topo` memory part):
 * DRAM and CXL nodes, distances, memory tiers, the GPUs' nodes. */
#include "topo.h"

int main(void)
{
	cxls_topo_print(stdout);
	return 0;
}

/* topo.h - which NUMA nodes are DRAM and which are CXL memory.
 *
 * Read from sysfs once: a node with CPUs and memory is DRAM; a node with
 * memory but no CPU (a CXL Type 3 expander onlined by the kernel, or an
 * emulated one) is CXL, and so is any memory node in a lower memory tier
 * (larger abstract distance) than the DRAM nodes.  The policy's
 * mem.dram_nodes / mem.cxl_nodes / mem.gpu_node override what sysfs says.
 */
#ifndef CXLSHIM_CORE_MEM_TOPO_H
#define CXLSHIM_CORE_MEM_TOPO_H

#include <stdint.h>
#include <stdio.h>

#include "mem_rules.h"

#define CXLS_TOPO_MAX_GPUS 16

enum cxls_tier { CXLS_TIER_NONE = 0, CXLS_TIER_DRAM, CXLS_TIER_CXL };

struct cxls_node {
	int present;       /* online and has memory */
	int has_cpu;
	int has_normal;    /* has ZONE_NORMAL memory (else movable only) */
	int tier;          /* enum cxls_tier */
	int memory_tier;   /* memory_tierN it belongs to, -1 unknown */
	uint64_t total;    /* bytes, from nodeN/meminfo */
	int dist[CXLS_MEM_MAX_NODE];
};

struct cxls_gpu {
	char pci[32];      /* 0000:3b:00.0 */
	int node;          /* the PCI device's numa_node, -1 unknown */
	int dram;          /* the DRAM node nearest it, -1 unknown */
};

struct cxls_topo {
	char root[128];    /* sysfs root ("" = /sys), for tests */
	int max_node;      /* highest present node id, -1 none */
	struct cxls_node node[CXLS_MEM_MAX_NODE];
	int ndram, ncxl;
	int dram[CXLS_MEM_MAX_NODE], cxl[CXLS_MEM_MAX_NODE]; /* ids, ascending */
	int ngpu;
	struct cxls_gpu gpu[CXLS_TOPO_MAX_GPUS];
	int gpu_node;      /* DRAM node nearest the GPU, -1 unknown */
	int gpu_node_set;  /* ... named by the policy: every device's */
	int overridden;    /* the policy changed something */
};

/* Reads sysfs under root (NULL: /sys) and applies the overrides
 * ("" = none; gpu_node "auto" = from the PCI device).  Returns 0, or -1 with
 * msg set ("; " between problems) when an override is malformed or names
 * an absent node: then mem.dram_nodes and mem.cxl_nodes are both ignored
 * (one describes the other's nodes too), or mem.gpu_node is, which is also
 * ignored when it names a CXL node; the rest still holds. */
int cxls_topo_discover(struct cxls_topo *t, const char *root, const char *dram_nodes,
		       const char *cxl_nodes, const char *gpu_node, char *msg, size_t msglen);
/* The DRAM node nearest the GPU at PCI address pci (as CUDA writes it,
 * "0000:3B:00.0", any case): on a machine with a GPU per socket each
 * device's buffers go to its own socket.  gpu_node where the policy names
 * one, the device is not listed or pci is NULL. */
int cxls_topo_dram_near(const struct cxls_topo *t, const char *pci);
/* Free bytes of a node now (nodeN/meminfo MemFree), 0 when unknown. */
uint64_t cxls_topo_node_free(const struct cxls_topo *t, int node);
/* The process's topology, discovered once with the policy's overrides. */
const struct cxls_topo *cxls_topo(void);
void cxls_topo_dump(const struct cxls_topo *t, FILE *out);
/* What `cxlshim topo` prints: the process's topology. */
void cxls_topo_print(FILE *out);

#endif

/* topo.c - DRAM and CXL nodes from sysfs, with the policy's overrides. */
#include "topo.h"

#include <dirent.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "log.h"
#include "runtime.h"

#define NODE_DIR "/devices/system/node"
#define TIER_DIR "/devices/virtual/memory_tiering"
#define PCI_DIR "/bus/pci/devices"

static int read_text(const struct cxls_topo *t, const char *rel, char *buf, size_t len)
{
	char path[512];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s%s", *t->root ? t->root : "/sys", rel);
	f = fopen(path, "r");
	if (!f)
		return -1;
	n = fread(buf, 1, len - 1, f);
	fclose(f);
	buf[n] = '\0';
	return 0;
}

/* "0-1,3\n" -> bits; an unreadable file is an empty set. */
static uint64_t read_nodelist(const struct cxls_topo *t, const char *rel)
{
	char buf[256];
	int nodes[CXLS_MEM_MAX_NODE], n;
	uint64_t bits = 0;

	if (read_text(t, rel, buf, sizeof(buf)))
		return 0;
	buf[strcspn(buf, "\n")] = '\0';
	n = *buf ? cxls_parse_nodes(buf, nodes, CXLS_MEM_MAX_NODE) : 0;
	for (int i = 0; i < n; i++)
		bits |= 1ull << nodes[i];
	return bits;
}

/* "Node 0 MemFree:  123 kB" -> bytes. */
static uint64_t meminfo(const struct cxls_topo *t, int node, const char *field)
{
	char rel[64], buf[4096], *p;
	unsigned long long kb;

	snprintf(rel, sizeof(rel), NODE_DIR "/node%d/meminfo", node);
	if (read_text(t, rel, buf, sizeof(buf)))
		return 0;
	p = strstr(buf, field);
	if (!p || sscanf(p + strlen(field), " %llu", &kb) != 1)
		return 0;
	return kb << 10;
}

uint64_t cxls_topo_node_free(const struct cxls_topo *t, int node)
{
	if (node < 0 || node >= CXLS_MEM_MAX_NODE)
		return 0;
	return meminfo(t, node, "MemFree:");
}

/* nodeN/distance lists distances to the online nodes in id order. */
static void read_distances(struct cxls_topo *t, int node, uint64_t online)
{
	char rel[64], buf[1024], *p, *end;
	int col = 0;

	snprintf(rel, sizeof(rel), NODE_DIR "/node%d/distance", node);
	if (read_text(t, rel, buf, sizeof(buf)))
		return;
	p = buf;
	for (int j = 0; j < CXLS_MEM_MAX_NODE; j++) {
		long d;

		if (!(online & (1ull << j)))
			continue;
		d = strtol(p, &end, 10);
		if (end == p)
			break;
		t->node[node].dist[j] = (int)d;
		p = end;
		col++;
	}
	(void)col;
}

/* memory_tierN/nodelist: a larger N is a slower tier. */
static void read_tiers(struct cxls_topo *t)
{
	char path[256];
	struct dirent *de;
	DIR *d;

	snprintf(path, sizeof(path), "%s" TIER_DIR, *t->root ? t->root : "/sys");
	d = opendir(path);
	if (!d)
		return;
	while ((de = readdir(d))) {
		char rel[320];
		int id;
		uint64_t bits;

		if (sscanf(de->d_name, "memory_tier%d", &id) != 1)
			continue;
		snprintf(rel, sizeof(rel), TIER_DIR "/%s/nodelist", de->d_name);
		bits = read_nodelist(t, rel);
		for (int n = 0; n < CXLS_MEM_MAX_NODE; n++)
			if (bits & (1ull << n))
				t->node[n].memory_tier = id;
	}
	closedir(d);
}

/* NVIDIA display/3D controllers and the node their slot hangs off. */
static void read_gpus(struct cxls_topo *t)
{
	char path[256];
	struct dirent *de;
	DIR *d;

	snprintf(path, sizeof(path), "%s" PCI_DIR, *t->root ? t->root : "/sys");
	d = opendir(path);
	if (!d)
		return;
	while ((de = readdir(d)) && t->ngpu < CXLS_TOPO_MAX_GPUS) {
		char rel[320], buf[64];
		struct cxls_gpu *g;

		if (de->d_name[0] == '.')
			continue;
		snprintf(rel, sizeof(rel), PCI_DIR "/%s/vendor", de->d_name);
		if (read_text(t, rel, buf, sizeof(buf)) || strtoul(buf, NULL, 16) != 0x10de)
			continue;
		snprintf(rel, sizeof(rel), PCI_DIR "/%s/class", de->d_name);
		if (read_text(t, rel, buf, sizeof(buf)) || (strtoul(buf, NULL, 16) >> 16) != 0x03)
			continue;
		g = &t->gpu[t->ngpu++];
		snprintf(g->pci, sizeof(g->pci), "%.31s", de->d_name);
		snprintf(rel, sizeof(rel), PCI_DIR "/%s/numa_node", de->d_name);
		g->node = read_text(t, rel, buf, sizeof(buf)) ? -1 : atoi(buf);
	}
	closedir(d);
}

/* Lowest tier id holding a node with CPUs: DRAM's tier. */
static int dram_tier(const struct cxls_topo *t)
{
	int best = -1;

	for (int n = 0; n <= t->max_node; n++)
		if (t->node[n].present && t->node[n].has_cpu && t->node[n].memory_tier >= 0 &&
		    (best < 0 || t->node[n].memory_tier < best))
			best = t->node[n].memory_tier;
	return best;
}

static void classify(struct cxls_topo *t)
{
	int dt = dram_tier(t);

	for (int n = 0; n <= t->max_node; n++) {
		struct cxls_node *nd = &t->node[n];

		if (!nd->present)
			nd->tier = CXLS_TIER_NONE;
		else if (!nd->has_cpu || (dt >= 0 && nd->memory_tier > dt))
			nd->tier = CXLS_TIER_CXL;
		else
			nd->tier = CXLS_TIER_DRAM;
	}
}

static void index_tiers(struct cxls_topo *t)
{
	t->ndram = t->ncxl = 0;
	for (int n = 0; n <= t->max_node; n++) {
		if (t->node[n].tier == CXLS_TIER_DRAM)
			t->dram[t->ndram++] = n;
		else if (t->node[n].tier == CXLS_TIER_CXL)
			t->cxl[t->ncxl++] = n;
	}
}

/* The GPU's node if it is DRAM, else the DRAM node closest to it. */
static int nearest_dram(const struct cxls_topo *t, int node)
{
	int best = -1;

	if (node < 0 || node >= CXLS_MEM_MAX_NODE || !t->node[node].present)
		return t->ndram ? t->dram[0] : -1;
	if (t->node[node].tier == CXLS_TIER_DRAM)
		return node;
	for (int i = 0; i < t->ndram; i++) {
		int d = t->dram[i];

		if (best < 0 || t->node[node].dist[d] < t->node[node].dist[best])
			best = d;
	}
	return best;
}

/* Adds "; text" to msg, so that every ignored override is reported. */
static void add_msg(char *msg, size_t msglen, const char *text)
{
	size_t used = strnlen(msg, msglen);

	if (used + 1 < msglen)
		snprintf(msg + used, msglen - used, "%s%s", used ? "; " : "", text);
}

/* Parses one "1,2" override into nodes; -1 with msg when it is not a list
 * or names a node without memory here.  The policy loader checked the
 * syntax already; the environment of a tool may not have. */
static int check_tier(const struct cxls_topo *t, const char *list, const char *key, int *nodes,
		      int *n, char *msg, size_t msglen)
{
	char text[160];

	*n = 0;
	if (!list || !*list)
		return 0;
	*n = cxls_parse_nodes(list, nodes, CXLS_MEM_MAX_NODE);
	if (*n < 0) {
		snprintf(text, sizeof(text), "mem.%s = '%.40s' is not a node list", key, list);
		add_msg(msg, msglen, text);
		return -1;
	}
	for (int i = 0; i < *n; i++) {
		if (!t->node[nodes[i]].present) {
			snprintf(text, sizeof(text), "mem.%s names node %d, which has no memory here",
				 key, nodes[i]);
			add_msg(msg, msglen, text);
			return -1;
		}
	}
	return 0;
}

/* mem.dram_nodes and mem.cxl_nodes describe one split of the nodes: both
 * apply or neither (half of it would leave a node in the wrong tier). */
static int override_tiers(struct cxls_topo *t, const char *dram_nodes, const char *cxl_nodes,
			  char *msg, size_t msglen)
{
	int dram[CXLS_MEM_MAX_NODE], cxl[CXLS_MEM_MAX_NODE], nd, nc, bad;

	bad = check_tier(t, dram_nodes, "dram_nodes", dram, &nd, msg, msglen);
	bad |= check_tier(t, cxl_nodes, "cxl_nodes", cxl, &nc, msg, msglen);
	for (int i = 0; !bad && i < nd; i++) {
		for (int j = 0; j < nc; j++) {
			if (dram[i] == cxl[j]) {
				add_msg(msg, msglen, "mem.dram_nodes and mem.cxl_nodes share a node");
				bad = 1;
				break;
			}
		}
	}
	if (bad) {
		add_msg(msg, msglen, "ignoring mem.dram_nodes and mem.cxl_nodes");
		return -1;
	}
	for (int i = 0; i < nd; i++)
		t->node[dram[i]].tier = CXLS_TIER_DRAM;
	for (int i = 0; i < nc; i++)
		t->node[cxl[i]].tier = CXLS_TIER_CXL;
	t->overridden |= nd || nc;
	return 0;
}

/* The key names the DRAM node nearest the GPU, where place = dram, the
 * spill prefix and fallback = dram go: a CXL node there would send them
 * all to CXL. */
static int override_gpu(struct cxls_topo *t, const char *gpu, char *msg, size_t msglen)
{
	char *end, text[160];
	long v;

	if (!gpu || !*gpu || !strcmp(gpu, "auto"))
		return 0;
	v = strtol(gpu, &end, 10);
	if (*end || end == gpu || v < 0 || v >= CXLS_MEM_MAX_NODE || !t->node[v].present) {
		snprintf(text, sizeof(text), "mem.gpu_node = '%.40s' is not a node with memory: "
			 "ignoring it", gpu);
		add_msg(msg, msglen, text);
		return -1;
	}
	if (t->node[v].tier != CXLS_TIER_DRAM) {
		snprintf(text, sizeof(text), "mem.gpu_node = %ld is a CXL node, not DRAM: "
			 "ignoring it", v);
		add_msg(msg, msglen, text);
		return -1;
	}
	t->gpu_node = (int)v;
	t->gpu_node_set = 1;
	t->overridden = 1;
	return 0;
}

int cxls_topo_discover(struct cxls_topo *t, const char *root, const char *dram_nodes,
		       const char *cxl_nodes, const char *gpu_node, char *msg, size_t msglen)
{
	uint64_t online, mem, cpu, normal;
	int rc = 0;

	memset(t, 0, sizeof(*t));
	if (msglen)
		*msg = '\0';
	snprintf(t->root, sizeof(t->root), "%s", root ? root : "");
	t->max_node = -1;
	t->gpu_node = -1;
	online = read_nodelist(t, NODE_DIR "/online");
	mem = read_nodelist(t, NODE_DIR "/has_memory");
	cpu = read_nodelist(t, NODE_DIR "/has_cpu");
	normal = read_nodelist(t, NODE_DIR "/has_normal_memory");
	for (int n = 0; n < CXLS_MEM_MAX_NODE; n++) {
		struct cxls_node *nd = &t->node[n];

		nd->memory_tier = -1;
		if (!(online & mem & (1ull << n)))
			continue;
		nd->present = 1;
		nd->has_cpu = !!(cpu & (1ull << n));
		nd->has_normal = !!(normal & (1ull << n));
		nd->total = meminfo(t, n, "MemTotal:");
		read_distances(t, n, online);
		t->max_node = n;
	}
	read_tiers(t);
	read_gpus(t);
	classify(t);
	if (override_tiers(t, dram_nodes, cxl_nodes, msg, msglen))
		rc = -1;
	index_tiers(t);
	for (int i = 0; i < t->ngpu; i++)
		t->gpu[i].dram = nearest_dram(t, t->gpu[i].node);
	t->gpu_node = t->ngpu ? t->gpu[0].dram : nearest_dram(t, -1);
	if (override_gpu(t, gpu_node, msg, msglen))
		rc = -1;
	return rc;
}

int cxls_topo_dram_near(const struct cxls_topo *t, const char *pci)
{
	if (pci && !t->gpu_node_set)
		for (int i = 0; i < t->ngpu; i++)
			if (!strcasecmp(t->gpu[i].pci, pci) && t->gpu[i].dram >= 0)
				return t->gpu[i].dram;
	return t->gpu_node;
}

static struct cxls_topo process_topo;
static pthread_once_t topo_once = PTHREAD_ONCE_INIT;

/* Weights without nodes are the CXL nodes' (plan.c), whose number only
 * this machine tells: said once, not at every buffer. */
static void check_weights(const struct cxls_config *cfg, const struct cxls_topo *t)
{
	for (int i = 0; cfg && i < cfg->mem_rules.n; i++) {
		const struct cxls_mem_rule *r = &cfg->mem_rules.r[i];
		int nw = cxls_mem_rule_nweights(r);

		if (nw && !r->nnodes && nw != t->ncxl)
			CXLS_WARN("rule.%s: %d weights but %d CXL nodes here: striping evenly",
				  r->name, nw, t->ncxl);
	}
}

static void discover_once(void)
{
	const struct cxls_config *cfg = cxls_runtime_config();
	char msg[320];

	if (cxls_topo_discover(&process_topo, NULL, cfg ? cfg->mem_dram_nodes : NULL,
			       cfg ? cfg->mem_cxl_nodes : NULL, cfg ? cfg->mem_gpu_node : NULL,
			       msg, sizeof(msg)))
		CXLS_WARN("%s", msg);
	CXLS_INFO("memory topology: %d DRAM node(s), %d CXL node(s), GPU's DRAM node %d",
		  process_topo.ndram, process_topo.ncxl, process_topo.gpu_node);
	check_weights(cfg, &process_topo);
}

const struct cxls_topo *cxls_topo(void)
{
	pthread_once(&topo_once, discover_once);
	return &process_topo;
}

static const char *tier_name(int tier)
{
	return tier == CXLS_TIER_DRAM ? "dram" : tier == CXLS_TIER_CXL ? "cxl" : "-";
}

static void print_ids(FILE *out, const int *ids, int n)
{
	if (!n)
		fprintf(out, "none");
	for (int i = 0; i < n; i++)
		fprintf(out, "%s%d", i ? "," : "", ids[i]);
	fprintf(out, "\n");
}

void cxls_topo_dump(const struct cxls_topo *t, FILE *out)
{
	fprintf(out, "memory nodes%s:\n", t->overridden ? " (policy overrides applied)" : "");
	fprintf(out, "  node  tier  cpus  normal  memory_tier  total_MiB  free_MiB  distances\n");
	for (int n = 0; n <= t->max_node; n++) {
		const struct cxls_node *nd = &t->node[n];

		if (!nd->present)
			continue;
		fprintf(out, "  %4d  %-4s  %-4s  %-6s  %11d  %9llu  %8llu ", n, tier_name(nd->tier),
			nd->has_cpu ? "yes" : "no", nd->has_normal ? "yes" : "no", nd->memory_tier,
			(unsigned long long)(nd->total >> 20),
			(unsigned long long)(cxls_topo_node_free(t, n) >> 20));
		for (int j = 0; j <= t->max_node; j++)
			if (t->node[j].present)
				fprintf(out, " %d", nd->dist[j]);
		fprintf(out, "\n");
	}
	fprintf(out, "dram nodes: ");
	print_ids(out, t->dram, t->ndram);
	fprintf(out, "cxl nodes:  ");
	print_ids(out, t->cxl, t->ncxl);
	for (int i = 0; i < t->ngpu; i++)
		fprintf(out, "gpu %s: numa_node %d\n", t->gpu[i].pci, t->gpu[i].node);
	if (!t->ngpu)
		fprintf(out, "gpus: none found under %s" PCI_DIR "\n", *t->root ? t->root : "/sys");
	fprintf(out, "gpu's dram node: %d\n", t->gpu_node);
	if (!t->ncxl)
		fprintf(out, "single tier: no CXL node, cxl/stripe/spill rules fall back\n");
}

void cxls_topo_print(FILE *out)
{
	cxls_topo_dump(cxls_topo(), out);
}

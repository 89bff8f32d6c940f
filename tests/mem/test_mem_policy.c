/* test_mem_policy.c - placement rules, topology from a fake sysfs tree,
 * and plans (which node each stripe chunk goes to, spill, fallbacks). */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "freemem.h"
#include "plan.h"
#include "topo.h"
#include "../common/check.h"

static char *write_file(const char *text)
{
	static char path[64];
	FILE *f;

	strcpy(path, "/tmp/cxlshim-hostmem-policy-XXXXXX");
	close(mkstemp(path));
	f = fopen(path, "w");
	fputs(text, f);
	fclose(f);
	return path;
}

static const char *policy =
	"[mem]\nstripe_size = 1M\n"
	"[rule.opt]\ntag = optimizer*\nplace = dram\n"
	"[rule.act]\nsize = 2M-1G\nflags = mapped\nplace = stripe\nnodes = 1,2\n"
	"weights = 1,2\nstripe_size = 2M\nfallback = dram\n"
	"[rule.reg]\nkind = register\nplace = nodes\nnodes = 2\n"
	"[rule.third]\nnth = 3\nplace = interleave\n"
	"[rule.libc]\ncaller = libc.so*\nplace = cxl\n"
	"[rule.env]\nenv_tag = rank1\nplace = spill\nwatermark = 4M\n"
	"[rule.wc]\nflags = writecombined\nplace = default\n";

static void test_parse_match(void)
{
	struct cxls_config c;
	struct cxls_config_error e;
	struct cxls_mem_req q = { .size = 4096, .kind = CXLS_MEMK_ALLOC, .nth = 1 };
	char *p = write_file(policy);

	CHECK(cxls_config_load(&c, p, &e) == 0, "%s:%d %s %s", e.file, e.line, e.key, e.msg);
	CHECK(c.mem_rules.n == 7, "%d rules", c.mem_rules.n);
	CHECK(c.mem_stripe_size == 1 << 20, "stripe");
	CHECK(c.mem_rules.r[1].weights[1] == 2 && c.mem_rules.r[1].nnodes == 2, "weights");
	CHECK(cxls_mem_rules_match(&c.mem_rules, &q) == -1, "nothing for a plain 4K");
	q.tag = "optimizer_states";
	CHECK(cxls_mem_rules_match(&c.mem_rules, &q) == 0, "tag glob");
	q.tag = NULL;
	q.size = 4 << 20;
	CHECK(cxls_mem_rules_match(&c.mem_rules, &q) == -1, "act needs mapped");
	q.flags = CXLS_MEMF_MAPPED | CXLS_MEMF_PORTABLE;
	CHECK(cxls_mem_rules_match(&c.mem_rules, &q) == 1, "size + flags");
	q.size = 2ull << 30;
	CHECK(cxls_mem_rules_match(&c.mem_rules, &q) == -1, "above the range");
	q.kind = CXLS_MEMK_REGISTER;
	CHECK(cxls_mem_rules_match(&c.mem_rules, &q) == 2, "register kind");
	q.kind = CXLS_MEMK_ALLOC;
	q.nth = 3;
	CHECK(cxls_mem_rules_match(&c.mem_rules, &q) == 3, "nth");
	q.nth = 4;
	q.caller = (void *)dlsym(RTLD_DEFAULT, "printf");
	CHECK(cxls_mem_rules_match(&c.mem_rules, &q) == 4, "caller object glob");
	q.caller = (void *)test_parse_match;
	q.env_tag = "rank1";
	CHECK(cxls_mem_rules_match(&c.mem_rules, &q) == 5, "env tag");
	q.env_tag = NULL;
	q.flags = CXLS_MEMF_WRITECOMBINED | CXLS_MEMF_MAPPED;
	q.size = 4 << 20;
	CHECK(cxls_mem_rules_match(&c.mem_rules, &q) == 6, "WC only by a rule naming it");
	cxls_config_print(&c, fopen("/dev/null", "w"));
	unlink(p);
}

static void test_errors(void)
{
	static const struct { const char *text; int line; const char *key; } bad[] = {
		{ "[rule.a]\nplace = dram\nnodes = 1,x\n", 3, "rule.a.nodes" },
		{ "[rule.a]\nplace = teleport\n", 2, "rule.a.place" },
		{ "[rule.a]\nsize = 2G-1M\n", 2, "rule.a.size" },
		{ "[rule.a]\ncolour = blue\n", 2, "rule.a.colour" },
		{ "[rule.a]\nplace = stripe\nnodes = 1,2\nweights = 1\n", 2, "rule.a" },
		{ "[rule.a]\nplace = spill\n", 2, "rule.a" },
		{ "[rule.a]\nplace = nodes\n", 2, "rule.a" },
		{ "[rule.a]\nnodes = 1,1\n", 2, "rule.a.nodes" },
		{ "[rule.a]\nwatermark = 120%\n", 2, "rule.a.watermark" },
		{ "[mem]\nstripe_size = 1000\n", 0, "mem.stripe_size" },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct cxls_config c;
		struct cxls_config_error e;
		char *p = write_file(bad[i].text);

		CHECK(cxls_config_load(&c, p, &e) == -1, "case %zu loaded", i);
		CHECK(e.line == bad[i].line && !strcmp(e.key, bad[i].key),
		      "case %zu: got line %d key %s (%s)", i, e.line, e.key, e.msg);
		unlink(p);
	}
}

static void put(const char *root, const char *rel, const char *text)
{
	char path[512], cmd[600];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	snprintf(cmd, sizeof(cmd), "mkdir -p $(dirname %s)", path);
	if (system(cmd))
		return;
	f = fopen(path, "w");
	fputs(text, f);
	fclose(f);
}

/* node0: CPUs + 8 GiB; node1, node2: CPU-less 4 GiB (CXL); GPU on node 0. */
static void fake_sysfs(const char *r)
{
	put(r, "devices/system/node/online", "0-2\n");
	put(r, "devices/system/node/has_memory", "0-2\n");
	put(r, "devices/system/node/has_normal_memory", "0-1\n");
	put(r, "devices/system/node/has_cpu", "0\n");
	put(r, "devices/system/node/node0/meminfo",
	    "Node 0 MemTotal:  8388608 kB\nNode 0 MemFree:  4194304 kB\n");
	put(r, "devices/system/node/node1/meminfo",
	    "Node 1 MemTotal:  4194304 kB\nNode 1 MemFree:  4000000 kB\n");
	put(r, "devices/system/node/node2/meminfo",
	    "Node 2 MemTotal:  4194304 kB\nNode 2 MemFree:  1024 kB\n");
	put(r, "devices/system/node/node0/distance", "10 20 20\n");
	put(r, "devices/system/node/node1/distance", "20 10 30\n");
	put(r, "devices/system/node/node2/distance", "20 30 10\n");
	put(r, "devices/virtual/memory_tiering/memory_tier4/nodelist", "0\n");
	put(r, "devices/virtual/memory_tiering/memory_tier22/nodelist", "1-2\n");
	put(r, "bus/pci/devices/0000:3b:00.0/vendor", "0x10de\n");
	put(r, "bus/pci/devices/0000:3b:00.0/class", "0x030200\n");
	put(r, "bus/pci/devices/0000:3b:00.0/numa_node", "0\n");
	put(r, "bus/pci/devices/0000:00:1f.0/vendor", "0x8086\n");
	put(r, "bus/pci/devices/0000:00:1f.0/class", "0x060100\n");
}

static uint64_t plenty(const struct cxls_topo *t, int node, uint64_t need)
{
	(void)t;
	(void)node;
	(void)need;
	return 1ull << 40;
}

static uint64_t exact_free(const struct cxls_topo *t, int node, uint64_t need)
{
	(void)need;
	return cxls_topo_node_free(t, node);
}

/* The free-memory cache: sysfs is read again when its value is a second
 * old, when a request is more than 1/16 of it, and never otherwise. */
static void test_freemem(const struct cxls_topo *t, const char *root)
{
	static struct cxls_freemem c;
	const uint64_t s = 1000000000ull, mib = 1 << 20, node1 = 4000000ull << 10;
	uint64_t reads;

	CHECK(cxls_freemem_get(&c, t, 1, mib, 5 * s) == node1 && c.reads == 1, "first read");
	put(root, "devices/system/node/node1/meminfo",
	    "Node 1 MemTotal:  4194304 kB\nNode 1 MemFree:  2000000 kB\n");
	CHECK(cxls_freemem_get(&c, t, 1, mib, 5 * s + s / 2) == node1 && c.reads == 1,
	      "a small request within the second: cached");
	cxls_freemem_debit(&c, 1, 100 * mib);
	CHECK(cxls_freemem_get(&c, t, 1, mib, 5 * s + s / 2) == node1 - 100 * mib && c.reads == 1,
	      "our own placements are taken off");
	reads = c.reads;
	CHECK(cxls_freemem_get(&c, t, 1, node1 / 8, 5 * s + s / 2) == 2000000ull << 10 &&
	      c.reads == reads + 1, "a large share: read again");
	put(root, "devices/system/node/node1/meminfo",
	    "Node 1 MemTotal:  4194304 kB\nNode 1 MemFree:  4000000 kB\n");
	CHECK(cxls_freemem_get(&c, t, 1, mib, 6 * s + s / 4) == 2000000ull << 10,
	      "still within the second of that read");
	CHECK(cxls_freemem_get(&c, t, 1, mib, 7 * s) == node1 && c.reads == reads + 2,
	      "a second later: read again");
	CHECK(cxls_freemem_get(&c, t, 2, 128 << 10, 7 * s) == 1024 << 10 &&
	      cxls_freemem_get(&c, t, 2, 128 << 10, 7 * s) == 1024 << 10 && c.reads == reads + 4,
	      "a node without room to spare is read every time");
	CHECK(cxls_freemem_get(&c, t, -1, 1, 7 * s) == 0 &&
	      cxls_freemem_get(&c, t, CXLS_MEM_MAX_NODE, 1, 7 * s) == 0, "bad node ids");
}

/* mem.dram_nodes / cxl_nodes apply both or neither; mem.gpu_node must be a
 * DRAM node (it is where place = dram goes). */
static void test_overrides(const char *root)
{
	struct cxls_topo t;
	char msg[320];

	/* node 1 made DRAM, so the GPU's DRAM node may be 1 */
	CHECK(cxls_topo_discover(&t, root, "0,1", "2", "1", msg, sizeof(msg)) == 0, "%s", msg);
	CHECK(t.ndram == 2 && t.ncxl == 1 && t.cxl[0] == 2 && t.gpu_node == 1, "gpu override");
	CHECK(cxls_topo_discover(&t, root, "", "7", "auto", msg, sizeof(msg)) == -1 &&
	      strstr(msg, "node 7"), "absent node refused: %s", msg);
	/* a bad dram_nodes: the valid cxl_nodes is not applied alone */
	CHECK(cxls_topo_discover(&t, root, "9", "1", "auto", msg, sizeof(msg)) == -1 &&
	      strstr(msg, "node 9") && strstr(msg, "ignoring mem.dram_nodes and mem.cxl_nodes"),
	      "%s", msg);
	CHECK(t.ncxl == 2 && !t.overridden, "cxl_nodes applied alone: %d CXL nodes", t.ncxl);
	/* a bad cxl_nodes: the valid dram_nodes is not applied alone */
	CHECK(cxls_topo_discover(&t, root, "0,1", "9", "auto", msg, sizeof(msg)) == -1 &&
	      strstr(msg, "node 9"), "%s", msg);
	CHECK(t.ndram == 1 && t.ncxl == 2 && !t.overridden, "dram_nodes applied alone: %d",
	      t.ndram);
	CHECK(cxls_topo_discover(&t, root, "0,1", "1,2", "auto", msg, sizeof(msg)) == -1 &&
	      t.ndram == 1 && strstr(msg, "share"), "a node in both: %s", msg);
	CHECK(cxls_topo_discover(&t, root, "x", "", "auto", msg, sizeof(msg)) == -1 &&
	      strstr(msg, "not a node list"), "%s", msg);
	/* node 2 is CXL: refused with a warning, the GPU's DRAM node stays 0 */
	CHECK(cxls_topo_discover(&t, root, "", "", "2", msg, sizeof(msg)) == -1 &&
	      strstr(msg, "mem.gpu_node = 2 is a CXL node"), "%s", msg);
	CHECK(t.gpu_node == 0, "CXL gpu_node taken: %d", t.gpu_node);
	/* and both problems are reported */
	CHECK(cxls_topo_discover(&t, root, "", "7", "2", msg, sizeof(msg)) == -1 &&
	      strstr(msg, "node 7") && strstr(msg, "gpu_node"), "%s", msg);
}

/* Two sockets, a GPU on each (PCI 1b on node 0, db on node 1), and a CXL
 * node behind socket 1: "dram" is the caller's GPU's own socket, whatever
 * order sysfs lists the GPUs in, unless mem.gpu_node names one for all. */
static void test_gpu_sockets(void)
{
	char r[] = "/tmp/cxlshim-hostmem-sockets-XXXXXX", msg[160], cmd[128];
	struct cxls_mem_rule rule = { .place = CXLS_PLACE_DRAM };
	struct cxls_topo t;
	struct cxls_plan p;
	struct cxls_plan_in in = { .rule = &rule, .topo = &t, .len = 1 << 20, .node_free = plenty };

	if (!mkdtemp(r))
		return;
	put(r, "devices/system/node/online", "0-2\n");
	put(r, "devices/system/node/has_memory", "0-2\n");
	put(r, "devices/system/node/has_normal_memory", "0-2\n");
	put(r, "devices/system/node/has_cpu", "0-1\n");
	for (int n = 0; n < 3; n++) {
		char rel[64], text[64];

		snprintf(rel, sizeof(rel), "devices/system/node/node%d/meminfo", n);
		snprintf(text, sizeof(text), "Node %d MemTotal:  8388608 kB\n", n);
		put(r, rel, text);
	}
	put(r, "devices/system/node/node0/distance", "10 21 31\n");
	put(r, "devices/system/node/node1/distance", "21 10 20\n");
	put(r, "devices/system/node/node2/distance", "31 20 10\n");
	put(r, "bus/pci/devices/0000:1b:00.0/vendor", "0x10de\n");
	put(r, "bus/pci/devices/0000:1b:00.0/class", "0x030200\n");
	put(r, "bus/pci/devices/0000:1b:00.0/numa_node", "0\n");
	put(r, "bus/pci/devices/0000:db:00.0/vendor", "0x10de\n");
	put(r, "bus/pci/devices/0000:db:00.0/class", "0x030200\n");
	put(r, "bus/pci/devices/0000:db:00.0/numa_node", "1\n");
	CHECK(cxls_topo_discover(&t, r, "", "", "auto", msg, sizeof(msg)) == 0, "%s", msg);
	CHECK(t.ngpu == 2 && t.ndram == 2 && t.ncxl == 1, "%d GPUs, %d DRAM, %d CXL nodes", t.ngpu,
	      t.ndram, t.ncxl);
	CHECK(cxls_topo_dram_near(&t, "0000:1B:00.0") == 0 &&
		      cxls_topo_dram_near(&t, "0000:DB:00.0") == 1, "each GPU's own socket");
	CHECK(cxls_topo_dram_near(&t, NULL) == t.gpu_node &&
		      cxls_topo_dram_near(&t, "0000:99:00.0") == t.gpu_node,
	      "no device, or one not listed: the process's");
	in.gpu_pci = "0000:DB:00.0";
	cxls_plan_make(&in, &p);
	CHECK(p.mode == CXLS_PLAN_BIND && p.n == 1 && p.nodes[0] == 1, "dram for GPU db: node %d",
	      p.n ? p.nodes[0] : -1);
	in.gpu_pci = "0000:1b:00.0";
	cxls_plan_make(&in, &p);
	CHECK(p.n == 1 && p.nodes[0] == 0, "dram for GPU 1b: node %d", p.n ? p.nodes[0] : -1);
	CHECK(cxls_topo_discover(&t, r, "", "", "0", msg, sizeof(msg)) == 0 &&
		      cxls_topo_dram_near(&t, "0000:DB:00.0") == 0, "mem.gpu_node is every GPU's");
	snprintf(cmd, sizeof(cmd), "rm -rf %s", r);
	if (system(cmd))
		printf("cannot remove %s\n", r);
}

/* The policy file refuses node lists that do not parse, before any run. */
static void test_node_keys(void)
{
	static const struct { const char *text; int line; const char *key; } bad[] = {
		{ "[mem]\ncxl_nodes = banana\n", 2, "mem.cxl_nodes" },
		{ "[mem]\ndram_nodes = 99\n", 2, "mem.dram_nodes" },
		{ "[mem]\ncxl_nodes = 1,1\n", 2, "mem.cxl_nodes" },
		{ "[mem]\ngpu_node = 42x\n", 2, "mem.gpu_node" },
		{ "[mem]\ngpu_node = 64\n", 2, "mem.gpu_node" },
		{ "[mem]\ngpu_node = -1\n", 2, "mem.gpu_node" },
		{ "[mem]\ndram_nodes = 0-1\ncxl_nodes = 1,2\n", 0, "mem.cxl_nodes" },
	};
	struct cxls_config c;
	struct cxls_config_error e;
	char *p;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		p = write_file(bad[i].text);
		CHECK(cxls_config_load(&c, p, &e) == -1, "node case %zu loaded", i);
		CHECK(e.line == bad[i].line && !strcmp(e.key, bad[i].key),
		      "node case %zu: got line %d key %s (%s)", i, e.line, e.key, e.msg);
		unlink(p);
	}
	/* weights alone are the CXL nodes', as conf/cxlshim.conf says */
	p = write_file("[rule.w]\nplace = stripe\nweights = 1,3\n");
	CHECK(cxls_config_load(&c, p, &e) == 0 && cxls_mem_rule_nweights(&c.mem_rules.r[0]) == 2,
	      "weights without nodes: %s:%d %s %s", e.file, e.line, e.key, e.msg);
	unlink(p);
	p = write_file("[mem]\ndram_nodes = 0\ncxl_nodes = 1-2, 5\ngpu_node = 63\n");
	CHECK(cxls_config_load(&c, p, &e) == 0, "%s:%d %s %s", e.file, e.line, e.key, e.msg);
	unlink(p);
}

static void test_topo_plan(void)
{
	char root[] = "/tmp/cxlshim-hostmem-sysfs-XXXXXX", msg[160], cmd[128];
	struct cxls_mem_rule rule = { .place = CXLS_PLACE_STRIPE, .nnodes = 2, .nodes = { 1, 2 },
				      .weights = { 1, 2 }, .stripe_size = 2 << 20 };
	struct cxls_topo t;
	struct cxls_plan p;
	struct cxls_plan_in in = { .rule = &rule, .topo = &t, .len = 12 << 20,
				   .default_stripe = 1 << 20, .node_free = plenty };
	static const int want[] = { 1, 2, 2, 1, 2, 2 };

	if (!mkdtemp(root))
		return;
	fake_sysfs(root);
	CHECK(cxls_topo_discover(&t, root, "", "", "auto", msg, sizeof(msg)) == 0, "%s", msg);
	CHECK(t.ndram == 1 && t.dram[0] == 0, "dram %d", t.ndram);
	CHECK(t.ncxl == 2 && t.cxl[0] == 1 && t.cxl[1] == 2, "cxl %d", t.ncxl);
	CHECK(t.node[1].dist[2] == 30 && t.node[0].memory_tier == 4, "distances, tiers");
	CHECK(t.ngpu == 1 && t.gpu_node == 0, "gpu %d node %d", t.ngpu, t.gpu_node);
	CHECK(!t.node[2].has_normal, "movable-only node");
	CHECK(cxls_topo_node_free(&t, 2) == 1024 << 10, "free");
	cxls_topo_dump(&t, stdout);

	cxls_plan_make(&in, &p);
	CHECK(p.mode == CXLS_PLAN_STRIPE && !p.why, "stripe plan %d why %u", p.mode, p.why);
	for (int i = 0; i < 6; i++)
		CHECK(cxls_plan_node_at(&p, (size_t)i << 21) == want[i], "chunk %d -> %d", i,
		      cxls_plan_node_at(&p, (size_t)i << 21));
	CHECK(p.tier_bytes[CXLS_TIER_CXL] == 12 << 20, "tier bytes");
	/* a last chunk shorter than the stripe counts its own bytes: 3 MiB in
	 * 2 MiB chunks is 2 MiB on node 1 and 1 MiB on node 2, and over DRAM
	 * and CXL nodes 2 MiB on DRAM (the spill watermark counts those) */
	in.len = 3 << 20;
	cxls_plan_make(&in, &p);
	CHECK(p.tier_bytes[CXLS_TIER_CXL] == 3 << 20, "tier bytes of a partial chunk: %llu",
	      (unsigned long long)p.tier_bytes[CXLS_TIER_CXL]);
	rule.nodes[0] = 0;
	rule.nodes[1] = 1;
	rule.weights[1] = 1;
	cxls_plan_make(&in, &p);
	CHECK(p.tier_bytes[CXLS_TIER_DRAM] == 2 << 20 && p.tier_bytes[CXLS_TIER_CXL] == 1 << 20,
	      "dram + cxl stripe of 3 MiB: dram %llu cxl %llu",
	      (unsigned long long)p.tier_bytes[CXLS_TIER_DRAM],
	      (unsigned long long)p.tier_bytes[CXLS_TIER_CXL]);
	rule.nodes[0] = 1;
	rule.nodes[1] = 2;
	rule.weights[1] = 2;
	in.len = 12 << 20;

	in.node_free = exact_free; /* node 2 has 1 MiB free */
	rule.fallback = CXLS_FB_DRAM;
	cxls_plan_make(&in, &p);
	CHECK((p.why & CXLS_WHY_FULL) && p.full_node == 2, "full node 2: why %u", p.why);
	CHECK(p.mode == CXLS_PLAN_BIND && p.n == 1 && p.nodes[0] == 0, "falls back to DRAM");
	rule.fallback = CXLS_FB_FAIL;
	cxls_plan_make(&in, &p);
	CHECK(p.mode == CXLS_PLAN_FAIL, "fallback fail");

	rule.nodes[1] = 5;
	rule.fallback = CXLS_FB_DEFAULT;
	cxls_plan_make(&in, &p);
	CHECK((p.why & CXLS_WHY_NO_NODE) && p.missing_node == 5 && p.mode == CXLS_PLAN_PASS,
	      "missing node 5");

	/* spill: 4 MiB under the watermark on DRAM, the rest striped */
	rule = (struct cxls_mem_rule){ .place = CXLS_PLACE_SPILL, .watermark = 10 << 20 };
	in.node_free = plenty;
	in.dram_placed = 6 << 20;
	cxls_plan_make(&in, &p);
	CHECK(p.prefix == 4 << 20 && p.prefix_node == 0 && (p.why & CXLS_WHY_SPILLED),
	      "spill prefix %zu", p.prefix);
	CHECK(cxls_plan_node_at(&p, 0) == 0 && cxls_plan_node_at(&p, (4 << 20) - 4096) == 0 &&
	      cxls_plan_node_at(&p, 4 << 20) == 1 && cxls_plan_node_at(&p, 5 << 20) == 2,
	      "spill layout");
	in.dram_placed = 0;
	in.len = 8 << 20;
	cxls_plan_make(&in, &p);
	CHECK(p.mode == CXLS_PLAN_BIND && p.nodes[0] == 0 && !p.prefix, "under the watermark");

	/* weights without nodes: the CXL nodes' (1 and 2) in id order */
	rule = (struct cxls_mem_rule){ .place = CXLS_PLACE_STRIPE, .weights = { 1, 3 } };
	in.dram_placed = 0;
	in.len = 8 << 20;
	cxls_plan_make(&in, &p);
	CHECK(p.mode == CXLS_PLAN_STRIPE && p.n == 2 && p.weights[0] == 1 && p.weights[1] == 3,
	      "weights of the CXL nodes: n %d %u,%u", p.n, p.weights[0], p.weights[1]);
	CHECK(cxls_plan_node_at(&p, 0) == 1 && cxls_plan_node_at(&p, 1 << 20) == 2 &&
	      cxls_plan_node_at(&p, 2 << 20) == 2 && cxls_plan_node_at(&p, 3 << 20) == 2 && cxls_plan_node_at(&p, 4 << 20) == 1,
	      "weighted CXL stripe");
	/* as many weights as another machine's CXL nodes: even */
	rule.weights[2] = 2;
	cxls_plan_make(&in, &p);
	CHECK(p.n == 2 && p.weights[0] == 1 && p.weights[1] == 1, "3 weights, 2 CXL nodes");

	test_freemem(&t, root);

	test_overrides(root);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	if (system(cmd))
		printf("cannot remove %s\n", root);
}

int main(void)
{
	test_parse_match();
	test_errors();
	test_node_keys();
	test_topo_plan();
	test_gpu_sockets();
	return CHECK_SUMMARY();
}

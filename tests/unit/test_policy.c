/* test_policy.c - the policy file, environment overrides and routing. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "sock_bufs.h"
#include "sock_rules.h"

#include <arpa/inet.h>
#include "../common/check.h"

static char *write_file(const char *text)
{
	static char path[64];
	FILE *f;

	strcpy(path, "/tmp/cxlshim-policy-XXXXXX");
	close(mkstemp(path));
	f = fopen(path, "w");
	fputs(text, f);
	fclose(f);
	return path;
}

static void test_defaults(void)
{
	struct cxls_config c;
	struct cxls_config_error e;

	CHECK(cxls_config_load(&c, NULL, &e) == 0, "defaults must load: %s", e.msg);
	CHECK(c.pool_devices == 4, "%u", c.pool_devices);
	/* overlap auto: decided per communicator by what runs the copies */
	CHECK(c.cccl_interleave == 1 && c.cccl_overlap == -1, "variant all");
	CHECK(c.cccl_chunk_size == 512 << 10, "%llu", (unsigned long long)c.cccl_chunk_size);
	/* window auto (0): decided per communicator by what runs the copies */
	CHECK(c.cccl_window == 0, "%llu", (unsigned long long)c.cccl_window);
	CHECK(c.nccl_collectives == CXLS_COLL_ALL, "%x", c.nccl_collectives);
}

static void test_file(void)
{
	struct cxls_config c;
	struct cxls_config_error e;
	char *p = write_file("; comment\n[pool]\npath = /dev/shm/x.pool\nsize = 64M\n"
			     "devices = 6\ncoherence = flush\n\n[cccl]\nvariant = naive\n"
			     "chunks = 3\nwindow = max\n[nccl]\ncollectives = broadcast\n"
			     "max_bytes = 1G\n"
			     "[wait]\nmode = host\n");

	CHECK(cxls_config_load(&c, p, &e) == 0, "%s:%d %s %s", e.file, e.line, e.key, e.msg);
	CHECK(!strcmp(c.pool_path, "/dev/shm/x.pool"), "%s", c.pool_path);
	CHECK(c.pool_size == 64ull << 20, "%llu", (unsigned long long)c.pool_size);
	CHECK(c.pool_devices == 6 && c.pool_coherence == CXLS_FLUSH, "pool");
	CHECK(c.cccl_variant == CXLS_VARIANT_NAIVE && c.cccl_interleave == 0 &&
	      c.cccl_overlap == 0 && c.cccl_chunk_size == 4 << 20, "naive derives the rest");
	CHECK(c.cccl_chunks == 3 && c.cccl_window == UINT64_MAX, "%u %llu", c.cccl_chunks,
	      (unsigned long long)c.cccl_window);
	CHECK(c.nccl_collectives == CXLS_COLL_BROADCAST, "%x", c.nccl_collectives);
	CHECK(c.nccl_max_bytes == 1ull << 30, "max_bytes");
	CHECK(c.wait_mode == CXLS_WAIT_HOST, "wait mode");
	unlink(p);
}

/* Every kind of mistake names file, line and key, and loads nothing bad. */
static void test_errors(void)
{
	static const struct { const char *text; int line; const char *key; } bad[] = {
		{ "[pool]\nsize = 12Q\n", 2, "pool.size" },
		{ "[pool]\n\n\nfoo = 1\n", 4, "pool.foo" },
		{ "[cccl]\nvariant = fast\n", 2, "cccl.variant" },
		{ "[cccl]\ninterleave = maybe\n", 2, "cccl.interleave" },
		{ "[nccl]\ncollectives = allgather,frobnicate\n", 2, "nccl.collectives" },
		{ "[pool]\nsize = -5\n", 2, "pool.size" },
		{ "[pool]\nmode = 1777\n", 2, "pool.mode" },
		{ "[pool]\ndevices = 99999999999\n", 2, "pool.devices" },
		/* a repeat would merge into the first section or replace the value */
		{ "[rule.a]\nplace = cxl\n[rule.b]\nplace = dram\n[rule.a]\nsize = 4K\n", 5, "" },
		{ "[mem]\nstripe_size = 4M\n[MEM]\n", 3, "" },
		{ "[rule.a]\nplace = cxl\nplace = dram\n", 3, "rule.a.place" },
		{ "[pool]\nsize = 1G\n\nSIZE = 2G\n", 4, "pool.SIZE" },
	};
	struct cxls_config c;
	struct cxls_config_error e;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *p = write_file(bad[i].text);

		CHECK(cxls_config_load(&c, p, &e) == -1, "case %zu must fail", i);
		CHECK(e.line == bad[i].line, "case %zu: line %d, want %d", i, e.line, bad[i].line);
		CHECK(!strcmp(e.key, bad[i].key), "case %zu: key %s, want %s", i, e.key,
		      bad[i].key);
		CHECK(!strcmp(e.file, p), "case %zu: file %s", i, e.file);
		unlink(p);
	}
	CHECK(cxls_config_load(&c, "/nonexistent/cxlshim.conf", &e) == -1, "missing file");
	{
		char *p = write_file("[pool\nsize=1\n");
		CHECK(cxls_config_load(&c, p, &e) == -1 && e.line == 1, "syntax line %d", e.line);
		unlink(p);
	}
	{
		char *p = write_file("[pool]\ndevices = 0\n");
		CHECK(cxls_config_load(&c, p, &e) == -1 && !strcmp(e.key, "pool.devices"),
		      "range check: %s", e.key);
		unlink(p);
	}
}

static char *write_bytes(const char *text, size_t len)
{
	static char path[64];
	FILE *f;

	strcpy(path, "/tmp/cxlshim-policy-XXXXXX");
	close(mkstemp(path));
	f = fopen(path, "w");
	fwrite(text, 1, len, f);
	fclose(f);
	return path;
}

/* "PREFIX" + n times c + "SUFFIX", for lines of a given length. */
static char *long_text(const char *prefix, char c, size_t n, const char *suffix)
{
	static char buf[4096];
	size_t p = strlen(prefix);

	memcpy(buf, prefix, p);
	memset(buf + p, c, n);
	strcpy(buf + p + n, suffix);
	return buf;
}

/* Lines are read whole up to CXLS_LINE_MAX characters and refused beyond:
 * libinih cut them at 199 and parsed the rest as a line of its own. */
static void test_lines(void)
{
	struct cxls_config c;
	struct cxls_config_error e;
	char *p;

	/* a long comment whose tail looks like a key stays a comment */
	p = write_file(long_text("[rule.small]\nsize = <=64K\nplace = dram\n; ", '-', 200,
				 "place = cxl\n"));
	CHECK(cxls_config_load(&c, p, &e) == 0, "%s:%d %s", e.file, e.line, e.msg);
	CHECK(c.mem_rules.n == 1 && c.mem_rules.r[0].place == CXLS_PLACE_DRAM,
	      "long comment: place %d", c.mem_rules.r[0].place);
	unlink(p);
	/* a string of 255 bytes, as the type allows */
	p = write_file(long_text("[log]\nfile = /", 'd', 254, "\n"));
	CHECK(cxls_config_load(&c, p, &e) == 0 && strlen(c.log_file) == 255, "%s:%d %s",
	      e.file, e.line, e.msg);
	unlink(p);
	/* CXLS_LINE_MAX characters (CRLF or not) load, one more does not */
	p = write_file(long_text("[pool]\n;", 'x', CXLS_LINE_MAX - 1, "\r\nsize = 2G\n"));
	CHECK(cxls_config_load(&c, p, &e) == 0 && c.pool_size == 2ull << 30, "%s:%d %s",
	      e.file, e.line, e.msg);
	unlink(p);
	p = write_file(long_text("[pool]\nsize = 2G\n;", 'x', CXLS_LINE_MAX, "\nsize = 1G\n"));
	CHECK(cxls_config_load(&c, p, &e) == -1 && e.line == 3 && !*e.key &&
	      !strcmp(e.msg, "line longer than 1023 characters"), "%d %s", e.line, e.msg);
	unlink(p);
	/* line numbers after a long line are those of the file */
	p = write_file(long_text("[pool]\n;", 'x', 300, "\n\nfoo = 1\n"));
	CHECK(cxls_config_load(&c, p, &e) == -1 && e.line == 4 && !strcmp(e.key, "pool.foo"),
	      "line %d key %s", e.line, e.key);
	unlink(p);
	/* a NUL byte would end the line early */
	p = write_bytes("[rule.a]\nplace = dram\0 garbage\n", 32);
	CHECK(cxls_config_load(&c, p, &e) == -1 && e.line == 2, "NUL: line %d %s", e.line,
	      e.msg);
	unlink(p);
	/* an indented line is a key, not the previous value's continuation */
	p = write_file("[rule.a]\nsize = 4K\n  place = cxl\n");
	CHECK(cxls_config_load(&c, p, &e) == 0 && c.mem_rules.r[0].place == CXLS_PLACE_CXL &&
	      c.mem_rules.r[0].max_size == 4096, "indented key: %s", e.msg);
	unlink(p);
	/* a line without end is refused at its limit, not read for ever */
	CHECK(cxls_config_load(&c, "/dev/zero", &e) == -1 && e.line == 1 &&
	      !strcmp(e.msg, "line longer than 1023 characters"), "/dev/zero: %d %s", e.line,
	      e.msg);
	/* a directory opens but cannot be read: refused, not an empty policy */
	CHECK(cxls_config_load(&c, "/tmp", &e) == -1 && strstr(e.msg, "directory"),
	      "directory: %s", e.msg);
}

/* Numbers are decimal (0x hex): a zero-padded 010 was octal 8.  Only
 * pool.mode, a file mode, is octal. */
static void test_numbers(void)
{
	struct cxls_config c;
	struct cxls_config_error e;
	char *p = write_file("[pool]\nsize = 0100M\nmax_comms = 010\nmode = 660\n"
			     "[cccl]\nchunk_size = 0x100000\n"
			     "[rule.s]\nplace = spill\nwatermark = 010%\nnth = 08-09\n");

	CHECK(cxls_config_load(&c, p, &e) == 0, "%s:%d %s %s", e.file, e.line, e.key, e.msg);
	CHECK(c.pool_size == 100ull << 20, "size %llu", (unsigned long long)c.pool_size);
	CHECK(c.pool_max_comms == 10, "max_comms %u", c.pool_max_comms);
	CHECK(c.pool_mode == 0660, "mode %o", c.pool_mode);
	CHECK(c.cccl_chunk_size == 1 << 20, "hex %llu", (unsigned long long)c.cccl_chunk_size);
	CHECK(c.mem_rules.r[0].watermark_pct == 10, "watermark %u%%",
	      c.mem_rules.r[0].watermark_pct);
	CHECK(c.mem_rules.r[0].nth_min == 8 && c.mem_rules.r[0].nth_max == 9, "nth");
	unlink(p);
	p = write_file("[pool]\nmode = 0680\n");
	CHECK(cxls_config_load(&c, p, &e) == -1 && e.line == 2, "8 is not an octal digit");
	unlink(p);
}

static void test_env(void)
{
	struct cxls_config c;
	struct cxls_config_error e;
	char *p = write_file("[pool]\ndevices = 6\n");

	setenv("CXLSHIM_POOL_DEVICES", "8", 1);
	setenv("CXLSHIM_CCCL_CHUNK_SIZE", "1M", 1);
	CHECK(cxls_config_load(&c, p, &e) == 0, "%s", e.msg);
	CHECK(c.pool_devices == 8, "environment overrides the file: %u", c.pool_devices);
	CHECK(c.cccl_chunk_size == 1 << 20, "chunk");
	setenv("CXLSHIM_CCCL_CHUNK_SIZE", "1000", 1);
	CHECK(cxls_config_load(&c, p, &e) == -1 && !strcmp(e.key, "cccl.chunk_size"),
	      "chunk must be 4K aligned: %s", e.key);
	setenv("CXLSHIM_CCCL_CHUNK_SIZE", "4K", 1);
	CHECK(cxls_config_load(&c, p, &e) == -1 && !strcmp(e.key, "cccl.chunk_size"),
	      "chunk must be at least 64K: %s", e.key);
	unsetenv("CXLSHIM_CCCL_CHUNK_SIZE");
	setenv("CXLSHIM_WAIT_SLEEP_MAX_US", "2000000", 1);
	CHECK(cxls_config_load(&c, p, &e) == -1 && !strcmp(e.key, "wait.sleep_max_us"),
	      "sleep bound: %s", e.key);
	unsetenv("CXLSHIM_WAIT_SLEEP_MAX_US");
	setenv("CXLSHIM_CCCL_DEVICE_BW", "0", 1);
	CHECK(cxls_config_load(&c, p, &e) == -1 && !strcmp(e.key, "cccl.device_bw"),
	      "device bandwidth: %s", e.key);
	unsetenv("CXLSHIM_CCCL_DEVICE_BW");
	setenv("CXLSHIM_NCCL_SIM_BW", "1000", 1);
	CHECK(cxls_config_load(&c, p, &e) == -1 && !strcmp(e.key, "nccl.sim_bw"),
	      "simulated bandwidth: %s", e.key);
	unsetenv("CXLSHIM_NCCL_SIM_BW");
	setenv("CXLSHIM_CCCL_CHUNK_SIZE", "lots", 1);
	CHECK(cxls_config_load(&c, p, &e) == -1 && !strcmp(e.key, "CXLSHIM_CCCL_CHUNK_SIZE") &&
	      !strcmp(e.file, "environment"), "env error names the variable: %s", e.key);
	unsetenv("CXLSHIM_CCCL_CHUNK_SIZE");
	unsetenv("CXLSHIM_POOL_DEVICES");
	unlink(p);
}

static void test_route(void)
{
	struct cxls_config c;

	cxls_config_defaults(&c);
	c.nccl_collectives = CXLS_COLL_ALLGATHER;
	c.nccl_min_bytes = 1024;
	c.nccl_max_bytes = 1 << 20;
	c.nccl_max_ranks = 8;
	CHECK(cxls_route_to_pool(&c, CXLS_COLL_ALLGATHER, 4096, 4), "in range");
	CHECK(!cxls_route_to_pool(&c, CXLS_COLL_BROADCAST, 4096, 4), "op not listed");
	CHECK(!cxls_route_to_pool(&c, CXLS_COLL_ALLGATHER, 100, 4), "too small");
	CHECK(!cxls_route_to_pool(&c, CXLS_COLL_ALLGATHER, 2 << 20, 4), "too large");
	CHECK(!cxls_route_to_pool(&c, CXLS_COLL_ALLGATHER, 4096, 9), "too many ranks");
	c.nccl_enable = 0;
	CHECK(!cxls_route_to_pool(&c, CXLS_COLL_ALLGATHER, 4096, 4), "disabled");
}

static void test_print(void)
{
	struct cxls_config c, d;
	struct cxls_config_error e;
	char path[] = "/tmp/cxlshim-print-XXXXXX";
	FILE *f;

	cxls_config_defaults(&c);
	c.pool_devices = 5;
	c.nccl_collectives = CXLS_COLL_BROADCAST;
	close(mkstemp(path));
	f = fopen(path, "w");
	cxls_config_print(&c, f);
	fclose(f);
	/* what we print parses back to the same values */
	CHECK(cxls_config_load(&d, path, &e) == 0, "%s:%d %s %s", e.file, e.line, e.key, e.msg);
	CHECK(d.pool_devices == 5 && d.nccl_collectives == CXLS_COLL_BROADCAST, "round trip");
	unlink(path);
}

extern char **environ;

/* The runner sets CXLSHIM_* for the shim; these tests want none of them. */
static void clear_env(void)
{
	char name[128];

	for (int i = 0; environ[i];) {
		if (!strncmp(environ[i], "CXLSHIM_", 8)) {
			snprintf(name, sizeof(name), "%.*s", (int)strcspn(environ[i], "="), environ[i]);
			unsetenv(name);
			continue;
		}
		i++;
	}
}

/* The shipped example policies must load. */
static void test_shipped(void)
{
	static const char *files[] = { "conf/cxlshim.conf", "conf/naive.conf",
				       "conf/cross-host.conf", "conf/broadcast-only.conf" };
	struct cxls_config c;
	struct cxls_config_error e;

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		CHECK(cxls_config_load(&c, files[i], &e) == 0, "%s:%d %s: %s", e.file, e.line,
		      e.key, e.msg);
}

/* [sock] rules: CIDR with deny and first match, port ranges, programs. */
static void test_sock_rules(void)
{
	struct cxls_config c;
	struct cxls_sock_rules r;
	uint8_t a[16] = { 0 }, b6[16] = { 0 };
	char msg[160];
	uint16_t p6379 = htons(6379), p22 = htons(22);

	cxls_config_defaults(&c);
	CHECK(cxls_sock_rules_parse(&r, &c, msg, sizeof(msg)) == 0, "defaults: %s", msg);
	inet_pton(AF_INET, "10.1.2.3", a);
	CHECK(cxls_sock_rules_allow(&r, AF_INET, a, p22, "x"), "defaults allow everything");
	strcpy(c.sock_peers, "!10.1.2.3, 10.0.0.0/8, ::1/128");
	strcpy(c.sock_ports, "!22, 1024-65535");
	strcpy(c.sock_programs, "!sshd, any");
	CHECK(cxls_sock_rules_parse(&r, &c, msg, sizeof(msg)) == 0, "rules: %s", msg);
	CHECK(!cxls_sock_rules_allow(&r, AF_INET, a, p6379, "redis"), "denied host first");
	inet_pton(AF_INET, "10.200.0.9", a);
	CHECK(cxls_sock_rules_allow(&r, AF_INET, a, p6379, "redis"), "in 10/8");
	CHECK(!cxls_sock_rules_allow(&r, AF_INET, a, p22, "redis"), "port 22 denied");
	CHECK(!cxls_sock_rules_allow(&r, AF_INET, a, p6379, "sshd"), "program denied");
	inet_pton(AF_INET, "11.0.0.1", a);
	CHECK(!cxls_sock_rules_allow(&r, AF_INET, a, p6379, "redis"), "no match denies");
	inet_pton(AF_INET6, "::1", b6);
	CHECK(cxls_sock_rules_allow(&r, AF_INET6, b6, p6379, "redis"), "::1/128");
	/* a listener is advertised when some peer may use the pool */
	CHECK(cxls_sock_rules_allow_some(&r, p6379, "redis"), "some peer: 10/8 allowed");
	CHECK(!cxls_sock_rules_allow_some(&r, p22, "redis"), "some peer: port 22 denied to all");
	CHECK(!cxls_sock_rules_allow_some(&r, p6379, "sshd"), "some peer: sshd denied to all");
	strcpy(c.sock_peers, "!10.0.0.0/8, !any, 11.0.0.0/8");
	CHECK(cxls_sock_rules_parse(&r, &c, msg, sizeof(msg)) == 0, "rules: %s", msg);
	CHECK(!cxls_sock_rules_allow_some(&r, p6379, "redis"), "some peer: !any first");
	strcpy(c.sock_peers, "!10.0.0.0/8");
	CHECK(cxls_sock_rules_parse(&r, &c, msg, sizeof(msg)) == 0, "rules: %s", msg);
	CHECK(!cxls_sock_rules_allow_some(&r, p6379, "redis"), "some peer: deny rules only");
	strcpy(c.sock_peers, "!10.0.0.0/8, any");
	CHECK(cxls_sock_rules_parse(&r, &c, msg, sizeof(msg)) == 0, "rules: %s", msg);
	CHECK(cxls_sock_rules_allow_some(&r, p6379, "redis"), "some peer: any after a deny");
	strcpy(c.sock_peers, "10.0.0.0/33");
	CHECK(cxls_sock_rules_parse(&r, &c, msg, sizeof(msg)) && strstr(msg, "sock.peers"),
	      "bad prefix: %s", msg);
	strcpy(c.sock_peers, "any");
	strcpy(c.sock_ports, "70000");
	CHECK(cxls_sock_rules_parse(&r, &c, msg, sizeof(msg)) && strstr(msg, "sock.ports"),
	      "bad port: %s", msg);
	strcpy(c.sock_ports, "9-3");
	CHECK(cxls_sock_rules_parse(&r, &c, msg, sizeof(msg)), "reversed range");
	setenv("CXLSHIM_SOCK_RING_SIZE", "100K", 1);
	CHECK(cxls_config_load(&c, NULL, &(struct cxls_config_error){ 0 }) == -1,
	      "ring_size must be a power of two");
	unsetenv("CXLSHIM_SOCK_RING_SIZE");
	setenv("CXLSHIM_SOCK_PEERS", "not-an-address", 1);
	CHECK(cxls_config_load(&c, NULL, &(struct cxls_config_error){ 0 }) == -1,
	      "bad peers in the environment");
	unsetenv("CXLSHIM_SOCK_PEERS");
}

/* sock.buffers: SIZE:COUNT classes; every malformed list is refused. */
static void test_sock_bufs(void)
{
	static const char *bad[] = {
		"64K", "64K:0", "3K:4", "6K:4", "128M:1", "64K:70000", "1M:2,64K:4", "64K:1,64K:2",
		"4K:1,8K:1,12K:1,16K:1,20K:1", "x:y", "64K:", ":4",
	};
	uint32_t size[CXLS_SOCK_BUF_CLASSES], count[CXLS_SOCK_BUF_CLASSES];
	struct cxls_config c;
	char msg[160];

	CHECK(cxls_sock_bufs_parse("64K:16, 256K:8,1M:8", size, count, msg, sizeof(msg)) == 0 &&
	      size[0] == 65536 && count[0] == 16 && size[2] == (1u << 20) && count[2] == 8 &&
	      size[3] == 0 && count[3] == 0, "three classes: %s", msg);
	CHECK(cxls_sock_bufs_parse("none", size, count, msg, sizeof(msg)) == 0 && !count[0] &&
	      cxls_sock_bufs_parse("", size, count, msg, sizeof(msg)) == 0 && !count[0],
	      "none and empty: no buffers");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(cxls_sock_bufs_parse(bad[i], size, count, msg, sizeof(msg)) == -1 && *msg,
		      "'%s' refused", bad[i]);
	setenv("CXLSHIM_SOCK_BUFFERS", "1M:2,64K:4", 1);
	CHECK(cxls_config_load(&c, NULL, &(struct cxls_config_error){ 0 }) == -1,
	      "descending classes in the environment");
	setenv("CXLSHIM_SOCK_BUFFERS", "none", 1);
	setenv("CXLSHIM_SOCK_REF_MIN", "0", 1);
	CHECK(cxls_config_load(&c, NULL, &(struct cxls_config_error){ 0 }) == 0 &&
	      c.sock_ref_min == 0, "no buffers, no references");
	unsetenv("CXLSHIM_SOCK_BUFFERS");
	unsetenv("CXLSHIM_SOCK_REF_MIN");
}

int main(void)
{
	clear_env();
	test_sock_rules();
	test_sock_bufs();
	test_shipped();
	test_defaults();
	test_file();
	test_errors();
	test_lines();
	test_numbers();
	test_env();
	test_route();
	test_print();
	return CHECK_SUMMARY();
}

/* test_pool.c - the pool file, its superblock, the rendezvous in the
 * communicator table and the doorbells, with real processes. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "comm_table.h"
#include "doorbell.h"
#include "pool.h"
#include "config.h"
#include "../common/check.h"

static struct cxls_config cfg;

static void fresh_pool(const char *tag)
{
	cxls_config_defaults(&cfg);
	snprintf(cfg.pool_path, sizeof(cfg.pool_path), "/dev/shm/cxlshim-test-%s-%d.pool", tag,
		 (int)getpid());
	unlink(cfg.pool_path);
	cfg.pool_size = 64 << 20;
	cfg.pool_max_comms = 8;
	cfg.pool_max_ranks = 16;
}

static void test_format_and_reopen(void)
{
	struct cxls_pool a, b;

	fresh_pool("fmt");
	CHECK(cxls_pool_open(&a, &cfg) == 0, "create");
	CHECK(a.sb->magic == CXLS_POOL_MAGIC && a.sb->ndev == 4, "superblock");
	CHECK(cxls_super_check(a.sb, a.size) == 0, "valid");
	/* another process's policy with other geometry adopts the pool's */
	cfg.pool_devices = 2;
	CHECK(cxls_pool_open(&b, &cfg) == 0, "reopen");
	CHECK(b.sb->ndev == 4 && !memcmp(a.sb->uuid, b.sb->uuid, 16), "same pool");
	cxls_pool_close(&b);
	cxls_pool_close(&a);
	unlink(cfg.pool_path);
}

/* n processes open one blank pool at the same instant with flock off (as
 * hosts sharing a pool are): the in-pool claim alone must let exactly one
 * format it and every other attach to that format. */
struct race {
	_Atomic int ready, go;
	int err[64], formatted[64];
	uint8_t uuid[64][16];
};

static void race_round(struct race *r, int n, int flush)
{
	pid_t pids[64];
	int st, formatted = 0, errs = 0, same = 1;

	memset(r, 0, sizeof(*r));
	unlink(cfg.pool_path);
	for (int i = 0; i < n; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			struct cxls_pool p;

			atomic_fetch_add(&r->ready, 1);
			while (!atomic_load(&r->go))
				;
			r->err[i] = cxls_pool_open(&p, &cfg);
			if (!r->err[i]) {
				r->formatted[i] = p.formatted;
				memcpy(r->uuid[i], p.sb->uuid, 16);
				cxls_pool_close(&p);
			}
			_exit(0);
		}
	}
	while (atomic_load(&r->ready) < n)
		usleep(100);
	atomic_store(&r->go, 1);
	for (int i = 0; i < n; i++)
		waitpid(pids[i], &st, 0);
	for (int i = 0; i < n; i++) {
		formatted += r->formatted[i];
		errs += r->err[i] != 0;
		same &= !memcmp(r->uuid[i], r->uuid[0], 16);
	}
	CHECK(formatted == 1 && errs == 0 && same,
	      "%s: %d processes race on a blank pool, flock off: %d formatted (want 1), %d "
	      "failed, %s", flush ? "flush" : "coherent", n, formatted, errs,
	      same ? "one uuid" : "DIFFERENT uuids");
}

static void test_format_race(int flush, int n, int rounds)
{
	struct race *r = mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE,
			      MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	fresh_pool(flush ? "raceflush" : "race");
	cfg.pool_flock = 0;
	/* every contender reads the empty claim before anyone writes one */
	setenv("CXLSHIM_TEST_CLAIM_DELAY_US", "20000", 1);
	cfg.pool_coherence = flush ? CXLS_FLUSH : CXLS_COHERENT;
	for (int i = 0; i < rounds; i++)
		race_round(r, n, flush);
	/* a formatter killed after its claim: the claim goes stale and the
	 * next process takes it over */
	{
		struct cxls_pool p;
		uint64_t t0;

		unsetenv("CXLSHIM_TEST_CLAIM_DELAY_US");
		CHECK(cxls_pool_open(&p, &cfg) == 0, "open");
		memset(p.sb, 0, sizeof(*p.sb));
		atomic_store(&p.sb->format_claim, 0x1234567ull);
		cxls_pool_close(&p);
		t0 = cxls_now_ns();
		CHECK(cxls_pool_open(&p, &cfg) == 0 && p.formatted, "stale claim taken over");
		CHECK(cxls_now_ns() - t0 < 10000000000ull, "within the stale limit");
		cxls_pool_close(&p);
	}
	munmap(r, sizeof(*r));
	unlink(cfg.pool_path);
}

/* Damages one field of a valid pool and expects `want` on reopening. */
static void damaged(const char *what, size_t off, uint64_t value, int bytes, int want)
{
	struct cxls_pool p;
	int err;

	fresh_pool("bad");
	CHECK(cxls_pool_open(&p, &cfg) == 0, "create");
	/* XOR, so that the field always changes (a random uuid byte may
	 * already hold the damage value) */
	for (int i = 0; i < bytes; i++)
		((unsigned char *)p.sb)[off + (size_t)i] ^= (unsigned char)(value >> (8 * i));
	cxls_pool_close(&p);
	err = cxls_pool_open(&p, &cfg);
	CHECK(err == want, "%s: got %d (%s), want %d", what, err, cxls_pool_strerror(err), want);
	CHECK(p.base == NULL, "%s: nothing left mapped", what);
	unlink(cfg.pool_path);
}

/* Like damaged(), but with a valid checksum over the damage. */
static void forged(const char *what, size_t off, uint64_t value)
{
	struct cxls_pool p;
	int err;

	fresh_pool("forge");
	CHECK(cxls_pool_open(&p, &cfg) == 0, "create");
	memcpy((char *)p.sb + off, &value, 8);
	p.sb->checksum = cxls_super_checksum(p.sb);
	cxls_pool_close(&p);
	err = cxls_pool_open(&p, &cfg);
	CHECK(err == CXLS_POOL_ECORRUPT || err == CXLS_POOL_ESIZE, "%s: got %d", what, err);
	unlink(cfg.pool_path);
}

/* A pool the file system cannot hold is refused at open, not a SIGBUS at
 * first touch: here the file size limit plays the full tmpfs. */
static void test_no_space(void)
{
	struct rlimit old, small = { 8 << 20, 8 << 20 };
	struct cxls_pool p;
	pid_t pid;
	int st;

	fresh_pool("nospace");
	pid = fork();
	if (pid == 0) {
		signal(SIGXFSZ, SIG_IGN);
		getrlimit(RLIMIT_FSIZE, &old);
		setrlimit(RLIMIT_FSIZE, &small);
		_exit(cxls_pool_open(&p, &cfg) == CXLS_POOL_ESYS ? 0 : 1);
	}
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "oversized pool refused (status %d)", st);
	unlink(cfg.pool_path);
}

static void test_bad_superblocks(void)
{
	damaged("magic", offsetof(struct cxls_super, magic), 0x1234, 8, CXLS_POOL_EMAGIC);
	damaged("version", offsetof(struct cxls_super, version), 99, 4, CXLS_POOL_EVERSION);
	damaged("ndev", offsetof(struct cxls_super, ndev), 7, 4, CXLS_POOL_ECORRUPT);
	damaged("dev_size", offsetof(struct cxls_super, dev_size), 1ull << 40, 8,
		CXLS_POOL_ECORRUPT);
	damaged("checksum", offsetof(struct cxls_super, checksum), 1, 4, CXLS_POOL_ECORRUPT);
	/* every byte of the checksummed part matters */
	for (size_t off = 8; off < offsetof(struct cxls_super, checksum); off += 4)
		damaged("byte", off, 0x5a5a5a5a, 1, off < 12 ? CXLS_POOL_EVERSION :
							       CXLS_POOL_ECORRUPT);
	/* forged checksums cannot smuggle in geometry that wraps or escapes */
	forged("dev_size wraps", offsetof(struct cxls_super, dev_size), 1ull << 62);
	forged("lane_size wraps", offsetof(struct cxls_super, lane_size), 1ull << 40);
	forged("comm_offset wraps", offsetof(struct cxls_super, comm_offset), (uint64_t)-4096);
	forged("unaligned dev_offset", offsetof(struct cxls_super, dev_offset), 4096 * 3 + 8);
	forged("pool beyond the file", offsetof(struct cxls_super, pool_size), 1ull << 40);
	/* socket buffer classes: sizes, order and counts must match the region */
	forged("buffer class of 4G-1", offsetof(struct cxls_super, sock_buf_size), 0xffffffffull);
	forged("buffer classes descending", offsetof(struct cxls_super, sock_buf_size),
	       (65536ull << 32) | (1u << 20));
	forged("buffers beyond the region", offsetof(struct cxls_super, sock_buf_count),
	       (1ull << 32) | 65536);
	/* a too-small existing file */
	fresh_pool("tiny");
	FILE *f = fopen(cfg.pool_path, "w");
	fputs("x", f);
	fclose(f);
	struct cxls_pool p;
	CHECK(cxls_pool_open(&p, &cfg) == CXLS_POOL_ESIZE, "tiny file");
	unlink(cfg.pool_path);
	/* an unreachable path */
	snprintf(cfg.pool_path, sizeof(cfg.pool_path), "/nonexistent/dir/pool");
	CHECK(cxls_pool_open(&p, &cfg) == CXLS_POOL_ENOENT, "missing dir");
}

static struct cxls_join_args args(uint64_t key, uint32_t n, uint32_t rank, uint32_t ms)
{
	struct cxls_join_args a = { .key = { key, ~key }, .nranks = n, .rank = rank,
				    .timeout_ms = ms, .chunk = 1 << 20, .slots = 4,
				    .interleave = 1 };
	return a;
}

/* n ranks as processes join one record; each exits 0 on success. */
static void test_rendezvous(uint32_t n)
{
	struct cxls_pool p;
	pid_t pids[16];
	int ok = 1, st;

	fresh_pool("rdv");
	CHECK(cxls_pool_open(&p, &cfg) == 0, "create");
	for (uint32_t r = 0; r < n; r++) {
		pids[r] = fork();
		if (pids[r] == 0) {
			struct cxls_join_args a = args(42, n, r, 5000);
			struct cxls_comm_view v;
			struct cxls_pool q;

			if (cxls_pool_open(&q, &cfg) || cxls_comm_join(&q, &a, &v))
				_exit(1);
			_exit(CXLS_PHASE(v.rec->state) == CXLS_COMM_READY && a.chunk == 1 << 20 ?
				      0 : 2);
		}
	}
	for (uint32_t r = 0; r < n; r++) {
		waitpid(pids[r], &st, 0);
		ok &= WIFEXITED(st) && WEXITSTATUS(st) == 0;
	}
	CHECK(ok, "%u ranks rendezvous", n);
	/* all of them exited without leaving: the record is reclaimable */
	CHECK(cxls_comm_reclaim(&p) == 1, "dead job's record reclaimed");
	cxls_pool_close(&p);
	unlink(cfg.pool_path);
}

static void test_timeout_and_latecomer(void)
{
	struct cxls_pool p;
	struct cxls_comm_view v;
	struct cxls_join_args a = args(7, 3, 0, 300), b = args(7, 3, 1, 300);

	fresh_pool("late");
	CHECK(cxls_pool_open(&p, &cfg) == 0, "create");
	CHECK(cxls_comm_join(&p, &a, &v) == CXLS_JOIN_ETIMEDOUT, "alone: times out");
	/* a late rank must not start a new rendezvous: it fails too */
	CHECK(cxls_comm_join(&p, &b, &v) == CXLS_JOIN_EFAILED, "latecomer fails");
	cxls_pool_close(&p);
	unlink(cfg.pool_path);
}

static void test_mismatch(void)
{
	struct cxls_pool p;
	struct cxls_comm_view v;
	struct cxls_join_args a = args(9, 2, 0, 2000);
	pid_t pid;
	int st;

	fresh_pool("mm");
	CHECK(cxls_pool_open(&p, &cfg) == 0, "create");
	pid = fork();
	if (pid == 0) {
		struct cxls_join_args b = args(9, 3, 1, 2000); /* disagrees on nranks */
		struct cxls_pool q;

		usleep(100000);
		if (cxls_pool_open(&q, &cfg))
			_exit(9);
		_exit(cxls_comm_join(&q, &b, &v) == CXLS_JOIN_EINVAL ? 0 : 1);
	}
	CHECK(cxls_comm_join(&p, &a, &v) == CXLS_JOIN_EFAILED, "nranks mismatch fails rank 0");
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "and the mismatching rank");
	/* same rank twice */
	a = args(10, 2, 0, 2000);
	pid = fork();
	if (pid == 0) {
		struct cxls_join_args b = args(10, 2, 0, 2000);
		struct cxls_pool q;

		usleep(100000);
		if (cxls_pool_open(&q, &cfg))
			_exit(9);
		_exit(cxls_comm_join(&q, &b, &v) == CXLS_JOIN_EINVAL ? 0 : 1);
	}
	CHECK(cxls_comm_join(&p, &a, &v) == CXLS_JOIN_EFAILED, "duplicate rank fails");
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "duplicate detected");
	CHECK(cxls_comm_join(&p, &(struct cxls_join_args){ .nranks = 0 }, &v) == CXLS_JOIN_EINVAL,
	      "zero ranks");
	cxls_pool_close(&p);
	unlink(cfg.pool_path);
}

/* A job SIGKILLed mid-rendezvous leaves a record and maybe the table lock;
 * a new job starts cleanly anyway. */
static void test_killed_job(void)
{
	struct cxls_pool p;
	struct cxls_comm_view v;
	pid_t pid;

	fresh_pool("kill");
	cfg.pool_max_comms = 1; /* the only slot is the dead job's */
	CHECK(cxls_pool_open(&p, &cfg) == 0, "create");
	pid = fork();
	if (pid == 0) {
		struct cxls_join_args a = args(11, 2, 0, 60000);
		cxls_comm_join(&p, &a, &v);
		_exit(0);
	}
	usleep(200000);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	/* also leave the table lock held by the dead process */
	atomic_store(&p.sb->table_lock, ((uint64_t)0xffffffff << 32) | (uint64_t)pid);
	{
		struct cxls_join_args a = args(12, 1, 0, 2000);
		/* the lock token's host half does not match ours: give it the
		 * real one so the same-host liveness rule applies */
		struct cxls_proc_id me;
		cxls_proc_self(&me);
		atomic_store(&p.sb->table_lock, (me.boot_hash << 32) | (uint64_t)pid);
		CHECK(cxls_comm_join(&p, &a, &v) == CXLS_JOIN_OK, "new job after a killed one");
		cxls_comm_leave(&p, &v, 0);
		CHECK(CXLS_PHASE(v.rec->state) == CXLS_COMM_FREE, "freed after the last leave");
	}
	cxls_pool_close(&p);
	unlink(cfg.pool_path);
}

/* Every byte of a record's checksummed words matters: a damaged header
 * is refused by the rendezvous and reclaimed even while its holders live,
 * a damaged rank record never passes for a live holder. */
static void test_record_checksums(void)
{
	size_t id_words[][2] = {
		{ offsetof(struct cxls_comm_rec, key_lo), 16 },
		{ offsetof(struct cxls_comm_rec, nranks), 36 }, /* nranks .. sum */
	};
	size_t rank_words[][2] = {
		{ offsetof(struct cxls_rank_rec, pid), 4 },
		{ offsetof(struct cxls_rank_rec, boot_hash), 16 },
		{ offsetof(struct cxls_rank_rec, sum), 4 },
	};
	struct cxls_join_args a = args(77, 2, 0, 5000);
	struct cxls_comm_view v;
	struct cxls_pool p;
	int missed = 0, flips = 0, st;
	pid_t pid;

	fresh_pool("sum");
	CHECK(cxls_pool_open(&p, &cfg) == 0, "create");
	pid = fork();
	if (pid == 0) {
		struct cxls_join_args b = args(77, 2, 1, 5000);
		struct cxls_pool q;

		if (cxls_pool_open(&q, &cfg) || cxls_comm_join(&q, &b, &v))
			_exit(1);
		pause(); /* holds rank 1 until killed */
		_exit(0);
	}
	CHECK(cxls_comm_join(&p, &a, &v) == 0, "two ranks joined");
	CHECK(cxls_comm_rec_ok(v.rec) && cxls_comm_rank_alive(&v, 1) == 1, "records check");
	for (size_t w = 0; w < sizeof(id_words) / sizeof(id_words[0]); w++)
		for (size_t i = 0; i < id_words[w][1] * 8; i++) {
			uint8_t *b = (uint8_t *)v.rec + id_words[w][0] + i / 8;

			*b ^= (uint8_t)(1u << (i % 8));
			missed += cxls_comm_rec_ok(v.rec);
			flips++;
			*b ^= (uint8_t)(1u << (i % 8));
		}
	for (size_t w = 0; w < sizeof(rank_words) / sizeof(rank_words[0]); w++)
		for (size_t i = 0; i < rank_words[w][1] * 8; i++) {
			uint8_t *b = (uint8_t *)&v.ranks[1] + rank_words[w][0] + i / 8;

			*b ^= (uint8_t)(1u << (i % 8));
			missed += cxls_comm_rank_alive(&v, 1) != 0;
			flips++;
			*b ^= (uint8_t)(1u << (i % 8));
		}
	CHECK(missed == 0, "%d of %d single-bit flips of checksummed words went unnoticed", missed,
	      flips);
	CHECK(cxls_comm_rank_alive(&v, 1) == 1, "restored rank record checks again");
	/* a damaged header: a late rank with the same key is refused, not
	 * handed a fresh record that would split the job */
	v.rec->chunk ^= 4096;
	{
		struct cxls_join_args c = args(77, 2, 1, 500);
		struct cxls_comm_view w;

		CHECK(cxls_comm_join(&p, &c, &w) == CXLS_JOIN_ECORRUPT, "join of a damaged record");
	}
	CHECK(cxls_comm_reclaim(&p) == 1, "damaged record reclaimed though its holders live");
	CHECK(CXLS_PHASE(atomic_load(&v.rec->state)) == CXLS_COMM_FREE, "and free");
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	cxls_pool_close(&p);
	unlink(cfg.pool_path);
}

static void test_doorbells(void)
{
	struct cxls_bell *b = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
				   -1, 0);
	struct cxls_wait_cfg w = { 0, 5, 1000 };
	pid_t pid;
	int st;

	atomic_store(&b->seq, 0xfffffff0u); /* waits must work across the wrap */
	pid = fork();
	if (pid == 0) {
		for (uint32_t i = 1; i <= 64; i++) {
			cxls_bell_wait(&b[1], 0xfffffff0u + i, &w);
			cxls_bell_ring(&b[0], 0xfffffff0u + i, 0);
		}
		_exit(0);
	}
	for (uint32_t i = 1; i <= 64; i++) {
		cxls_bell_ring(&b[1], 0xfffffff0u + i, 0);
		cxls_bell_wait(&b[0], 0xfffffff0u + i, &w);
	}
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "ping-pong across processes");
	CHECK(cxls_seq_reached(5, 0xfffffff0u) && !cxls_seq_reached(0xfffffff0u, 5), "wrap");
	CHECK(atomic_load(&b[0].seq) == 0xfffffff0u + 64, "final value");
	cxls_bell_poison(&b[0], 0);
	CHECK(cxls_seq_reached(atomic_load(&b[0].seq), 0xfffffff0u + 1000), "poison passes waits");
	munmap(b, 4096);
}

int main(void)
{
	unsetenv("CXLSHIM_DEBUG");
	test_format_and_reopen();
	test_format_race(0, 48, 10);
	test_format_race(1, 24, 4);
	test_bad_superblocks();
	test_no_space();
	test_rendezvous(1);
	test_rendezvous(2);
	test_rendezvous(8);
	test_timeout_and_latecomer();
	test_mismatch();
	test_killed_job();
	test_record_checksums();
	test_doorbells();
	return CHECK_SUMMARY();
}

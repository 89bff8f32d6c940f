/* pool.c - open, format and validate the shared pool. */
#include "pool.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "config.h"
#include "coherence.h"
#include "format_claim.h"
#include "log.h"
#include "proc_id.h"
#include "sock_bufs.h"
#include "sock_format.h"

/* Bytes of one communicator record: header, ranks, three bell arrays. */
uint64_t cxls_comm_stride(uint32_t max_ranks);

const char *cxls_pool_strerror(int err)
{
	switch (err) {
	case CXLS_POOL_OK: return "ok";
	case CXLS_POOL_ENOENT: return "cannot open or create the pool";
	case CXLS_POOL_EMAGIC: return "not a cxlshim pool (wrong magic)";
	case CXLS_POOL_EVERSION: return "unsupported pool format version";
	case CXLS_POOL_ECORRUPT: return "pool superblock is corrupt";
	case CXLS_POOL_ESIZE: return "pool is too small";
	case CXLS_POOL_ESYS: return "system error mapping the pool";
	case CXLS_POOL_EAGAIN: return "another process formats the pool";
	}
	return "unknown pool error";
}

/* A pool of another release is never reformatted by a job: its own jobs
 * may still use it.  The tool replaces it when no process does. */
void cxls_pool_explain(char *buf, size_t len, int err, const struct cxls_super *sb)
{
	switch (err) {
	case CXLS_POOL_EVERSION:
		snprintf(buf, len, "pool format version %u, this cxlshim uses version %u "
			 "(a pool of another release; once none of its jobs runs, "
			 "`cxlshim pool create --replace` makes a new one)",
			 sb ? sb->version : 0, CXLS_POOL_VERSION);
		return;
	case CXLS_POOL_EMAGIC:
	case CXLS_POOL_ECORRUPT:
		snprintf(buf, len, "%s (`cxlshim pool create --replace` makes a new one once no "
			 "process uses the file)", cxls_pool_strerror(err));
		return;
	}
	snprintf(buf, len, "%s", cxls_pool_strerror(err));
}

/* Covers the immutable geometry; the magic is excluded because it is
 * stored last, after the checksum, to publish a fully formatted pool. */
uint32_t cxls_super_checksum(const struct cxls_super *sb)
{
	size_t from = offsetof(struct cxls_super, version);

	return (uint32_t)cxls_hash64((const char *)sb + from,
				     offsetof(struct cxls_super, checksum) - from);
}

/* a + b * n without wrapping, or UINT64_MAX */
static uint64_t span(uint64_t a, uint64_t b, uint64_t n)
{
	uint64_t prod, sum;

	if (__builtin_mul_overflow(b, n, &prod) || __builtin_add_overflow(a, prod, &sum))
		return UINT64_MAX;
	return sum;
}

/* Buffer classes: unused ones all zero, used ones ascending. */
static int sock_bufs_ok(const struct cxls_super *sb)
{
	uint32_t prev = 0;

	for (int k = 0; k < CXLS_SOCK_BUF_CLASSES; k++) {
		uint32_t size = sb->sock_buf_size[k], count = sb->sock_buf_count[k];

		if (!size && !count)
			continue;
		if (size < CXLS_SOCK_BUF_MIN || size > CXLS_SOCK_BUF_MAX ||
		    (size & (CXLS_SOCK_BUF_MIN - 1)) || size <= prev || count < 1 ||
		    count > CXLS_SOCK_BUF_COUNT_MAX)
			return 0;
		prev = size;
	}
	return 1;
}

/* The socket region lies between the communicator records and the
 * devices; with no slots it is empty. */
static int sock_region_ok(const struct cxls_super *sb, uint64_t comm_end)
{
	uint64_t ring = sb->sock_ring;

	if (sb->sock_slots == 0)
		return sb->sock_size == 0 && sb->sock_listeners == 0 &&
		       !cxls_sock_nbufs(sb->sock_buf_count);
	if (sb->sock_slots > 65536 || sb->sock_listeners < 1 || sb->sock_listeners > 65536 ||
	    ring < CXLS_SOCK_RING_MIN || ring > CXLS_SOCK_RING_MAX || (ring & (ring - 1)) ||
	    !sock_bufs_ok(sb))
		return 0;
	if (sb->sock_size != cxls_sock_region_size(sb->sock_listeners, sb->sock_slots, ring,
						   sb->sock_buf_size, sb->sock_buf_count) ||
	    sb->sock_offset & (CXLS_PAGE - 1) || sb->sock_offset < comm_end)
		return 0;
	return span(sb->sock_offset, sb->sock_size, 1) <= sb->dev_offset;
}

int cxls_super_check(const struct cxls_super *sb, size_t map_size)
{
	uint64_t comm_end, dev_end;

	if (sb->magic != CXLS_POOL_MAGIC)
		return CXLS_POOL_EMAGIC;
	if (sb->version != CXLS_POOL_VERSION)
		return CXLS_POOL_EVERSION;
	if (sb->checksum != cxls_super_checksum(sb))
		return CXLS_POOL_ECORRUPT;
	if (sb->super_size != sizeof(*sb) || sb->ndev < 1 || sb->ndev > 64 ||
	    sb->max_comms < 1 || sb->max_comms > 1024 || sb->max_ranks < 1 ||
	    sb->max_ranks > CXLS_MAX_RANKS || sb->coherence > 1)
		return CXLS_POOL_ECORRUPT;
	/* Untrusted numbers: every product and sum checked, every region
	 * page aligned and inside the pool. */
	if (sb->comm_stride != cxls_comm_stride(sb->max_ranks) || sb->lane_size < CXLS_PAGE ||
	    span(0, sb->lane_size, sb->max_comms) > sb->dev_size ||
	    (sb->comm_offset | sb->dev_offset | sb->dev_size | sb->lane_size) & (CXLS_PAGE - 1))
		return CXLS_POOL_ECORRUPT;
	comm_end = span(sb->comm_offset, sb->comm_stride, sb->max_comms);
	dev_end = span(sb->dev_offset, sb->dev_size, sb->ndev);
	if (sb->comm_offset < CXLS_PAGE || comm_end > sb->dev_offset || dev_end > sb->pool_size ||
	    !sock_region_ok(sb, comm_end))
		return CXLS_POOL_ECORRUPT;
	if (sb->pool_size > map_size)
		return CXLS_POOL_ESIZE;
	return CXLS_POOL_OK;
}

static uint64_t align_down(uint64_t v, uint64_t a)
{
	return v & ~(a - 1);
}

static uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) & ~(a - 1);
}

/* Connection slots for a new pool: what the policy asks, halved until the
 * socket region takes at most an eighth of the pool.  Buffer classes come
 * first, unless they alone would take more than half of that eighth. */
static void sock_geometry(struct cxls_super *sb, const struct cxls_config *cfg)
{
	uint32_t slots = cfg->sock_slots, *size = sb->sock_buf_size, *count = sb->sock_buf_count;
	uint64_t ring = cfg->sock_ring_size;
	char msg[160];

	if (cxls_sock_bufs_parse(cfg->sock_buffers, size, count, msg, sizeof(msg)) ||
	    cxls_sock_bufs_size(size, count) > sb->pool_size / 16) {
		CXLS_INFO("new pool: sock.buffers '%s' takes more than a 16th of it: no socket "
			  "buffers", cfg->sock_buffers);
		memset(size, 0, CXLS_SOCK_BUF_CLASSES * sizeof(*size));
		memset(count, 0, CXLS_SOCK_BUF_CLASSES * sizeof(*count));
	}
	while (slots && cxls_sock_region_size(slots, slots, ring, size, count) > sb->pool_size / 8)
		slots /= 2;
	if (!slots) {
		memset(size, 0, CXLS_SOCK_BUF_CLASSES * sizeof(*size));
		memset(count, 0, CXLS_SOCK_BUF_CLASSES * sizeof(*count));
	}
	sb->sock_slots = slots;
	sb->sock_listeners = slots;
	sb->sock_ring = slots ? ring : 0;
	sb->sock_size = slots ? cxls_sock_region_size(slots, slots, ring, size, count) : 0;
}

/* Lays the geometry out in a fresh superblock; the magic goes last, and
 * only while the format claim is still ours (format_claim.h), which the
 * geometry's bytes leave alone. */
static int format(struct cxls_pool *pool, const struct cxls_config *cfg, uint64_t token)
{
	struct cxls_super *sb = pool->sb;
	size_t claim = offsetof(struct cxls_super, format_claim);
	size_t after = offsetof(struct cxls_super, table_lock);
	uint64_t comm_bytes, dev_size, lane;

	memset(sb, 0, claim);
	memset((char *)sb + after, 0, sizeof(*sb) - after);
	sb->version = CXLS_POOL_VERSION;
	sb->super_size = sizeof(*sb);
	sb->pool_size = pool->size;
	if (getrandom(sb->uuid, sizeof(sb->uuid), 0) != sizeof(sb->uuid))
		return CXLS_POOL_ESYS;
	sb->ndev = cfg->pool_devices;
	sb->max_comms = cfg->pool_max_comms;
	sb->max_ranks = cfg->pool_max_ranks;
	sb->coherence = (uint32_t)cfg->pool_coherence;
	sb->comm_offset = CXLS_PAGE;
	sb->comm_stride = cxls_comm_stride(sb->max_ranks);
	comm_bytes = align_up(sb->comm_stride * sb->max_comms, CXLS_PAGE);
	sb->sock_offset = sb->comm_offset + comm_bytes;
	sock_geometry(sb, cfg);
	sb->dev_offset = sb->sock_offset + sb->sock_size;
	if (sb->dev_offset >= pool->size)
		return CXLS_POOL_ESIZE;
	dev_size = align_down((pool->size - sb->dev_offset) / sb->ndev, CXLS_PAGE);
	lane = align_down(dev_size / sb->max_comms, CXLS_PAGE);
	if (lane < (1ull << 20))
		return CXLS_POOL_ESIZE;
	sb->dev_size = dev_size;
	sb->lane_size = lane;
	sb->created_ns = cxls_now_ns();
	sb->checksum = cxls_super_checksum(sb);
	cxls_publish(pool->flush_mode, sb, sizeof(*sb));
	if (!cxls_claim_still_ours(sb, pool->flush_mode, token)) {
		CXLS_INFO("pool %s: another process claimed the format late: it formats", pool->path);
		return CXLS_POOL_EAGAIN;
	}
	atomic_store((_Atomic uint64_t *)&sb->magic, CXLS_POOL_MAGIC);
	cxls_publish(pool->flush_mode, sb, CXLS_LINE);
	pool->formatted = 1;
	CXLS_INFO("pool %s formatted: %zu bytes, %u devices of %llu bytes, %u comm slots, "
		  "%u socket slots of 2 x %llu bytes", pool->path, pool->size, sb->ndev,
		  (unsigned long long)dev_size, sb->max_comms, sb->sock_slots,
		  (unsigned long long)sb->sock_ring);
	return CXLS_POOL_OK;
}

/* Size of a DAX character device from sysfs. */
static int dax_size(const char *path, size_t *size)
{
	char sys[128];
	unsigned long long v;
	struct stat st;
	FILE *f;

	if (stat(path, &st))
		return -1;
	snprintf(sys, sizeof(sys), "/sys/dev/char/%u:%u/size", major(st.st_rdev),
		 minor(st.st_rdev));
	f = fopen(sys, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%llu", &v) != 1)
		v = 0;
	fclose(f);
	*size = (size_t)v;
	return v ? 0 : -1;
}

/* Reserves the whole pool now: a sparse file on a full tmpfs would hand out
 * SIGBUS on first touch instead of an error here. */
static int size_new_file(struct cxls_pool *pool, const struct cxls_config *cfg)
{
	int err = posix_fallocate(pool->fd, 0, (off_t)cfg->pool_size);

	if (err == 0)
		return 0;
	CXLS_WARN("pool %s: cannot reserve %llu bytes: %s (pool.size too large for this "
		  "file system?)", pool->path, (unsigned long long)cfg->pool_size, strerror(err));
	if (ftruncate(pool->fd, 0))
		return -1;
	return -1;
}

/* 1 when the file's group is one of this process's groups. */
static int in_group(gid_t gid)
{
	gid_t groups[256];
	int n = getgroups(256, groups);

	if (gid == getegid())
		return 1;
	for (int i = 0; i < n; i++)
		if (groups[i] == gid)
			return 1;
	return 0;
}

/* Whoever can write the pool file can read and forge every job's state in
 * it.  A file of ours gets exactly pool.mode (a new one despite the umask,
 * an old one even if someone widened it); another user's file is used
 * only when the policy shares pools with the group, the file is in one of
 * our groups and others have no access to it.  A tool that only attaches
 * (pool clean) takes away what others had and leaves the group's: its
 * policy need not be the jobs' (0600 where they share at 0660). */
static int check_access(struct cxls_pool *pool, const struct stat *st, uint32_t mode,
			int attach)
{
	if (st->st_uid == geteuid()) {
		if (attach)
			mode = st->st_mode & 0770;
		if ((st->st_mode & 0777) != mode && fchmod(pool->fd, mode)) {
			CXLS_WARN("pool %s: cannot set mode 0%o: %s", pool->path, mode,
				  strerror(errno));
			return -1;
		}
		return 0;
	}
	if (!(mode & 0060)) {
		CXLS_WARN("pool %s belongs to uid %u and pool.mode 0%o shares with nobody: refused",
			  pool->path, (unsigned)st->st_uid, mode);
		return -1;
	}
	if (!in_group(st->st_gid) || (st->st_mode & 0007)) {
		CXLS_WARN("pool %s (uid %u, gid %u, mode 0%o) is not shared through one of our "
			  "groups only: refused", pool->path, (unsigned)st->st_uid,
			  (unsigned)st->st_gid, (unsigned)(st->st_mode & 0777));
		return -1;
	}
	return 0;
}

static int open_source(struct cxls_pool *pool, const struct cxls_config *cfg, int attach)
{
	struct stat st;

	pool->fd = open(pool->path, O_RDWR | O_CLOEXEC | (attach ? 0 : O_CREAT),
			cfg->pool_mode & 0600);
	if (pool->fd < 0) {
		CXLS_WARN("pool %s: open: %s", pool->path, strerror(errno));
		return CXLS_POOL_ENOENT;
	}
	if (fstat(pool->fd, &st))
		return CXLS_POOL_ESYS;
	if (S_ISREG(st.st_mode) && check_access(pool, &st, cfg->pool_mode, attach))
		return CXLS_POOL_ENOENT;
	if (S_ISCHR(st.st_mode)) {
		pool->is_dax = 1;
		if (dax_size(pool->path, &pool->size))
			return CXLS_POOL_ESYS;
		return CXLS_POOL_OK;
	}
	if (!S_ISREG(st.st_mode))
		return CXLS_POOL_ENOENT;
	/* Sizing is idempotent (fallocate never shrinks, never clears) and
	 * the format is decided in the pool; flock only spares the processes
	 * of one host the claim's waits. */
	if (cfg->pool_flock)
		flock(pool->fd, LOCK_EX);
	if (!attach && fstat(pool->fd, &st) == 0 && st.st_size == 0 && size_new_file(pool, cfg)) {
		if (cfg->pool_flock)
			flock(pool->fd, LOCK_UN);
		return CXLS_POOL_ESYS;
	}
	if (cfg->pool_flock)
		flock(pool->fd, LOCK_UN);
	if (fstat(pool->fd, &st))
		return CXLS_POOL_ESYS;
	pool->size = (size_t)st.st_size; /* never shrink what others mapped */
	return CXLS_POOL_OK;
}

/* A blank pool (no magic) is formatted by the one process that wins the
 * claim; the others wait for its magic, then everybody validates.  One
 * that only attaches takes a blank pool for no pool. */
static int format_or_attach(struct cxls_pool *pool, const struct cxls_config *cfg, int attach)
{
	for (int round = 0; round < 4; round++) {
		uint64_t token;

		cxls_refresh(pool->flush_mode, pool->sb, sizeof(*pool->sb));
		if (atomic_load((_Atomic uint64_t *)&pool->sb->magic))
			return cxls_super_check(pool->sb, pool->size);
		if (attach)
			return CXLS_POOL_EMAGIC;
		switch (cxls_claim_format(pool->sb, pool->flush_mode, &token)) {
		case CXLS_CLAIM_WON: {
			int err = format(pool, cfg, token);

			if (err == CXLS_POOL_EAGAIN)
				break;
			if (err) { /* the next contender fails alike, without a wait */
				atomic_compare_exchange_strong(&pool->sb->format_claim, &token, 0);
				cxls_publish(pool->flush_mode, &pool->sb->format_claim, CXLS_LINE);
			}
			return err;
		}
		case CXLS_CLAIM_MAGIC:
			break;
		default:
			return CXLS_POOL_ESYS;
		}
	}
	cxls_refresh(pool->flush_mode, pool->sb, sizeof(*pool->sb));
	return atomic_load((_Atomic uint64_t *)&pool->sb->magic) ? cxls_super_check(pool->sb, pool->size) :
					       CXLS_POOL_ESYS;
}

static int pool_open(struct cxls_pool *pool, const struct cxls_config *cfg, int attach)
{
	char why[256];
	int err;

	memset(pool, 0, sizeof(*pool));
	pool->fd = -1;
	snprintf(pool->path, sizeof(pool->path), "%s", cfg->pool_path);
	err = open_source(pool, cfg, attach);
	if (err)
		goto fail;
	if (pool->size < (16ull << 20)) {
		err = CXLS_POOL_ESIZE;
		goto fail;
	}
	pool->base = mmap(NULL, pool->size, PROT_READ | PROT_WRITE, MAP_SHARED, pool->fd, 0);
	if (pool->base == MAP_FAILED) {
		pool->base = NULL;
		err = CXLS_POOL_ESYS;
		goto fail;
	}
	pool->sb = (struct cxls_super *)pool->base;
	pool->flush_mode = cfg->pool_coherence == CXLS_FLUSH;
	if (cfg->pool_flock)
		flock(pool->fd, LOCK_EX);
	err = format_or_attach(pool, cfg, attach);
	if (cfg->pool_flock)
		flock(pool->fd, LOCK_UN);
	if (err)
		goto fail;
	/* format_or_attach() checked the live superblock, which any process
	 * mapping the file may rewrite meanwhile: what this process uses from
	 * now on is one copy, and that copy is what must pass the checks */
	pool->geo = *pool->sb;
	err = cxls_super_check(&pool->geo, pool->size);
	if (err)
		goto fail;
	/* the pool's own mode wins over this process's policy */
	pool->flush_mode = pool->geo.coherence == CXLS_FLUSH;
	/* the mapping keeps the file: an fd left open took the lowest free
	 * number, which the application may count on (a number its
	 * close-on-exec fd left free in an exec'd image reads as open) */
	syscall(SYS_close, pool->fd);
	pool->fd = -1;
	return CXLS_POOL_OK;
fail:
	cxls_pool_explain(why, sizeof(why), err, err == CXLS_POOL_EVERSION ? pool->sb : NULL);
	CXLS_WARN("pool %s: %s", pool->path, why);
	cxls_pool_close(pool);
	return err;
}

int cxls_pool_open(struct cxls_pool *pool, const struct cxls_config *cfg)
{
	return pool_open(pool, cfg, 0);
}

int cxls_pool_attach(struct cxls_pool *pool, const struct cxls_config *cfg)
{
	return pool_open(pool, cfg, 1);
}

void cxls_pool_close(struct cxls_pool *pool)
{
	if (pool->base)
		munmap(pool->base, pool->size);
	if (pool->fd >= 0)
		close(pool->fd);
	pool->base = NULL;
	pool->sb = NULL;
	pool->fd = -1;
}

/* fuzz_pool.c - libFuzzer target: everything that reads pool metadata
 * another process (or host, or attacker) wrote.
 *
 * Input byte 0 picks the mode:
 *   odd:  the rest is the start of a pool file: superblock validation
 *         (pool.c) and the read-only snapshot + doctor of `cxlshim`;
 *   even: the rest overwrites the communicator table of a pool with a
 *         valid superblock (bit 2 set: its socket region instead), then
 *         the library's own readers run on it: reclaim, rendezvous (join,
 *         leave) and the snapshot + doctor (with its cycle search).  Bit 1
 *         set: every record's checksum is made to match first, so that
 *         what lies behind the checksums is exercised too.
 * Nothing may crash, hang or touch memory outside the pool.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_table.h"
#include "doctor.h"
#include "layout.h"
#include "pool.h"
#include "snapshot.h"
#include "sock_format.h"

#define MAP (4u << 20)
#define MAX_COMMS 4
#define MAX_RANKS 4
#define SOCK_SLOTS 4

static uint8_t *map;
static FILE *devnull;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	map = aligned_alloc(CXLS_PAGE, MAP);
	devnull = fopen("/dev/null", "w");
	return !map || !devnull;
}

/* A small valid pool: 2 devices after the communicator table. */
static void format(struct cxls_super *sb)
{
	memset(sb, 0, sizeof(*sb));
	sb->magic = CXLS_POOL_MAGIC;
	sb->version = CXLS_POOL_VERSION;
	sb->super_size = sizeof(*sb);
	sb->pool_size = MAP;
	sb->ndev = 2;
	sb->max_comms = MAX_COMMS;
	sb->max_ranks = MAX_RANKS;
	sb->comm_offset = CXLS_PAGE;
	sb->comm_stride = cxls_comm_stride(MAX_RANKS);
	sb->sock_offset = 16 * CXLS_PAGE;
	sb->sock_slots = SOCK_SLOTS;
	sb->sock_listeners = SOCK_SLOTS;
	sb->sock_ring = CXLS_SOCK_RING_MIN;
	/* two buffer classes, so that referenced writes' descriptors are fuzzed too */
	sb->sock_buf_size[0] = CXLS_SOCK_BUF_MIN;
	sb->sock_buf_count[0] = 4;
	sb->sock_buf_size[1] = 2 * CXLS_SOCK_BUF_MIN;
	sb->sock_buf_count[1] = 2;
	sb->sock_size = cxls_sock_region_size(SOCK_SLOTS, SOCK_SLOTS, CXLS_SOCK_RING_MIN,
					      sb->sock_buf_size, sb->sock_buf_count);
	sb->dev_offset = sb->sock_offset + sb->sock_size;
	sb->dev_size = (MAP - sb->dev_offset) / 2 & ~(CXLS_PAGE - 1);
	sb->lane_size = sb->dev_size / MAX_COMMS & ~(CXLS_PAGE - 1);
	sb->checksum = cxls_super_checksum(sb);
}

static void snapshot(size_t size)
{
	struct pool_snap s;

	if (snap_take(map, size, 0, &s) == 0) {
		doctor_report(&s, devnull, 0);
		snap_free(&s);
	}
}

static void library_readers(void)
{
	struct cxls_pool pool = { .fd = -1, .base = map, .size = MAP };
	struct cxls_comm_view v;
	struct cxls_layout lay;
	const _Atomic int cancel = 1;
	struct cxls_join_args a = { .key = { 1, 2 }, .nranks = 2, .rank = 1, .timeout_ms = 0,
				    .cancel = &cancel, .chunk = 1 << 20, .slots = 4 };

	pool.sb = (struct cxls_super *)map;
	pool.geo = *pool.sb;
	cxls_comm_reclaim(&pool);
	/* the key of slot 0, whatever it holds: join may find, claim or refuse */
	cxls_comm_view_of(&pool, 0, &v);
	a.key[0] = atomic_load(&v.rec->key_lo);
	a.key[1] = atomic_load(&v.rec->key_hi);
	if (cxls_comm_join(&pool, &a, &v) == 0) {
		cxls_layout_init(&lay, pool.sb, v.slot, a.nranks, a.chunk, a.slots,
				 (int)a.interleave, a.window);
		cxls_comm_leave(&pool, &v, a.rank);
	}
}

/* Makes every record's checksums match its (fuzzed) contents. */
static void forge_sums(void)
{
	struct cxls_pool pool = { .fd = -1, .base = map, .size = MAP };

	pool.sb = (struct cxls_super *)map;
	pool.geo = *pool.sb;
	for (uint32_t s = 0; s < MAX_COMMS; s++) {
		struct cxls_comm_view v;

		cxls_comm_view_of(&pool, s, &v);
		v.rec->sum = cxls_comm_rec_sum(v.rec);
		for (uint32_t r = 0; r < MAX_RANKS; r++)
			v.ranks[r].sum = cxls_rank_rec_sum(v.rec, &v.ranks[r], r);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	memset(map, 0, MAP);
	if (data[0] & 1) {
		memcpy(map, data + 1, size - 1 < MAP ? size - 1 : MAP);
		/* the bytes are the whole pool, or a pool cut short */
		snapshot(size - 1 < CXLS_PAGE ? CXLS_PAGE : MAP);
		return 0;
	}
	format((struct cxls_super *)map);
	if (data[0] & 4) {
		struct cxls_super *sb = (struct cxls_super *)map;
		size_t room = cxls_sock_rings_off(SOCK_SLOTS, SOCK_SLOTS) + 2 * CXLS_LINE;

		memcpy(map + sb->sock_offset, data + 1, size - 1 < room ? size - 1 : room);
	} else {
		memcpy(map + CXLS_PAGE, data + 1,
		       size - 1 < 15 * CXLS_PAGE ? size - 1 : 15 * CXLS_PAGE);
	}
	if (data[0] & 2)
		forge_sums();
	snapshot(MAP);
	library_readers();
	snapshot(MAP);
	return 0;
}

/* test_layout.c - CCCL placement: every slot inside the communicator's
 * lanes, no two slots overlapping, and devices assigned as the paper says. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"
#include "pool_format.h"
#include "../common/check.h"

static struct cxls_super geometry(uint32_t ndev, uint32_t comms, uint64_t lane)
{
	struct cxls_super sb;

	memset(&sb, 0, sizeof(sb));
	sb.ndev = ndev;
	sb.max_comms = comms;
	sb.lane_size = lane;
	sb.dev_size = lane * comms;
	sb.dev_offset = 1 << 20;
	return sb;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* A slot: where it starts and how long it is. */
struct span {
	uint64_t off, len;
};

static int cmp_span(const void *a, const void *b)
{
	return cmp_u64(&((const struct span *)a)->off, &((const struct span *)b)->off);
}

/* Spans sorted: each inside its device's lane, none overlapping the next. */
static int spans_apart(const struct cxls_layout *l, struct span *sp, size_t n,
		       const struct cxls_super *sb, uint32_t lane)
{
	qsort(sp, n, sizeof(*sp), cmp_span);
	for (size_t i = 0; i < n; i++) {
		uint32_t dev = cxls_layout_device(l, sp[i].off);
		uint64_t start = sb->dev_offset + dev * sb->dev_size + lane * sb->lane_size;

		if (dev >= sb->ndev || sp[i].off < start ||
		    sp[i].off + sp[i].len > start + sb->lane_size)
			return 0;
		if (i && sp[i].off < sp[i - 1].off + sp[i - 1].len)
			return 0;
	}
	return 1;
}

static void sweep(void)
{
	static const uint32_t ndevs[] = { 1, 2, 3, 4, 6, 8 };
	static const uint32_t ranks[] = { 1, 2, 3, 4, 5, 8, 16 };

	for (size_t d = 0; d < sizeof(ndevs) / 4; d++)
		for (size_t r = 0; r < sizeof(ranks) / 4; r++)
			for (int il = 0; il < 2; il++) {
				struct cxls_super sb = geometry(ndevs[d], 4, 8 << 20);
				struct cxls_layout l;
				uint32_t n = ranks[r], lane = 2;
				struct span *sp;
				size_t k = 0;

				if (cxls_layout_init(&l, &sb, lane, n, 512 << 10, 8, il, 0)) {
					CHECK(0, "ND %u N %u il %d: no layout", ndevs[d], n, il);
					continue;
				}
				/* p2p.c takes a 32-bit sequence modulo p2p_slots */
				CHECK(!(l.p2p_slots & (l.p2p_slots - 1)), "%u p2p slots", l.p2p_slots);
				sp = malloc(sizeof(*sp) * (n * l.slots + l.bcast_slots));
				for (uint32_t rk = 0; rk < n; rk++)
					for (uint32_t s = 0; s < l.slots; s++)
						sp[k++] = (struct span){ cxls_layout_n2n(&l, rk, s), l.chunk };
				CHECK(spans_apart(&l, sp, k, &sb, lane),
				      "N-to-N ND %u N %u il %d overlaps or escapes", ndevs[d], n, il);
				k = 0;
				for (uint32_t c = 0; c < l.bcast_slots; c++)
					sp[k++] = (struct span){ cxls_layout_1n(&l, c), l.chunk };
				CHECK(spans_apart(&l, sp, k, &sb, lane),
				      "1-to-N ND %u N %u il %d overlaps or escapes", ndevs[d], n, il);
				CHECK(l.bcast_slots >= l.slots, "bcast depth");
				free(sp);
			}
}

/* Equation 4: with ND >= N every rank writes only to its own devices. */
static void exclusive_devices(void)
{
	struct cxls_super sb = geometry(8, 4, 8 << 20);
	struct cxls_layout l;
	int owner[8];

	memset(owner, -1, sizeof(owner));
	CHECK(cxls_layout_init(&l, &sb, 0, 4, 256 << 10, 8, 1, 0) == 0, "init");
	for (uint32_t r = 0; r < 4; r++)
		for (uint32_t s = 0; s < l.slots; s++) {
			uint32_t dev = cxls_layout_device(&l, cxls_layout_n2n(&l, r, s));

			CHECK(owner[dev] == -1 || owner[dev] == (int)r, "device %u shared", dev);
			owner[dev] = (int)r;
		}
	for (int d = 0; d < 8; d++)
		CHECK(owner[d] >= 0, "device %d unused: 2 devices per rank expected", d);
}

/* Equations 1-3: consecutive 1-to-N chunks go round robin over devices;
 * without interleaving they stay on device 0 (CCCL-Naive). */
static void round_robin(void)
{
	struct cxls_super sb = geometry(4, 4, 8 << 20);
	struct cxls_layout l;

	CHECK(cxls_layout_init(&l, &sb, 1, 4, 256 << 10, 8, 1, 0) == 0, "init");
	for (uint32_t c = 0; c < 16; c++)
		CHECK(cxls_layout_device(&l, cxls_layout_1n(&l, c)) == c % 4, "chunk %u", c);
	CHECK(cxls_layout_init(&l, &sb, 1, 4, 256 << 10, 8, 0, 0) == 0, "init naive");
	for (uint32_t c = 0; c < 16; c++)
		CHECK(cxls_layout_device(&l, cxls_layout_1n(&l, c)) == 0, "naive chunk %u", c);
}

/* The footprint is bounded: a lane too small shrinks slots, then chunks. */
static void bounded(void)
{
	struct cxls_super sb = geometry(2, 16, 1 << 20);
	struct cxls_layout l;

	CHECK(cxls_layout_init(&l, &sb, 0, 16, 1 << 20, 8, 1, 0) == 0, "fits by shrinking");
	CHECK((uint64_t)l.slots * 16 * l.chunk <= 2 * (1 << 20), "footprint %u x %llu",
	      l.slots, (unsigned long long)l.chunk);
	CHECK(cxls_layout_init(&l, &sb, 0, 1000, 1 << 20, 8, 1, 0) == -1, "1000 ranks cannot fit");
	CHECK(cxls_layout_init(&l, &sb, 16, 2, 1 << 20, 8, 1, 0) == -1, "lane out of range");
	CHECK(cxls_layout_init(&l, &sb, 0, 0, 1 << 20, 8, 1, 0) == -1, "zero ranks");
}

/* Slot a of the eager channels (a < n * n * p2p_slots), then of the
 * captured ones: its offset and size. */
static uint64_t p2p_slot(const struct cxls_layout *l, uint32_t n, uint32_t a, uint64_t *size)
{
	uint32_t eager = n * n * l->p2p_slots;

	if (a < eager) {
		*size = l->p2p_chunk;
		return cxls_layout_p2p(l, a / l->p2p_slots / n, a / l->p2p_slots % n,
				       a % l->p2p_slots);
	}
	a -= eager;
	*size = l->gp2p_chunk;
	return cxls_layout_gp2p(l, a / l->gp2p_slots / n, a / l->gp2p_slots % n, a % l->gp2p_slots);
}

/* Point-to-point channels, eager ones in the lane's last quarter,
 * captured ones before them: never overlapping each other or the
 * collectives' blocks, consecutive slots of a channel on different
 * devices. */
static void p2p_channels(void)
{
	struct cxls_super sb = geometry(4, 4, 8 << 20);
	struct cxls_layout l;
	uint32_t n = 3, all;

	CHECK(cxls_layout_init(&l, &sb, 2, n, 256 << 10, 8, 1, 0) == 0, "init");
	CHECK(l.p2p_slots >= 2 && l.p2p_chunk >= 4096, "%u slots of %llu", l.p2p_slots,
	      (unsigned long long)l.p2p_chunk);
	CHECK(l.gp2p_slots >= 2 && l.gp2p_chunk >= 4096, "%u captured slots of %llu",
	      l.gp2p_slots, (unsigned long long)l.gp2p_chunk);
	CHECK(l.lane_blocks * l.chunk <= l.gp2p_off && l.gp2p_off < l.p2p_off,
	      "collective blocks end before the captured channels, those before the eager ones");
	all = n * n * (l.p2p_slots + l.gp2p_slots);
	for (uint32_t a = 0; a < all; a++) {
		uint64_t sa, sb2, oa = p2p_slot(&l, n, a, &sa);
		uint64_t in_lane = (oa - l.lane_base) % l.dev_size;

		CHECK(in_lane >= l.gp2p_off && in_lane + sa <= sb.lane_size,
		      "slot %u inside the p2p part", a);
		CHECK((in_lane >= l.p2p_off) == (a < n * n * l.p2p_slots),
		      "slot %u in its kind's part", a);
		for (uint32_t b = a + 1; b < all; b++) {
			uint64_t ob = p2p_slot(&l, n, b, &sb2);

			CHECK(oa + sa <= ob || ob + sb2 <= oa, "slots %u and %u overlap", a, b);
		}
	}
	CHECK(cxls_layout_device(&l, cxls_layout_p2p(&l, 0, 1, 0)) !=
		      cxls_layout_device(&l, cxls_layout_p2p(&l, 0, 1, 1)),
	      "consecutive slots on different devices");
	CHECK(cxls_layout_device(&l, cxls_layout_gp2p(&l, 0, 1, 0)) !=
		      cxls_layout_device(&l, cxls_layout_gp2p(&l, 0, 1, 1)),
	      "consecutive captured slots on different devices");
	/* the captured channels run out first: eager ones stay */
	for (n = 2; cxls_layout_init(&l, &sb, 0, n, 256 << 10, 8, 1, 0) == 0 && l.gp2p_slots; n++)
		;
	CHECK(l.p2p_slots >= 1 && !l.gp2p_slots, "%u ranks: eager channels, no captured ones", n);
	sb = geometry(2, 16, 1 << 20);
	CHECK(cxls_layout_init(&l, &sb, 0, 16, 1 << 20, 8, 1, 0) == 0 && l.p2p_slots == 0,
	      "no room for 16x16 channels: collectives only");
	/* a lane of a page or two has no room for the parts: refused (a page
	 * once wrapped below zero and placed blocks beyond the lane) */
	for (uint64_t lane = 4096; lane <= 8192; lane += 4096) {
		sb = geometry(4, 4, lane);
		CHECK(cxls_layout_init(&l, &sb, 0, 2, 64 << 10, 8, 1, 0) == -1,
		      "a lane of %llu bytes refused", (unsigned long long)lane);
	}
}

/* Captured collectives' slots: GCOLL_SLOTS per rank in the part of the
 * lane before the captured channels, never overlapping each other,
 * the eager collectives' blocks or the channels; a rank's consecutive
 * slots on different devices; at most the collectives' chunk. */
static void gcoll_slots(void)
{
	struct cxls_super sb = geometry(4, 4, 8 << 20);
	struct cxls_layout l;
	uint32_t n = 3;

	CHECK(cxls_layout_init(&l, &sb, 1, n, 256 << 10, 8, 1, 0) == 0, "init");
	CHECK(l.gcoll_slots == 4 && l.gcoll_chunk >= 4096 && l.gcoll_chunk <= l.chunk,
	      "%u captured collective slots of %llu", l.gcoll_slots,
	      (unsigned long long)l.gcoll_chunk);
	CHECK(l.lane_blocks * l.chunk <= l.gcoll_off && l.gcoll_off < l.gp2p_off,
	      "eager blocks end before the captured collectives' part, it before the channels");
	for (uint32_t a = 0; a < n * l.gcoll_slots; a++) {
		uint64_t oa = cxls_layout_gcoll(&l, a / l.gcoll_slots, a % l.gcoll_slots);
		uint64_t in_lane = (oa - l.lane_base) % l.dev_size;

		CHECK(oa >= l.lane_base && in_lane >= l.gcoll_off &&
			      in_lane + l.gcoll_chunk <= l.gp2p_off,
		      "slot %u inside its part", a);
		for (uint32_t b = a + 1; b < n * l.gcoll_slots; b++) {
			uint64_t ob = cxls_layout_gcoll(&l, b / l.gcoll_slots, b % l.gcoll_slots);

			CHECK(oa + l.gcoll_chunk <= ob || ob + l.gcoll_chunk <= oa,
			      "captured slots %u and %u overlap", a, b);
		}
	}
	CHECK(cxls_layout_device(&l, cxls_layout_gcoll(&l, 1, 0)) !=
		      cxls_layout_device(&l, cxls_layout_gcoll(&l, 1, 1)),
	      "consecutive captured slots on different devices");
	/* many ranks: fewer slots of a page or more, as long as the eager
	 * collectives fit (a 64 KiB block per rank against a page) */
	for (n = 2; cxls_layout_init(&l, &sb, 0, n, 64 << 10, 1, 1, 0) == 0; n++)
		CHECK(l.gcoll_slots >= 1 && l.gcoll_chunk >= 4096, "%u ranks: captured slots", n);
	CHECK(n > 64, "eager collectives fit up to %u ranks", n - 1);
}

/* The captured parts take the blocks the interleaved eager placement
 * leaves, at least a sixteenth (collectives) and an eighth (sends) of the
 * lane: at a few ranks captured collectives stage in slots of the eager
 * chunk; at many they still get their least; sequentially placed eager
 * blocks fill the lane up to those least parts. */
static void captured_share(void)
{
	struct cxls_super sb = geometry(4, 16, 15u << 20);
	uint64_t lane = sb.lane_size;
	struct cxls_layout l;

	for (uint32_t n = 1; n <= 16; n++) {
		for (int il = 0; il <= 1; il++) {
			uint64_t eager_end, per_dev, least;

			CHECK(cxls_layout_init(&l, &sb, 3, n, 512 << 10, 8, il, 0) == 0,
			      "%u ranks: init", n);
			eager_end = l.lane_blocks * l.chunk;
			CHECK(eager_end <= l.gcoll_off && l.gcoll_off - eager_end < (il ? 4096 : l.chunk),
			      "%u ranks, interleave %d: captured slots right after the eager blocks",
			      n, il);
			per_dev = ((uint64_t)n * 4 + sb.ndev - 1) / sb.ndev;
			least = (lane / 16 / per_dev) & ~4095ull;
			CHECK(l.gp2p_off - l.gcoll_off >= per_dev * l.gcoll_chunk,
			      "%u ranks: the captured collectives' part holds its slots", n);
			CHECK(l.gcoll_slots == 4 &&
				      l.gcoll_chunk >= (least < l.chunk ? least : l.chunk),
			      "%u ranks: 4 captured slots of at least a sixteenth's share", n);
			CHECK(l.p2p_off - l.gp2p_off >= (lane / 8 & ~4095ull),
			      "%u ranks: the captured channels keep an eighth", n);
			if (il && n <= 4)
				CHECK(l.gcoll_chunk == l.chunk,
				      "%u ranks: captured slots of the eager chunk (%llu)", n,
				      (unsigned long long)l.gcoll_chunk);
		}
	}
}

/* The slots of every part but one eager placement (N-to-N or 1-to-N,
 * which share blocks): n2n selects which.  Returns how many. */
static size_t all_slots(const struct cxls_layout *l, int n2n, struct span *sp)
{
	uint32_t n = l->nranks;
	size_t k = 0;

	if (n2n)
		for (uint32_t r = 0; r < n; r++)
			for (uint32_t s = 0; s < l->slots; s++)
				sp[k++] = (struct span){ cxls_layout_n2n(l, r, s), l->chunk };
	else
		for (uint32_t c = 0; c < l->bcast_slots; c++)
			sp[k++] = (struct span){ cxls_layout_1n(l, c), l->chunk };
	for (uint32_t r = 0; r < n; r++)
		for (uint32_t j = 0; j < l->gcoll_slots; j++)
			sp[k++] = (struct span){ cxls_layout_gcoll(l, r, j), l->gcoll_chunk };
	for (uint32_t a = 0; a < n * n * (l->p2p_slots + l->gp2p_slots); a++) {
		sp[k].off = p2p_slot(l, n, a, &sp[k].len);
		k++;
	}
	return k;
}

/* Every slot of every kind inside its lane and apart from the others, for
 * lanes from 1 MiB (format()'s least) up, page multiples or not, both
 * placements: the captured parts follow the eager blocks wherever those
 * end. */
static void every_kind(void)
{
	static const uint32_t ndevs[] = { 1, 2, 3, 4, 8 };
	static const uint32_t ranks[] = { 1, 2, 3, 4, 5, 8 };
	static const uint64_t lanes[] = { 1 << 20, (1 << 20) + 3 * 4096, 15u << 20,
					  (15u << 20) + 1000 };

	for (size_t d = 0; d < sizeof(ndevs) / sizeof(ndevs[0]); d++)
		for (size_t r = 0; r < sizeof(ranks) / sizeof(ranks[0]); r++)
			for (size_t z = 0; z < sizeof(lanes) / sizeof(lanes[0]); z++)
				for (int il = 0; il < 2; il++) {
					struct cxls_super sb = geometry(ndevs[d], 4, lanes[z]);
					struct cxls_layout l;
					uint32_t n = ranks[r];
					struct span *sp;

					if (cxls_layout_init(&l, &sb, 3, n, 512 << 10, 8, il, 0))
						continue; /* no room: refused, fine */
					sp = malloc(sizeof(*sp) * (n * l.slots + l.bcast_slots +
								   n * l.gcoll_slots +
								   n * n * (l.p2p_slots + l.gp2p_slots)));
					for (int n2n = 0; n2n < 2; n2n++)
						CHECK(spans_apart(&l, sp, all_slots(&l, n2n, sp), &sb, 3),
						      "ND %u N %u lane %llu il %d %s: a slot escapes its lane or overlaps another",
						      ndevs[d], n, (unsigned long long)lanes[z], il,
						      n2n ? "N-to-N" : "1-to-N");
					free(sp);
				}
}

/* The window bounds the depth of the collectives whose ranks move alike:
 * bytes over all ranks, at least 2 slots, at most all of them. */
static void window(void)
{
	static const struct {
		uint32_t nranks, slots;
		uint64_t window;
		uint32_t win_slots;
	} cases[] = {
		{ 2, 8, 8 << 20, 8 },  { 4, 8, 8 << 20, 4 },  { 3, 8, 8 << 20, 5 },
		{ 8, 8, 8 << 20, 2 },  { 16, 8, 8 << 20, 2 }, { 4, 8, 0, 8 },
		{ 4, 8, 1, 2 },        { 4, 8, ~0ull, 8 },   { 4, 1, 8 << 20, 1 },
		{ 4, 2, 1, 2 },        { 1, 8, 1 << 20, 2 },
	};
	struct cxls_super sb = geometry(4, 4, 256 << 20);

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct cxls_layout l, full;

		CHECK(cxls_layout_init(&l, &sb, 0, cases[i].nranks, 512 << 10, cases[i].slots, 1,
				       cases[i].window) == 0 &&
			      cxls_layout_init(&full, &sb, 0, cases[i].nranks, 512 << 10,
					       cases[i].slots, 1, 0) == 0,
		      "case %zu: init", i);
		CHECK(l.slots == cases[i].slots && l.win_slots == cases[i].win_slots,
		      "case %zu: %u slots, %u in the window, want %u", i, l.slots, l.win_slots,
		      cases[i].win_slots);
		CHECK(l.win_bcast_slots == cases[i].nranks * l.win_slots &&
			      l.win_bcast_slots <= l.bcast_slots,
		      "case %zu: 1-to-N window %u of %u", i, l.win_bcast_slots, l.bcast_slots);
		/* the window changes depths only, never where a slot lies */
		CHECK(!memcmp(&l, &full, offsetof(struct cxls_layout, win_slots)) &&
			      l.chunk == full.chunk && l.bcast_slots == full.bcast_slots,
		      "case %zu: the window moved the layout", i);
	}
}

int main(void)
{
	window();
	p2p_channels();
	gcoll_slots();
	captured_share();
	every_kind();
	sweep();
	exclusive_devices();
	round_robin();
	bounded();
	return CHECK_SUMMARY();
}

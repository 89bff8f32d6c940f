/* layout.c - CCCL's device interleaving formulas over a lane. */
#include "layout.h"

#include "pool_format.h"

#include <string.h>

static uint64_t div_up(uint64_t a, uint64_t b)
{
	return (a + b - 1) / b;
}

/* Blocks one device must hold for the N-to-N placement. */
static uint64_t n2n_blocks_per_dev(uint32_t ndev, uint32_t nranks, uint32_t slots, int il)
{
	if (!il)
		return div_up((uint64_t)nranks * slots, ndev); /* sequential fill */
	if (ndev >= nranks)
		return div_up(slots, ndev / nranks);
	return div_up(nranks, ndev) * slots;
}

static int fits(const struct cxls_layout *l)
{
	return l->lane_blocks >= 1 &&
	       n2n_blocks_per_dev(l->ndev, l->nranks, l->slots, l->interleave) <= l->lane_blocks;
}

#define P2P_SLOTS 4 /* powers of two: p2p.c takes a 32-bit sequence modulo */
#define GCOLL_SLOTS 4
_Static_assert(P2P_SLOTS <= CXLS_FLAG_SLOTS && GCOLL_SLOTS <= CXLS_FLAG_SLOTS,
	       "a flag for every captured slot");
#define P2P_MAX_CHUNK (1u << 20)

/* Cuts a part of each device lane (`bytes` per device) into `most` slots
 * for each of `owners` (ordered pairs of ranks, or ranks), halving the
 * slots until each is at least a page, at most `max_chunk`; with less
 * than a page each there are none (*slots == 0). */
static void cut_part(const struct cxls_layout *l, uint64_t bytes, uint64_t owners, uint32_t most,
		     uint64_t max_chunk, uint32_t *slots, uint64_t *chunk)
{
	for (*slots = most; *slots >= 1; *slots /= 2) {
		uint64_t per_dev = div_up(owners * *slots, l->ndev);

		*chunk = (bytes / per_dev) & ~(uint64_t)4095;
		if (*chunk > max_chunk)
			*chunk = max_chunk;
		if (*chunk >= 4096)
			return;
	}
	*slots = 0;
	*chunk = 0;
}

/* A p2p part: P2P_SLOTS slots per ordered pair. */
static void p2p_init(const struct cxls_layout *l, uint64_t bytes, uint32_t *slots,
		     uint64_t *chunk)
{
	cut_part(l, bytes, (uint64_t)l->nranks * l->nranks, P2P_SLOTS, P2P_MAX_CHUNK, slots, chunk);
}

/* A loop of collectives cycles through every staging slot, nranks x
 * slots chunks of pool, 16 MiB at 4 ranks by default: with the ranks'
 * own buffers that leaves a 32 MiB last-level cache, and each op then
 * reads its peers' chunks from memory.  The collectives whose ranks move
 * alike run in step anyway, so they need only a couple of chunks ahead
 * and keep to the window; the rooted ones whose root moves most (Gather,
 * Scatter, Reduce) use every slot, which lets the others run ahead of it.
 * At least 2 slots, so that one chunk can be written while the other is
 * read. */
static uint32_t window_slots(const struct cxls_layout *l, uint64_t window)
{
	uint64_t n = window / ((uint64_t)l->nranks * l->chunk);

	if (!window || l->slots <= 2)
		return l->slots;
	return n < 2 ? 2 : n < l->slots ? (uint32_t)n : l->slots;
}

static uint64_t page_up(uint64_t bytes)
{
	return (bytes + CXLS_PAGE - 1) & ~(CXLS_PAGE - 1);
}

static uint64_t page_down(uint64_t bytes)
{
	return bytes & ~(CXLS_PAGE - 1);
}

/* Bytes of each device lane a part of `slots` slots per owner uses. */
static uint64_t part_bytes(const struct cxls_layout *l, uint64_t owners, uint32_t slots,
			   uint64_t chunk)
{
	return page_up(div_up(owners * slots, l->ndev) * chunk);
}

/* Cuts the room from `eager_end` (a page boundary, at least gcoll_least +
 * gp2p_least before p2p_off) to the eager sends' part: first the captured
 * collectives' GCOLL_SLOTS per rank, at most the eager chunk each, from
 * all of it but gp2p_least; then the captured sends' channels from the
 * rest.  Slots as large as the eager ones matter on a GPU, where a slot's
 * hand-off costs about what an eager chunk's does (bench/README.md, "On a
 * real GPU, eighth run"). */
static void captured_parts(struct cxls_layout *l, uint64_t eager_end, uint64_t gp2p_least)
{
	l->gcoll_off = eager_end;
	cut_part(l, l->p2p_off - gp2p_least - l->gcoll_off, l->nranks, GCOLL_SLOTS, l->chunk,
		 &l->gcoll_slots, &l->gcoll_chunk);
	l->gp2p_off = l->gcoll_off + part_bytes(l, l->nranks, l->gcoll_slots, l->gcoll_chunk);
	p2p_init(l, l->p2p_off - l->gp2p_off, &l->gp2p_slots, &l->gp2p_chunk);
}

/* The largest chunk (halving from `chunk`, down to 64 KiB) and then the
 * most slots (halving, down to 2, then 1) whose N-to-N placement fits in
 * coll_bytes of each device lane.  Returns 0 or -1. */
static int fit_eager(struct cxls_layout *l, uint64_t coll_bytes, uint64_t chunk, uint32_t slots)
{
	for (l->chunk = chunk; l->chunk >= (64u << 10); l->chunk /= 2) {
		l->lane_blocks = coll_bytes / l->chunk;
		for (l->slots = slots; l->slots >= 1; l->slots = l->slots > 2 ? l->slots / 2 :
								 l->slots - 1) {
			if (fits(l))
				return 0;
		}
	}
	return -1;
}

int cxls_layout_init(struct cxls_layout *l, const struct cxls_super *sb, uint32_t lane,
		     uint32_t nranks, uint64_t chunk, uint32_t slots, int interleave,
		     uint64_t window)
{
	uint64_t lane_size = sb->lane_size, gcoll_least = lane_size / 16;
	uint64_t gp2p_least = page_down(lane_size / 8), coll_bytes, eager_end;

	if (nranks < 1 || chunk < 4096 || slots < 1 || lane >= sb->max_comms)
		return -1;
	l->ndev = sb->ndev;
	l->nranks = nranks;
	l->interleave = interleave;
	l->dev_size = sb->dev_size;
	l->lane_base = sb->dev_offset + (uint64_t)lane * lane_size;
	/* the last quarter for eager sends, at least an eighth and a
	 * sixteenth before it for captured sends and collectives (layout.h);
	 * a lane of a page or so has no room for them (format() makes lanes
	 * of 1 MiB or more, a crafted pool may not) */
	l->p2p_off = page_down(lane_size - lane_size / 4);
	if (l->p2p_off < gp2p_least + gcoll_least)
		goto fail;
	coll_bytes = page_down(l->p2p_off - gp2p_least - gcoll_least);
	p2p_init(l, lane_size - l->p2p_off, &l->p2p_slots, &l->p2p_chunk);
	if (fit_eager(l, coll_bytes, chunk, slots))
		goto fail;
	if (interleave) {
		/* eager ops address only the N-to-N blocks (1-to-N needs no
		 * more); the captured parts get the rest */
		l->lane_blocks = n2n_blocks_per_dev(l->ndev, nranks, l->slots, 1);
		eager_end = page_up(l->lane_blocks * l->chunk);
	} else {
		eager_end = coll_bytes; /* place_seq fills device by device */
	}
	captured_parts(l, eager_end, gp2p_least);
	/* The root of a 1-to-N op may use every block the N-to-N layout
	 * reserves, which keeps the footprint the same for both. */
	l->bcast_slots = nranks * l->slots;
	if ((uint64_t)l->bcast_slots > l->lane_blocks * l->ndev)
		l->bcast_slots = (uint32_t)(l->lane_blocks * l->ndev);
	l->win_slots = window_slots(l, window);
	l->win_bcast_slots = nranks * l->win_slots;
	if (l->win_bcast_slots > l->bcast_slots)
		l->win_bcast_slots = l->bcast_slots;
	return 0;
fail:
	memset(l, 0, sizeof(*l));
	return -1;
}

static uint64_t place(const struct cxls_layout *l, uint64_t dev, uint64_t block)
{
	return l->lane_base + dev * l->dev_size + block * l->chunk;
}

/* Sequential placement: index i fills device 0's lane, then device 1's. */
static uint64_t place_seq(const struct cxls_layout *l, uint64_t i)
{
	return place(l, i / l->lane_blocks, i % l->lane_blocks);
}

uint64_t cxls_layout_n2n(const struct cxls_layout *l, uint32_t rank, uint32_t slot)
{
	uint32_t dpr;

	if (!l->interleave)
		return place_seq(l, (uint64_t)rank * l->slots + slot);
	if (l->ndev >= l->nranks) {
		dpr = l->ndev / l->nranks;
		return place(l, (uint64_t)rank * dpr + slot % dpr, slot / dpr);
	}
	return place(l, rank % l->ndev, (uint64_t)(rank / l->ndev) * l->slots + slot);
}

uint64_t cxls_layout_1n(const struct cxls_layout *l, uint32_t c)
{
	if (!l->interleave)
		return place_seq(l, c);
	return place(l, c % l->ndev, c / l->ndev);
}

/* Slot g of a part at `off` of each device lane, cut in `chunk`-byte
 * slots: on device g % ND, so consecutive slots use different devices. */
static uint64_t spread(const struct cxls_layout *l, uint64_t off, uint64_t chunk, uint64_t g)
{
	return l->lane_base + (g % l->ndev) * l->dev_size + off + (g / l->ndev) * chunk;
}

/* Slot j of the channel src -> dst in a p2p part at `off` of each device
 * lane, `slots` per channel of `chunk` bytes (layout.h). */
static uint64_t channel_slot(const struct cxls_layout *l, uint64_t off, uint32_t slots,
			     uint64_t chunk, uint32_t src, uint32_t dst, uint32_t j)
{
	return spread(l, off, chunk, ((uint64_t)src * l->nranks + dst) * slots + j);
}

uint64_t cxls_layout_p2p(const struct cxls_layout *l, uint32_t src, uint32_t dst, uint32_t j)
{
	return channel_slot(l, l->p2p_off, l->p2p_slots, l->p2p_chunk, src, dst, j);
}

uint64_t cxls_layout_gp2p(const struct cxls_layout *l, uint32_t src, uint32_t dst, uint32_t j)
{
	return channel_slot(l, l->gp2p_off, l->gp2p_slots, l->gp2p_chunk, src, dst, j);
}

uint64_t cxls_layout_gcoll(const struct cxls_layout *l, uint32_t rank, uint32_t j)
{
	return spread(l, l->gcoll_off, l->gcoll_chunk, (uint64_t)rank * l->gcoll_slots + j);
}

uint32_t cxls_layout_device(const struct cxls_layout *l, uint64_t off)
{
	return (uint32_t)((off - l->lane_base) / l->dev_size);
}

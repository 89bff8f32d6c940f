/* layout.h - where a staging chunk lives in the pool (CCCL section 3.3).
 *
 * A communicator owns one lane (lane_size bytes) in each of the ND devices,
 * cut into blocks of one chunk.  Two placements, as in the paper:
 *
 *   1-to-N (Broadcast; the root publishes):  chunk c goes to device
 *     c % ND, block c / ND  (equations 1-3), so the root's stream is
 *     spread over every device and readers starting at different chunks
 *     read different devices.
 *   N-to-N (AllGather; everybody publishes): rank r owns the devices
 *     r*dpr .. r*dpr+dpr-1 with dpr = ND / N (equation 4), and its slot s
 *     goes to device r*dpr + s % dpr, block s / dpr.  With fewer devices
 *     than ranks, ranks share device r % ND.
 *
 * Without interleaving (CCCL-Naive) chunks are placed sequentially, filling
 * device 0 first, as an allocator without device awareness would.
 *
 * The last quarter of every device lane holds the point-to-point channels:
 * p2p_slots blocks of p2p_chunk bytes for each ordered pair of ranks, slot
 * g = pair * p2p_slots + j on device g % ND, so that a rank's channels to
 * different peers, and consecutive slots of one channel, use different
 * devices.  Between the eager collectives' blocks and that quarter lie the
 * parts of operations captured in CUDA graphs, which hand off their slots
 * otherwise: GCOLL_SLOTS staging slots per rank for collectives (gcoll_,
 * gcoll.h; slot g = rank * gcoll_slots + j on device g % ND), then as
 * many channels as the eager sends have (gp2p_, p2p.h), at least a
 * sixteenth and an eighth of the lane respectively.  Interleaved, they
 * share every block the eager placement leaves: the collectives' slots
 * grow up to the eager chunk, the sends' channels take the rest
 * (layout.c captured_parts).  The
 * captured collectives' flags, unlike the doorbells, do not count, so
 * eager and captured collectives must not hand the same slots to each
 * other.
 */
#ifndef CXLSHIM_CORE_LAYOUT_H
#define CXLSHIM_CORE_LAYOUT_H

#include <stdint.h>

struct cxls_super;

struct cxls_layout {
	uint32_t ndev;
	uint32_t nranks;
	uint32_t slots;        /* N-to-N staging slots per rank (all) */
	uint32_t bcast_slots;  /* 1-to-N staging slots (all) */
	/* The same for a collective whose ranks move alike (window_slots()),
	 * at most the window's bytes over all ranks. */
	uint32_t win_slots;
	uint32_t win_bcast_slots;
	uint64_t chunk;        /* bytes per block */
	/* blocks per device lane the eager collectives may use: interleaved,
	 * those the N-to-N placement needs; sequential, all it fills */
	uint64_t lane_blocks;
	uint64_t lane_base;    /* pool offset of this lane in device 0 */
	uint64_t dev_size;     /* stride between devices */
	int interleave;
	/* point-to-point channels */
	uint64_t p2p_off;      /* start of the p2p part of each device lane */
	uint64_t p2p_chunk;
	uint32_t p2p_slots;    /* staging slots per ordered pair; 0: no room */
	/* the same for captured sends and receives */
	uint64_t gp2p_off;
	uint64_t gp2p_chunk;
	uint32_t gp2p_slots;
	/* captured collectives' staging slots per rank; 0: no room */
	uint64_t gcoll_off;
	uint64_t gcoll_chunk;
	uint32_t gcoll_slots;
};

/* Fits nranks x slots chunks into the lane, shrinking slots (down to 2,
 * then 1) and then the chunk (down to 64 KiB); `window` bytes (0: no
 * limit) bound the win_ depths.  Returns 0 or -1. */
int cxls_layout_init(struct cxls_layout *l, const struct cxls_super *sb, uint32_t lane,
		     uint32_t nranks, uint64_t chunk, uint32_t slots, int interleave,
		     uint64_t window);

/* Pool offset of rank's N-to-N slot, and of 1-to-N chunk slot c. */
uint64_t cxls_layout_n2n(const struct cxls_layout *l, uint32_t rank, uint32_t slot);
uint64_t cxls_layout_1n(const struct cxls_layout *l, uint32_t c);
/* Pool offset of slot j of the channel from rank src to rank dst, for
 * eager and for captured sends. */
uint64_t cxls_layout_p2p(const struct cxls_layout *l, uint32_t src, uint32_t dst, uint32_t j);
uint64_t cxls_layout_gp2p(const struct cxls_layout *l, uint32_t src, uint32_t dst, uint32_t j);
/* Pool offset of rank's captured-collective staging slot j. */
uint64_t cxls_layout_gcoll(const struct cxls_layout *l, uint32_t rank, uint32_t j);
/* Device index of a pool offset produced above. */
uint32_t cxls_layout_device(const struct cxls_layout *l, uint64_t off);

#endif

/* pool_format.h - the bytes every host sees in the shared pool.
 *
 *   offset 0          superblock (one page): magic, version, geometry, uuid
 *   comm_offset       max_comms communicator records of comm_stride bytes
 *   sock_offset       socket region of sock_size bytes (core/sock/sock_format.h):
 *                     listener records, connection records, their rings
 *   dev_offset        ndev emulated CXL devices of dev_size bytes each;
 *                     device d holds one lane of lane_size bytes per
 *                     communicator slot (staging windows, see layout.c)
 *
 * Everything here is read by other processes, possibly other hosts and
 * possibly corrupted: readers validate before use (pool.c, comm_table.c).
 * Words written concurrently live in their own 64-byte line so that the
 * non-coherent (flush) mode can write back one line without clobbering a
 * neighbour's.
 */
#ifndef CXLSHIM_CORE_POOL_FORMAT_H
#define CXLSHIM_CORE_POOL_FORMAT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define CXLS_POOL_MAGIC 0x4c4f4f50534c5843ull /* "CXLSPOOL" */
#define CXLS_POOL_VERSION 20u /* 4: socket region; 5: record checksums, format claim;
				* 6: p2p message sizes; 7: socket buffer classes;
				* 8: socket lines with one writer, sleepers;
				* 9: replayed calls; 10: socket claims identified,
				* listener generations; 11: socket wake-up
				* requests name their sleep; 12: twelve socket and listener
				* holders, a count beyond them, sends in flight;
				* 13: the communicator's staging window, group
				* gates; 14: the communicator's routing rules;
				* 15: no group gates (groups enqueue at their end);
				* 16: the communicator's least rounds per op;
				* 17: replay barriers per pair of ranks;
				* 18: slot flags for captured sends (no pair
				* barriers); 19: slot flags for captured
				* collectives (no replay barriers), replay
				* descriptor rings; 20: captured collectives'
				* slots and captured sends' channels take the
				* lane's blocks the eager collectives leave
				* (layout.c) */
#define CXLS_LINE 64
#define CXLS_PAGE 4096ull
#define CXLS_MAX_RANKS 1024u /* ranks per communicator a pool can describe */
#define CXLS_SOCK_BUF_CLASSES 4 /* buffer classes of the socket region */

struct cxls_super {
	uint64_t magic;
	uint32_t version;
	uint32_t super_size;
	uint64_t pool_size;
	uint8_t uuid[16];
	uint32_t ndev;
	uint32_t max_comms;
	uint32_t max_ranks;
	uint32_t coherence;
	uint64_t dev_size;
	uint64_t dev_offset;
	uint64_t comm_offset;
	uint64_t comm_stride;
	uint64_t lane_size;
	uint64_t created_ns;
	/* sockets through the pool; sock_slots == 0: no socket region */
	uint64_t sock_offset;
	uint64_t sock_size;
	uint64_t sock_ring;       /* bytes of one ring (one direction) */
	uint32_t sock_slots;      /* connection records */
	uint32_t sock_listeners;  /* listener records */
	/* buffers for writes passed by reference, by class (ascending
	 * sizes; a class of 0 buffers is unused) */
	uint32_t sock_buf_size[CXLS_SOCK_BUF_CLASSES];
	uint32_t sock_buf_count[CXLS_SOCK_BUF_CLASSES];
	uint32_t checksum; /* hash of version .. sock_buf_count (pool.c) */
	uint32_t pad0;
	/* mutable part, outside the checksum */
	/* Who formats a blank pool (pool.c): a random token, set with a
	 * compare-and-swap and, in a non-coherent pool, re-read after a
	 * settle delay; kept when the rest of the superblock is written. */
	_Alignas(CXLS_LINE) _Atomic uint64_t format_claim;
	_Alignas(CXLS_LINE) _Atomic uint64_t table_lock; /* owner token or 0 */
	uint64_t table_lock_ns;
	/* copies in flight per device, for the optional bandwidth model */
	_Alignas(CXLS_LINE) _Atomic uint32_t dev_active[64];
};

_Static_assert(sizeof(struct cxls_super) <= CXLS_PAGE, "superblock fits its page");

/* A 32-bit doorbell alone in its line: increasing sequence numbers.
 * `queued`: the last value its writer submitted to CUDA, which may not
 * have run yet (core/coll/order.h: read by ranks of the writer's own
 * process only). */
struct cxls_bell {
	_Alignas(CXLS_LINE) _Atomic uint32_t seq;
	_Atomic uint32_t queued;
};

/* Slot flags of what CUDA graphs captured: a captured send's channel
 * slots (p2p.c), a captured collective's staging slots (gcoll.c).
 * A slot's flag is two words that a device reads as one little-endian
 * 64-bit word: streams write `state` (EMPTY, FULL), only hosts write
 * `failed`, all ones once the communicator failed, so that every wait on
 * the flag (state bit | failed, CU_STREAM_WAIT_VALUE_AND) passes for good
 * whatever the streams write afterwards: a replayed graph keeps writing
 * its frozen values (a device without 64-bit waits waits on `state`
 * alone, which a failure sets to both bits, again at every watchdog
 * tick).  Both ends write the line, unlike a doorbell's (flag.c writes
 * its words without writing the line back). */
#define CXLS_FLAG_SLOTS 7 /* at least layout.c's P2P_SLOTS and GCOLL_SLOTS */
#define CXLS_FLAG_FULL 1u
#define CXLS_FLAG_EMPTY 2u

struct cxls_flag {
	_Alignas(8) _Atomic uint32_t state;
	_Atomic uint32_t failed;
};

/* One line of slot flags.  A channel's (src -> dst): slot[j] is its
 * captured slot j; busy[0]: the sender's stream is in a captured send of
 * the channel, busy[1]: the receiver's in a captured receive.  A
 * collective's (owner -> reader): slot[j] is the owner's captured staging
 * slot j as that reader sees it; the line owner == reader holds no slot
 * flags, and its busy[0] says the rank's stream is in a captured
 * collective.  The watchdog fails the communicator when a busy rank's
 * peer is gone (watchdog.c). */
struct cxls_flag_line {
	_Alignas(CXLS_LINE) struct cxls_flag slot[CXLS_FLAG_SLOTS];
	_Atomic uint32_t busy[2];
};

_Static_assert(sizeof(struct cxls_flag) == 8 && offsetof(struct cxls_flag, failed) == 4,
	       "a flag is one 64-bit word to a device");
_Static_assert(sizeof(struct cxls_flag_line) == CXLS_LINE, "one line per channel");
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "struct cxls_flag: `state` must be the low half of the device's 64-bit word"
#endif

enum cxls_rank_state { CXLS_RANK_EMPTY = 0, CXLS_RANK_JOINED = 1, CXLS_RANK_LEFT = 2 };

/* Who holds a rank: enough to tell a dead process from a live one. */
struct cxls_rank_rec {
	_Alignas(CXLS_LINE) _Atomic uint32_t state;
	uint32_t pid;
	uint64_t boot_hash;     /* hash of the host's boot id */
	uint64_t start_time;    /* process start time, clock ticks since boot */
	_Atomic uint64_t heartbeat; /* bumped by the owner's watchdog */
	uint32_t device;
	_Atomic uint32_t ops_enqueued; /* collectives this rank enqueued */
	/* ncclCommSplit exchange (comm_split.c): split number n's color and
	 * key sit in slot n % 2, then split_seq = n */
	_Atomic uint32_t split_seq;
	int32_t split_color[2];
	int32_t split_key[2];
	/* hash of the holder's identity (pid, boot_hash, start_time), the
	 * rank number and the communicator's key (comm_table.c): a record
	 * damaged or left over from an earlier communicator in the slot does
	 * not check, and is never taken for a live holder */
	uint32_t sum;
};

_Static_assert(sizeof(struct cxls_rank_rec) == CXLS_LINE, "a rank record is one line");

/* Communicator phase, in the top byte of comm_rec.state. */
enum cxls_comm_phase {
	CXLS_COMM_FREE = 0,
	CXLS_COMM_JOINING = 1,
	CXLS_COMM_READY = 2,
	CXLS_COMM_FAILED = 3,
};

enum cxls_abort_reason {
	CXLS_ABORT_NONE = 0,
	CXLS_ABORT_USER = 1,     /* ncclCommAbort */
	CXLS_ABORT_PEER_DEAD = 2,
	CXLS_ABORT_TIMEOUT = 3,
	CXLS_ABORT_MISMATCH = 4, /* different collectives, or send/receive sizes */
};

/* What a rank enqueued as its n-th operation on a communicator, kept in a
 * ring of CXLS_DESC_RING per rank.  Ranks compare their descriptors of the
 * same sequence number to catch mismatched calls (different collective,
 * count, type, op or root) before they corrupt results or hang, and
 * `cxlshim doctor` reads them to name the operation a hung job waits on.
 * Seqlock: the writer zeroes seq, fills the words, then publishes seq. */
#define CXLS_DESC_RING 8

enum cxls_op_kind {
	CXLS_OP_NONE = 0,
	CXLS_OP_ALLGATHER, CXLS_OP_BROADCAST, CXLS_OP_GATHER, CXLS_OP_SCATTER,
	CXLS_OP_ALLTOALL, CXLS_OP_REDUCE, CXLS_OP_ALLREDUCE, CXLS_OP_REDUCESCATTER,
	CXLS_OP_SENDRECV, /* a group of sends and receives (posted by none
			   * since their replays meet their pairs alone,
			   * p2p.h; kept, the numbers after it stay) */
	CXLS_OP_ALLREDUCE_DIRECT, /* AllReduce in CCCL's direct scheme */
	CXLS_OP_KINDS
};

struct cxls_op_desc {
	_Alignas(CXLS_LINE) _Atomic uint32_t seq; /* 1-based op number; 0: being written */
	_Atomic uint32_t kind;   /* enum cxls_op_kind */
	_Atomic uint64_t count;  /* elements, as passed to the call */
	_Atomic uint32_t type;   /* ncclDataType_t */
	_Atomic uint32_t redop;  /* ncclRedOp_t, or the PreMulSum kind */
	_Atomic int32_t root;    /* -1 when the collective has none */
	_Atomic uint32_t rounds; /* doorbell rounds: must agree across ranks */
	_Atomic uint64_t sum;    /* hash of the fields that must agree */
	_Atomic uint64_t enq_ns; /* CLOCK_REALTIME when enqueued */
	/* the queue it was enqueued on: a hash of the stream (and the
	 * device, and the thread for a per-thread default stream), never 0;
	 * 0 in pools written before it was recorded.  Ops of one process on
	 * different queues run independently (`cxlshim doctor`). */
	_Atomic uint64_t queue;
};

_Static_assert(sizeof(struct cxls_op_desc) == CXLS_LINE, "a descriptor is one line");

/* The sizes of the last CXLS_P2P_MSG_RING messages one side enqueued on
 * one direction of a point-to-point channel.  Sender and receiver each
 * post theirs and compare them with the other side's, so that a receive of
 * another size than its send fails the communicator (p2p_match.c) instead
 * of shifting every later message of the channel.  Seqlock per entry, one
 * writer per line. */
#define CXLS_P2P_MSG_RING 4

struct cxls_p2p_msg {
	_Alignas(CXLS_LINE) struct {
		_Atomic uint32_t seq;   /* 1-based message number; 0: being written */
		_Atomic uint32_t chunk0; /* the channel's chunk count where it starts
					 * (for `cxlshim doctor`: bytes moved) */
		_Atomic uint64_t bytes;
	} m[CXLS_P2P_MSG_RING];
};

_Static_assert(sizeof(struct cxls_p2p_msg) == CXLS_LINE, "a message ring is one line");

/* Header of a communicator record; per-rank arrays follow at offsets
 * computed by comm_table.c from max_ranks. */
struct cxls_comm_rec {
	_Alignas(CXLS_LINE) _Atomic uint64_t key_lo;
	_Atomic uint64_t key_hi;
	_Atomic uint64_t state; /* phase << 56 | joined count */
	uint32_t nranks;
	uint32_t lane;          /* == slot index; staging lane in every device */
	uint64_t created_ns;
	/* staging geometry chosen by the rank that claimed the record; the
	 * others adopt it, so ranks with different policies still agree */
	uint64_t chunk;
	uint32_t slots;
	uint32_t interleave;
	uint64_t window;        /* cccl.window (layout.h) */
	/* which collectives run on the pool (policy/route.c: struct
	 * cxls_route), adopted as the geometry is: a collective that one
	 * rank runs on the pool and another on NCCL hangs both */
	uint32_t route_colls;
	uint32_t route_min_ranks, route_max_ranks;
	/* the least rounds an op is cut in (common.c: op_chunk), 8 with
	 * two work streams, 2 with one: per rank that is a local choice
	 * (cccl.overlap), but the rounds must agree, so they are adopted
	 * too; no padding up to sum, every byte of the header is hashed */
	uint32_t min_rounds;
	uint64_t route_min_bytes, route_max_bytes;
	/* hash of key .. route_max_bytes, written before the phase leaves FREE
	 * (comm_table.c); state and the abort words change, it does not */
	uint32_t sum;
	_Alignas(CXLS_LINE) _Atomic uint32_t abort_reason;
	_Atomic uint32_t abort_rank;
	/* struct cxls_rank_rec ranks[max_ranks];
	 * struct cxls_bell     pub[max_ranks];   chunks published
	 * struct cxls_bell     ack[max_ranks];   chunks consumed
	 * struct cxls_bell     done[max_ranks];  collectives completed
	 * struct cxls_op_desc  desc[max_ranks][CXLS_DESC_RING];
	 * struct cxls_bell     p2p_pub[max_ranks][max_ranks];  [src][dst] chunks sent
	 * struct cxls_bell     p2p_ack[max_ranks][max_ranks];  [src][dst] chunks received
	 * struct cxls_bell     p2p_done[max_ranks];  send/receive groups completed
	 * struct cxls_bell     gcoll_bell[max_ranks][2];  a captured collective's
	 *                      rounds published and consumed, which only the
	 *                      rank's own two streams wait on (gcoll.h)
	 * struct cxls_flag_line p2p_flag[max_ranks][max_ranks]; [src][dst]
	 *                      captured sends' slot flags (p2p.c)
	 * struct cxls_flag_line gcoll_flag[max_ranks][max_ranks]; [owner][reader]
	 *                      captured collectives' slot flags (gcoll.c)
	 * struct cxls_op_desc  replay[max_ranks][CXLS_DESC_RING]; the captured
	 *                      collectives each rank replayed, by number
	 * struct cxls_p2p_msg  p2p_smsg[max_ranks][max_ranks]; [src][dst] as sent
	 * struct cxls_p2p_msg  p2p_rmsg[max_ranks][max_ranks]; [src][dst] as received
	 * Point-to-point traffic involves two ranks, not the communicator, so
	 * it cannot share the collectives' rounds: every ordered pair has its
	 * own sequence and its own staging slots (layout.h). */
};

/* the header's checked words are contiguous (tests/ops/bitflip.c flips
 * every byte from nranks to sum and expects each flip reported) */
_Static_assert(offsetof(struct cxls_comm_rec, sum) ==
		       offsetof(struct cxls_comm_rec, route_max_bytes) + 8 &&
	       offsetof(struct cxls_comm_rec, route_min_bytes) ==
		       offsetof(struct cxls_comm_rec, min_rounds) + 4,
	       "no padding in the communicator header");

#define CXLS_PHASE(st) ((unsigned)((st) >> 56))
#define CXLS_JOINED(st) ((uint32_t)((st) & 0xffffffu))
#define CXLS_STATE(phase, joined) (((uint64_t)(phase) << 56) | (uint64_t)(joined))

#endif

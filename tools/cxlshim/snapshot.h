/* snapshot.h - a validated, private copy of what a pool holds.
 *
 * `cxlshim pool status`, `pool clean` and `doctor` never act on the live
 * pool's bytes: they map it read-only, copy the superblock, validate it,
 * then copy every record field by field, checking each number against
 * the validated geometry.  A record that fails a check is marked corrupt
 * (with the reason) and not interpreted further.  snap_take() works on
 * any bytes, which is what the fuzzer feeds it.
 */
#ifndef CXLSHIM_TOOLS_SNAPSHOT_H
#define CXLSHIM_TOOLS_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "pool_format.h"
#include "sock_format.h"

struct snap_desc {
	int valid;               /* posted, consistent and in range */
	uint32_t seq, kind, type, redop, rounds;
	int32_t root;
	uint64_t count, enq_ns;  /* enq_ns: CLOCK_REALTIME */
	uint64_t queue;          /* stream it was enqueued on; 0: not recorded */
};

struct snap_rank {
	uint32_t state;          /* enum cxls_rank_state */
	uint32_t pid, device;
	uint64_t boot_hash, start_time, heartbeat;
	uint32_t enq, done;      /* ops enqueued, ops completed (done bell) */
	uint32_t pub, ack;
	int alive;               /* 1 alive, 0 dead, -1 another host */
	const char *corrupt;     /* the record fails its checksum: not trusted */
	struct snap_desc desc[CXLS_DESC_RING];
};

/* The last message one side of a channel posted (p2p_match.c). */
struct snap_p2p_msg {
	int valid;               /* read whole */
	uint32_t chunk0;         /* channel chunk where it starts */
	uint64_t bytes;
};

/* A point-to-point channel src -> dst with messages in flight, or one of
 * a rank that has: sent != recvd when one side called a Send (or a Recv)
 * the other has not matched yet.  pub and ack count the channel's chunks
 * published and consumed: with the chunk size, how far the last message
 * got. */
struct snap_p2p {
	uint32_t src, dst;
	uint32_t sent;           /* messages src posted to send to dst */
	uint32_t recvd;          /* messages dst posted to receive from src */
	uint32_t pub, ack;
	struct snap_p2p_msg smsg, rmsg; /* message `sent` as sent, `recvd` as received */
	int busy;                /* unmatched, or its last message not through */
};

struct snap_comm {
	uint32_t slot, phase, joined, nranks;
	uint64_t key_hash;       /* never the key itself */
	uint64_t created_ns;     /* CLOCK_MONOTONIC of the host that claimed it */
	uint32_t abort_reason, abort_rank;
	uint64_t chunk;
	uint32_t slots;
	const char *corrupt;     /* why it cannot be interpreted, or NULL */
	uint32_t bad_ranks;      /* joined ranks whose record fails its checksum */
	struct snap_rank *ranks; /* nranks entries when not corrupt */
	uint32_t np2p;           /* busy channels, and the rest of their ranks' */
	struct snap_p2p *p2p;
	uint64_t p2p_chunk;      /* bytes per channel chunk; 0: unknown */
};

/* A process recorded as holding a socket or listener. */
struct snap_holder {
	uint32_t pid;
	uint64_t start_time;
	int alive;               /* 1 alive, 0 dead, -1 another host */
};

/* Who holds a CLAIMING record's claim (sock_claim.h): pid and
 * enum cxls_claimer (UNKNOWN: not written yet, another host, or liveness
 * not asked). */
struct snap_claim {
	uint32_t pid;
	int who;
};

struct snap_listener {
	uint32_t idx, state, gen; /* enum cxls_listener_state */
	struct snap_claim claim;
	uint16_t port, family;   /* port in host order */
	uint8_t addr[16];
	uint32_t uid, untracked, forking;
	uint32_t nholders;
	struct snap_holder holder[CXLS_LISTENER_HOLDERS];
};

struct snap_sock_end {
	uint32_t flags, forking, uid;
	uint32_t nholders;
	struct snap_holder holder[CXLS_SOCK_HOLDERS];
};

/* One connection record in use. */
struct snap_sock {
	uint32_t slot, state, gen, creator, cap;
	struct snap_claim claim;      /* CLAIMING only */
	struct cxls_sock_tuple tuple; /* ports in network order, as in the pool */
	uint64_t created_ns;          /* CLOCK_MONOTONIC of the creating host */
	uint64_t fill[2];             /* bytes queued: client to server, back */
	struct snap_sock_end end[2];  /* by enum cxls_sock_role */
	const char *corrupt;
};

/* A buffer of the socket region lent for a write by reference. */
struct snap_buf {
	uint32_t idx;                 /* within its class */
	uint32_t slot, gen;           /* the owner it names: record and generation */
	const struct snap_sock *conn; /* that record in this snapshot, or NULL:
				       * an orphan no connection will give back */
	int alive;                    /* 1 a holder of conn alive, 0 none, -1 remote */
};

struct snap_bufclass {
	uint32_t size, count, in_use;
	struct snap_buf *lent;        /* in_use entries */
};

struct pool_snap {
	struct cxls_super sb;    /* validated copy */
	size_t map_size;
	uint32_t nfree;          /* free communicator records */
	uint32_t ncomms;         /* records in use (listed in comms) */
	struct snap_comm *comms;
	uint64_t lock_owner;     /* table lock token, 0 when free */
	/* the socket region (empty when sb.sock_slots == 0) */
	uint32_t nlisteners;     /* listener records in use (listed) */
	struct snap_listener *listeners;
	uint32_t nsocks, nsock_free;
	struct snap_sock *socks;
	int nbufclasses;          /* classes with buffers, in the pool's order */
	struct snap_bufclass bufclass[CXLS_SOCK_BUF_CLASSES];
};

/* Flags of snap_take(). */
#define SNAP_LIVENESS 1 /* ask the kernel whether holders are alive */

/* Copies and validates the pool at base (size bytes).  Returns 0, or a
 * negative enum cxls_pool_err for an unusable superblock. */
int snap_take(const void *base, size_t size, int flags, struct pool_snap *out);
void snap_free(struct pool_snap *s);

/* Maps a pool file or DAX device read-only (nothing is ever created). */
struct snap_map {
	const void *base;
	size_t size;
};
int snap_map_open(const char *path, struct snap_map *m);
void snap_map_close(struct snap_map *m);

/* The socket region of a validated snapshot (snap_sock.c); 0 or -1 when
 * out of memory. */
int snap_take_socks(const uint8_t *base, int flags, struct pool_snap *out);
/* Its buffer classes and who holds each lent buffer (snap_buf.c), after
 * snap_take_socks; 0 or -1 when out of memory. */
int snap_take_bufs(const uint8_t *base, struct pool_snap *out);

const char *snap_phase_name(uint32_t phase);
const char *snap_sock_state_name(uint32_t state);
const char *snap_listener_state_name(uint32_t state);
/* "1.2.3.4:80" or "[::1]:80" into buf. */
void snap_addr(char *buf, unsigned long len, uint16_t family, const uint8_t *addr,
	       uint16_t port_host_order);
const char *snap_rank_state_name(uint32_t state);
const char *snap_abort_name(uint32_t reason);

#endif

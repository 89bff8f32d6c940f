/* uid.h - what a cxlshim ncclUniqueId carries.
 *
 * The 128-byte id is split: bytes 0..63 hold the real NCCL id when one was
 * made (the real library only uses the first few dozen bytes), so every
 * rank can still fall back to the real NCCL together; bytes 64..127 hold
 * this record: which pool to meet in and the job's random key.
 */
#ifndef CXLSHIM_CORE_UID_H
#define CXLSHIM_CORE_UID_H

#include <nccl.h>
#include <stdint.h>

#define CXLS_UID_MAGIC 0x44494d48534c5843ull /* "CXLSHMID" */
#define CXLS_UID_VERSION 1u
#define CXLS_UID_OFFSET 64
#define CXLS_UID_HAS_REAL 1u  /* bytes 0..63 hold a real NCCL id */
#define CXLS_UID_WANT_REAL 2u /* rank 0's policy routes some ops to NCCL */

struct cxls_uid {
	uint64_t magic;
	uint32_t version;
	uint32_t flags;
	uint8_t pool_uuid[16];
	uint64_t key[2];
	uint32_t check;
	uint32_t pad[3];
};

_Static_assert(sizeof(struct cxls_uid) <= NCCL_UNIQUE_ID_BYTES - CXLS_UID_OFFSET,
	       "uid record must fit the tail of ncclUniqueId");

/* Fills the tail of id (the head may already hold a real id). */
int cxls_uid_make(ncclUniqueId *id, const uint8_t pool_uuid[16], uint32_t flags);
/* Parses the tail; returns 0 and fills *out when it is a valid record. */
int cxls_uid_parse(const ncclUniqueId *id, struct cxls_uid *out);
/* The real NCCL id from the head, tail cleared. */
void cxls_uid_real(const ncclUniqueId *id, ncclUniqueId *real);
/* 1 when the head is free for our record's neighbour (real id fits). */
int cxls_uid_head_fits(const ncclUniqueId *real);

#endif

/* uid.c - build and parse the unique id record. */
#include "uid.h"

#include <string.h>
#include <sys/random.h>

#include "proc_id.h"

static uint32_t check_of(const struct cxls_uid *u)
{
	return (uint32_t)cxls_hash64(u, offsetof(struct cxls_uid, check));
}

int cxls_uid_make(ncclUniqueId *id, const uint8_t pool_uuid[16], uint32_t flags)
{
	struct cxls_uid u;

	memset(&u, 0, sizeof(u));
	u.magic = CXLS_UID_MAGIC;
	u.version = CXLS_UID_VERSION;
	u.flags = flags;
	memcpy(u.pool_uuid, pool_uuid, sizeof(u.pool_uuid));
	if (getrandom(u.key, sizeof(u.key), 0) != sizeof(u.key))
		return -1;
	u.check = check_of(&u);
	if (!(flags & CXLS_UID_HAS_REAL))
		memset(id->internal, 0, CXLS_UID_OFFSET);
	memcpy(id->internal + CXLS_UID_OFFSET, &u, sizeof(u));
	return 0;
}

int cxls_uid_parse(const ncclUniqueId *id, struct cxls_uid *out)
{
	memcpy(out, id->internal + CXLS_UID_OFFSET, sizeof(*out));
	if (out->magic != CXLS_UID_MAGIC || out->version != CXLS_UID_VERSION)
		return -1;
	return out->check == check_of(out) ? 0 : -1;
}

void cxls_uid_real(const ncclUniqueId *id, ncclUniqueId *real)
{
	memcpy(real->internal, id->internal, CXLS_UID_OFFSET);
	memset(real->internal + CXLS_UID_OFFSET, 0, NCCL_UNIQUE_ID_BYTES - CXLS_UID_OFFSET);
}

int cxls_uid_head_fits(const ncclUniqueId *real)
{
	for (int i = CXLS_UID_OFFSET; i < NCCL_UNIQUE_ID_BYTES; i++)
		if (real->internal[i])
			return 0;
	return 1;
}

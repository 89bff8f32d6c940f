/* comm_config.c - ncclConfig_t as NCCL reads it. */
#include "comm_config.h"

#include <stddef.h>
#include <string.h>

#include "log.h"

#define CONFIG_MAGIC 0xcafebeefu
#define MAX_CHANNELS 64 /* NCCL's MAXCHANNELS */

/* The caller's bytes over the defaults, up to its size; fields its
 * version did not have yet stay at their defaults, as NCCL keeps them. */
static void config_read(const ncclConfig_t *in, ncclConfig_t *out)
{
	const ncclConfig_t def = NCCL_CONFIG_INITIALIZER;

	*out = def;
	memcpy(out, in, in->size < sizeof(*out) ? in->size : sizeof(*out));
	if (out->version < NCCL_VERSION(2, 14, 0))
		out->blocking = def.blocking;
	if (out->version < NCCL_VERSION(2, 17, 0)) {
		out->cgaClusterSize = def.cgaClusterSize;
		out->minCTAs = def.minCTAs;
		out->maxCTAs = def.maxCTAs;
	}
	if (out->version < NCCL_VERSION(2, 27, 0)) {
		out->collnetEnable = def.collnetEnable;
		out->CTAPolicy = def.CTAPolicy;
		out->shrinkShare = def.shrinkShare;
		out->nvlsCTAs = def.nvlsCTAs;
	}
	if (out->version < NCCL_VERSION(2, 28, 0)) {
		out->nChannelsPerNetPeer = def.nChannelsPerNetPeer;
		out->nvlinkCentricSched = def.nvlinkCentricSched;
	}
}

/* Unset, or in [lo, hi]. */
static int in_range(int v, int lo, int hi)
{
	return v == NCCL_CONFIG_UNDEF_INT || (v >= lo && v <= hi);
}

/* The first attribute out of its range, or NULL. */
static const char *config_bad(const ncclConfig_t *c)
{
	if (!in_range(c->blocking, 0, 1))
		return "blocking";
	if (!in_range(c->cgaClusterSize, 0, __INT_MAX__))
		return "cgaClusterSize";
	/* NCCL compares the two even when one is unset (unset is INT_MIN) */
	if (!in_range(c->minCTAs, 1, __INT_MAX__) || !in_range(c->maxCTAs, 1, __INT_MAX__) ||
	    c->minCTAs > c->maxCTAs)
		return "minCTAs/maxCTAs";
	if (!in_range(c->splitShare, 0, 1))
		return "splitShare";
	if (!in_range(c->collnetEnable, 0, 1))
		return "collnetEnable";
	if (!in_range(c->CTAPolicy, NCCL_CTA_POLICY_DEFAULT, NCCL_CTA_POLICY_ZERO))
		return "CTAPolicy";
	if (!in_range(c->shrinkShare, 0, 1))
		return "shrinkShare";
	if (!in_range(c->nvlsCTAs, 1, __INT_MAX__))
		return "nvlsCTAs";
	if (!in_range(c->nChannelsPerNetPeer, 1, MAX_CHANNELS))
		return "nChannelsPerNetPeer";
	if (!in_range(c->nvlinkCentricSched, 0, 1))
		return "nvlinkCentricSched";
	return NULL;
}

ncclResult_t cxls_nccl_config_blocking(const ncclConfig_t *config, int *blocking)
{
	ncclConfig_t c;
	const char *bad;

	*blocking = 1;
	if (!config)
		return ncclSuccess;
	if (config->magic != CONFIG_MAGIC || config->size < offsetof(ncclConfig_t, blocking)) {
		CXLS_WARN("ncclConfig_t not initialised with NCCL_CONFIG_INITIALIZER");
		return ncclInvalidArgument;
	}
	config_read(config, &c);
	if ((bad = config_bad(&c))) {
		CXLS_WARN("ncclConfig_t: invalid %s", bad);
		return ncclInvalidArgument;
	}
	if (c.blocking != NCCL_CONFIG_UNDEF_INT)
		*blocking = c.blocking;
	return ncclSuccess;
}

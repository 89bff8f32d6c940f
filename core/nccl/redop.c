/* redop.c - built-in and user (PreMulSum) reduction operators. */
#include "redop.h"
#include "minifloat.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static int is_int(ncclDataType_t t)
{
	return t <= ncclUint64;
}

static double scalar_value(const void *p, ncclDataType_t t)
{
	switch (t) {
	case ncclInt8: return *(const int8_t *)p;
	case ncclUint8: return *(const uint8_t *)p;
	case ncclInt32: return *(const int32_t *)p;
	case ncclUint32: return *(const uint32_t *)p;
	case ncclInt64: return (double)*(const int64_t *)p;
	case ncclUint64: return (double)*(const uint64_t *)p;
	case ncclFloat16: return cxls_half_to_float(*(const uint16_t *)p);
	case ncclBfloat16: return cxls_bf16_to_float(*(const uint16_t *)p);
	case ncclFloat8e4m3: return cxls_e4m3_to_float(*(const uint8_t *)p);
	case ncclFloat8e5m2: return cxls_e5m2_to_float(*(const uint8_t *)p);
	case ncclFloat32: return *(const float *)p;
	default: return *(const double *)p;
	}
}

/* An integer scalar exactly, sign- or zero-extended to 64 bits: products
 * wrap in the type, so only the low bits matter, and a double keeps 53. */
static uint64_t int_value(const void *p, ncclDataType_t t)
{
	switch (t) {
	case ncclInt8: return (uint64_t)(int64_t)*(const int8_t *)p;
	case ncclUint8: return *(const uint8_t *)p;
	case ncclInt32: return (uint64_t)(int64_t)*(const int32_t *)p;
	case ncclUint32: return *(const uint32_t *)p;
	default: return *(const uint64_t *)p;
	}
}

/* Operator handles are ncclNumOps + tag + OP_TAGS x slot, the tag the
 * communicator's own (from its key): as with NCCL's mangled handles, an
 * operator of one communicator is refused by another.  The slots grow as
 * NCCL's do, up to what an int can name. */
#define OP_TAGS (1 << 16)
#define MAX_SLOTS ((uint32_t)(((long long)INT_MAX - ncclNumOps) / OP_TAGS))

static int op_tag(const struct cxls_comm *c)
{
	return 1 + (int)(c->key[0] % (OP_TAGS - 1));
}

struct cxls_user_op *cxls_redop_user(struct cxls_comm *c, ncclRedOp_t op)
{
	/* in 64 bits: any int may come in (INT_MIN - ncclNumOps overflowed) */
	long long v = (long long)(int)op - (long long)ncclNumOps;
	struct cxls_user_op *u;

	if (v < 0 || v % OP_TAGS != op_tag(c) || (uint64_t)(v / OP_TAGS) >= c->n_uops)
		return NULL;
	u = &c->uops[v / OP_TAGS];
	return u->used ? u : NULL;
}

/* A free slot, doubling the table when none is left; NULL when full. */
static struct cxls_user_op *free_slot(struct cxls_comm *c, uint32_t *slot)
{
	uint32_t n = c->n_uops, grown = n ? 2 * n : 4;
	struct cxls_user_op *t;

	for (uint32_t i = 0; i < n; i++)
		if (!c->uops[i].used) {
			*slot = i;
			return &c->uops[i];
		}
	if (grown > MAX_SLOTS)
		grown = MAX_SLOTS;
	if (grown == n || !(t = realloc(c->uops, grown * sizeof(*t))))
		return NULL;
	memset(t + n, 0, (grown - n) * sizeof(*t));
	c->uops = t;
	c->n_uops = grown;
	*slot = n;
	return &t[n];
}

ncclResult_t cxls_redop_resolve(struct cxls_comm *c, ncclRedOp_t op, ncclDataType_t t,
				struct cxls_redop *out)
{
	struct cxls_user_op *u;

	memset(out, 0, sizeof(*out));
	switch (op) {
	case ncclSum: out->kind = CXLS_RED_SUM; return ncclSuccess;
	case ncclProd: out->kind = CXLS_RED_PROD; return ncclSuccess;
	case ncclMax: out->kind = CXLS_RED_MAX; return ncclSuccess;
	case ncclMin: out->kind = CXLS_RED_MIN; return ncclSuccess;
	case ncclAvg:
		if (is_int(t)) {
			out->kind = CXLS_RED_SUM;
			out->postdiv = (uint32_t)c->nranks;
		} else {
			out->kind = CXLS_RED_PREMULSUM;
			out->scalar = 1.0 / c->nranks;
		}
		return ncclSuccess;
	default:
		break;
	}
	u = cxls_redop_user(c, op);
	if (!u || u->type != t)
		goto bad;
	out->kind = CXLS_RED_PREMULSUM;
	out->scalar = u->value;
	out->int_exact = is_int(t);
	out->scalar_int = u->ivalue;
	out->scalar_dev = u->dev;
	out->scalar_type = t;
	return ncclSuccess;
bad:
	cxls_comm_set_error(c, "reduction operator %d is not valid for datatype %d here",
			    (int)op, (int)t);
	return ncclInvalidArgument;
}

ncclResult_t cxls_redop_create_premulsum(struct cxls_comm *c, ncclRedOp_t *op, void *scalar,
					 ncclDataType_t t, ncclScalarResidence_t res)
{
	struct cxls_user_op *u;
	uint32_t slot;

	if (!op || !scalar || !cxls_type_size(t) ||
	    (res != ncclScalarDevice && res != ncclScalarHostImmediate)) {
		cxls_comm_set_error(c, "ncclRedOpCreatePreMulSum: invalid arguments");
		return ncclInvalidArgument;
	}
	if (!(u = free_slot(c, &slot))) {
		cxls_comm_set_error(c, "ncclRedOpCreatePreMulSum: no room for another operator "
				       "(%u live)", c->n_uops);
		return c->n_uops == MAX_SLOTS ? ncclInvalidUsage : ncclSystemError;
	}
	*u = (struct cxls_user_op){ .used = 1, .type = t };
	/* a host scalar is read now; a device one at every use */
	u->dev = res == ncclScalarDevice ? scalar : NULL;
	u->value = res == ncclScalarDevice ? 0 : scalar_value(scalar, t);
	u->ivalue = res == ncclScalarDevice || !is_int(t) ? 0 : int_value(scalar, t);
	*op = (ncclRedOp_t)((int)ncclNumOps + op_tag(c) + OP_TAGS * (int)slot);
	return ncclSuccess;
}

ncclResult_t cxls_redop_destroy(struct cxls_comm *c, ncclRedOp_t op)
{
	struct cxls_user_op *u = cxls_redop_user(c, op);

	if (!u) {
		cxls_comm_set_error(c, "ncclRedOpDestroy: %d is not a live operator of this "
				       "communicator", (int)op);
		return ncclInvalidArgument;
	}
	u->used = 0;
	return ncclSuccess;
}

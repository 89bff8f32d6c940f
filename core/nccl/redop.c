/* redop.c - built-in and user (PreMulSum) reduction operators. */
#include "redop.h"
#include "minifloat.h"

#include <limits.h>
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

/* Operator handles are ncclNumOps + slot + CXLS_MAX_USER_OPS x tag, the
 * tag the communicator's own (from its key): as with NCCL's mangled
 * handles, an operator of one communicator is refused by another. */
#define OP_TAGS (1 << 20)
_Static_assert((long long)ncclNumOps + (long long)CXLS_MAX_USER_OPS * OP_TAGS <= INT_MAX,
	       "operator handles fit an int");

static int op_tag(const struct cxls_comm *c)
{
	return 1 + (int)(c->key[0] % (OP_TAGS - 1));
}

struct cxls_user_op *cxls_redop_user(struct cxls_comm *c, ncclRedOp_t op)
{
	int v = (int)op - (int)ncclNumOps;
	struct cxls_user_op *u;

	if (v < 0 || v / CXLS_MAX_USER_OPS != op_tag(c))
		return NULL;
	u = &c->uops[v % CXLS_MAX_USER_OPS];
	return u->used ? u : NULL;
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
	if (!op || !scalar || !cxls_type_size(t) ||
	    (res != ncclScalarDevice && res != ncclScalarHostImmediate)) {
		cxls_comm_set_error(c, "ncclRedOpCreatePreMulSum: invalid arguments");
		return ncclInvalidArgument;
	}
	for (int i = 0; i < CXLS_MAX_USER_OPS; i++) {
		struct cxls_user_op *u = &c->uops[i];

		if (u->used)
			continue;
		u->used = 1;
		u->type = t;
		/* a host scalar is read now; a device one at every use */
		u->dev = res == ncclScalarDevice ? scalar : NULL;
		u->value = res == ncclScalarDevice ? 0 : scalar_value(scalar, t);
		u->ivalue = res == ncclScalarDevice || !is_int(t) ? 0 : int_value(scalar, t);
		*op = (ncclRedOp_t)((int)ncclNumOps + i + CXLS_MAX_USER_OPS * op_tag(c));
		return ncclSuccess;
	}
	cxls_comm_set_error(c, "ncclRedOpCreatePreMulSum: more than %d live operators",
			    CXLS_MAX_USER_OPS);
	return ncclInvalidUsage;
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

/* names.c - printable names for the tool's reports. */
#include "names.h"

#include <stdio.h>

#include "pool_format.h"

const char *name_type(uint32_t type)
{
	static const char *const names[] = { "int8",  "uint8",   "int32",   "uint32",
					     "int64", "uint64",  "float16", "float32",
					     "float64", "bfloat16", "fp8e4m3", "fp8e5m2" };

	return type < sizeof(names) / sizeof(names[0]) ? names[type] : "type?";
}

const char *name_redop(uint32_t redop)
{
	static const char *const names[] = { "sum", "prod", "max", "min", "avg" };

	return redop < 5 ? names[redop] : "premulsum";
}

const char *name_kind(uint32_t kind)
{
	static const char *const names[CXLS_OP_KINDS] = {
		"none",    "AllGather", "Broadcast", "Gather",        "Scatter",
		"AlltoAll", "Reduce",   "AllReduce", "ReduceScatter", "SendRecv",
		"AllReduce(direct)",
	};

	return kind < CXLS_OP_KINDS ? names[kind] : "invalid";
}

static int has_redop(uint32_t kind)
{
	return kind == CXLS_OP_REDUCE || kind == CXLS_OP_ALLREDUCE ||
	       kind == CXLS_OP_REDUCESCATTER || kind == CXLS_OP_ALLREDUCE_DIRECT;
}

void name_call(char *buf, unsigned long len, uint32_t kind, uint64_t count, uint32_t type,
	       uint32_t redop, int32_t root)
{
	int n = snprintf(buf, len, "%s(count %llu, %s", name_kind(kind), (unsigned long long)count,
			 name_type(type));

	if (n < 0 || (unsigned long)n >= len)
		return;
	if (has_redop(kind))
		n += snprintf(buf + n, len - (unsigned long)n, ", %s", name_redop(redop));
	if (n > 0 && (unsigned long)n < len && root >= 0)
		n += snprintf(buf + n, len - (unsigned long)n, ", root %d", root);
	if (n > 0 && (unsigned long)n < len)
		snprintf(buf + n, len - (unsigned long)n, ")");
}

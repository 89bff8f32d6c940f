/* names.h - printable names of NCCL datatypes, reductions and pooled
 * collectives, for the tool's reports. */
#ifndef CXLSHIM_TOOLS_NAMES_H
#define CXLSHIM_TOOLS_NAMES_H

#include <stdint.h>

const char *name_type(uint32_t type);
const char *name_redop(uint32_t redop);
const char *name_kind(uint32_t kind);
/* "AllReduce(count 1024, float32, sum)" into buf. */
void name_call(char *buf, unsigned long len, uint32_t kind, uint64_t count, uint32_t type,
	       uint32_t redop, int32_t root);

#endif

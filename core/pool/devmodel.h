/* devmodel.h - optional model of the pool's devices' bandwidth.
 *
 * A /dev/shm pool has no separate devices, so interleaving over them
 * changes nothing measurable.  With cccl.model_devices = 1 every pooled
 * chunk copy is bracketed by two host functions on its stream, as in
 * CCCL's scalability emulator: the first counts the copy in on its device,
 * the second stretches it to bytes / (device_bw / copies sharing the
 * device).  Devices are independent; copies on one device share it evenly.
 */
#ifndef CXLSHIM_CORE_DEVMODEL_H
#define CXLSHIM_CORE_DEVMODEL_H

#include <stdint.h>

#include "comm.h"

/* A per-stream record index for the model (one per work stream), or -1
 * when the process ran out of records (the model is then skipped). */
int cxls_devmodel_record(void);
int cxls_devmodel_begin(const struct cxls_stage *s, CUstream st, int rec, uint32_t dev,
			uint64_t bytes);
int cxls_devmodel_end(const struct cxls_stage *s, CUstream st, int rec);

#endif

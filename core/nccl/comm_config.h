/* comm_config.h - ncclConfig_t as NCCL reads it.
 *
 * The caller's struct counts up to its own `size` (older headers have
 * fewer fields) and fields newer than its `version` take their defaults.
 * Every attribute is checked against NCCL 2.28's ranges, so that a
 * configuration NCCL would refuse is refused here too, before anything is
 * created: the pool serves none of them but `blocking`.
 */
#ifndef CXLSHIM_CORE_COMM_CONFIG_H
#define CXLSHIM_CORE_COMM_CONFIG_H

#include <nccl.h>

/* *blocking: 1 unless the config says blocking = 0 (NULL config:
 * blocking).  ncclInvalidArgument for a config not made with
 * NCCL_CONFIG_INITIALIZER or with an attribute out of its range. */
ncclResult_t cxls_nccl_config_blocking(const ncclConfig_t *config, int *blocking);

#endif

/* estimate.h - how long the pool would take for a call, as
 * ncclGroupSimulateEnd reports it.
 *
 * NCCL answers a simulated group with its tuning model's time; the pool's
 * model is simpler and as rough: the busiest rank's bytes through the
 * pool at nccl.sim_bw, plus nccl.sim_round_ns for each chunk round (a
 * doorbell's hand-off).  Both come from the policy, to be fitted to the
 * machine (bench/README.md gives the measured rates).
 */
#ifndef CXLSHIM_CORE_COLL_ESTIMATE_H
#define CXLSHIM_CORE_COLL_ESTIMATE_H

#include <stddef.h>

#include "coll.h"

/* Microseconds for one held collective of c. */
double cxls_coll_estimate_us(const struct cxls_comm *c, const struct cxls_coll *k);

/* Microseconds for a rank's sends and receives on c that move `bytes` in
 * all (what it sends plus what it receives). */
double cxls_p2p_estimate_us(const struct cxls_comm *c, size_t bytes);

#endif

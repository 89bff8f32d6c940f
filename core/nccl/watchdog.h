/* watchdog.h - one thread per process that keeps communicators honest:
 * bumps this process's heartbeats, notices collectives that stopped making
 * progress (timeout) or whose peers died, and turns that into an async
 * error plus unblocked doorbells, so no stream waits forever. */
#ifndef CXLSHIM_CORE_WATCHDOG_H
#define CXLSHIM_CORE_WATCHDOG_H

void cxls_watchdog_start(void);

#endif

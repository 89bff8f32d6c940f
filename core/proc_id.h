/* proc_id.h - identity of a process, good enough to detect that it died:
 * pid + process start time + its host (boot id, and its pid and time
 * namespaces: only a process that sees its pid and clocks as it does can
 * judge).  Recorded in the pool by every rank, checked by peers while
 * they wait. */
#ifndef CXLSHIM_CORE_PROC_ID_H
#define CXLSHIM_CORE_PROC_ID_H

#include <stdint.h>

struct cxls_proc_id {
	uint32_t pid;
	uint64_t boot_hash;
	uint64_t start_time;
};

void cxls_proc_self(struct cxls_proc_id *id);
/* Another process of this host (start time 0 when it is gone). */
void cxls_proc_of(uint32_t pid, struct cxls_proc_id *id);
/* 1: alive, 0: dead, -1: cannot tell (another host). */
int cxls_proc_alive(const struct cxls_proc_id *id);
/* Between these, cxls_proc_alive answers each process once on this
 * thread (a sweep of many records held by a few processes); not nested. */
void cxls_proc_memo_begin(void);
void cxls_proc_memo_end(void);
/* The state letter of /proc/PID/stat ('R', 'S', 'Z', ...), 0 when gone. */
int cxls_proc_state(uint32_t pid);
/* A number of this process's /proc/self/status ("FDSize", "Threads"), -1
 * when it cannot be read. */
long cxls_proc_status(const char *field);
uint64_t cxls_now_ns(void);
/* Now in a start time's units (clock ticks since boot): a process forked
 * after this call has a start time at least this. */
uint64_t cxls_proc_now_ticks(void);
uint64_t cxls_hash64(const void *data, unsigned long len);

#endif

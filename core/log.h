/* log.h - NCCL-style logging: one line per event,
 *   host:pid:tid [rank] CXLSHIM LEVEL message
 * Level from CXLSHIM_DEBUG (WARN, INFO, TRACE) or the policy's log.level.
 */
#ifndef CXLSHIM_CORE_LOG_H
#define CXLSHIM_CORE_LOG_H

enum cxls_log_level { CXLS_LOG_NONE = 0, CXLS_LOG_WARN, CXLS_LOG_INFO, CXLS_LOG_TRACE };

/* Applies level and optional file; safe to call more than once. */
void cxls_log_setup(int level, const char *file);
int cxls_log_enabled(int level);
/* Rank printed in the prefix by this thread's next lines (-1: none). */
void cxls_log_set_rank(int rank);
int cxls_log_rank(void);
void cxls_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define CXLS_WARN(...) cxls_log(CXLS_LOG_WARN, __VA_ARGS__)
#define CXLS_INFO(...) \
	do { if (cxls_log_enabled(CXLS_LOG_INFO)) cxls_log(CXLS_LOG_INFO, __VA_ARGS__); } while (0)
#define CXLS_TRACE(...) \
	do { if (cxls_log_enabled(CXLS_LOG_TRACE)) cxls_log(CXLS_LOG_TRACE, __VA_ARGS__); } while (0)

#endif

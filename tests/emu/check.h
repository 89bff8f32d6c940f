/* check.h - minimal test reporting for the CUDA emulation tests.
 *
 * One line per check ("ok" / "FAIL" and what was checked); check_done()
 * prints "N passed, M failed" and gives the exit status.
 */
#ifndef CXLSHIM_TESTS_EMU_CHECK_H
#define CXLSHIM_TESTS_EMU_CHECK_H

#include <cuda.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

static int check_passed, check_failed;

__attribute__((format(printf, 4, 5)))
static int check_report(int ok, const char *file, int line,
			const char *fmt, ...)
{
	va_list ap;

	printf("%s - ", ok ? "ok  " : "FAIL");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	if (!ok)
		printf("  (%s:%d)", file, line);
	printf("\n");
	fflush(stdout);
	if (ok)
		check_passed++;
	else
		check_failed++;
	return ok;
}

#define CHECK(cond, ...) check_report(!!(cond), __FILE__, __LINE__, __VA_ARGS__)

static inline const char *cu_name(CUresult r)
{
	const char *s = NULL;

	cuGetErrorName(r, &s);
	return s ? s : "?";
}

/* Checks that a driver call returns `want`. */
#define CHECK_CU(call, want)						\
	do {								\
		CUresult got_ = (call);					\
		check_report(got_ == (want), __FILE__, __LINE__,	\
			     "%s -> %s (want %s)", #call, cu_name(got_),	\
			     cu_name(want));				\
	} while (0)

/* Checks that a runtime call returns `want` (for the tests that include
 * cuda_runtime_api.h). */
#define CHECK_RT(call, want)						\
	do {								\
		cudaError_t got_ = (call);				\
		check_report(got_ == (want), __FILE__, __LINE__,	\
			     "%s -> %s (want %s)", #call,		\
			     cudaGetErrorName(got_), cudaGetErrorName(want)); \
	} while (0)

static inline double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static inline void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

static void check_timeout(int sig)
{
	char buf[128];
	int n;

	(void)sig;
	n = snprintf(buf, sizeof(buf), "FAIL - timed out (a wait that never "
		     "completes?)\n%d passed, %d failed\n", check_passed,
		     check_failed + 1);
	if (n > 0 && write(STDOUT_FILENO, buf, (size_t)n) < 0)
		_exit(2);
	_exit(1);
}

/* A hang is a failure too: report it instead of blocking the suite. */
static inline void check_watchdog(unsigned seconds)
{
	signal(SIGALRM, check_timeout);
	alarm(seconds);
}

static inline int check_done(void)
{
	printf("%d passed, %d failed\n", check_passed, check_failed);
	return check_failed ? 1 : 0;
}

#endif

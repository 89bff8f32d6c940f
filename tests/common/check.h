/* check.h - the tiny assertion vocabulary of the unit tests.
 *
 * CHECK(cond, fmt, ...) counts one check, prints "FAIL file:line ..." when
 * it does not hold, and never stops the test: later checks still run.
 * CHECK_SUMMARY() prints "N passed, M failed" and yields the exit status.
 *
 * The counters are the including file's own, which suits a program of one
 * file.  A program of several files defines CHECK_SHARED before it
 * includes this in every file, and one of its files defines the counters
 * (int check_passed, check_failed;), so that a summary counts the checks
 * of every file (tests/coll/api/).
 */
#ifndef CXLSHIM_TESTS_CHECK_H
#define CXLSHIM_TESTS_CHECK_H

#include <stdio.h>

#ifdef CHECK_SHARED
extern int check_passed, check_failed;
#else
static int check_passed, check_failed;
#endif

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (cond) {                                                    \
			check_passed++;                                        \
		} else {                                                       \
			check_failed++;                                        \
			printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			printf(__VA_ARGS__);                                   \
			printf("\n");                                          \
		}                                                              \
	} while (0)

/* Flushed: a rank of a multi-process test may leave by _exit. */
#define CHECK_SUMMARY()                                                        \
	(printf("%d passed, %d failed\n", check_passed, check_failed),         \
	 fflush(stdout), check_failed ? 1 : 0)

#endif

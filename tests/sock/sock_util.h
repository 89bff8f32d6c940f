/* sock_util.h - helpers of the socket tests: loopback listeners, whole
 * reads and writes, a checksum, whether a connection went through the
 * pool (the kernel's TCP counters say how many bytes TCP carried). */
#ifndef CXLSHIM_TESTS_SOCK_UTIL_H
#define CXLSHIM_TESTS_SOCK_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Listening socket on 127.0.0.1 (or ::1 with v6), port in *port. */
int tu_listen(uint16_t *port, int v6);
int tu_connect(uint16_t port, int v6);
/* -1 on error or early EOF */
int tu_write_all(int fd, const void *buf, size_t n);
int tu_read_all(int fd, void *buf, size_t n);
uint64_t tu_sum(uint64_t h, const void *buf, size_t n);
void tu_fill(void *buf, size_t n, uint64_t seed);
/* Bytes the kernel's TCP sent on fd (tcpi_bytes_acked). */
uint64_t tu_tcp_bytes(int fd);
/* Bytes it received on fd (tcpi_bytes_received): on a pooled connection,
 * the doorbells its peer rang. */
uint64_t tu_tcp_bytes_in(int fd);
/* 1 when fd's payload bypassed TCP: fewer TCP bytes than 'payload'/2 */
int tu_pooled(int fd, uint64_t payload);
/* A connected pair over 127.0.0.1 (a: the client); -1 without one. */
int tu_pair(int *a, int *b);
/* Moves 256 KiB a -> b (a child writes); 1 when it bypassed TCP, 0 when
 * not, -1 when it did not arrive whole. */
int tu_probe_pooled(int a, int b);
uint64_t tu_now_us(void);

/* A test program's named cases: `want` runs the one of that name, "all"
 * or NULL every one; each is announced as "== NAME (expect pool|tcp)".
 * Returns how many ran. */
struct tu_case {
	const char *name;
	void (*fn)(void);
};
int tu_run_cases(const struct tu_case *c, size_t n, const char *want, int expect_pool);
/* Waits for a child; returns its exit status or 128 + signal. */
int tu_wait(pid_t pid);
/* Runs fn(arg) in a child; returns its pid. */
pid_t tu_spawn(int (*fn)(void *), void *arg);

#endif

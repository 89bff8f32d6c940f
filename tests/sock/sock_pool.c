/* sock_pool.c - see sock_pool.h. */
#include "sock_pool.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "pool.h"
#include "sock_util.h"

static struct cxls_pool pool;
static struct cxls_sock_bufs bufs;

static int pool_map(void)
{
	struct cxls_config cfg;
	struct cxls_config_error err;

	if (pool.base)
		return 0;
	if (cxls_config_load(&cfg, getenv("CXLSHIM_CONF"), &err) || cxls_pool_open(&pool, &cfg))
		return -1;
	if (!pool.sb->sock_slots)
		return -1;
	cxls_bufs_map(&bufs, (uint8_t *)pool.base + pool.sb->sock_offset, pool.sb);
	return 0;
}

static uint8_t *recs(void)
{
	return (uint8_t *)pool.base + pool.sb->sock_offset +
	       (uint64_t)pool.sb->sock_listeners * CXLS_SOCK_LISTENER_SIZE;
}

/* The records of client port cport from slot *from on, in turn (NULL
 * after the last); the pool is mapped. */
static struct cxls_sock_rec *next_rec(uint16_t cport, uint32_t *from)
{
	while (*from < pool.sb->sock_slots) {
		struct cxls_sock_rec *r = (void *)(recs() + (uint64_t)(*from)++ * CXLS_SOCK_REC_SIZE);

		if (CXLS_SG_STATE(atomic_load(&r->sg)) != CXLS_SK_FREE &&
		    r->tuple.cport == htons(cport))
			return r;
	}
	return NULL;
}

int pool_recs(uint16_t cport, uint32_t st)
{
	struct cxls_sock_rec *r;
	uint32_t i = 0;
	int n = 0;

	if (pool_map())
		return 0;
	while ((r = next_rec(cport, &i)))
		n += CXLS_SG_STATE(atomic_load(&r->sg)) == st;
	return n;
}

struct cxls_sock_rec *pool_rec(uint16_t cport, int any_state)
{
	struct cxls_sock_rec *r;
	uint32_t i = 0;

	if (pool_map())
		return NULL;
	while ((r = next_rec(cport, &i)))
		if (any_state || CXLS_SG_STATE(atomic_load(&r->sg)) == CXLS_SK_JOINED)
			return r;
	return NULL;
}

int pool_listening(uint16_t port)
{
	if (pool_map())
		return 0;
	for (uint32_t i = 0; i < pool.sb->sock_listeners; i++) {
		struct cxls_sock_listener *l =
			(void *)((uint8_t *)pool.base + pool.sb->sock_offset +
				 (uint64_t)i * CXLS_SOCK_LISTENER_SIZE);

		if (CXLS_SG_STATE(atomic_load(&l->sg)) == CXLS_LST_LIVE && l->port == htons(port))
			return 1;
	}
	return 0;
}

uint32_t pool_slot(const struct cxls_sock_rec *r)
{
	return (uint32_t)(((const uint8_t *)r - recs()) / CXLS_SOCK_REC_SIZE);
}

int pool_flush_mode(void)
{
	if (pool_map())
		return -1;
	return pool.flush_mode;
}

int pool_mode_ok(void)
{
	const char *want = getenv("SOCK_CHECK_COHERENCE");

	return !want || pool_flush_mode() == !strcmp(want, "flush");
}

int pool_expected(void)
{
	const char *pre = getenv("LD_PRELOAD"), *en = getenv("CXLSHIM_SOCK_ENABLE");
	const char *expect = getenv("SOCK_CHECK_EXPECT");

	if (expect)
		return !strcmp(expect, "pool");
	return pre && strstr(pre, "cxlshim") && !(en && !strcmp(en, "0"));
}

const struct cxls_sock_bufs *pool_bufs(void)
{
	pool_map();
	return &bufs;
}

uint16_t local_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t l = sizeof(ss);

	getsockname(fd, (struct sockaddr *)&ss, &l);
	return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

void tcp_pair(int *a, int *b)
{
	uint16_t port;
	int lfd = tu_listen(&port, 0);

	*a = tu_connect(port, 0);
	*b = accept(lfd, NULL, NULL);
	close(lfd);
}

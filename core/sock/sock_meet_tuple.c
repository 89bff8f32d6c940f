/* sock_meet_tuple.c - how both ends name a connection: its tuple (client
 * and server address and port, alike from either side) and the key it is
 * found by in the record table; and, before a connect, whether a process
 * under the shim listens at the address.
 */
#include "sock_meet_int.h"

#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include "pool.h"
#include "sock_sys.h"

static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

/* Both ends must name the connection alike: a v4-mapped IPv6 address (a
 * dual-stack server) is written as the IPv4 address it maps. */
static int put_addr(const struct sockaddr_storage *ss, uint8_t addr[16], uint16_t *port,
		    uint16_t *family)
{
	memset(addr, 0, 16);
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)ss;

		memcpy(addr, &in->sin_addr, 4);
		*port = in->sin_port;
		*family = AF_INET;
		return 0;
	}
	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)ss;

		*port = in6->sin6_port;
		if (!memcmp(in6->sin6_addr.s6_addr, v4mapped, 12)) {
			memcpy(addr, in6->sin6_addr.s6_addr + 12, 4);
			*family = AF_INET;
		} else {
			memcpy(addr, in6->sin6_addr.s6_addr, 16);
			*family = AF_INET6;
		}
		return 0;
	}
	return -1;
}

int cxls_sock_tuple(int fd, int role, struct cxls_sock_tuple *t)
{
	struct sockaddr_storage me, peer;
	socklen_t ml = sizeof(me), pl = sizeof(peer);
	uint16_t fam_me, fam_peer = 0;
	int type = 0, proto = 0;
	socklen_t tl = sizeof(type), pr = sizeof(proto);

	memset(t, 0, sizeof(*t));
	if (sys_getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) || type != SOCK_STREAM ||
	    sys_getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &pr) || proto != IPPROTO_TCP)
		return -1;
	if (sys_getsockname(fd, (struct sockaddr *)&me, &ml))
		return -1;
	if (role == CXLS_SERVER && put_addr(&me, t->saddr, &t->sport, &fam_me) == 0 &&
	    sys_getpeername(fd, (struct sockaddr *)&peer, &pl) && errno == ENOTCONN) {
		t->family = fam_me; /* a listening socket: server end only */
		return 0;
	}
	if (sys_getpeername(fd, (struct sockaddr *)&peer, &pl))
		return -1;
	if (role == CXLS_CLIENT) {
		if (put_addr(&me, t->caddr, &t->cport, &fam_me) ||
		    put_addr(&peer, t->saddr, &t->sport, &fam_peer))
			return -1;
	} else if (put_addr(&me, t->saddr, &t->sport, &fam_me) ||
		   put_addr(&peer, t->caddr, &t->cport, &fam_peer)) {
		return -1;
	}
	if (fam_me != fam_peer)
		return -1;
	t->family = fam_me;
	return 0;
}

uint64_t cxls_meet_tuple_key(const struct cxls_sock_region *r, const struct cxls_sock_tuple *t)
{
	uint8_t buf[16 + sizeof(*t)];

	memcpy(buf, r->pool->geo.uuid, 16); /* the checked copy (pool.h) */
	memcpy(buf + 16, t, sizeof(*t));
	return cxls_hash64(buf, sizeof(buf)) | 1;
}

int cxls_sock_server_listens(const struct sockaddr *sa)
{
	struct cxls_sock_tuple t;
	struct sockaddr_storage ss;
	uint16_t fam;

	if (!cxls_sock_region())
		return 0;
	memset(&ss, 0, sizeof(ss));
	memcpy(&ss, sa, sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
						   : sizeof(struct sockaddr_in));
	memset(&t, 0, sizeof(t));
	if (put_addr(&ss, t.saddr, &t.sport, &fam))
		return 0;
	t.family = fam;
	return cxls_listener_serves(&t);
}

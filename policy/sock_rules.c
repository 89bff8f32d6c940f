/* sock_rules.c - parse and match the [sock] peer, port and program rules. */
#include "sock_rules.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"

typedef int (*item_fn)(struct cxls_sock_rules *r, const char *item, int deny);

static int is_any(const char *s)
{
	return !strcasecmp(s, "any") || !strcmp(s, "*");
}

/* "10.0.0.0/8", "::1", "any" */
static int parse_net(struct cxls_sock_rules *r, const char *item, int deny)
{
	struct cxls_net_rule *n = &r->nets[r->nnets];
	char buf[64], *slash, *end;
	long bits;
	int max;

	memset(n, 0, sizeof(*n));
	n->deny = (uint8_t)deny;
	if (is_any(item))
		return r->nnets++, 0;
	if (strlen(item) >= sizeof(buf))
		return -1;
	strcpy(buf, item);
	slash = strchr(buf, '/');
	if (slash)
		*slash++ = '\0';
	if (inet_pton(AF_INET, buf, n->addr) == 1)
		n->family = AF_INET, max = 32;
	else if (inet_pton(AF_INET6, buf, n->addr) == 1)
		n->family = AF_INET6, max = 128;
	else
		return -1;
	bits = max;
	if (slash) {
		bits = strtol(slash, &end, 10);
		if (end == slash || *end || bits < 0 || bits > max)
			return -1;
	}
	n->bits = (uint8_t)bits;
	r->nnets++;
	return 0;
}

/* "6379", "5201-5210", "any" */
static int parse_port(struct cxls_sock_rules *r, const char *item, int deny)
{
	struct cxls_port_rule *p = &r->ports[r->nports];
	unsigned long lo, hi;
	char *end;

	p->deny = (uint8_t)deny;
	if (is_any(item)) {
		p->lo = 0, p->hi = 65535;
		return r->nports++, 0;
	}
	if (!isdigit((unsigned char)*item))
		return -1;
	lo = strtoul(item, &end, 10);
	hi = lo;
	if (*end == '-') {
		const char *h = end + 1;
		if (!isdigit((unsigned char)*h))
			return -1;
		hi = strtoul(h, &end, 10);
	}
	if (*end || lo > hi || hi > 65535)
		return -1;
	p->lo = (uint16_t)lo, p->hi = (uint16_t)hi;
	r->nports++;
	return 0;
}

static int parse_prog(struct cxls_sock_rules *r, const char *item, int deny)
{
	struct cxls_prog_rule *p = &r->progs[r->nprogs];

	p->deny = (uint8_t)deny;
	if (is_any(item)) {
		p->name[0] = '\0';
		return r->nprogs++, 0;
	}
	if (strlen(item) >= sizeof(p->name))
		return -1;
	strcpy(p->name, item);
	r->nprogs++;
	return 0;
}

static int parse_list(struct cxls_sock_rules *r, const char *what, const char *list,
		      int *count, item_fn fn, char *err, size_t errlen)
{
	struct cxls_list l;
	char *tok;

	if (cxls_list_open(&l, list, CXLS_PATH_MAX)) {
		snprintf(err, errlen, "sock.%s: too long", what);
		return -1;
	}
	while ((tok = cxls_list_next(&l))) {
		int deny = *tok == '!';

		if (*count >= CXLS_SOCK_RULES_MAX) {
			snprintf(err, errlen, "sock.%s: more than %d items", what,
				 CXLS_SOCK_RULES_MAX);
			return -1;
		}
		if (fn(r, tok + deny, deny)) {
			snprintf(err, errlen, "sock.%s: bad item '%.60s'", what, tok);
			return -1;
		}
	}
	return 0;
}

int cxls_sock_rules_parse(struct cxls_sock_rules *r, const struct cxls_config *cfg,
			  char *err, size_t errlen)
{
	memset(r, 0, sizeof(*r));
	if (parse_list(r, "peers", cfg->sock_peers, &r->nnets, parse_net, err, errlen) ||
	    parse_list(r, "ports", cfg->sock_ports, &r->nports, parse_port, err, errlen) ||
	    parse_list(r, "programs", cfg->sock_programs, &r->nprogs, parse_prog, err, errlen))
		return -1;
	return 0;
}

static int net_match(const struct cxls_net_rule *n, int family, const uint8_t *a)
{
	unsigned full = n->bits / 8, rest = n->bits % 8;

	if (!n->family)
		return 1;
	if (n->family != family)
		return 0;
	if (memcmp(n->addr, a, full))
		return 0;
	if (!rest)
		return 1;
	return ((n->addr[full] ^ a[full]) & (0xff00u >> rest)) == 0;
}

/* Each list is first-match; no match denies. */
static int peer_ok(const struct cxls_sock_rules *r, int family, const uint8_t *peer)
{
	for (int i = 0; i < r->nnets; i++)
		if (net_match(&r->nets[i], family, peer))
			return !r->nets[i].deny;
	return 0;
}

static int port_ok(const struct cxls_sock_rules *r, uint16_t sport)
{
	uint16_t port = ntohs(sport);

	for (int i = 0; i < r->nports; i++)
		if (port >= r->ports[i].lo && port <= r->ports[i].hi)
			return !r->ports[i].deny;
	return 0;
}

static int prog_ok(const struct cxls_sock_rules *r, const char *prog)
{
	for (int i = 0; i < r->nprogs; i++)
		if (!r->progs[i].name[0] || (prog && !strcmp(r->progs[i].name, prog)))
			return !r->progs[i].deny;
	return 0;
}

/* Some peer matches an allowing rule before the first rule that matches
 * every peer. */
static int some_peer_ok(const struct cxls_sock_rules *r)
{
	for (int i = 0; i < r->nnets; i++) {
		if (!r->nets[i].deny)
			return 1;
		if (!r->nets[i].family)
			return 0;
	}
	return 0;
}

int cxls_sock_rules_allow(const struct cxls_sock_rules *r, int family, const uint8_t *peer,
			  uint16_t sport, const char *prog)
{
	return peer_ok(r, family, peer) && port_ok(r, sport) && prog_ok(r, prog);
}

int cxls_sock_rules_allow_some(const struct cxls_sock_rules *r, uint16_t sport, const char *prog)
{
	return some_peer_ok(r) && port_ok(r, sport) && prog_ok(r, prog);
}

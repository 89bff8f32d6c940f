/* sock_rules.h - which TCP connections may go through the pool.
 *
 * Three comma lists from the [sock] section, each item optionally prefixed
 * with '!' to deny, first match wins, no match denies, "any" matches all:
 *   peers    = !10.0.0.5, 10.0.0.0/8, 127.0.0.0/8, ::1/128
 *   ports    = 6379, 5201-5210, !22      (the server's port)
 *   programs = redis-server, !sshd       (each end checks its own name)
 */
#ifndef CXLSHIM_POLICY_SOCK_RULES_H
#define CXLSHIM_POLICY_SOCK_RULES_H

#include <stddef.h>
#include <stdint.h>

struct cxls_config;

#define CXLS_SOCK_RULES_MAX 16

struct cxls_net_rule {
	uint16_t family;   /* AF_INET, AF_INET6, or 0 for any */
	uint8_t bits;
	uint8_t deny;
	uint8_t addr[16];
};

struct cxls_port_rule {
	uint16_t lo, hi;   /* host order; 0..65535 for any */
	uint8_t deny;
};

struct cxls_prog_rule {
	char name[32];     /* "" for any */
	uint8_t deny;
};

struct cxls_sock_rules {
	int nnets, nports, nprogs;
	struct cxls_net_rule nets[CXLS_SOCK_RULES_MAX];
	struct cxls_port_rule ports[CXLS_SOCK_RULES_MAX];
	struct cxls_prog_rule progs[CXLS_SOCK_RULES_MAX];
};

/* Compiles the three lists of cfg; -1 with a message on a bad item. */
int cxls_sock_rules_parse(struct cxls_sock_rules *r, const struct cxls_config *cfg,
			  char *err, size_t errlen);

/* 1 when a connection to/from peer (family, 4 or 16 bytes) on server port
 * sport (network order) by program prog may use the pool. */
int cxls_sock_rules_allow(const struct cxls_sock_rules *r, int family, const uint8_t *peer,
			  uint16_t sport, const char *prog);
/* 0 when no peer may use the pool with a server on port sport run by
 * prog (its listener need not be advertised); 1 when some peer may. */
int cxls_sock_rules_allow_some(const struct cxls_sock_rules *r, uint16_t sport, const char *prog);

#endif

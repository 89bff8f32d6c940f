/* sock_bufs.c - parse sock.buffers (see sock_bufs.h). */
#include "sock_bufs.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "config.h"

#define BUF_MIN (4ull << 10)
#define BUF_MAX (64ull << 20)
#define COUNT_MAX 65536ull

static int parse_item(char *tok, uint64_t *size, uint64_t *count)
{
	char *colon = strchr(tok, ':');

	if (!colon)
		return -1;
	*colon = '\0';
	return cxls_config_parse_size(tok, size) || cxls_config_parse_size(colon + 1, count);
}

int cxls_sock_bufs_parse(const char *s, uint32_t size[CXLS_SOCK_BUF_CLASSES],
			 uint32_t count[CXLS_SOCK_BUF_CLASSES], char *msg, size_t len)
{
	struct cxls_list l;
	char *tok;
	int n = 0;

	memset(size, 0, CXLS_SOCK_BUF_CLASSES * sizeof(*size));
	memset(count, 0, CXLS_SOCK_BUF_CLASSES * sizeof(*count));
	if (cxls_list_open(&l, s, CXLS_PATH_MAX))
		return snprintf(msg, len, "too long"), -1;
	while ((tok = cxls_list_next(&l))) {
		uint64_t sz, cnt;

		if (!strcasecmp(tok, "none"))
			continue;
		if (n == CXLS_SOCK_BUF_CLASSES)
			return snprintf(msg, len, "more than %d classes", CXLS_SOCK_BUF_CLASSES), -1;
		if (parse_item(tok, &sz, &cnt))
			return snprintf(msg, len, "'%.40s': expected SIZE:COUNT", tok), -1;
		if (sz < BUF_MIN || sz > BUF_MAX || (sz & (BUF_MIN - 1)))
			return snprintf(msg, len, "buffer size %llu: a multiple of 4K, 4K..64M",
					(unsigned long long)sz), -1;
		if (cnt < 1 || cnt > COUNT_MAX)
			return snprintf(msg, len, "count %llu: 1..65536", (unsigned long long)cnt), -1;
		if (n && sz <= size[n - 1])
			return snprintf(msg, len, "sizes must ascend"), -1;
		size[n] = (uint32_t)sz;
		count[n] = (uint32_t)cnt;
		n++;
	}
	return 0;
}

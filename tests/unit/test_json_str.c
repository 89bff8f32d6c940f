/* test_json_str.c - strings from outside in the tools' JSON (paths in
 * `pool status --json`, host names in `cxlshim trace`): escaped, and
 * whatever bytes they hold, valid UTF-8 out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/check.h"
#include "../../tools/cxlshim/json_str.c"

static void one(const char *in, const char *want)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	json_str(f, in);
	fclose(f);
	CHECK(!strcmp(buf, want), "json of \"%s\": %s, want %s", in, buf, want);
	free(buf);
}

int main(void)
{
	one("/dev/shm/pool", "\"/dev/shm/pool\"");
	one("node\"7\\x", "\"node\\\"7\\\\x\"");
	one("a\nb\tc\x01", "\"a\\u000ab\\u0009c\\u0001\"");
	one("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
	one("bad\xff", "\"bad\\ufffd\"");              /* not a start byte */
	one("\xc3", "\"\\ufffd\"");                     /* cut short */
	one("\xc0\xaf", "\"\\ufffd\\ufffd\"");          /* overlong '/' */
	one("\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\""); /* a surrogate */
	one("\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\""); /* past U+10FFFF */
	one("", "\"\"");
	return CHECK_SUMMARY();
}

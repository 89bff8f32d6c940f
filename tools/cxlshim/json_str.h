/* json_str.h - strings from outside (paths, host names) as JSON strings. */
#ifndef CXLSHIM_TOOLS_JSON_STR_H
#define CXLSHIM_TOOLS_JSON_STR_H

#include <stdio.h>

/* s between quotes: '"', '\\' and control characters escaped, and any
 * byte that does not start a valid UTF-8 character written as U+FFFD, so
 * that the document stays valid JSON whatever s holds. */
void json_str(FILE *out, const char *s);

#endif

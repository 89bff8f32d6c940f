/* json_str.c - strings from outside as JSON strings (json_str.h). */
#include "json_str.h"

/* Bytes of the valid UTF-8 character at p (1-4), or 0 when p starts
 * none: a stray continuation byte, an overlong form, a surrogate, past
 * U+10FFFF, or cut short. */
static int utf8_len(const unsigned char *p)
{
	unsigned c = p[0], min, cp;
	int n;

	if (c < 0x80)
		return 1;
	if ((c & 0xe0) == 0xc0) {
		n = 2, cp = c & 0x1f, min = 0x80;
	} else if ((c & 0xf0) == 0xe0) {
		n = 3, cp = c & 0x0f, min = 0x800;
	} else if ((c & 0xf8) == 0xf0) {
		n = 4, cp = c & 0x07, min = 0x10000;
	} else {
		return 0;
	}
	for (int i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

void json_str(FILE *out, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	fputc('"', out);
	while (*p) {
		int n = utf8_len(p);

		if (*p == '"' || *p == '\\')
			fprintf(out, "\\%c", *p);
		else if (*p < 0x20)
			fprintf(out, "\\u%04x", *p);
		else if (n)
			fwrite(p, 1, (size_t)n, out);
		else
			fputs("\\ufffd", out);
		p += n ? n : 1;
	}
	fputc('"', out);
}

/* test_fold_image.c - the GPU reduction kernels embedded in the library.
 *
 * No GPU runs here, so this checks what can be checked without one: the
 * image the loader hands to cuModuleLoadData is a fatbin, it holds a kernel
 * under every name the loader asks for (one per datatype, none for an
 * invalid type), and the PTX built from the same source (argv[1]) defines
 * exactly those kernels and contains no fused multiply-add (a PreMulSum
 * product must be rounded before it is added, as on the CPU).  The
 * kernels' arithmetic is the CPU's (test_arith checks the shared codecs).
 * Exit 77 (skip) when the library was built without nvcc.
 */
#include <stdlib.h>
#include <string.h>

#include "fold_gpu.h"
#include "../common/check.h"

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (!fseek(f, 0, SEEK_END) && (n = ftell(f)) > 0 && !fseek(f, 0, SEEK_SET) &&
	    (buf = calloc(1, (size_t)n + 1)) && fread(buf, 1, (size_t)n, f) == (size_t)n)
		*len = (size_t)n;
	fclose(f);
	return buf;
}

static int count(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

int main(int argc, char **argv)
{
	size_t size, ptx_len = 0;
	const unsigned char *img = cxls_fold_gpu_image(&size);
	char *ptx = argc > 1 ? slurp(argv[1], &ptx_len) : NULL;
	uint32_t magic;
	char entry[64];

	if (!size) {
		printf("SKIP: the library was built without nvcc (no GPU reduction kernels)\n");
		return 77;
	}
	memcpy(&magic, img, sizeof(magic));
	CHECK(magic == 0xba55ed50u, "fatbin magic, got %#x", magic);
	CHECK(ptx != NULL, "PTX of the kernels at %s", argc > 1 ? argv[1] : "(no path given)");
	for (int t = 0; t < 12; t++) {
		const char *name = cxls_fold_gpu_kernel((ncclDataType_t)t);

		CHECK(name && memmem(img, size, name, strlen(name)), "kernel for type %d in the image", t);
		snprintf(entry, sizeof(entry), ".entry %s(", name ? name : "?");
		CHECK(ptx && count(ptx, entry) == 1, "PTX defines %s once", entry);
	}
	CHECK(!cxls_fold_gpu_kernel((ncclDataType_t)12) && !cxls_fold_gpu_kernel((ncclDataType_t)-1),
	      "no kernel for an invalid type");
	CHECK(ptx && count(ptx, ".entry ") == 12, "12 kernels in all");
	CHECK(ptx && !strstr(ptx, "fma."), "no fused multiply-add in the kernels");
	free(ptx);
	return CHECK_SUMMARY();
}

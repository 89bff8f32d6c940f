/* cmd.h - the subcommands of `cxlshim` (one file each) and the helpers
 * they share (main.c). */
#ifndef CXLSHIM_TOOLS_CMD_H
#define CXLSHIM_TOOLS_CMD_H

#include "config.h"
#include "snapshot.h"

/* Exit codes of every subcommand. */
enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2, EXIT_FOUND = 3 };

int cmd_run(int argc, char **argv);
int cmd_pool(int argc, char **argv);
int cmd_policy(int argc, char **argv);
int cmd_trace(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_topo(int argc, char **argv);

/* The policy from `file` (NULL: $CXLSHIM_CONF, or none) and the
 * environment; prints the first error and returns -1. */
int tool_policy(const char *file, struct cxls_config *cfg);
/* The pool path: `path` if given, else the policy's. */
const char *tool_pool_path(const char *path, const struct cxls_config *cfg);
/* Maps the pool at `path` read-only and takes a validated snapshot; on
 * failure prints "cxlshim CMD: PATH: why" (for a pool of another release,
 * the versions and the fix) and returns -1 with nothing left to release. */
int tool_snapshot(const char *cmd, const char *path, int flags, struct snap_map *m,
		  struct pool_snap *s);
/* Directory of this executable, for finding the library next to it. */
int tool_self_dir(char *buf, unsigned long len);

#endif

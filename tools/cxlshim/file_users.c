/* file_users.c - which processes of this host hold a file open or mapped.
 *
 * `cxlshim pool create --replace` must not take a pool away from a job
 * still using it.  A process may map the pool and close its descriptor,
 * so both /proc/PID/fd and /proc/PID/maps are read; a process whose
 * entries cannot be read (another user's without privilege, a process
 * that is not dumpable) is counted as unknown, for the caller to say so.
 * Processes of other hosts sharing a DAX device cannot be seen: the
 * command replaces nothing but regular files.
 */
#include "file_users.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

/* 1 when one of pid's descriptors is the file, 0 when none, -1 unknown */
static int holds_fd(const char *pid, dev_t dev, ino_t ino)
{
	char path[320];
	struct dirent *e;
	struct stat st;
	DIR *d;
	int found = 0;

	snprintf(path, sizeof(path), "/proc/%s/fd", pid);
	d = opendir(path);
	if (!d)
		return errno == ENOENT ? 0 : -1; /* ENOENT: it exited meanwhile */
	while (!found && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/fd/%s", pid, e->d_name);
		found = stat(path, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
	}
	closedir(d);
	return found;
}

/* Same for pid's mappings: "start-end perms offset major:minor inode path" */
static int holds_map(const char *pid, dev_t dev, ino_t ino)
{
	char path[320], line[512];
	unsigned maj, min;
	uint64_t node;
	int found = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%s/maps", pid);
	f = fopen(path, "r");
	if (!f)
		return errno == ENOENT ? 0 : -1;
	while (!found && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%*s %*s %*s %x:%x %" SCNu64, &maj, &min, &node) == 3)
			found = node == (uint64_t)ino && maj == major(dev) && min == minor(dev);
		/* a line longer than the buffer: skip the rest of it */
		while (!strchr(line, '\n') && fgets(line, sizeof(line), f))
			;
	}
	if (ferror(f))
		found = -1;
	fclose(f);
	return found;
}

int cxls_file_users(const struct stat *file, struct cxls_file_users *u)
{
	struct dirent *e;
	DIR *proc = opendir("/proc");

	memset(u, 0, sizeof(*u));
	if (!proc)
		return -1;
	while ((e = readdir(proc))) {
		int fd, map;

		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		fd = holds_fd(e->d_name, file->st_dev, file->st_ino);
		map = fd == 1 ? 1 : holds_map(e->d_name, file->st_dev, file->st_ino);
		if (fd == 1 || map == 1) {
			if (u->n < CXLS_FILE_USERS_MAX)
				u->pid[u->n] = (pid_t)atol(e->d_name);
			u->n++;
		} else if (fd < 0 || map < 0) {
			if (u->unknown < CXLS_FILE_USERS_MAX)
				u->unknown_pid[u->unknown] = (pid_t)atol(e->d_name);
			u->unknown++;
		}
	}
	closedir(proc);
	return 0;
}

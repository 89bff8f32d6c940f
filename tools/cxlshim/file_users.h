/* file_users.h - which processes of this host hold a file open or mapped. */
#ifndef CXLSHIM_TOOLS_FILE_USERS_H
#define CXLSHIM_TOOLS_FILE_USERS_H

#include <sys/stat.h>
#include <sys/types.h>

#define CXLS_FILE_USERS_MAX 8

struct cxls_file_users {
	int n;                           /* processes that hold it */
	pid_t pid[CXLS_FILE_USERS_MAX];  /* the first of them */
	int unknown;                     /* processes that could not be read */
	pid_t unknown_pid[CXLS_FILE_USERS_MAX];
};

/* Scans /proc for `file` (its st_dev and st_ino).  0, or -1 without /proc. */
int cxls_file_users(const struct stat *file, struct cxls_file_users *u);

#endif

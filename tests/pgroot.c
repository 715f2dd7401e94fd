/*
 * pgroot.so: preloaded into PostgreSQL's initdb and postgres by
 * t-apps.sh where root lacks CAP_SYS_RESOURCE, without which criu cannot
 * dump another user's processes: there the server runs as root, and its
 * refusal to ("root" execution of the PostgreSQL server is not
 * permitted) is answered by getuid() and geteuid() giving the uid in
 * PGROOT_UID.  Nothing else of the server is changed.
 */
#include "config.h"

#include <sys/types.h>

#include <stdlib.h>
#include <unistd.h>

uid_t	getuid(void);
uid_t	geteuid(void);

static uid_t
pgroot_uid(void)
{
	const char	*s = getenv("PGROOT_UID");

	return s != NULL ? (uid_t)strtoul(s, NULL, 10) : 0;
}

uid_t
getuid(void)
{
	return pgroot_uid();
}

uid_t
geteuid(void)
{
	return pgroot_uid();
}

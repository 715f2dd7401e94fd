/*
 * getprogname(3) as on the BSDs, from glibc's invocation name.
 */
#include "config.h"

#include <errno.h>

#include "compat.h"

const char *
getprogname(void)
{
	return program_invocation_short_name;
}

/*
 * strtonum(3) as on OpenBSD: a bounded, checked strtoll.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>

#include "compat.h"

long long
strtonum(const char *s, long long min, long long max, const char **errstrp)
{
	long long	 v = 0;
	char		*end;
	const char	*errstr = NULL;

	if (min > max) {
		errstr = "invalid";
	} else {
		errno = 0;
		v = strtoll(s, &end, 10);
		if (end == s || *end != '\0')
			errstr = "invalid";
		else if ((v == LLONG_MIN && errno == ERANGE) || v < min)
			errstr = "too small";
		else if ((v == LLONG_MAX && errno == ERANGE) || v > max)
			errstr = "too large";
	}
	if (errstrp != NULL)
		*errstrp = errstr;
	if (errstr != NULL) {
		errno = errstr[0] == 'i' ? EINVAL : ERANGE;
		return 0;
	}
	return v;
}

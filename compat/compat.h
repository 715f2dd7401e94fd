/*
 * compat.h: functions some C libraries lack.
 */
#ifndef GCK_COMPAT_H
#define GCK_COMPAT_H

#ifndef HAVE_STRTONUM
long long	strtonum(const char *, long long, long long, const char **);
#endif

#ifndef HAVE_GETPROGNAME
const char	*getprogname(void);
#endif

#endif /* GCK_COMPAT_H */

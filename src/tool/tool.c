/*
 * tool.c: CLI glue every gpuckpt binary shares.
 */
#include "config.h"

#include <sys/types.h>

#include <err.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compat.h"
#include "gpuckpt.h"
#include "tool.h"

volatile sig_atomic_t	tool_signal;

static void
tool_log(void *arg, int level, const char *msg)
{
	tool_progress_clear();
	warnx("%s", msg);
}

struct gck_ctx *
tool_ctx(int verbosity)
{
	struct gck_ctx	*ctx;

	if ((ctx = gck_ctx_new()) == NULL)
		errx(1, "out of memory");
	gck_set_log(ctx, tool_log, NULL, verbosity);
	gck_set_interrupt(ctx, &tool_signal);
	return ctx;
}

static void
on_signal(int sig)
{
	if (tool_signal == 0)
		tool_signal = sig;
}

void
tool_signals(void)
{
	struct sigaction	sa;

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = 0;	/* no SA_RESTART: blocked writes return */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

long long
tool_number(const char *s, long long min, long long max, const char *what)
{
	const char	*errstr;
	long long	 v;

	v = strtonum(s, min, max, &errstr);
	if (errstr != NULL) {
		warnx("invalid %s '%s': %s (use %lld to %lld)", what, s, errstr,
		    min, max);
		exit(2);
	}
	return v;
}

uint64_t
tool_size(const char *s, const char *what)
{
	const char	*units = "KMGT";
	char		*end;
	unsigned long long v;
	int		 shift = 0;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (*end != '\0' && strchr(units, *end) != NULL && end[1] == '\0')
		shift = 10 * (int)(strchr(units, *end) - units + 1);
	else if (*end != '\0')
		end = NULL;
	if (end == NULL || end == s || *s == '-' || errno != 0 || v == 0 ||
	    v > (UINT64_MAX >> shift)) {
		warnx("invalid %s '%s': use a number of bytes, or of K, M, G "
		    "or T (KiB to TiB)", what, s);
		exit(2);
	}
	return (uint64_t)v << shift;
}

pid_t
tool_pid(const char *s)
{
	return (pid_t)tool_number(s, 1, 0x3fffffff, "pid");
}

int
tool_compress(const char *s)
{
	const char	*errstr;
	long long	 v;

	if (strcmp(s, "none") == 0)
		return 0;
	if (strcmp(s, "zstd") == 0)
		return GCK_ZSTD_LEVEL;
	if (strncmp(s, "zstd:", 5) == 0) {
		v = strtonum(s + 5, 1, 19, &errstr);
		if (errstr == NULL)
			return (int)v;
	}
	warnx("invalid compression '%s': use zstd, zstd:1 to zstd:19 or none",
	    s);
	return -1;
}

long
tool_seconds(const char *s, const char *what, long max_s)
{
	char	*end;
	double	 v;

	errno = 0;
	v = strtod(s, &end);
	if (end == s || *end != '\0' || errno != 0 || !(v >= 0) ||
	    v > (double)max_s) {
		warnx("invalid %s '%s': use seconds, from 0 to %ld", what, s,
		    max_s);
		return -1;
	}
	return (long)(v * 1000 + 0.5);
}

int
tool_open_image(const char *path, int status)
{
	int	fd;

	if (path == NULL || strcmp(path, "-") == 0) {
		if (isatty(STDIN_FILENO))
			errx(status, "refusing to read an image from a "
			    "terminal");
		return STDIN_FILENO;
	}
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		err(status, "cannot open '%s'", path);
	return fd;
}

/* The licence that --version states: gpuckpt's source names none other. */
#define TOOL_LICENCE \
	"License ISC: <https://opensource.org/licenses/ISC>.\n" \
	"This is free software: you are free to change and redistribute it.\n" \
	"There is NO WARRANTY, to the extent permitted by law.\n"

_Noreturn void
tool_version(void)
{
	printf("%s (gpuckpt) %s\n%s", getprogname(), gck_version(),
	    TOOL_LICENCE);
	exit(0);
}

_Noreturn void
tool_usage(int status, const char *synopsis, const char *help)
{
	if (status == 0) {
		fputs(synopsis, stdout);
		fputs(help, stdout);
		exit(0);
	}
	fputs(synopsis, stderr);
	fprintf(stderr, "Try '%s --help' for more information.\n",
	    getprogname());
	exit(status);
}

_Noreturn void
tool_usage_error(const char *synopsis, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	vwarnx(fmt, ap);
	va_end(ap);
	tool_usage(2, synopsis, NULL);
}

/*
 * Says that process pid wrote to terminal tty on fd, which a restore
 * cannot give back: restored, it writes to /dev/null there.
 */
void
tool_tty_note(pid_t pid, const char *tty, int fd)
{
	if (pid > 0)
		warnx("process %d wrote to terminal %s on fd %d, which a "
		    "restore cannot give back: restored, it writes to "
		    "/dev/null there", (int)pid, tty, fd);
}

void
tool_append(char ***vp, size_t *np, char *s)
{
	char	**nv;

	if ((nv = reallocarray(*vp, *np + 1, sizeof *nv)) == NULL)
		err(1, NULL);
	nv[(*np)++] = s;
	*vp = nv;
}

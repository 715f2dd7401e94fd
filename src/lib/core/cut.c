/*
 * cut.c: the gpuckpts of one cut across hosts, meeting in a directory
 * they share (cut.h).  Files rather than a connection: a batch job's
 * hosts share a file system more surely than they reach each other, and
 * a file says what a gpuckpt reached even once it is gone.  Each file is
 * written under a temporary name and renamed, so that a reader sees it
 * whole or not at all.
 */
#include "config.h"

#include <sys/stat.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "private.h"
#include "core/cut.h"
#include "core/util.h"

#define CUT_TEXT_MAX	(1 << 20)	/* one host's text of a phase */
#define CUT_POLL_MS	20

struct gck_cut {
	char		*dir;
	char		 name[128];
	unsigned int	 size;
};

/* A host's name: letters, digits, '.', '_' and '-', no leading dot. */
static int
name_ok(const char *s)
{
	size_t	i, n = strlen(s);

	if (n == 0 || n >= 128 || s[0] == '.')
		return 0;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' &&
		    s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
		    s[i] == '.' || s[i] == '_' || s[i] == '-'))
			return 0;
	return 1;
}

int
gck_cut_open(struct gck_ctx *ctx, const char *dir, unsigned int size,
    const char *name, struct gck_cut **cp)
{
	struct gck_cut	*c;
	char		 host[128];

	*cp = NULL;
	if (name == NULL) {
		if (gethostname(host, sizeof host) == -1)
			return gck_set_syserr(ctx, errno, "gethostname: %s",
			    strerror(errno));
		host[sizeof host - 1] = '\0';
		host[strcspn(host, ".")] = '\0';
		name = host;
	}
	if (!name_ok(name))
		return gck_set_error(ctx, GCK_EINVAL, "bad name '%s' in the "
		    "cut: letters, digits, '.', '_' and '-'", name);
	if (size < 2)
		return gck_set_error(ctx, GCK_EINVAL, "a cut is of 2 hosts or "
		    "more");
	if (mkdir(dir, 0755) == -1 && errno != EEXIST)
		return gck_set_syserr(ctx, errno, "cannot make '%s': %s", dir,
		    strerror(errno));
	if ((c = calloc(1, sizeof *c)) == NULL || (c->dir = strdup(dir)) ==
	    NULL) {
		free(c);
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	}
	snprintf(c->name, sizeof c->name, "%s", name);
	c->size = size;
	*cp = c;
	return GCK_OK;
}

const char *
gck_cut_name(const struct gck_cut *c)
{
	return c->name;
}

/* DIR/NAME.PHASE, whole (a temporary name renamed). */
static int
put_file(struct gck_ctx *ctx, const struct gck_cut *c, const char *phase,
    const char *text)
{
	char	path[PATH_MAX], tmp[PATH_MAX];
	int	fd, r;

	snprintf(path, sizeof path, "%s/%s.%s", c->dir, c->name, phase);
	snprintf(tmp, sizeof tmp, "%s/.%s.%s.tmp", c->dir, c->name, phase);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) ==
	    -1)
		return gck_set_syserr(ctx, errno, "cannot create '%s': %s",
		    tmp, strerror(errno));
	if ((r = gck_write_all(ctx, fd, text, strlen(text), tmp)) != GCK_OK) {
		close(fd);
		unlink(tmp);
		return r;
	}
	if (fsync(fd) == -1 || close(fd) == -1 || rename(tmp, path) == -1) {
		r = gck_set_syserr(ctx, errno, "cannot write '%s': %s", path,
		    strerror(errno));
		unlink(tmp);
		return r;
	}
	return GCK_OK;
}

int
gck_cut_post(struct gck_ctx *ctx, struct gck_cut *c, const char *phase,
    const char *text)
{
	return put_file(ctx, c, phase, text);
}

void
gck_cut_fail(struct gck_cut *c, const char *why)
{
	struct gck_ctx	tmp;

	if (c == NULL)
		return;
	memset(&tmp, 0, sizeof tmp);
	(void)put_file(&tmp, c, "failed", why != NULL ? why : "failed");
}

/* A file's text, whole (at most CUT_TEXT_MAX), or NULL. */
static char *
slurp(const char *path)
{
	char	*buf;
	ssize_t	 n;
	size_t	 len = 0;
	int	 fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return NULL;
	if ((buf = malloc(CUT_TEXT_MAX + 1)) == NULL) {
		close(fd);
		return NULL;
	}
	while (len < CUT_TEXT_MAX && (n = read(fd, buf + len,
	    CUT_TEXT_MAX - len)) > 0)
		len += (size_t)n;
	close(fd);
	buf[len] = '\0';
	return buf;
}

/*
 * What the directory holds of phase: *np hosts have posted it; *failed
 * is the first host that posted a failure (its name in a buffer of
 * 128), or "".
 */
static int
scan(const struct gck_cut *c, const char *phase, unsigned int *np,
    char *failed)
{
	struct dirent	*de;
	const char	*dot;
	DIR		*d;

	*np = 0;
	failed[0] = '\0';
	if ((d = opendir(c->dir)) == NULL)
		return -1;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.' ||
		    (dot = strrchr(de->d_name, '.')) == NULL)
			continue;
		if (strcmp(dot + 1, phase) == 0)
			(*np)++;
		else if (strcmp(dot + 1, "failed") == 0 && failed[0] == '\0' &&
		    (size_t)(dot - de->d_name) < 128)
			snprintf(failed, 128, "%.*s", (int)(dot - de->d_name),
			    de->d_name);
	}
	closedir(d);
	return 0;
}

/* The others' texts of phase, each line prefixed with its host. */
static int
collect(struct gck_ctx *ctx, const struct gck_cut *c, const char *phase,
    char **textp)
{
	struct dirent	*de;
	const char	*dot;
	char		 path[PATH_MAX], *t, *line, *save, *out = NULL;
	size_t		 len = 0, sz = 0, need;
	DIR		*d;

	if ((d = opendir(c->dir)) == NULL)
		return gck_set_syserr(ctx, errno, "cannot read '%s': %s",
		    c->dir, strerror(errno));
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.' ||
		    (dot = strrchr(de->d_name, '.')) == NULL ||
		    strcmp(dot + 1, phase) != 0 ||
		    ((size_t)(dot - de->d_name) == strlen(c->name) &&
		    strncmp(de->d_name, c->name, strlen(c->name)) == 0))
			continue;
		snprintf(path, sizeof path, "%s/%s", c->dir, de->d_name);
		if ((t = slurp(path)) == NULL)
			continue;
		for (line = strtok_r(t, "\n", &save); line != NULL;
		    line = strtok_r(NULL, "\n", &save)) {
			need = (size_t)(dot - de->d_name) + strlen(line) + 3;
			while (len + need > sz)
				if (gck_grow(ctx, &out, &sz, sz, 1) != GCK_OK) {
					free(t);
					free(out);
					closedir(d);
					return ctx->code;
				}
			len += (size_t)snprintf(out + len, sz - len,
			    "%.*s %s\n", (int)(dot - de->d_name), de->d_name,
			    line);
		}
		free(t);
	}
	closedir(d);
	if (out == NULL && (out = strdup("")) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	*textp = out;
	return GCK_OK;
}

int
gck_cut_gather(struct gck_ctx *ctx, struct gck_cut *c, const char *phase,
    int64_t deadline, char **textp)
{
	char		 failed[128], path[PATH_MAX], *why;
	unsigned int	 n;

	*textp = NULL;
	for (;;) {
		if (scan(c, phase, &n, failed) == -1)
			return gck_set_syserr(ctx, errno, "cannot read '%s': "
			    "%s", c->dir, strerror(errno));
		if (failed[0] != '\0') {
			snprintf(path, sizeof path, "%s/%s.failed", c->dir,
			    failed);
			why = slurp(path);
			if (why != NULL)
				why[strcspn(why, "\n")] = '\0';
			gck_set_error(ctx, GCK_EREMOTE, "%s of the cut failed: "
			    "%s", failed, why != NULL && *why != '\0' ? why :
			    "no reason given");
			free(why);
			return GCK_EREMOTE;
		}
		if (n >= c->size)
			return collect(ctx, c, phase, textp);
		if (gck_clock_us() >= deadline)
			return gck_set_error(ctx, GCK_ETIMEDOUT, "only %u of the "
			    "%u hosts of the cut in '%s' reached '%s' in time",
			    n, c->size, c->dir, phase);
		if (gck_check_interrupt(ctx) != GCK_OK)
			return ctx->code;
		gck_msleep(CUT_POLL_MS);
	}
}

void
gck_cut_free(struct gck_cut *c)
{
	if (c == NULL)
		return;
	free(c->dir);
	free(c);
}

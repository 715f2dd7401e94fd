/*
 * mounts.c: the mounts of a mount namespace, and where each stands in
 * ours.
 *
 * A container's mounts are of two kinds.  Those made inside it (its
 * proc, its /dev tmpfs, its devpts) have a file system no mount of ours
 * has: criu makes them again.  Those bound from the host (the root file
 * system, a data directory, the cgroup controllers, the GPU's device
 * nodes) show the major:minor of a file system one of our mounts holds
 * too: for each, the path here to what it shows is the mount point of
 * ours with the longest root that is a prefix of its root, joined with
 * the rest of its root.  That path is what an image records as the
 * mount's source, and what criu is told is external to the tree.
 */
#include "config.h"

#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "private.h"
#include "core/mounts.h"
#include "core/util.h"

#define MOUNTINFO_MAX	(16u << 20)	/* bytes of one mountinfo */
#define MOUNTS_MAX	65536

static void
mount_release(struct gck_mount *m)
{
	free(m->root);
	free(m->at);
	free(m->fstype);
	free(m->source);
	free(m->host);
}

void
gck_mounts_free(struct gck_mounts *ms)
{
	size_t	i;

	if (ms == NULL)
		return;
	for (i = 0; i < ms->n; i++)
		mount_release(&ms->m[i]);
	free(ms->m);
	free(ms);
}

/*
 * A field of mountinfo, its octal escapes (\040 for a space, \011,
 * \012, \134) undone: malloc'ed, or NULL (out of memory, or an escape
 * that is not one).
 */
static char *
unescape(const char *s, size_t len)
{
	char	*out, *o;
	size_t	 i;
	int	 v;

	if ((out = malloc(len + 1)) == NULL)
		return NULL;
	for (i = 0, o = out; i < len; i++) {
		if (s[i] != '\\') {
			*o++ = s[i];
			continue;
		}
		if (i + 3 >= len)
			goto bad;
		if (s[i + 1] < '0' || s[i + 1] > '3' ||
		    s[i + 2] < '0' || s[i + 2] > '7' ||
		    s[i + 3] < '0' || s[i + 3] > '7')
			goto bad;
		v = (s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 +
		    (s[i + 3] - '0');
		if (v == 0)
			goto bad;
		*o++ = (char)v;
		i += 3;
	}
	*o = '\0';
	return out;
bad:
	free(out);
	return NULL;
}

/* The next field of line (space-separated) in *fp, *lenp. */
static int
field(const char **linep, const char *end, const char **fp, size_t *lenp)
{
	const char	*s = *linep;

	while (s < end && *s == ' ')
		s++;
	if (s == end)
		return -1;
	*fp = s;
	while (s < end && *s != ' ')
		s++;
	*lenp = (size_t)(s - *fp);
	*linep = s;
	return 0;
}

/*
 * One line of mountinfo (proc(5)): "ID PARENT MAJ:MIN ROOT AT OPTS
 * [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS".
 */
static int
parse_line(const char *s, const char *end, struct gck_mount *m)
{
	const char	*f;
	size_t		 len;
	char		 num[32];
	char		*e;
	long		 v;
	int		 i;

	memset(m, 0, sizeof *m);
	for (i = 0; i < 2; i++) {
		if (field(&s, end, &f, &len) == -1 || len >= sizeof num)
			return -1;
		memcpy(num, f, len);
		num[len] = '\0';
		errno = 0;
		v = strtol(num, &e, 10);
		if (errno != 0 || *e != '\0' || e == num || v < 0 ||
		    v > INT_MAX)
			return -1;
		if (i == 0)
			m->id = (int)v;
		else
			m->parent = (int)v;
	}
	if (field(&s, end, &f, &len) == -1 || len >= sizeof num)
		return -1;
	memcpy(num, f, len);
	num[len] = '\0';
	if (sscanf(num, "%u:%u", &m->major, &m->minor) != 2)
		return -1;
	if (field(&s, end, &f, &len) == -1 ||
	    (m->root = unescape(f, len)) == NULL || m->root[0] != '/')
		return -1;
	if (field(&s, end, &f, &len) == -1 ||
	    (m->at = unescape(f, len)) == NULL || m->at[0] != '/')
		return -1;
	if (field(&s, end, &f, &len) == -1)	/* per-mount options */
		return -1;
	for (;;) {				/* optional fields, then - */
		if (field(&s, end, &f, &len) == -1)
			return -1;
		if (len == 1 && f[0] == '-')
			break;
	}
	if (field(&s, end, &f, &len) == -1 ||
	    (m->fstype = unescape(f, len)) == NULL)
		return -1;
	if (field(&s, end, &f, &len) == -1 ||
	    (m->source = unescape(f, len)) == NULL)
		return -1;
	return 0;
}

int
gck_mountinfo_parse(struct gck_ctx *ctx, const char *text,
    struct gck_mounts **msp)
{
	struct gck_mounts	*ms;
	const char		*s, *nl;
	size_t			 line = 0;
	int			 r;

	*msp = NULL;
	if ((ms = calloc(1, sizeof *ms)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	for (s = text; *s != '\0'; s = *nl == '\0' ? nl : nl + 1) {
		if ((nl = strchr(s, '\n')) == NULL)
			nl = s + strlen(s);
		line++;
		if (nl == s)
			continue;
		if (ms->n >= MOUNTS_MAX) {
			r = gck_set_error(ctx, GCK_EINVAL, "mountinfo: more "
			    "than %d mounts", MOUNTS_MAX);
			goto fail;
		}
		if ((r = gck_grow(ctx, &ms->m, &ms->cap, ms->n,
		    sizeof *ms->m)) != GCK_OK)
			goto fail;
		if (parse_line(s, nl, &ms->m[ms->n]) == -1) {
			mount_release(&ms->m[ms->n]);
			r = gck_set_error(ctx, GCK_EINVAL, "mountinfo: line "
			    "%zu is not a mount", line);
			goto fail;
		}
		ms->n++;
	}
	*msp = ms;
	return GCK_OK;
fail:
	gck_mounts_free(ms);
	return r;
}

int
gck_mountinfo_read(struct gck_ctx *ctx, pid_t pid, struct gck_mounts **msp)
{
	char	 path[64], *buf = NULL, *nb;
	size_t	 len = 0, cap = 0;
	ssize_t	 n;
	int	 fd, r;

	*msp = NULL;
	if (pid > 0)
		snprintf(path, sizeof path, "/proc/%d/mountinfo", (int)pid);
	else
		snprintf(path, sizeof path, "/proc/self/mountinfo");
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return gck_set_syserr(ctx, errno, "cannot open %s", path);
	for (;;) {
		if (cap - len < 4096) {
			if (cap >= MOUNTINFO_MAX) {
				r = gck_set_error(ctx, GCK_EINVAL, "%s: over "
				    "%u bytes", path, MOUNTINFO_MAX);
				goto out;
			}
			cap = cap ? cap * 2 : 16384;
			if ((nb = realloc(buf, cap + 1)) == NULL) {
				r = gck_set_error(ctx, GCK_ENOMEM,
				    "out of memory");
				goto out;
			}
			buf = nb;
		}
		if ((n = read(fd, buf + len, cap - len)) == -1) {
			if (errno == EINTR)
				continue;
			r = gck_set_syserr(ctx, errno, "cannot read %s", path);
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	r = gck_mountinfo_parse(ctx, buf, msp);
	if (r != GCK_OK)
		gck_error_prefix(ctx, "%s: ", path);
out:
	free(buf);
	close(fd);
	return r;
}

/* Whether the path prefix is, component by component, a prefix of s. */
static size_t
path_prefix(const char *prefix, const char *s)
{
	size_t	len = strlen(prefix);

	if (strcmp(prefix, "/") == 0)
		return 1;
	if (strncmp(prefix, s, len) != 0)
		return 0;
	return s[len] == '\0' || s[len] == '/' ? len : 0;
}

/*
 * Sets the host field of each mount of ms that a mount of ours (host)
 * holds: its file system the same, its root under that mount's root.
 */
int
gck_mounts_resolve(struct gck_ctx *ctx, struct gck_mounts *ms,
    const struct gck_mounts *host)
{
	const struct gck_mount	*h, *best;
	struct gck_mount	*m;
	const char		*rest;
	size_t			 i, j, plen, bestlen;

	for (i = 0; i < ms->n; i++) {
		m = &ms->m[i];
		free(m->host);
		m->host = NULL;
		best = NULL;
		bestlen = 0;
		for (j = 0; j < host->n; j++) {
			h = &host->m[j];
			if (h->major != m->major || h->minor != m->minor)
				continue;
			if ((plen = path_prefix(h->root, m->root)) == 0)
				continue;
			if (best == NULL || plen > bestlen) {
				best = h;
				bestlen = plen;
			}
		}
		if (best == NULL)
			continue;
		rest = strcmp(best->root, "/") == 0 ? m->root :
		    m->root + bestlen;
		if (*rest == '/' && strcmp(best->at, "/") == 0)
			m->host = strdup(rest);
		else if (*rest == '\0' || strcmp(rest, "/") == 0)
			m->host = strdup(best->at);
		else if (asprintf(&m->host, "%s%s", best->at, rest) == -1)
			m->host = NULL;
		if (m->host == NULL)
			return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	}
	return GCK_OK;
}

const struct gck_mount *
gck_mounts_find(const struct gck_mounts *ms, int id)
{
	size_t	i;

	for (i = 0; i < ms->n; i++)
		if (ms->m[i].id == id)
			return &ms->m[i];
	return NULL;
}

/* The mount at /: of those, the last (the one on top). */
const struct gck_mount *
gck_mounts_root(const struct gck_mounts *ms)
{
	const struct gck_mount	*root = NULL;
	size_t			 i;

	for (i = 0; i < ms->n; i++)
		if (strcmp(ms->m[i].at, "/") == 0)
			root = &ms->m[i];
	return root;
}

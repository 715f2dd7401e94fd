/*
 * knownhosts.c: an OpenSSH known_hosts file: reading it, looking a host
 * key up in it and adding one to it.
 *
 * libssh2 reads the plain and hashed lines and matches host names; the
 * @revoked lines, which it does not know, are kept here, and the other
 * marked lines (@cert-authority) are skipped, as ssh skips them for a
 * host that shows a plain key.
 */
#include "config.h"

#include <sys/types.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <libssh2.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "private.h"
#include "core/util.h"
#include "transport/knownhosts.h"

/* The host keys as known_hosts lists them. */
struct gck_known {
	LIBSSH2_KNOWNHOSTS	*kh;
	char			**revoked;	/* base64 keys of @revoked */
	size_t			 nrevoked;
};

static int	kh_error(struct gck_ctx *, const char *, int, const char *,
		    ...) __attribute__((__format__(__printf__, 4, 5)));
static void	lower(char *);
static int	add_revoked(struct gck_known *, char *);
static int	read_lines(struct gck_ctx *, const char *, const char *,
		    FILE *, struct gck_known *);
static int	add_line(struct gck_ctx *, const char *, const char *, int,
		    const char *, const struct gck_hostkey *);

/*
 * Records "ssh CONN: " and the message, from the SSH connection; with
 * GCK_ESYS, errno as well.  Returns code.
 */
static int
kh_error(struct gck_ctx *ctx, const char *conn, int code, const char *fmt,
    ...)
{
	char	msg[GCK_ERRMAX];
	va_list	ap;
	int	oerrno = errno;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (code == GCK_ESYS)
		gck_set_syserr(ctx, oerrno, "ssh %s: %s", conn, msg);
	else
		gck_set_error(ctx, code, "ssh %s: %s", conn, msg);
	return gck_error_from(ctx, GCK_FROM_SSH);
}

static void
lower(char *p)
{
	for (; *p != '\0'; p++)
		if (*p >= 'A' && *p <= 'Z')
			*p = (char)(*p - 'A' + 'a');
}

void
gck_known_names(const char *host, int port, char *name, size_t namesz,
    char *plain, size_t plainsz)
{
	/* ssh's names in known_hosts: lower case, "[host]:port" off 22 */
	if (port == 22)
		snprintf(name, namesz, "%s", host);
	else
		snprintf(name, namesz, "[%s]:%d", host, port);
	snprintf(plain, plainsz, "%s", host);
	lower(plain);
	lower(name);
}

/* Keeps the key of an "@revoked host-patterns type key" line. */
static int
add_revoked(struct gck_known *k, char *p)
{
	char	**v, *q;
	int	  i;

	for (i = 0; i < 3 && *p != '\0'; i++) {
		p += strcspn(p, " \t");
		p += strspn(p, " \t");
	}
	if (*p == '\0')
		return 0;
	q = p + strcspn(p, " \t");
	*q = '\0';
	if ((v = reallocarray(k->revoked, k->nrevoked + 1, sizeof *v)) ==
	    NULL)
		return -1;
	k->revoked = v;
	if ((v[k->nrevoked] = strdup(p)) == NULL)
		return -1;
	k->nrevoked++;
	return 0;
}

/*
 * Reads the lines of f into k: lines libssh2 cannot read (other key
 * types, bad lines) and marked lines other than @revoked are skipped.
 */
static int
read_lines(struct gck_ctx *ctx, const char *conn, const char *path,
    FILE *f, struct gck_known *k)
{
	char	*line = NULL, *p;
	size_t	 cap = 0, n;
	int	 r = GCK_OK;

	while (getline(&line, &cap, f) != -1) {
		n = strlen(line);
		while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r' ||
		    line[n - 1] == ' ' || line[n - 1] == '\t'))
			line[--n] = '\0';
		p = line + strspn(line, " \t");
		if (*p == '\0' || *p == '#')
			continue;
		if (*p != '@') {
			(void)libssh2_knownhost_readline(k->kh, p, strlen(p),
			    LIBSSH2_KNOWNHOST_FILE_OPENSSH);
			continue;
		}
		if (strncmp(p, "@revoked", 8) != 0 ||
		    (p[8] != ' ' && p[8] != '\t'))
			continue;
		if (add_revoked(k, p) == -1) {
			r = kh_error(ctx, conn, GCK_ENOMEM, "out of memory");
			goto out;
		}
	}
	if (ferror(f))
		r = kh_error(ctx, conn, GCK_ESYS, "cannot read '%s': %s", path,
		    strerror(errno));
out:
	free(line);
	return r;
}

int
gck_known_load(struct gck_ctx *ctx, LIBSSH2_SESSION *sess, const char *conn,
    const char *path, struct gck_known **kp)
{
	struct gck_known	*k;
	FILE			*f = NULL;
	int			 r;

	*kp = NULL;
	if ((k = calloc(1, sizeof *k)) == NULL ||
	    (k->kh = libssh2_knownhost_init(sess)) == NULL) {
		r = kh_error(ctx, conn, GCK_ENOMEM, "out of memory");
		goto out;
	}
	if ((f = fopen(path, "re")) == NULL) {
		if (errno == ENOENT || errno == ENOTDIR)
			r = GCK_OK;
		else
			r = kh_error(ctx, conn, GCK_ESYS, "cannot read '%s': "
			    "%s", path, strerror(errno));
		goto out;
	}
	r = read_lines(ctx, conn, path, f, k);
out:
	if (f != NULL)
		fclose(f);
	if (r != GCK_OK) {
		gck_known_free(k);
		k = NULL;
	}
	*kp = k;
	return r;
}

void
gck_known_free(struct gck_known *k)
{
	size_t	i;

	if (k == NULL)
		return;
	if (k->kh != NULL)
		libssh2_knownhost_free(k->kh);
	for (i = 0; i < k->nrevoked; i++)
		free(k->revoked[i]);
	free(k->revoked);
	free(k);
}

int
gck_known_check(const struct gck_known *k, const char *name,
    const struct gck_hostkey *hk)
{
	size_t	i;
	int	rc;

	for (i = 0; i < k->nrevoked; i++)
		if (strcmp(k->revoked[i], hk->b64) == 0)
			return GCK_KNOWN_REVOKED;
	/*
	 * Port -1: libssh2 would also take the plain host for a port other
	 * than 22, where ssh takes only "[host]:port"; name is that already.
	 */
	rc = libssh2_knownhost_checkp(k->kh, name, -1, (const char *)hk->blob,
	    hk->len, LIBSSH2_KNOWNHOST_TYPE_PLAIN |
	    LIBSSH2_KNOWNHOST_KEYENC_RAW | hk->kbit, NULL);
	switch (rc) {
	case LIBSSH2_KNOWNHOST_CHECK_MATCH:
		return GCK_KNOWN_MATCH;
	case LIBSSH2_KNOWNHOST_CHECK_NOTFOUND:
		return GCK_KNOWN_NOTFOUND;
	case LIBSSH2_KNOWNHOST_CHECK_MISMATCH:
		return GCK_KNOWN_CHANGED;
	default:
		return GCK_KNOWN_FAILED;
	}
}

int
gck_known_has_type(const struct gck_known *k, const char *name, int kbit)
{
	/* a made-up key: a mismatch means the type is known */
	return libssh2_knownhost_checkp(k->kh, name, -1, "?", 1,
	    LIBSSH2_KNOWNHOST_TYPE_PLAIN | LIBSSH2_KNOWNHOST_KEYENC_RAW | kbit,
	    NULL) == LIBSSH2_KNOWNHOST_CHECK_MISMATCH;
}

/* Appends the line for name to fd, the file at path, locked. */
static int
add_line(struct gck_ctx *ctx, const char *conn, const char *path, int fd,
    const char *name, const struct gck_hostkey *hk)
{
	struct stat	 st;
	char		*line = NULL, last;
	int		 len, r;

	if (fstat(fd, &st) == -1)
		return kh_error(ctx, conn, GCK_ESYS, "cannot stat '%s': %s",
		    path, strerror(errno));
	last = '\n';
	if (st.st_size > 0 && pread(fd, &last, 1, st.st_size - 1) != 1)
		last = '\n';
	len = asprintf(&line, "%s%s %s %s\n", last == '\n' ? "" : "\n", name,
	    hk->type, hk->b64);
	if (len == -1)
		return kh_error(ctx, conn, GCK_ENOMEM, "out of memory");
	r = gck_write_all(ctx, fd, line, (size_t)len, path);
	free(line);
	if (r != GCK_OK)
		return r;
	gck_log(ctx, 1, "ssh %s: added the host key (%s %s) to %s", conn,
	    hk->type, hk->fp, path);
	return GCK_KNOWN_MATCH;
}

/*
 * Under an exclusive lock, the file is read again before the key goes
 * in: another connection to the same host may have added the key
 * meanwhile, or a key of another kind.
 */
int
gck_known_add(struct gck_ctx *ctx, LIBSSH2_SESSION *sess, const char *conn,
    const char *path, int mkdir_parent, const char *name,
    const struct gck_hostkey *hk)
{
	struct gck_known	*k = NULL;
	char			 dir[PATH_MAX], *slash;
	int			 fd = -1, r;

	if (mkdir_parent && (slash = strrchr(path, '/')) != NULL &&
	    slash != path && (size_t)(slash - path) < sizeof dir) {
		memcpy(dir, path, (size_t)(slash - path));
		dir[slash - path] = '\0';
		if (mkdir(dir, 0700) == -1 && errno != EEXIST) {
			r = kh_error(ctx, conn, GCK_ESYS, "cannot create '%s': "
			    "%s", dir, strerror(errno));
			goto out;
		}
	}
	if ((fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC,
	    0600)) == -1) {
		r = kh_error(ctx, conn, GCK_ESYS, "cannot open '%s': %s", path,
		    strerror(errno));
		goto out;
	}
	while (flock(fd, LOCK_EX) == -1) {
		if (errno != EINTR) {
			r = kh_error(ctx, conn, GCK_ESYS, "cannot lock '%s': "
			    "%s", path, strerror(errno));
			goto out;
		}
	}
	if ((r = gck_known_load(ctx, sess, conn, path, &k)) != GCK_OK)
		goto out;
	if ((r = gck_known_check(k, name, hk)) == GCK_KNOWN_NOTFOUND)
		r = add_line(ctx, conn, path, fd, name, hk);
out:
	gck_known_free(k);
	if (fd != -1)
		close(fd);	/* and unlocks */
	return r;
}

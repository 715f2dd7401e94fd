/*
 * cache.c: a receiver's cache of the images it restored.
 *
 * gpurecv keeps each image it restores, as it arrived, in the cache
 * directory: DIR/ID.gck, a complete image file of format 2 named by its
 * id.  The chunks those images store make a content-addressed pool: at
 * the next hand-over gpurecv tells the sender their digests, and the
 * sender writes a reference for every chunk of its image that the pool
 * has (the manifest's parent says "cache"), sending only the rest.
 * Each chunk taken from the pool is checked against its digest as it is
 * used; an image found damaged is dropped.
 *
 * The image arrives into a file with no name (O_TMPFILE), so that a
 * receiver that dies leaves nothing; it is linked into the directory
 * only once the tree it holds runs.  Adding and evicting (least
 * recently used first, down to the size limit) happen under an
 * exclusive lock on DIR/lock; several receivers may share a cache, as
 * an image one of them evicts stays readable to any that opened it.
 */
#include "config.h"

#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "private.h"
#include "core/util.h"
#include "image/parent.h"
#include "transport/cache.h"

#define CACHE_IMAGES_MAX	64	/* offered to a sender, newest first */

struct gck_cache {
	struct gck_ctx		*ctx;
	char			*dir;
	int			 dfd;		/* the directory */
	uint64_t		 limit;		/* bytes */
	struct gck_parents	*pool;
	int			 spool;		/* the image arriving, or -1 */
	uint64_t		 spooled;
	int			 spool_err;	/* a write failed: keep nothing */
};

/* A file of the directory, for eviction. */
struct cfile {
	char		 name[64];
	uint64_t	 size;
	struct timespec	 mtime;
	int		 gone;		/* evicted */
};

static int
cfile_older(const void *a, const void *b)
{
	const struct cfile	*x = a, *y = b;

	if (x->mtime.tv_sec != y->mtime.tv_sec)
		return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
	if (x->mtime.tv_nsec != y->mtime.tv_nsec)
		return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* Whether name is ID.gck, ID 32 lowercase hex digits. */
static int
image_name(const char *name)
{
	size_t	i;

	if (strlen(name) != 36 || strcmp(name + 32, ".gck") != 0)
		return 0;
	for (i = 0; i < 32; i++)
		if (!((name[i] >= '0' && name[i] <= '9') ||
		    (name[i] >= 'a' && name[i] <= 'f')))
			return 0;
	return 1;
}

/*
 * The images of the directory, newest first, into *fp (*np of them).
 * Returns GCK_OK or a code.
 */
static int
list_images(struct gck_cache *c, struct cfile **fp, size_t *np)
{
	struct cfile	*f = NULL, *nf;
	struct dirent	*de;
	struct stat	 sb;
	DIR		*d;
	size_t		 n = 0, cap = 0, i;
	int		 fd;

	*fp = NULL;
	*np = 0;
	if ((fd = openat(c->dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) ==
	    -1 || (d = fdopendir(fd)) == NULL) {
		if (fd != -1)
			close(fd);
		return gck_set_syserr(c->ctx, errno, "cannot read the cache "
		    "'%s': %s", c->dir, strerror(errno));
	}
	while ((de = readdir(d)) != NULL) {
		if (!image_name(de->d_name) || fstatat(c->dfd, de->d_name,
		    &sb, AT_SYMLINK_NOFOLLOW) == -1 || !S_ISREG(sb.st_mode))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			if ((nf = reallocarray(f, cap, sizeof *f)) == NULL) {
				free(f);
				closedir(d);
				return gck_set_error(c->ctx, GCK_ENOMEM,
				    "out of memory");
			}
			f = nf;
		}
		memset(&f[n], 0, sizeof f[n]);
		snprintf(f[n].name, sizeof f[n].name, "%s", de->d_name);
		f[n].size = (uint64_t)sb.st_blocks * 512;
		f[n].mtime = sb.st_mtim;
		n++;
	}
	closedir(d);
	if (n > 1)
		qsort(f, n, sizeof *f, cfile_older);
	/* newest first */
	for (i = 0; i < n / 2; i++) {
		struct cfile t = f[i];

		f[i] = f[n - 1 - i];
		f[n - 1 - i] = t;
	}
	*fp = f;
	*np = n;
	return GCK_OK;
}

/* Makes dir, private, and the directories above it that are missing. */
static int
make_dir(struct gck_ctx *ctx, const char *dir)
{
	char	path[PATH_MAX], *p;

	if ((size_t)snprintf(path, sizeof path, "%s", dir) >= sizeof path)
		return gck_set_error(ctx, GCK_EINVAL, "cache directory path "
		    "too long: '%s'", dir);
	for (p = path + 1; (p = strchr(p, '/')) != NULL; p++) {
		*p = '\0';
		if (mkdir(path, 0755) == -1 && errno != EEXIST)
			break;
		*p = '/';
	}
	if (mkdir(dir, 0700) == -1 && errno != EEXIST)
		return gck_set_syserr(ctx, errno, "cannot make the cache "
		    "'%s': %s", dir, strerror(errno));
	return GCK_OK;
}

static int
lock_dir(struct gck_cache *c, int how)
{
	int	fd;

	if ((fd = openat(c->dfd, "lock", O_RDWR | O_CREAT | O_CLOEXEC,
	    0600)) == -1)
		return -1;
	while (flock(fd, how) == -1)
		if (errno != EINTR) {
			close(fd);
			return -1;
		}
	return fd;
}

/* The size limit when none is given: a quarter of the file system. */
static uint64_t
default_limit(int dfd)
{
	struct statvfs	sv;

	if (fstatvfs(dfd, &sv) == -1)
		return (uint64_t)16 << 30;
	return (uint64_t)sv.f_blocks * sv.f_frsize / 4;
}

/*
 * Opens the cache in dir (made, private, if it is not there), of at
 * most limit bytes (0: a quarter of its file system), with the images
 * it holds.  An image found damaged is dropped.  Returns GCK_OK with
 * *cp, or a code.
 */
int
gck_cache_open(struct gck_ctx *ctx, const char *dir, uint64_t limit,
    struct gck_cache **cp)
{
	struct gck_cache	*c;
	struct cfile		*f = NULL;
	struct stat		 sb;
	char			 path[PATH_MAX];
	size_t			 n, i, used = 0, pass;
	ssize_t			 orphan;
	const char		*base;
	int			 r, lfd = -1;

	*cp = NULL;
	if ((c = calloc(1, sizeof *c)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	c->ctx = ctx;
	c->dfd = c->spool = -1;
	if ((c->dir = strdup(dir)) == NULL) {
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	if ((r = make_dir(ctx, dir)) != GCK_OK)
		goto out;
	if ((c->dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1 ||
	    fstat(c->dfd, &sb) == -1) {
		r = gck_set_syserr(ctx, errno, "cannot open the cache '%s': %s",
		    dir, strerror(errno));
		goto out;
	}
	if (sb.st_uid != geteuid() || (sb.st_mode & 022) != 0) {
		r = gck_set_error(ctx, GCK_EINVAL, "the cache '%s' is not "
		    "private to this user", dir);
		goto out;
	}
	c->limit = limit > 0 ? limit : default_limit(c->dfd);
	if ((r = gck_parents_new(ctx, &c->pool)) != GCK_OK)
		goto out;
	if ((lfd = lock_dir(c, LOCK_SH)) == -1) {
		r = gck_set_syserr(ctx, errno, "cannot lock the cache '%s': "
		    "%s", dir, strerror(errno));
		goto out;
	}
	if ((r = list_images(c, &f, &n)) != GCK_OK)
		goto out;
	for (pass = 0;; pass++) {
		for (i = 0, used = 0; i < n && used < CACHE_IMAGES_MAX; i++) {
			if (f[i].name[0] == '\0')
				continue;
			snprintf(path, sizeof path, "%s/%s", dir, f[i].name);
			if ((r = gck_parents_pool_add(c->pool, path)) ==
			    GCK_OK) {
				used++;
				continue;
			}
			if (r == GCK_ENOMEM)
				goto out;
			/* Gone meanwhile, or damaged: not offered, and
			 * dropped. */
			if (r != GCK_ESYS) {
				gck_log(ctx, 1, "dropping %s from the cache: "
				    "%s", f[i].name, ctx->msg);
				(void)unlinkat(c->dfd, f[i].name, 0);
			}
			f[i].name[0] = '\0';
		}
		/*
		 * An image that stands on one the cache no longer offers
		 * (dropped, or past the newest it offers) is not offered
		 * either: its chunks could not be read whole.
		 */
		if (pass > n || (orphan = gck_parents_pool_orphan(c->pool)) ==
		    -1)
			break;
		if ((base = strrchr(gck_parents_path(c->pool,
		    (size_t)orphan), '/')) != NULL)
			for (i = 0; i < n; i++)
				if (strcmp(f[i].name, base + 1) == 0)
					f[i].name[0] = '\0';
		gck_log(ctx, 1, "not offering %s: it stands on images the "
		    "cache does not offer", base != NULL ? base + 1 : "?");
		gck_parents_free(c->pool);
		c->pool = NULL;
		if ((r = gck_parents_new(ctx, &c->pool)) != GCK_OK)
			goto out;
	}
	gck_parents_pool_done(c->pool);
	r = GCK_OK;
out:
	if (lfd != -1)
		close(lfd);
	free(f);
	if (r == GCK_OK)
		*cp = c;
	else
		gck_cache_free(c);
	return r;
}

/* The images of the cache, whose chunks an image sent here may use. */
struct gck_parents *
gck_cache_pool(struct gck_cache *c)
{
	return c->pool;
}

/*
 * Starts keeping the image that arrives: what gck_cache_write() is
 * given.  Returns GCK_OK, also when the file system cannot keep it (it
 * is then not kept), or a code.
 */
int
gck_cache_spool(struct gck_cache *c)
{
	if ((c->spool = openat(c->dfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC,
	    0600)) == -1)
		gck_log(c->ctx, 1, "the cache '%s' cannot keep this image: "
		    "%s", c->dir, strerror(errno));
	c->spooled = 0;
	c->spool_err = 0;
	return GCK_OK;
}

/* Keeps len more bytes of the image arriving. */
void
gck_cache_write(struct gck_cache *c, const void *buf, size_t len)
{
	const char	*p = buf;
	ssize_t		 n;

	while (c->spool != -1 && !c->spool_err && len > 0) {
		if ((n = pwrite(c->spool, p, len, (off_t)c->spooled)) == -1) {
			if (errno == EINTR)
				continue;
			c->spool_err = errno;
			return;
		}
		p += n;
		len -= (size_t)n;
		c->spooled += (uint64_t)n;
	}
}

/* Whether the image arriving is being kept. */
int
gck_cache_kept(const struct gck_cache *c)
{
	return c->spool != -1 && c->spool_err == 0;
}

/*
 * The image kept so far, opened again for reading from its start: a
 * descriptor of its own, or -1 (with the error set) when none is kept.
 */
int
gck_cache_reopen(struct gck_cache *c)
{
	char	proc[64];
	int	fd;

	if (c->spool == -1) {
		gck_set_error(c->ctx, GCK_EINVAL, "the cache '%s' keeps no "
		    "image", c->dir);
		return -1;
	}
	if (c->spool_err != 0) {
		gck_set_syserr(c->ctx, c->spool_err, "the cache '%s' could "
		    "not keep the image: %s", c->dir, strerror(c->spool_err));
		return -1;
	}
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", c->spool);
	if ((fd = open(proc, O_RDONLY | O_CLOEXEC)) == -1)
		gck_set_syserr(c->ctx, errno, "cannot open the image kept in "
		    "the cache '%s': %s", c->dir, strerror(errno));
	return fd;
}

/* The index in the pool of the image file name, or -1. */
static ssize_t
pool_index(const struct gck_cache *c, const char *name)
{
	const char	*path, *base;
	size_t		 i;

	for (i = 0; c->pool != NULL && i < gck_parents_count(c->pool); i++) {
		if ((path = gck_parents_path(c->pool, i)) == NULL)
			continue;
		base = strrchr(path, '/');
		if (strcmp(base != NULL ? base + 1 : path, name) == 0)
			return (ssize_t)i;
	}
	return -1;
}

/*
 * Evicts file i of f, the cache's images, of which total bytes are left.
 * Returns 0, or -1 when it could not be removed.
 */
static int
evict_one(struct gck_cache *c, struct cfile *f, size_t i, uint64_t *total,
    const char *why)
{
	if (unlinkat(c->dfd, f[i].name, 0) == -1)
		return -1;
	gck_log(c->ctx, 1, "evicted %s from the cache '%s'%s", f[i].name,
	    c->dir, why);
	*total -= f[i].size;
	f[i].gone = 1;
	return 0;
}

/* Whether image i of f stands on image j: its chain names j's id. */
static int
stands_on(const struct gck_cache *c, const struct cfile *f, size_t i,
    size_t j)
{
	ssize_t	k;
	char	id[64];

	if ((k = pool_index(c, f[i].name)) < 0)
		return 0;
	snprintf(id, sizeof id, "%.*s", (int)strcspn(f[j].name, "."),
	    f[j].name);
	return gck_parents_stands_on(c->pool, (size_t)k, id);
}

/* Whether an image of f, n of them, not evicted stands on image j. */
static int
stood_on(const struct gck_cache *c, const struct cfile *f, size_t n,
    size_t j)
{
	size_t	i;

	for (i = 0; i < n; i++)
		if (i != j && !f[i].gone && stands_on(c, f, i, j))
			return 1;
	return 0;
}

/*
 * Evicts the oldest images until the cache fits its limit.  keep, the
 * newest, stays with every image that holds the only copy of a chunk
 * its restore took from the cache (gck_parents_pool_covered()), as long
 * as they fit: an image is never kept without those it needs.  If they
 * do not fit, keep goes first, then the others, oldest first, those
 * that no image left stands on (names in its chain) before those that
 * one does.  Then an image left that stands on one evicted goes too:
 * the cache would no longer offer it.
 */
static void
evict(struct gck_cache *c, const char *keep)
{
	struct cfile	*f;
	unsigned char	*gone = NULL;
	uint64_t	 total = 0;
	size_t		 n, i, j, np;
	ssize_t		 k;
	int		 pass, more;

	if (list_images(c, &f, &n) != GCK_OK)
		return;
	np = c->pool != NULL ? gck_parents_count(c->pool) : 0;
	if (np > 0 && (gone = calloc(np, 1)) == NULL) {
		free(f);
		return;
	}
	for (i = 0; i < n; i++)
		total += f[i].size;
	for (pass = 0; pass < 2; pass++) {
		if (pass == 1 && total > c->limit) {
			for (i = 0; i < n && strcmp(f[i].name, keep) != 0; i++)
				;
			if (i < n)
				(void)evict_one(c, f, i, &total, ": with what "
				    "it needs, over its limit");
		}
		for (i = n; i > 0 && total > c->limit; i--) {
			if (f[i - 1].gone || strcmp(f[i - 1].name, keep) == 0)
				continue;
			k = pool_index(c, f[i - 1].name);
			if (pass == 0 && k >= 0) {
				gone[k] = 1;
				if (!gck_parents_pool_covered(c->pool, gone)) {
					gone[k] = 0;
					continue;
				}
			}
			/* then those that no image left stands on first */
			if (pass == 1 && stood_on(c, f, n, i - 1))
				continue;
			(void)evict_one(c, f, i - 1, &total, "");
		}
		for (i = n; pass == 1 && i > 0 && total > c->limit; i--)
			if (!f[i - 1].gone)
				(void)evict_one(c, f, i - 1, &total, "");
	}
	do {
		more = 0;
		for (i = 0; i < n; i++)
			for (j = 0; j < n && !f[i].gone; j++)
				if (f[j].gone && stands_on(c, f, i, j) &&
				    evict_one(c, f, i, &total, ": it stood on "
				    "one evicted") == 0)
					more = 1;
	} while (more);
	free(gone);
	free(f);
}

/* t, ns nanoseconds later. */
static struct timespec
later(struct timespec t, long ns)
{
	t.tv_nsec += ns;
	while (t.tv_nsec >= 1000000000) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000;
	}
	return t;
}

/* Marks the images of the pool that were used as used at now, in order. */
static void
touch_used(struct gck_cache *c, struct timespec now)
{
	struct timespec	 ts[2];
	const char	*path;
	uint64_t	 least, prev = 0;
	size_t		 i, j, n = gck_parents_count(c->pool), rank = 0;

	/* by how many bytes each gave, least first (n is at most 64) */
	for (j = 0; j < n; j++) {
		least = UINT64_MAX;
		for (i = 0; i < n; i++)
			if (gck_parents_used(c->pool, i) > prev &&
			    gck_parents_used(c->pool, i) < least)
				least = gck_parents_used(c->pool, i);
		if (least == UINT64_MAX)
			break;
		for (i = 0; i < n; i++) {
			if (gck_parents_used(c->pool, i) != least ||
			    (path = gck_parents_path(c->pool, i)) == NULL)
				continue;
			ts[0] = ts[1] = later(now, (long)rank++);
			(void)utimensat(AT_FDCWD, path, ts, 0);
		}
		prev = least;
	}
}

/*
 * The image arrived whole and its tree runs: it joins the cache, named
 * by its id, and the images whose chunks it used are marked used now;
 * the oldest are evicted down to the limit.  A failure only costs the
 * cache this image, and is logged.
 */
void
gck_cache_commit(struct gck_cache *c)
{
	struct gck_parents	*self = NULL;
	struct gck_ctx		*ctx = c->ctx;
	struct timespec		 ts[2], now;
	char			 name[64], proc[64];
	int			 lfd;

	if (c->spool == -1)
		return;
	if (c->spool_err != 0) {
		gck_log(ctx, 1, "the cache '%s' could not keep this image: %s",
		    c->dir, strerror(c->spool_err));
		goto out;
	}
	/* Only an image file with a footer can lend its chunks. */
	if (gck_parents_self(ctx, c->spool, "the image received", &self) !=
	    GCK_OK) {
		gck_log(ctx, 1, "not kept in the cache: %s", ctx->msg);
		goto out;
	}
	snprintf(name, sizeof name, "%s.gck", gck_parents_id(self, 0));
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", c->spool);
	if ((lfd = lock_dir(c, LOCK_EX)) == -1)
		goto out;
	/*
	 * The times are set, not taken from the kernel's clock, whose ticks
	 * are too coarse to order what happens within one: the images used
	 * are the newest but this one, the more used the newer, a
	 * nanosecond apart.
	 */
	clock_gettime(CLOCK_REALTIME, &now);
	touch_used(c, now);
	if (linkat(AT_FDCWD, proc, c->dfd, name, AT_SYMLINK_FOLLOW) == -1 &&
	    errno != EEXIST)
		gck_log(ctx, 1, "the cache '%s' could not keep this image: %s",
		    c->dir, strerror(errno));
	else {
		ts[0] = ts[1] = later(now, 1000000);
		(void)utimensat(c->dfd, name, ts, 0);
		gck_log(ctx, 1, "kept %s in the cache '%s'", name, c->dir);
	}
	evict(c, name);
	close(lfd);
out:
	gck_parents_free(self);
	close(c->spool);
	c->spool = -1;
}

/*
 * Drops the image a fetch from the pool found damaged, if any: the
 * next hand-over sends its chunks again.  Returns its path, or NULL.
 */
const char *
gck_cache_drop_bad(struct gck_cache *c)
{
	const char	*bad = gck_parents_bad(c->pool);

	if (bad != NULL && unlink(bad) == 0)
		gck_log(c->ctx, 1, "dropped the damaged %s from the cache",
		    bad);
	return bad;
}

void
gck_cache_free(struct gck_cache *c)
{
	if (c == NULL)
		return;
	if (c->spool != -1)
		close(c->spool);
	if (c->dfd != -1)
		close(c->dfd);
	gck_parents_free(c->pool);
	free(c->dir);
	free(c);
}

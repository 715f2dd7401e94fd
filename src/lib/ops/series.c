/*
 * series.c: a snapshot series, the images of one running tree taken
 * over time into one directory (gpuckpt --series, gpuckpt(1)).
 *
 * The directory holds the images, named NNNNNN-YYYYMMDDTHHMMSSZ.gck
 * (a sequence number and the UTC time the snapshot began), an index,
 * index.json, and a lock file, .lock.  The index lists the complete
 * snapshots, oldest first; it is rewritten through a temporary name
 * only once an image is complete under its own name, so that what it
 * lists is whole, and it drops a snapshot before its file is removed.
 */
#include "config.h"

#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include "private.h"
#include "core/util.h"
#include "image/manifest.h"
#include "image/parent.h"
#include "image/zio.h"
#include "ops/ops.h"

#define SERIES_VERSION	1
#define SERIES_LOCK	".lock"
#define SERIES_MAX	100000		/* snapshots an index may list */

struct gck_series {
	struct gck_ctx		*ctx;
	char			*dir;
	int			 lockfd;	/* -1: opened to read */
	struct gck_snapshot	*snap;		/* oldest first */
	size_t			 nsnap;
	int			 indexed;	/* it has an index */
	unsigned int		 maxseq;	/* of the images there */
};

static void	snap_clear(struct gck_snapshot *);
static int	s_read_index(struct gck_series *);
static int	s_parse(struct gck_series *, json_t *, const char *);
static int	s_write_index(struct gck_series *);
static int	s_lock(struct gck_series *);
static int	s_tidy(struct gck_series *);
static ssize_t	s_find(const struct gck_series *, const char *);
static size_t	s_depth(const struct gck_series *, size_t);
static int	s_add(struct gck_series *, const char *, const char *,
		    const char *, unsigned int);
static int	s_prune(struct gck_series *, unsigned int);
static int	s_check(struct gck_ctx *, const struct gck_series *, size_t,
		    size_t);
static int	s_check_file(struct gck_ctx *, const struct gck_snapshot *);
static int	s_damage(const struct gck_ctx *, int);
static int	s_snapshot(struct gck_ctx *, struct gck_series *,
		    const struct gck_ckpt_opts *, const struct gck_series_opts *,
		    struct gck_ckpt_result *, const struct gck_snapshot **);

static void
snap_clear(struct gck_snapshot *sn)
{
	free(sn->name);
	free(sn->path);
	free(sn->parent);
	memset(sn, 0, sizeof *sn);
}

/* Whether name is that of a snapshot's image: NNNNNN-...Z.gck. */
static int
snap_name(const char *name, unsigned int *seqp)
{
	unsigned int	seq;
	int		n = -1;

	if (strspn(name, "0123456789") != 6 ||
	    sscanf(name, "%6u-%*8[0-9]T%*6[0-9]Z.gck%n", &seq, &n) != 1 ||
	    n != (int)strlen(name) || n != 27)
		return 0;
	if (seqp != NULL)
		*seqp = seq;
	return 1;
}

static ssize_t
s_find(const struct gck_series *s, const char *name)
{
	size_t	i;

	for (i = 0; i < s->nsnap; i++)
		if (strcmp(s->snap[i].name, name) == 0)
			return (ssize_t)i;
	return -1;
}

/* The images in the chain of snapshot i, itself included. */
static size_t
s_depth(const struct gck_series *s, size_t i)
{
	ssize_t	k = (ssize_t)i;
	size_t	n = 0;

	while (k != -1 && n <= s->nsnap) {
		n++;
		if (s->snap[k].parent == NULL)
			break;
		k = s_find(s, s->snap[k].parent);
	}
	return n;
}

/* Snapshot o of the index (file index, for messages) into the series. */
static int
s_parse(struct gck_series *s, json_t *o, const char *index)
{
	struct gck_snapshot	*sn = &s->snap[s->nsnap];
	json_t			*p;
	json_int_t		 size;
	const char		*name, *id, *tm;
	int			 full;

	p = json_object_get(o, "parent");
	if (json_unpack(o, "{s:s, s:s, s:s, s:I, s:b}", "name", &name, "id",
	    &id, "time", &tm, "size", &size, "full", &full) != 0 ||
	    !snap_name(name, &sn->seq) || strlen(id) != 32 || size < 0 ||
	    strlen(tm) >= sizeof sn->time || (p != NULL && !json_is_null(p) &&
	    (!json_is_string(p) || !snap_name(json_string_value(p), NULL))) ||
	    (full != 0) != (p == NULL || json_is_null(p)) ||
	    s_find(s, name) != -1)
		return gck_set_error(s->ctx, GCK_EFORMAT, "corrupt series "
		    "index '%s': bad snapshot %zu", index, s->nsnap + 1);
	if ((sn->name = strdup(name)) == NULL || (json_is_string(p) &&
	    (sn->parent = strdup(json_string_value(p))) == NULL) ||
	    asprintf(&sn->path, "%s/%s", s->dir, name) == -1) {
		sn->path = NULL;
		snap_clear(sn);
		return gck_set_error(s->ctx, GCK_ENOMEM, "out of memory");
	}
	snprintf(sn->id, sizeof sn->id, "%s", id);
	snprintf(sn->time, sizeof sn->time, "%s", tm);
	sn->size = (uint64_t)size;
	sn->full = full;
	s->nsnap++;
	return GCK_OK;
}

/* Reads the index; a series with none has no snapshots yet. */
static int
s_read_index(struct gck_series *s)
{
	json_error_t	 jerr;
	json_t		*doc = NULL, *a, *o;
	json_int_t	 version;
	char		*index = NULL;
	size_t		 i;
	int		 r;

	if (asprintf(&index, "%s/%s", s->dir, GCK_SERIES_INDEX) == -1)
		return gck_set_error(s->ctx, GCK_ENOMEM, "out of memory");
	if ((doc = json_load_file(index, 0, &jerr)) == NULL) {
		if (access(index, F_OK) == -1 && errno == ENOENT &&
		    s->lockfd != -1)
			r = GCK_OK;
		else if (access(index, F_OK) == -1 && errno == ENOENT)
			r = gck_set_error(s->ctx, GCK_EINVAL, "'%s' is not a "
			    "snapshot series: it has no %s", s->dir,
			    GCK_SERIES_INDEX);
		else
			r = gck_set_error(s->ctx, GCK_EFORMAT, "cannot read "
			    "series index '%s': %s", index, jerr.text);
		goto out;
	}
	if (json_unpack(doc, "{s:I, s:o}", "version", &version, "snapshots",
	    &a) != 0 || !json_is_array(a) || json_array_size(a) > SERIES_MAX) {
		r = gck_set_error(s->ctx, GCK_EFORMAT, "corrupt series index "
		    "'%s'", index);
		goto out;
	}
	s->indexed = 1;
	if (version != SERIES_VERSION) {
		r = gck_set_error(s->ctx, GCK_EVERSION, "series index '%s' is "
		    "of version %lld: this gpuckpt reads version %d", index,
		    (long long)version, SERIES_VERSION);
		goto out;
	}
	if (json_array_size(a) > 0 && (s->snap = calloc(json_array_size(a),
	    sizeof *s->snap)) == NULL) {
		r = gck_set_error(s->ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	r = GCK_OK;
	json_array_foreach(a, i, o)
		if ((r = s_parse(s, o, index)) != GCK_OK)
			break;
	for (i = 0; r == GCK_OK && i < s->nsnap; i++)
		if (i > 0 && s->snap[i].seq <= s->snap[i - 1].seq)
			r = gck_set_error(s->ctx, GCK_EFORMAT, "corrupt series "
			    "index '%s': its snapshots are out of order",
			    index);
out:
	json_decref(doc);
	free(index);
	return r;
}

/*
 * Writes the index through a temporary name: written, synced, renamed,
 * and the directory synced.
 */
static int
s_write_index(struct gck_series *s)
{
	const struct gck_snapshot *sn;
	json_t		*doc = NULL, *a;
	char		*index = NULL, *prefix = NULL, *tmp = NULL, *text = NULL;
	size_t		 i, len, off;
	ssize_t		 n;
	int		 fd = -1, dfd = -1, r;

	if ((doc = json_pack("{s:i, s:[]}", "version", SERIES_VERSION,
	    "snapshots")) == NULL)
		goto nomem;
	a = json_object_get(doc, "snapshots");
	for (i = 0; i < s->nsnap; i++) {
		sn = &s->snap[i];
		if (json_array_append_new(a, json_pack("{s:s, s:s, s:o, s:s, "
		    "s:I, s:b}", "name", sn->name, "id", sn->id, "parent",
		    sn->parent != NULL ? json_string(sn->parent) : json_null(),
		    "time", sn->time, "size", (json_int_t)sn->size, "full",
		    sn->full)) == -1)
			goto nomem;
	}
	if ((text = json_dumps(doc, JSON_INDENT(1))) == NULL ||
	    asprintf(&index, "%s/%s", s->dir, GCK_SERIES_INDEX) == -1 ||
	    asprintf(&prefix, "%s.tmp.", index) == -1)
		goto nomem;
	if ((r = gck_tempname(s->ctx, prefix, &tmp)) != GCK_OK)
		goto out;
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
	    0644)) == -1) {
		r = gck_set_syserr(s->ctx, errno, "cannot create '%s': %s",
		    tmp, strerror(errno));
		free(tmp);
		tmp = NULL;
		goto out;
	}
	len = strlen(text);
	text[len++] = '\n';	/* over the NUL: written by length */
	for (off = 0; off < len; off += (size_t)n)
		if ((n = write(fd, text + off, len - off)) <= 0) {
			r = gck_set_syserr(s->ctx, n == 0 ? ENOSPC : errno,
			    "cannot write '%s': %s", tmp, strerror(n == 0 ?
			    ENOSPC : errno));
			goto out;
		}
	if (fsync(fd) == -1 || close(fd) == -1) {
		fd = -1;
		r = gck_set_syserr(s->ctx, errno, "cannot write '%s': %s",
		    tmp, strerror(errno));
		goto out;
	}
	fd = -1;
	if (rename(tmp, index) == -1) {
		r = gck_set_syserr(s->ctx, errno, "cannot rename to '%s': %s",
		    index, strerror(errno));
		goto out;
	}
	free(tmp);
	tmp = NULL;
	if ((dfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1 ||
	    fsync(dfd) == -1) {
		r = gck_set_syserr(s->ctx, errno, "cannot sync '%s': %s",
		    s->dir, strerror(errno));
		goto out;
	}
	r = GCK_OK;
	goto out;
nomem:
	r = gck_set_error(s->ctx, GCK_ENOMEM, "out of memory");
out:
	if (fd != -1)
		close(fd);
	if (dfd != -1)
		close(dfd);
	if (tmp != NULL)
		unlink(tmp);
	free(tmp);
	free(prefix);
	free(index);
	free(text);
	json_decref(doc);
	return r;
}

/*
 * Takes the series' lock, .lock, and writes our PID in it; when another
 * process holds it, says which.
 */
static int
s_lock(struct gck_series *s)
{
	char	*path = NULL, buf[32];
	ssize_t	 n;
	long	 pid;
	int	 fd = -1, r;

	if (asprintf(&path, "%s/%s", s->dir, SERIES_LOCK) == -1)
		return gck_set_error(s->ctx, GCK_ENOMEM, "out of memory");
	if ((fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644)) == -1) {
		r = gck_set_syserr(s->ctx, errno, "cannot open '%s': %s", path,
		    strerror(errno));
		goto out;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) == -1) {
		if (errno != EWOULDBLOCK) {
			r = gck_set_syserr(s->ctx, errno, "cannot lock '%s': "
			    "%s", path, strerror(errno));
			goto out;
		}
		n = pread(fd, buf, sizeof buf - 1, 0);
		buf[n > 0 ? n : 0] = '\0';
		pid = strtol(buf, NULL, 10);
		if (pid > 0)
			r = gck_set_error(s->ctx, GCK_EBUSY, "series '%s' is "
			    "being written by process %ld (it holds '%s')",
			    s->dir, pid, path);
		else
			r = gck_set_error(s->ctx, GCK_EBUSY, "series '%s' is "
			    "being written by another process (it holds '%s')",
			    s->dir, path);
		goto out;
	}
	n = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) == -1 || pwrite(fd, buf, (size_t)n, 0) != n) {
		r = gck_set_syserr(s->ctx, errno, "cannot write '%s': %s",
		    path, strerror(errno));
		goto out;
	}
	s->lockfd = fd;
	fd = -1;
	r = GCK_OK;
out:
	if (fd != -1)
		close(fd);
	free(path);
	return r;
}

/*
 * Removes what a run cut short left in the directory: temporary files of
 * images and of the index, and images the index does not list (written
 * but not yet listed, or dropped but not yet removed).  Without an index
 * the images are left, and numbered after.
 */
static int
s_tidy(struct gck_series *s)
{
	DIR		*d;
	struct dirent	*de;
	char		*p, *stem;
	unsigned int	 seq;
	int		 junk;

	if ((d = opendir(s->dir)) == NULL)
		return gck_set_syserr(s->ctx, errno, "cannot open '%s': %s",
		    s->dir, strerror(errno));
	while ((de = readdir(d)) != NULL) {
		junk = 0;
		if ((stem = strdup(de->d_name)) == NULL)
			break;
		if ((p = strstr(stem, ".tmp.")) != NULL) {
			*p = '\0';
			junk = snap_name(stem, NULL) ||
			    strcmp(stem, GCK_SERIES_INDEX) == 0;
		} else if (snap_name(stem, &seq)) {
			junk = s->indexed && s_find(s, stem) == -1;
			if (!junk && seq > s->maxseq)
				s->maxseq = seq;
		}
		free(stem);
		if (!junk || asprintf(&p, "%s/%s", s->dir, de->d_name) == -1)
			continue;
		gck_log(s->ctx, 1, "removing '%s', left by a run cut short", p);
		unlink(p);
		free(p);
	}
	closedir(d);
	return GCK_OK;
}

int
gck_series_open(struct gck_ctx *ctx, const char *dir, int write,
    struct gck_series **sp)
{
	struct gck_series	*s;
	struct stat		 sb;
	size_t			 n;
	int			 r;

	*sp = NULL;
	if (write && mkdir(dir, 0755) == -1 && errno != EEXIST)
		return gck_set_syserr(ctx, errno, "cannot create '%s': %s",
		    dir, strerror(errno));
	if (stat(dir, &sb) == -1)
		return gck_set_syserr(ctx, errno, "cannot open series '%s': "
		    "%s", dir, strerror(errno));
	if (!S_ISDIR(sb.st_mode))
		return gck_set_error(ctx, GCK_EINVAL, "series '%s' is not a "
		    "directory", dir);
	if ((s = calloc(1, sizeof *s)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	s->ctx = ctx;
	s->lockfd = -1;
	if ((s->dir = strdup(dir)) == NULL) {
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	/* Its images' paths are the directory's, then their names. */
	for (n = strlen(s->dir); n > 1 && s->dir[n - 1] == '/'; n--)
		s->dir[n - 1] = '\0';
	if (write && (r = s_lock(s)) != GCK_OK)
		goto out;
	if ((r = s_read_index(s)) != GCK_OK)
		goto out;
	if (write && (r = s_tidy(s)) != GCK_OK)
		goto out;
	*sp = s;
	s = NULL;
out:
	gck_series_free(s);
	return r;
}

void
gck_series_free(struct gck_series *s)
{
	size_t	i;

	if (s == NULL)
		return;
	for (i = 0; i < s->nsnap; i++)
		snap_clear(&s->snap[i]);
	free(s->snap);
	if (s->lockfd != -1)
		close(s->lockfd);	/* lets go of the lock */
	free(s->dir);
	free(s);
}

size_t
gck_series_count(const struct gck_series *s)
{
	return s->nsnap;
}

const struct gck_snapshot *
gck_series_get(const struct gck_series *s, size_t i)
{
	return i < s->nsnap ? &s->snap[i] : NULL;
}

const char *
gck_series_dir(const struct gck_series *s)
{
	return s->dir;
}

/* Adds the complete image name to the index, in memory. */
static int
s_add(struct gck_series *s, const char *name, const char *parent,
    const char *tm, unsigned int seq)
{
	struct gck_snapshot	*sn, *ns;
	struct gck_parents	*ps = NULL;
	struct stat		 sb;
	int			 fd = -1, r;

	if ((ns = reallocarray(s->snap, s->nsnap + 1, sizeof *ns)) == NULL)
		return gck_set_error(s->ctx, GCK_ENOMEM, "out of memory");
	s->snap = ns;
	sn = &s->snap[s->nsnap];
	memset(sn, 0, sizeof *sn);
	if ((sn->name = strdup(name)) == NULL ||
	    (parent != NULL && (sn->parent = strdup(parent)) == NULL) ||
	    asprintf(&sn->path, "%s/%s", s->dir, name) == -1) {
		sn->path = NULL;
		r = gck_set_error(s->ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	if ((fd = open(sn->path, O_RDONLY | O_CLOEXEC)) == -1 ||
	    fstat(fd, &sb) == -1) {
		r = gck_set_syserr(s->ctx, errno, "cannot read '%s': %s",
		    sn->path, strerror(errno));
		goto out;
	}
	if ((r = gck_parents_self(s->ctx, fd, sn->path, &ps)) != GCK_OK)
		goto out;
	snprintf(sn->id, sizeof sn->id, "%s", gck_parents_id(ps, 0));
	snprintf(sn->time, sizeof sn->time, "%s", tm);
	sn->size = (uint64_t)sb.st_size;
	sn->full = parent == NULL;
	sn->seq = seq;
	s->nsnap++;
	r = GCK_OK;
out:
	if (r != GCK_OK)
		snap_clear(sn);
	if (fd != -1)
		close(fd);
	gck_parents_free(ps);
	return r;
}

/*
 * Keeps the newest keep snapshots and the images their chains need: the
 * index that lists no more is written first, then the files it dropped
 * are removed.
 */
static int
s_prune(struct gck_series *s, unsigned int keep)
{
	struct gck_snapshot	*all = NULL;
	char			*need = NULL;
	size_t			 i, j, n, nall;
	ssize_t			 k;
	int			 r;

	if (keep == 0 || s->nsnap <= keep)
		return GCK_OK;
	nall = s->nsnap;
	if ((need = calloc(nall, 1)) == NULL ||
	    (all = calloc(nall, sizeof *all)) == NULL) {
		r = gck_set_error(s->ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	for (i = nall - keep; i < nall; i++)
		for (k = (ssize_t)i, n = 0; k != -1 && !need[k] && n <= nall;
		    n++) {
			need[k] = 1;
			k = s->snap[k].parent != NULL ? s_find(s,
			    s->snap[k].parent) : -1;
		}
	/* Those kept first, in their order, then those dropped. */
	memcpy(all, s->snap, nall * sizeof *all);
	for (i = j = 0; i < nall; i++)
		if (need[i])
			s->snap[j++] = all[i];
	n = j;
	for (i = 0; i < nall; i++)
		if (!need[i])
			s->snap[j++] = all[i];
	s->nsnap = n;
	if ((r = s_write_index(s)) != GCK_OK) {
		memcpy(s->snap, all, nall * sizeof *all);
		s->nsnap = nall;	/* listed still */
		goto out;
	}
	for (i = n; i < nall; i++) {
		gck_log(s->ctx, 1, "removing snapshot '%s'", s->snap[i].path);
		if (unlink(s->snap[i].path) == -1 && errno != ENOENT)
			gck_log(s->ctx, 1, "cannot remove '%s': %s",
			    s->snap[i].path, strerror(errno));
		snap_clear(&s->snap[i]);
	}
out:
	free(all);
	free(need);
	return r;
}

int
gck_series_snapshot(struct gck_ctx *ctx, struct gck_series *s,
    const struct gck_ckpt_opts *co, const struct gck_series_opts *so,
    struct gck_ckpt_result *res, const struct gck_snapshot **snp)
{
	char	**req;
	size_t	  nreq;
	int	  r;

	/* The requests made before it began: request.c. */
	gck_requests_take(s->dir, &req, &nreq);
	r = s_snapshot(ctx, s, co, so, res, snp);
	gck_requests_answer(ctx, s->dir, req, nreq, r,
	    r == GCK_OK ? (*snp)->name : NULL);
	return r;
}

static int
s_snapshot(struct gck_ctx *ctx, struct gck_series *s,
    const struct gck_ckpt_opts *co, const struct gck_series_opts *so,
    struct gck_ckpt_result *res, const struct gck_snapshot **snp)
{
	struct gck_ckpt_opts	 o = *co;
	const struct gck_snapshot *last = NULL;
	struct tm		 tm;
	time_t			 now;
	char			 name[64], tmstr[32], *path = NULL;
	char			*ppath = NULL;
	const char		*parent = NULL;
	unsigned int		 seq;
	int			 r;

	*snp = NULL;
	if (s->lockfd == -1)
		return gck_set_error(ctx, GCK_EINVAL, "series '%s' is open "
		    "to read", s->dir);
	if (s->nsnap > 0)
		last = &s->snap[s->nsnap - 1];
	seq = (last != NULL && last->seq > s->maxseq ? last->seq :
	    s->maxseq) + 1;
	if (seq > 999999)
		return gck_set_error(ctx, GCK_EINVAL, "series '%s' is full: "
		    "its sequence numbers end at 999999", s->dir);
	if (last != NULL && so->full_every > 1 &&
	    s_depth(s, s->nsnap - 1) < so->full_every) {
		if (s_check(ctx, s, s->nsnap - 1, 0) == GCK_OK)
			parent = last->name;
		else
			gck_log(ctx, 1, "snapshot '%s' cannot be a parent, a "
			    "full snapshot is taken: %s", last->path,
			    gck_error_string(ctx));
	}
	now = time(NULL);
	gmtime_r(&now, &tm);
	strftime(tmstr, sizeof tmstr, "%Y-%m-%dT%H:%M:%SZ", &tm);
	snprintf(name, sizeof name, "%06u-", seq);
	strftime(name + 7, sizeof name - 7, "%Y%m%dT%H%M%SZ.gck", &tm);
	if (asprintf(&path, "%s/%s", s->dir, name) == -1)
		path = NULL;
	if (parent != NULL && asprintf(&ppath, "%s/%s", s->dir, parent) == -1)
		ppath = NULL;
	if (path == NULL || (parent != NULL && ppath == NULL)) {
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	o.output = path;
	o.parent = ppath;
	o.after = GCK_AFTER_RUN;
	gck_log(ctx, 1, "snapshot '%s', %s%s", path, parent != NULL ?
	    "incremental over " : "full", parent != NULL ? parent : "");
	if ((r = gck_checkpoint(ctx, &o, res)) != GCK_OK)
		goto out;
	if ((r = s_add(s, name, parent, tmstr, seq)) != GCK_OK ||
	    (r = s_write_index(s)) != GCK_OK) {
		/* Never listed: gone, or removed by the next run. */
		if (s->nsnap > 0 && strcmp(s->snap[s->nsnap - 1].name,
		    name) == 0)
			snap_clear(&s->snap[--s->nsnap]);
		unlink(path);
		goto out;
	}
	r = s_prune(s, so->keep);
	*snp = &s->snap[s->nsnap - 1];
out:
	free(path);
	free(ppath);
	return r;
}

/*
 * Whether the restore that failed with code r found its image damaged,
 * which it does before the tree runs: what it restored of the tree,
 * stopped, it has killed.  Then the next older snapshot may be tried.
 */
static int
s_damage(const struct gck_ctx *ctx, int r)
{
	return (r == GCK_EFORMAT || r == GCK_ETRUNC || r == GCK_ECORRUPT) &&
	    (ctx->fate == GCK_FATE_UNSAID || ctx->fate == GCK_FATE_KILLED);
}

/* The image of sn as its index lists it: there, of its size, readable. */
static int
s_check_file(struct gck_ctx *ctx, const struct gck_snapshot *sn)
{
	struct gck_parents	*ps = NULL;
	struct stat		 sb;
	uint64_t		 tat;
	int			 fd, r;

	if ((fd = open(sn->path, O_RDONLY | O_CLOEXEC)) == -1 ||
	    fstat(fd, &sb) == -1) {
		r = gck_set_syserr(ctx, errno, "%s", strerror(errno));
		goto out;
	}
	if ((uint64_t)sb.st_size < sn->size) {
		r = gck_set_error(ctx, GCK_ETRUNC, "image truncated: %llu "
		    "bytes of the %" PRIu64 " the index lists",
		    (unsigned long long)sb.st_size, sn->size);
		goto out;
	}
	if ((uint64_t)sb.st_size != sn->size) {
		r = gck_set_error(ctx, GCK_ECORRUPT, "image of %llu bytes, "
		    "where the index lists %" PRIu64,
		    (unsigned long long)sb.st_size, sn->size);
		goto out;
	}
	if (gck_zio_footer(fd, sn->size, &tat) == -1) {
		r = gck_set_error(ctx, GCK_ECORRUPT, "image damaged: no "
		    "footer at its end");
		goto out;
	}
	if ((r = gck_parents_self(ctx, fd, sn->path, &ps)) != GCK_OK)
		goto out;
	if (strcmp(gck_parents_id(ps, 0), sn->id) != 0)
		r = gck_set_error(ctx, GCK_ECORRUPT, "image %s, where the "
		    "index lists %s", gck_parents_id(ps, 0), sn->id);
out:
	if (fd != -1)
		close(fd);
	gck_parents_free(ps);
	return r;
}

/* Snapshot i and its chain, depth images down. */
static int
s_check(struct gck_ctx *ctx, const struct gck_series *s, size_t i,
    size_t depth)
{
	const struct gck_snapshot *sn = &s->snap[i];
	ssize_t			 k;
	int			 r;

	if ((r = s_check_file(ctx, sn)) != GCK_OK) {
		if (depth > 0)
			gck_error_prefix(ctx, "its parent '%s': ", sn->name);
		return r;
	}
	if (sn->parent == NULL)
		return GCK_OK;
	if ((k = s_find(s, sn->parent)) == -1 || depth >= s->nsnap)
		return gck_set_error(ctx, GCK_ECORRUPT, "its parent '%s' is "
		    "not in the series", sn->parent);
	return s_check(ctx, s, (size_t)k, depth + 1);
}

int
gck_series_check(struct gck_ctx *ctx, const struct gck_series *s, size_t i)
{
	if (i >= s->nsnap)
		return gck_set_error(ctx, GCK_EINVAL, "no snapshot %zu", i);
	return s_check(ctx, s, i, 0);
}

int
gck_series_verify(struct gck_ctx *ctx, const struct gck_series *s, size_t i)
{
	const struct gck_manifest *m;
	struct gck_reader	*rd = NULL;
	char			*dirs[1];
	int			 fd = -1, r;

	if ((r = gck_series_check(ctx, s, i)) != GCK_OK)
		return r;
	dirs[0] = s->dir;
	if ((fd = open(s->snap[i].path, O_RDONLY | O_CLOEXEC)) == -1)
		return gck_set_syserr(ctx, errno, "%s", strerror(errno));
	if ((r = gck_reader_new(ctx, fd, &rd)) == GCK_OK &&
	    (r = gck_reader_head(rd, &m)) == GCK_OK &&
	    (r = gck_reader_use_parents(rd, dirs, 1)) == GCK_OK)
		r = gck_reader_extract(rd, -1);
	gck_reader_free(rd);
	close(fd);
	return r;
}

int
gck_series_restore(struct gck_ctx *ctx, const struct gck_series *s,
    const struct gck_restore_opts *ro,
    void (*skip)(void *, const struct gck_snapshot *, const char *),
    void *arg, pid_t *rootp, const struct gck_snapshot **snp)
{
	struct gck_restore_opts	 o = *ro;
	char			**paths = NULL;
	size_t			 i;
	int			 r;

	*snp = NULL;
	if ((paths = calloc(ro->nparents + 1, sizeof *paths)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	for (i = 0; i < ro->nparents; i++)
		paths[i] = ro->parents[i];
	paths[ro->nparents] = s->dir;
	o.parents = paths;
	o.nparents = ro->nparents + 1;
	for (i = s->nsnap; i-- > 0; ) {
		if ((r = gck_series_check(ctx, s, i)) != GCK_OK) {
			if (skip != NULL)
				skip(arg, &s->snap[i], gck_error_string(ctx));
			continue;
		}
		if ((o.infd = open(s->snap[i].path, O_RDONLY | O_CLOEXEC)) ==
		    -1) {
			r = gck_set_syserr(ctx, errno, "%s", strerror(errno));
			if (skip != NULL)
				skip(arg, &s->snap[i], gck_error_string(ctx));
			continue;
		}
		o.inname = s->snap[i].path;
		r = gck_restore(ctx, &o, rootp);
		close(o.infd);
		if (r == GCK_OK) {
			*snp = &s->snap[i];
			goto out;
		}
		if (!s_damage(ctx, r))
			goto out;
		if (skip != NULL)
			skip(arg, &s->snap[i], gck_error_string(ctx));
	}
	r = gck_set_error(ctx, GCK_EINVAL, "series '%s' holds no snapshot "
	    "that can be restored", s->dir);
out:
	free(paths);
	return r;
}

int
gck_series_describe(struct gck_ctx *ctx, const struct gck_series *s,
    int verify, char **textp)
{
	const struct gck_snapshot *sn;
	json_t		*doc = NULL, *a, *o;
	ssize_t		 newest = -1;
	size_t		 i;
	int		 r, bad = 0;

	*textp = NULL;
	if ((doc = json_pack("{s:i, s:s, s:[]}", "schema", SERIES_VERSION,
	    "directory", s->dir, "snapshots")) == NULL)
		goto nomem;
	a = json_object_get(doc, "snapshots");
	for (i = 0; i < s->nsnap; i++) {
		sn = &s->snap[i];
		if ((r = gck_check_interrupt(ctx)) != GCK_OK)
			goto out;
		r = verify ? gck_series_verify(ctx, s, i) :
		    gck_series_check(ctx, s, i);
		if (r == GCK_OK)
			newest = (ssize_t)i;
		else
			bad++;
		if ((o = json_pack("{s:s, s:s, s:o, s:s, s:I, s:b, s:I, s:b}",
		    "name", sn->name, "id", sn->id, "parent", sn->parent !=
		    NULL ? json_string(sn->parent) : json_null(), "time",
		    sn->time, "size", (json_int_t)sn->size, "full", sn->full,
		    "chain", (json_int_t)s_depth(s, i), "ok", r == GCK_OK)) ==
		    NULL || (r != GCK_OK && json_object_set_new(o, "problem",
		    json_string(gck_error_string(ctx))) == -1) ||
		    json_array_append_new(a, o) == -1)
			goto nomem;
	}
	if (json_object_set_new(doc, "newest", newest != -1 ?
	    json_string(s->snap[newest].name) : json_null()) == -1 ||
	    json_object_set_new(doc, "damaged", json_integer(bad)) == -1 ||
	    (*textp = json_dumps(doc, JSON_INDENT(2))) == NULL)
		goto nomem;
	r = GCK_OK;
	goto out;
nomem:
	r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
out:
	json_decref(doc);
	return r;
}

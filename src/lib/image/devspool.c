/*
 * devspool.c: device memory that custom storage spooled, as the image's
 * own chunks.
 *
 * A checkpoint's device memory must leave the GPUs before criu dumps
 * the tree, and the image holds it only after criu's files, so it
 * waits in a spool file a GPU.  What waits there is what the image will
 * hold: as the memory comes off the GPU it is cut into chunks of
 * GCK_CHUNK_SIZE bytes, the last the rest (device memory does not move
 * about as a heap's does, and a restore from a stream can then tell
 * where each chunk goes before it has read the rest: the manifest says
 * so, gpuckpt-image(5)), and each chunk digested and compressed, on the
 * CPUs, into the entry it will be, a frame of its own.  Beside each
 * file, its index (path.idx) lists the chunks: size, digest, where the
 * frame is, and the digests of the chunk's pages (format 3).
 *
 * A chunk that the image's parents (or the receiver's cache) have, or of
 * which they have pages, will be a reference or a patch of theirs: it is
 * not compressed, but kept as it is in a file beside (path.raw), for a
 * rollback only.
 *
 * The image then takes each frame as it is (gck_devspool_splice()), or
 * a reference or patch in its stead; a rollback reads the memory back
 * out of the frames, each chunk checked against its digest, to give it
 * back to the GPU.  The spool never leaves this host: its index is in
 * this host's byte order.
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

#include <zstd.h>

#include "private.h"
#include "core/util.h"
#include "gpu/cuda.h"
#include "image/devspool.h"
#include "image/digest.h"
#include "image/image.h"
#include "image/names.h"
#include "image/parent.h"
#include "image/patch.h"

#define DS_MAGIC	"gckdsp2\n"
#define DS_PAGES	(GCK_CHUNK_SIZE / GCK_PAGE)	/* a chunk's, at most */
#define DS_HDR_SLACK	(64u << 10)	/* a frame's tar headers, at most */

struct dshead {
	char		magic[8];
	uint64_t	size;		/* the GPU's memory */
	uint64_t	nchunks;
	int32_t		format, level, dk, pad;
};

struct dsrec {
	uint64_t	len;		/* the chunk's bytes */
	uint64_t	at, zlen;	/* its frame in the spool file */
	uint64_t	raw;		/* 1: its bytes, at at of path.raw */
	unsigned char	digest[GCK_DIGEST_MAX];
	/* then, format 3, its pages' digests: GCK_PDIG bytes each */
};

/* A GPU's memory being spooled. */
struct dsw {
	int			 writer;	/* 1, as drop() tells */
	struct gck_ctx		*ctx;	/* its own: it runs on a GPU's thread */
	struct gck_writer	*w;
	int			 fd;
	char			 path[PATH_MAX];
	pid_t			 lpid;	/* its process, as the image has it */
	unsigned int		 k;	/* its GPU */
	uint64_t		 seg;	/* its segments' bytes */
	uint64_t		 size, got;
	char			*buf;
	size_t			 have;
	long			 part;
	int			 format, level, committed;
	const struct gck_parents *parents;	/* or NULL */
	const struct gck_ptab	*ptab;		/* their pages, or NULL */
	int			 rawfd;		/* path.raw, or -1 */
	uint64_t		 rawoff;
	struct dsrec		*recs;		/* the chunks kept raw, */
	unsigned char		*rpdig;		/* their pages' digests, */
	uint64_t		*rchunk;	/* their numbers */
	size_t			 nraw, capraw;
	unsigned char		 pdz[DS_PAGES * GCK_PDIG];
	unsigned char		 pzero[DS_PAGES];
	struct gck_patch	 patch;
};

/* A spool file read back, the chunk at hand decoded. */
struct dsr {
	int			 writer;	/* 0 */
	struct gck_ctx		*ctx;		/* a splice's, or NULL */
	const char		*path;
	int			 fd, rawfd;
	FILE			*idx;
	struct dshead		 h;
	uint64_t		 next;	/* chunks read */
	struct dsrec		 rec;
	char			*frame, *out;
	size_t			 fcap, ocap;
	const char		*data;	/* of the chunk at hand, */
	size_t			 left;	/* still to give */
	int			 framed, decoded;
};

/* The errno value a failure on ctx comes to. */
static int
ds_errno(const struct gck_ctx *ctx)
{
	if (ctx->code == GCK_ESYS && ctx->oerrno != 0)
		return ctx->oerrno;
	return ctx->code == GCK_ENOMEM ? ENOMEM : EIO;
}

/* The file beside spool file path of suffix sfx (".idx", ".raw"). */
static int
side_path(char *buf, size_t len, const char *path, const char *sfx)
{
	int	n = snprintf(buf, len, "%s%s", path, sfx);

	return n < 0 || (size_t)n >= len ? -1 : 0;
}

static void	dsw_drop(struct dsw *);

static int
ds_create(void *arg, const char *path, pid_t pid, unsigned int k,
    uint64_t size, void **hp)
{
	const struct gck_devspool_conf	*c = arg;
	struct dsw			*s;
	int				 e;

	if (c == NULL)
		return EINVAL;		/* ops to read with only */
	if ((s = calloc(1, sizeof *s)) == NULL)
		return ENOMEM;
	s->writer = 1;
	s->fd = -1;
	s->rawfd = -1;
	s->parents = c->parents;
	s->ptab = c->format > 2 && c->parents != NULL ?
	    gck_parents_ptab(c->parents) : NULL;
	if (s->ptab != NULL && s->ptab->slot == NULL)
		s->ptab = NULL;
	s->size = size;
	s->format = c->format;
	s->level = c->level;
	snprintf(s->path, sizeof s->path, "%s", path);
	s->lpid = c->local != NULL ? c->local(c->arg, pid) : pid;
	s->k = k;
	s->seg = gck_cuda_segment(size);
	if ((s->ctx = gck_ctx_new()) == NULL ||
	    (s->buf = malloc(GCK_CHUNK_SIZE)) == NULL) {
		e = ENOMEM;
		goto fail;
	}
	if ((s->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	    0600)) == -1) {
		e = errno;
		goto fail;
	}
	if (gck_writer_new2(s->ctx, s->fd, c->level, 0, c->format,
	    c->threads, &s->w) != GCK_OK) {
		e = ds_errno(s->ctx);
		goto fail;
	}
	*hp = s;
	return 0;
fail:
	dsw_drop(s);
	return e;
}

/*
 * Whether the parents have the chunk of len bytes at p or pages of it:
 * its digest and its pages' into *d and s->pdz.
 */
static int
ds_known(struct dsw *s, const char *p, size_t len, struct gck_digest *d)
{
	size_t	ent, n = len / GCK_PAGE;

	if (s->parents == NULL || len % GCK_PAGE != 0)
		return 0;
	if (gck_digest_buf(GCK_DK_SHA256, p, len, d) == -1)
		return -1;
	gck_pages_digest(p, n, s->pdz, s->pzero);
	if (gck_parents_has(s->parents, d))
		return 1;
	return s->ptab != NULL && gck_patch_plan(s->ptab, s->pdz, s->pzero,
	    n, &s->patch, &ent) != GCK_PLAN_FULL;
}

/* Keeps the chunk of len bytes at p as it is, its digest d. */
static int
ds_keep_raw(struct dsw *s, const char *p, size_t len,
    const struct gck_digest *d)
{
	struct dsrec	*nr;
	unsigned char	*np;
	uint64_t	*nc;
	char		 rpath[PATH_MAX];
	size_t		 cap, n;
	ssize_t		 w;

	if (s->rawfd == -1) {
		if (side_path(rpath, sizeof rpath, s->path, ".raw") == -1)
			return ENAMETOOLONG;
		if ((s->rawfd = open(rpath, O_WRONLY | O_CREAT | O_TRUNC |
		    O_CLOEXEC, 0600)) == -1)
			return errno;
	}
	if (s->nraw == s->capraw) {
		cap = s->capraw ? 2 * s->capraw : 64;
		if ((nr = reallocarray(s->recs, cap, sizeof *nr)) == NULL)
			return ENOMEM;
		s->recs = nr;
		if ((nc = reallocarray(s->rchunk, cap, sizeof *nc)) == NULL)
			return ENOMEM;
		s->rchunk = nc;
		if ((np = reallocarray(s->rpdig, cap, sizeof s->pdz)) == NULL)
			return ENOMEM;
		s->rpdig = np;
		s->capraw = cap;
	}
	for (n = 0; n < len; n += (size_t)w)
		if ((w = pwrite(s->rawfd, p + n, len - n,
		    (off_t)(s->rawoff + n))) == -1) {
			if (errno == EINTR) {
				w = 0;
				continue;
			}
			return errno;
		}
	nr = &s->recs[s->nraw];
	memset(nr, 0, sizeof *nr);
	nr->len = len;
	nr->at = s->rawoff;
	nr->zlen = len;
	nr->raw = 1;
	memcpy(nr->digest, d->b, sizeof nr->digest);
	memcpy(s->rpdig + s->nraw * sizeof s->pdz, s->pdz, sizeof s->pdz);
	s->rchunk[s->nraw++] = (uint64_t)s->part;
	s->rawoff += len;
	return 0;
}

/* Adds the first len bytes of s->buf as the next chunk. */
static int
ds_cut(struct dsw *s, size_t len)
{
	struct gck_digest	d;
	char			file[64], ename[GCK_NAME_MAX + 32];
	uint64_t		per = s->seg / GCK_CHUNK_SIZE, sg, p;
	int			e;

	/* The entry it will be: a part of its segment, or all of it. */
	sg = (uint64_t)s->part / per;
	p = (uint64_t)s->part % per;
	gck_cuda_seg_file(file, sizeof file, s->lpid, s->k, s->seg, sg);
	gck_entry_name(ename, sizeof ename, file, p == 0 && len ==
	    gck_cuda_seg_size(s->size, s->seg, sg) ? -1 : (long)p);
	if ((e = ds_known(s, s->buf, len, &d)) == -1)
		return ENOMEM;
	if (e == 1) {
		if ((e = ds_keep_raw(s, s->buf, len, &d)) != 0)
			return e;
	} else if (gck_writer_add_memory_whole(s->w, ename, s->buf, len,
	    s->parents != NULL && len % GCK_PAGE == 0 ? &d : NULL) != GCK_OK)
		return ds_errno(s->ctx);
	s->part++;
	s->have -= len;
	memmove(s->buf, s->buf + len, s->have);
	return 0;
}

/* Cuts the next chunk: all of s->buf, full or the memory's last. */
static int
ds_next(struct dsw *s)
{
	return ds_cut(s, s->have);
}

static int
ds_put(void *h, const void *buf, size_t n)
{
	struct dsw	*s = h;
	const char	*p = buf;
	size_t		 k;
	int		 e;

	if (s->got + n > s->size)
		return EIO;
	s->got += n;
	while (n > 0) {
		k = GCK_CHUNK_SIZE - s->have < n ? GCK_CHUNK_SIZE - s->have : n;
		memcpy(s->buf + s->have, p, k);
		s->have += k;
		p += k;
		n -= k;
		if (s->have == GCK_CHUNK_SIZE && (e = ds_next(s)) != 0)
			return e;
	}
	return 0;
}

static int
ds_commit(void *h)
{
	struct dsw		*s = h;
	struct dshead		 hd;
	struct dsrec		 rec;
	struct gck_digest	 d;
	const unsigned char	*pdig, *pd = NULL;
	char			 ipath[PATH_MAX];
	uint64_t		 np, pg = 0, i, n, j = 0;
	size_t			 k = 0;
	FILE			*f = NULL;
	int			 e, fd;

	if (s->got != s->size)
		return EIO;
	while (s->have > 0)
		if ((e = ds_next(s)) != 0)
			return e;
	if (gck_writer_sync(s->w) != GCK_OK)
		return ds_errno(s->ctx);
	if (side_path(ipath, sizeof ipath, s->path, ".idx") == -1)
		return ENAMETOOLONG;
	if ((fd = open(ipath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	    0600)) == -1)
		return errno;
	if ((f = fdopen(fd, "w")) == NULL) {
		e = errno;
		close(fd);
		goto fail;
	}
	memset(&hd, 0, sizeof hd);
	memcpy(hd.magic, DS_MAGIC, sizeof hd.magic);
	hd.size = s->size;
	hd.nchunks = (uint64_t)s->part;
	hd.format = s->format;
	hd.level = s->level;
	hd.dk = GCK_DK_SHA256;
	pdig = gck_writer_page_digests(s->w, &np);
	e = EIO;
	if (fwrite(&hd, sizeof hd, 1, f) != 1)
		goto fail_errno;
	/* The chunks in order: those kept raw among the writer's. */
	for (i = 0; i < hd.nchunks; i++) {
		if (k < s->nraw && s->rchunk[k] == i) {
			rec = s->recs[k];
			pd = s->rpdig + k++ * sizeof s->pdz;
		} else {
			memset(&rec, 0, sizeof rec);
			if (gck_writer_entry(s->w, (size_t)j++, &rec.len, &d,
			    &rec.at, &rec.zlen) != GCK_OK ||
			    d.kind != GCK_DK_SHA256)
				goto fail;
			memcpy(rec.digest, d.b, sizeof rec.digest);
			if (s->format > 2) {
				if (pg + rec.len / GCK_PAGE > np)
					goto fail;
				pd = pdig + pg * GCK_PDIG;
				pg += rec.len / GCK_PAGE;
			}
		}
		if (fwrite(&rec, sizeof rec, 1, f) != 1)
			goto fail_errno;
		n = rec.len / GCK_PAGE;
		if (s->format > 2 && fwrite(pd, GCK_PDIG, (size_t)n, f) != n)
			goto fail_errno;
	}
	if (s->rawfd != -1) {
		e = close(s->rawfd) == -1 ? errno : 0;
		s->rawfd = -1;
		if (e != 0)
			goto fail;
	}
	if (fclose(f) != 0) {
		f = NULL;
		goto fail_errno;
	}
	if (close(s->fd) == -1) {
		s->fd = -1;
		e = errno;
		unlink(ipath);
		return e;
	}
	s->fd = -1;
	s->committed = 1;
	return 0;
fail_errno:
	if (errno != 0)
		e = errno;
fail:
	if (f != NULL)
		fclose(f);
	unlink(ipath);
	return e;
}

static void
dsw_drop(struct dsw *s)
{
	char	ipath[PATH_MAX];

	if (s == NULL)
		return;
	gck_writer_free(s->w);
	if (s->fd != -1)
		close(s->fd);
	if (s->rawfd != -1)
		close(s->rawfd);
	if (!s->committed) {
		unlink(s->path);
		if (side_path(ipath, sizeof ipath, s->path, ".idx") == 0)
			unlink(ipath);
		if (side_path(ipath, sizeof ipath, s->path, ".raw") == 0)
			unlink(ipath);
	}
	gck_ctx_free(s->ctx);
	free(s->buf);
	free(s->recs);
	free(s->rpdig);
	free(s->rchunk);
	free(s);
}

/* Reads into *r the header of the spool file path.  Returns 0 or errno. */
static int
dsr_open(const char *path, struct dsr *r)
{
	char	ipath[PATH_MAX];
	int	fd;

	memset(r, 0, sizeof *r);
	r->fd = -1;
	r->rawfd = -1;
	if (side_path(ipath, sizeof ipath, path, ".idx") == -1)
		return ENAMETOOLONG;
	if ((fd = open(ipath, O_RDONLY | O_CLOEXEC)) == -1)
		return errno;
	if ((r->idx = fdopen(fd, "r")) == NULL) {
		close(fd);
		return errno;
	}
	if ((r->fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return errno;
	if (fread(&r->h, sizeof r->h, 1, r->idx) != 1 ||
	    memcmp(r->h.magic, DS_MAGIC, sizeof r->h.magic) != 0 ||
	    r->h.dk != GCK_DK_SHA256 || r->h.format < 2 || r->h.format > 3)
		return EIO;
	/* (only where some chunk was kept raw) */
	if (side_path(ipath, sizeof ipath, path, ".raw") == -1)
		return ENAMETOOLONG;
	if ((r->rawfd = open(ipath, O_RDONLY | O_CLOEXEC)) == -1 &&
	    errno != ENOENT)
		return errno;
	return 0;
}

static void
dsr_close(struct dsr *r)
{
	if (r->idx != NULL)
		fclose(r->idx);
	if (r->fd != -1)
		close(r->fd);
	if (r->rawfd != -1)
		close(r->rawfd);
	free(r->frame);
	free(r->out);
}

/* Reads len bytes at off of fd into buf.  Returns 0, or -1 with errno. */
static int
pread_all(int fd, char *buf, size_t len, uint64_t off)
{
	ssize_t	n;

	while (len > 0) {
		if ((n = pread(fd, buf, len, (off_t)off)) == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (n == 0) {
			errno = EIO;
			return -1;
		}
		buf += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

/*
 * The next chunk's record into r (its pages' digests into pdig, if not
 * NULL, else skipped); dsr_frame() reads its frame.  Returns 0, or
 * errno.
 */
static int
dsr_next(struct dsr *r, unsigned char *pdig)
{
	size_t	np;

	r->decoded = 0;
	r->framed = 0;
	if (fread(&r->rec, sizeof r->rec, 1, r->idx) != 1 ||
	    r->rec.len == 0 || r->rec.len > GCK_CHUNK_SIZE ||
	    r->rec.zlen > (uint64_t)GCK_CHUNK_SIZE + DS_HDR_SLACK ||
	    r->rec.raw > 1 || (r->rec.raw && (r->rawfd == -1 ||
	    r->rec.zlen != r->rec.len)))
		return EIO;
	np = r->h.format > 2 ? (size_t)(r->rec.len / GCK_PAGE) : 0;
	if (np > 0 && (pdig != NULL ? fread(pdig, GCK_PDIG, np, r->idx) !=
	    np : fseeko(r->idx, (off_t)(np * GCK_PDIG), SEEK_CUR) != 0))
		return EIO;
	r->next++;
	return 0;
}

/* The frame of the chunk at hand into r->frame.  Returns 0, or errno. */
static int
dsr_frame(struct dsr *r)
{
	size_t	 n = (size_t)r->rec.zlen;
	char	*nf;

	if (r->framed)
		return 0;
	if (n > r->fcap) {
		if ((nf = realloc(r->frame, n)) == NULL)
			return ENOMEM;
		r->frame = nf;
		r->fcap = n;
	}
	if (pread_all(r->rec.raw ? r->rawfd : r->fd, r->frame, n,
	    r->rec.at) != 0)
		return errno;
	r->framed = 1;
	return 0;
}

/*
 * The data of the chunk at hand out of its frame, checked against its
 * digest, at r->data.  Returns 0, or errno (EBADMSG: damaged).
 */
static int
dsr_decode(struct dsr *r)
{
	struct gck_digest	 d;
	unsigned long long	 csz;
	size_t			 len = (size_t)r->rec.len, n;
	char			*no;
	int			 e;

	if (r->decoded)
		return 0;
	if ((e = dsr_frame(r)) != 0)
		return e;
	if (r->rec.raw)
		r->data = r->frame;
	else if (r->h.level > 0) {
		csz = ZSTD_getFrameContentSize(r->frame, (size_t)r->rec.zlen);
		if (csz == ZSTD_CONTENTSIZE_ERROR ||
		    csz == ZSTD_CONTENTSIZE_UNKNOWN || csz < len ||
		    csz > (unsigned long long)len + DS_HDR_SLACK)
			return EBADMSG;
		if (csz > r->ocap) {
			if ((no = realloc(r->out, (size_t)csz)) == NULL)
				return ENOMEM;
			r->out = no;
			r->ocap = (size_t)csz;
		}
		n = ZSTD_decompress(r->out, (size_t)csz, r->frame,
		    (size_t)r->rec.zlen);
		if (ZSTD_isError(n) || n != csz)
			return EBADMSG;
		r->data = r->out + n - len;
	} else {
		if (r->rec.zlen < len)
			return EBADMSG;
		r->data = r->frame + r->rec.zlen - len;
	}
	if (gck_digest_buf(GCK_DK_SHA256, r->data, len, &d) == -1)
		return ENOMEM;
	if (memcmp(d.b, r->rec.digest, gck_digest_len(GCK_DK_SHA256)) != 0)
		return EBADMSG;
	r->decoded = 1;
	return 0;
}

static int
ds_open(void *arg, const char *path, uint64_t *sizep, void **hp)
{
	struct dsr	*r;
	int		 e;

	(void)arg;
	if ((r = malloc(sizeof *r)) == NULL)
		return ENOMEM;
	if ((e = dsr_open(path, r)) != 0) {
		dsr_close(r);
		free(r);
		return e;
	}
	*sizep = r->h.size;
	*hp = r;
	return 0;
}

static ssize_t
ds_get(void *h, void *buf, size_t len)
{
	struct dsr	*r = h;
	size_t		 n;
	int		 e;

	if (r->left == 0) {
		if (r->next == r->h.nchunks)
			return 0;
		if ((e = dsr_next(r, NULL)) != 0 || (e = dsr_decode(r)) != 0) {
			errno = e;
			return -1;
		}
		r->left = (size_t)r->rec.len;
	}
	n = len < r->left ? len : r->left;
	memcpy(buf, r->data, n);
	r->data += n;
	r->left -= n;
	return (ssize_t)n;
}

/* A handle of either kind: its first member tells which. */
static void
ds_drop(void *h)
{
	struct dsr	*r = h;

	if (r == NULL)
		return;
	if (r->writer) {
		dsw_drop(h);
		return;
	}
	dsr_close(r);
	free(r);
}

/*
 * The spool files of a checkpoint's device memory for an image of c
 * (which must outlive them), into *ops.  c NULL: to read them only.
 */
void
gck_devspool_ops(const struct gck_devspool_conf *c, struct gck_cuda_spool *ops)
{
	ops->create = ds_create;
	ops->put = ds_put;
	ops->commit = ds_commit;
	ops->open = ds_open;
	ops->get = ds_get;
	ops->drop = ds_drop;
	ops->arg = (void *)(uintptr_t)c;
}

/* What a patch's pages come from: the chunk at hand of a spool file. */
static int
ds_fetch(void *arg, const uint32_t *pages, char *const *to, size_t n)
{
	struct dsr	*r = arg;
	size_t		 i;
	int		 e;

	if ((e = dsr_decode(r)) != 0)
		return gck_set_error(r->ctx, GCK_EFORMAT, "the device memory "
		    "in the spool '%s' is damaged (chunk %llu): %s", r->path,
		    (unsigned long long)r->next - 1, strerror(e));
	for (i = 0; i < n; i++)
		memcpy(to[i], r->data + (size_t)pages[i] * GCK_PAGE, GCK_PAGE);
	return GCK_OK;
}

/*
 * Adds to w bytes [off, off + len) of the device memory (size bytes)
 * spooled at path, as file, a segment of it that starts with a chunk:
 * each chunk's frame as it is where w takes it so, else from its data;
 * what came how is added to *cnt.  Returns GCK_OK or a code.
 */
int
gck_devspool_splice(struct gck_ctx *ctx, struct gck_writer *w,
    const char *path, const char *file, uint64_t size, uint64_t off,
    uint64_t len, struct gck_splice_counts *cnt)
{
	struct dsr		 r;
	struct gck_digest	 d;
	unsigned char		*pdig = NULL;
	char			 ename[GCK_NAME_MAX + 32];
	uint64_t		 i, c0, got = 0, ref, want;
	off_t			 at;
	int			 e, rc, pass, again;

	if ((e = dsr_open(path, &r)) != 0) {
		rc = gck_set_syserr(ctx, e, "cannot read the spool '%s': %s",
		    path, strerror(e));
		goto out;
	}
	if (r.h.size != size || off % GCK_CHUNK_SIZE != 0 || off > size ||
	    len > size - off) {
		rc = gck_set_error(ctx, GCK_EFORMAT, "the spool '%s' holds %llu "
		    "bytes of device memory, not %llu", path,
		    (unsigned long long)r.h.size, (unsigned long long)size);
		goto out;
	}
	cnt->segs++;
	/* A GPU the process holds nothing on is a file all the same. */
	if (r.h.nchunks == 0 || len == 0) {
		gck_entry_name(ename, sizeof ename, file, -1);
		rc = len == 0 ? gck_writer_add(w, ename, "", 0) :
		    gck_set_error(ctx, GCK_EFORMAT, "the spool '%s' holds no "
		    "chunks", path);
		goto out;
	}
	/*
	 * Every chunk but the last is whole (ds_put()): the records of
	 * those before the segment's first are as long as each other.
	 */
	c0 = off / GCK_CHUNK_SIZE;
	at = (off_t)(sizeof r.h + c0 * (sizeof r.rec + (r.h.format > 2 ?
	    DS_PAGES * GCK_PDIG : 0)));
	if (c0 >= r.h.nchunks || fseeko(r.idx, at, SEEK_SET) != 0) {
		rc = gck_set_error(ctx, GCK_EFORMAT, "the spool '%s' holds no "
		    "chunk %llu", path, (unsigned long long)c0);
		goto out;
	}
	r.next = c0;
	if ((pdig = malloc((GCK_CHUNK_SIZE / GCK_PAGE) * GCK_PDIG)) == NULL) {
		rc = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	r.ctx = ctx;
	r.path = path;
	pass = gck_writer_takes_frames(w, r.h.format, r.h.level);
	memset(&d, 0, sizeof d);
	d.kind = GCK_DK_SHA256;
	for (i = 0; got < len; i++) {
		want = len - got < GCK_CHUNK_SIZE ? len - got : GCK_CHUNK_SIZE;
		if (r.next >= r.h.nchunks || (e = dsr_next(&r, pdig)) != 0 ||
		    r.rec.len != want) {
			rc = gck_set_syserr(ctx, e != 0 ? e : EIO, "cannot "
			    "read the spool '%s': %s", path,
			    strerror(e != 0 ? e : EIO));
			goto out;
		}
		memcpy(d.b, r.rec.digest, sizeof r.rec.digest);
		gck_entry_name(ename, sizeof ename, file, i == 0 &&
		    r.rec.len == len ? -1 : (long)i);
		ref = gck_writer_refbytes(w);
		again = 0;
		/* (a chunk kept raw has no frame to take) */
		if (pass && !r.rec.raw && (e = dsr_frame(&r)) != 0) {
			rc = gck_set_syserr(ctx, e, "cannot read the spool "
			    "'%s': %s", path, strerror(e));
			goto out;
		}
		rc = pass ? gck_writer_add_memory_frame(w, ename,
		    (size_t)r.rec.len, &d, r.h.format > 2 ? pdig : NULL,
		    r.rec.raw ? NULL : r.frame, (size_t)r.rec.zlen, ds_fetch,
		    &r) : 1;
		if (rc == 1) {
			if ((e = dsr_decode(&r)) != 0) {
				rc = gck_set_error(ctx, GCK_EFORMAT, "the "
				    "device memory in the spool '%s' is "
				    "damaged (chunk %llu): %s", path,
				    (unsigned long long)r.next - 1,
				    strerror(e));
				goto out;
			}
			rc = gck_writer_add_memory(w, ename, r.data,
			    (size_t)r.rec.len);
			again = 1;
		}
		if (rc != GCK_OK)
			goto out;
		if (gck_writer_refbytes(w) != ref)
			cnt->ref++;
		else if (again)
			cnt->again++;
		else
			cnt->whole++;
		got += r.rec.len;
	}
	rc = GCK_OK;
out:
	free(pdig);
	dsr_close(&r);
	return rc;
}

/*
 * parent.c: the parents of an incremental image (gpuckpt-image(5)).
 *
 * A parent is an image file of format 2, compressed, whose footer names
 * the frame of its trailer: the trailer lists every entry with where its
 * frame is, so that a chunk of memory is read by itself, one pread(2)
 * and one frame, without reading the rest of the file.  Writing, the
 * trailer of the one parent tells which chunks need not be stored
 * again; reading, the trailers of the whole chain tell where each chunk
 * that an image only refers to is stored.
 */
#include "config.h"

#include <sys/stat.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <jansson.h>
#include <zstd.h>
#include "private.h"
#include "image/digest.h"
#include "image/manifest.h"
#include "image/names.h"
#include "image/parent.h"
#include "image/patch.h"
#include "image/sign.h"
#include "image/zio.h"

#define CHAIN_MAX	1000		/* images in a chain, at most */

/* A chunk one of the images stores, and where. */
struct pchunk {
	struct gck_digest d;
	size_t		 img;
	uint64_t	 at, zsize, size;
};

/* An image of the chain. */
struct pimage {
	char		*path;
	int		 fd;
	char		 id[33];
	json_t		*chain;		/* its own parents, or NULL */
	json_t		*entries;	/* its trailer's */
	struct gck_manifest *m;		/* its manifest */
	uint64_t	 used;		/* bytes of its chunks fetched */
	int		 parent;	/* of a pool, the parent of the image
					   written over it */
};

/*
 * The bases a thread read last, kept for the patches after them: a
 * chunk rewritten in several rounds or snapshots is a patch on a patch
 * on the chunk of the first, and the patches of the next name several
 * of them, and those of its neighbours the same ones.  A base that is a
 * patch is kept as it is stored, its own pages and its map, and never
 * made whole: the pages wanted of it that it does not store are taken
 * from its bases in turn (p_take()).
 */
#define PF_KEPT		32

struct pkept {
	struct gck_digest d;
	uint64_t	 size;		/* of the chunk */
	char		*data;		/* the chunk, or its own pages */
	size_t		 cap;
	struct gck_patch *p;		/* a patch's map, or NULL */
	uint64_t	 tick;		/* when last used; 0: empty */
};

/* What a thread fetches chunks with: its error carrier and buffer. */
struct pfetch {
	struct gck_ctx	*ctx;
	char		*frame;		/* a frame read */
	size_t		 framecap;
	char		*tar;		/* and decompressed */
	size_t		 tarcap;
	ZSTD_DCtx	*dctx;
	struct pkept	 kept[PF_KEPT];	/* bases made whole */
	uint64_t	 tick;
};

struct gck_parents {
	struct gck_ctx	*ctx;
	char		**paths;	/* as given */
	size_t		 npaths;
	struct pimage	*img;		/* the chain, in its order */
	size_t		 nimg;
	struct pchunk	*chunk;		/* stored, by digest */
	size_t		 nchunk;
	struct gck_digest *all;		/* every digest the parent lists */
	size_t		 nall;
	struct pfetch	 fx;		/* the reader's fetches */
	char		*data;		/* a chunk fetched */
	size_t		 datacap;
	char		 want[33];	/* the image read (for messages) */
	const char	*what;		/* "parent image", or "image" */
	int		 pool;		/* a cache's images: no chain */
	int		 cached;	/* read for an image sent to one */
	ssize_t		 bad;		/* the image a fetch found damaged */
	const struct gck_parents *bases;	/* where the bases of its
						   patches are, or NULL:
						   its own images */
	struct gck_ptab	 ptab;		/* their pages, for a writer */
	unsigned char	*need;		/* a pool's: chunk[i] was fetched */
};

/* What a frame of one entry holds, once checked. */
struct fentry {
	char		 name[GCK_NAME_MAX + 32];
	uint64_t	 size;
	int		 ref;
	struct gck_digest rec;		/* its header's digest */
	struct gck_digest got;		/* that of its data */
	char		*map;		/* a patch's map, or NULL */
	size_t		 maplen;
	uint64_t	 refsize;	/* the size its ref record gives */
};

static int	p_frame_entry(const struct gck_parents *, struct pfetch *,
		    const struct pimage *, uint64_t, uint64_t, uint64_t,
		    struct fentry *, char **, size_t *);
static int	p_frame_entries(const struct gck_parents *, struct pfetch *,
		    const struct pimage *, uint64_t, uint64_t, uint64_t,
		    struct fentry *, char **, size_t *, struct fentry *,
		    char **, size_t *);
static int	p_entry_data(const struct gck_parents *, struct pfetch *,
		    struct archive *,
		    struct archive_entry *, struct fentry *, char **,
		    size_t *);
static int	p_open(struct gck_parents *, const char *, int,
		    struct pimage *);
static int	p_load(const struct gck_parents *, struct pfetch *,
		    const struct gck_digest *, uint64_t, char **, size_t *,
		    size_t *, int);
static int	p_patch(const struct gck_parents *, struct pfetch *,
		    const struct fentry *, char **, size_t *, int);
/* A page a patch takes of a base: its number there, and where it goes. */
struct pwant {
	uint32_t	 page;
	char		*to;
};
static int	p_take(const struct gck_parents *, struct pfetch *,
		    const struct gck_digest *, uint64_t, const struct pwant *,
		    size_t, int);
static int	p_patch_entry(struct fentry *, const char *, const char *,
		    size_t, const char *, uint64_t, uint64_t, char **,
		    size_t *);
static int	p_pool_add(struct gck_parents *, const char *);
static void	pimage_clear(struct pimage *);

static int
digest_cmp(const void *a, const void *b)
{
	return memcmp(((const struct gck_digest *)a)->b,
	    ((const struct gck_digest *)b)->b, GCK_DIGEST_MAX);
}

static int
pchunk_cmp(const void *a, const void *b)
{
	return digest_cmp(&((const struct pchunk *)a)->d,
	    &((const struct pchunk *)b)->d);
}

/* Frees what fx holds. */
static void
pfetch_clear(struct pfetch *fx)
{
	size_t	i;

	free(fx->frame);
	free(fx->tar);
	ZSTD_freeDCtx(fx->dctx);
	fx->frame = fx->tar = NULL;
	fx->framecap = fx->tarcap = 0;
	fx->dctx = NULL;
	for (i = 0; i < PF_KEPT; i++) {
		free(fx->kept[i].data);
		free(fx->kept[i].p);
	}
	memset(fx->kept, 0, sizeof fx->kept);
	fx->tick = 0;
}

/*
 * A base that fx made whole already: the chunk whose digest is d and
 * size size, checked when it was read (a digest names its content, so
 * whichever images it was read from).  Returns it, or NULL.
 */
static const struct pkept *
pfetch_kept(struct pfetch *fx, const struct gck_digest *d, uint64_t size)
{
	size_t	i;

	for (i = 0; i < PF_KEPT; i++)
		if (fx->kept[i].tick != 0 && fx->kept[i].size == size &&
		    gck_digest_equal(&fx->kept[i].d, d)) {
			fx->kept[i].tick = ++fx->tick;
			return &fx->kept[i];
		}
	return NULL;
}

/*
 * Keeps a copy of the base d of size bytes: the n bytes at data, the
 * chunk, or with patch p the pages it stores; in place of the one used
 * longest ago.  Returns it, or NULL when out of memory.
 */
static struct pkept *
pfetch_keep(struct pfetch *fx, const struct gck_digest *d, uint64_t size,
    const char *data, uint64_t n, const struct gck_patch *p)
{
	struct pkept	*k = &fx->kept[0];
	char		*nb;
	size_t		 i;

	for (i = 1; i < PF_KEPT && k->tick != 0; i++)
		if (fx->kept[i].tick < k->tick)
			k = &fx->kept[i];
	k->tick = 0;
	if (k->cap < n || k->data == NULL) {
		if ((nb = realloc(k->data, (size_t)n + 1)) == NULL)
			return NULL;
		k->data = nb;
		k->cap = (size_t)n + 1;
	}
	if (p != NULL && k->p == NULL && (k->p = malloc(sizeof *k->p)) ==
	    NULL)
		return NULL;
	if (p != NULL)
		*k->p = *p;
	else {
		free(k->p);
		k->p = NULL;
	}
	memcpy(k->data, data, (size_t)n);
	k->d = *d;
	k->size = size;
	k->tick = ++fx->tick;
	return k;
}

int
gck_parents_new(struct gck_ctx *ctx, struct gck_parents **pp)
{
	if ((*pp = calloc(1, sizeof **pp)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	(*pp)->ctx = ctx;
	(*pp)->fx.ctx = ctx;
	(*pp)->what = "parent image";
	(*pp)->bad = -1;
	return GCK_OK;
}

static void
pimage_clear(struct pimage *pi)
{
	free(pi->path);
	if (pi->fd != -1)
		close(pi->fd);
	json_decref(pi->chain);
	json_decref(pi->entries);
	gck_manifest_free(pi->m);
	memset(pi, 0, sizeof *pi);
	pi->fd = -1;
}

void
gck_parents_free(struct gck_parents *ps)
{
	size_t	i;

	if (ps == NULL)
		return;
	for (i = 0; i < ps->npaths; i++)
		free(ps->paths[i]);
	free(ps->paths);
	for (i = 0; i < ps->nimg; i++)
		pimage_clear(&ps->img[i]);
	free(ps->img);
	free(ps->chunk);
	free(ps->need);
	free(ps->all);
	gck_ptab_clear(&ps->ptab);
	pfetch_clear(&ps->fx);
	free(ps->data);
	free(ps);
}

/* Notes a place to look for parents in: an image file or a directory. */
int
gck_parents_add(struct gck_parents *ps, const char *path)
{
	char	**np;

	if ((np = reallocarray(ps->paths, ps->npaths + 1, sizeof *np)) ==
	    NULL)
		return gck_set_error(ps->ctx, GCK_ENOMEM, "out of memory");
	ps->paths = np;
	if ((np[ps->npaths] = strdup(path)) == NULL)
		return gck_set_error(ps->ctx, GCK_ENOMEM, "out of memory");
	ps->npaths++;
	return GCK_OK;
}

/*
 * Reads the frame of len bytes at offset at of pi's file, which must
 * hold exactly one tar entry (and, for the trailer, the end of the
 * archive), of at most max bytes of data.  Fills *fe and puts its data
 * in *bufp (*capp bytes, grown as needed).  Returns GCK_OK or a code.
 */
static int
p_frame_entry(const struct gck_parents *ps, struct pfetch *fx,
    const struct pimage *pi, uint64_t at, uint64_t len, uint64_t max,
    struct fentry *fe, char **bufp, size_t *capp)
{
	return p_frame_entries(ps, fx, pi, at, len, max, fe, bufp, capp, NULL,
	    NULL, NULL);
}

/*
 * As p_frame_entry(), and when fe2 is not NULL, the entry that follows
 * in the frame too, into fe2 and *buf2p (*cap2p bytes); fe2's name is
 * empty when none does.
 */
static int
p_frame_entries(const struct gck_parents *ps, struct pfetch *fx,
    const struct pimage *pi, uint64_t at, uint64_t len, uint64_t max,
    struct fentry *fe, char **bufp, size_t *capp, struct fentry *fe2,
    char **buf2p, size_t *cap2p)
{
	struct archive		*a = NULL;
	struct archive_entry	*e;
	unsigned long long	 dlen;
	char			*tar = NULL, *nf;
	size_t			 got;
	ssize_t			 n;
	int			 r;

	if (len > ZSTD_compressBound(max + (1u << 16)) || len < 8) {
		r = gck_set_error(fx->ctx, GCK_ECORRUPT, "corrupt %s '%s': a "
		    "frame of %" PRIu64 " bytes", ps->what, pi->path, len);
		goto out;
	}
	if (fx->framecap < len) {
		if ((nf = realloc(fx->frame, (size_t)len)) == NULL) {
			r = gck_set_error(fx->ctx, GCK_ENOMEM, "out of memory");
			goto out;
		}
		fx->frame = nf;
		fx->framecap = (size_t)len;
	}
	for (got = 0; got < len; got += (size_t)n) {
		n = pread(pi->fd, fx->frame + got, (size_t)len - got,
		    (off_t)(at + got));
		if (n == -1 && errno == EINTR)
			n = 0;
		else if (n <= 0) {
			r = n == 0 ? gck_set_error(fx->ctx, GCK_ETRUNC, "parent "
			    "image '%s' is truncated", pi->path) :
			    gck_set_syserr(fx->ctx, errno, "cannot read parent "
			    "image '%s': %s", pi->path, strerror(errno));
			goto out;
		}
	}
	dlen = ZSTD_getFrameContentSize(fx->frame, (size_t)len);
	if (dlen == ZSTD_CONTENTSIZE_UNKNOWN || dlen ==
	    ZSTD_CONTENTSIZE_ERROR || dlen > max + (1u << 16) ||
	    ZSTD_findFrameCompressedSize(fx->frame, (size_t)len) != len)
		goto bad;
	if (fx->tarcap < dlen + 1) {
		if ((nf = realloc(fx->tar, (size_t)dlen + 1)) == NULL) {
			r = gck_set_error(fx->ctx, GCK_ENOMEM, "out of memory");
			goto out;
		}
		fx->tar = nf;
		fx->tarcap = (size_t)dlen + 1;
	}
	tar = fx->tar;
	if (fx->dctx == NULL && (fx->dctx = ZSTD_createDCtx()) == NULL) {
		r = gck_set_error(fx->ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	if (ZSTD_decompressDCtx(fx->dctx, tar, (size_t)dlen + 1, fx->frame,
	    (size_t)len) != dlen)
		goto bad;
	if ((a = archive_read_new()) == NULL) {
		r = gck_set_error(fx->ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	archive_read_support_format_tar(a);
	if (archive_read_open_memory(a, tar, (size_t)dlen) != ARCHIVE_OK ||
	    archive_read_next_header(a, &e) != ARCHIVE_OK) {
		r = gck_set_error(fx->ctx, GCK_ECORRUPT, "corrupt %s '%s': no "
		    "entry in the frame at offset %" PRIu64, ps->what,
		    pi->path, at);
		goto out;
	}
	r = p_entry_data(ps, fx, a, e, fe, bufp, capp);
	if (r != GCK_OK || fe2 == NULL)
		goto out;
	memset(fe2, 0, sizeof *fe2);
	switch (archive_read_next_header(a, &e)) {
	case ARCHIVE_EOF:
		break;
	case ARCHIVE_OK:
		r = p_entry_data(ps, fx, a, e, fe2, buf2p, cap2p);
		/* and nothing after it but the end of the archive */
		if (r == GCK_OK && archive_read_next_header(a, &e) !=
		    ARCHIVE_EOF)
			r = gck_set_error(fx->ctx, GCK_ECORRUPT, "corrupt %s "
			    "'%s': more than two entries in the frame at "
			    "offset %" PRIu64, ps->what, pi->path, at);
		break;
	default:
		r = gck_set_error(fx->ctx, GCK_ECORRUPT, "corrupt %s '%s': "
		    "unreadable entry after the first in the frame at offset %"
		    PRIu64, ps->what, pi->path, at);
	}
	goto out;
bad:
	r = gck_set_error(fx->ctx, GCK_ECORRUPT, "corrupt %s '%s': bad frame "
	    "at offset %" PRIu64, ps->what, pi->path, at);
out:
	if (a != NULL)
		archive_read_free(a);
	return r;
}

/*
 * The data of entry e, read from a, into *bufp, holes as zeros, its
 * digest computed as the reader does (gpuckpt-image(5), Holes).
 */
static int
p_entry_data(const struct gck_parents *ps, struct pfetch *fx,
    struct archive *a, struct archive_entry *e, struct fentry *fe,
    char **bufp, size_t *capp)
{
	struct gck_dstate	*st = NULL;
	const char		*xn, *name;
	const void		*xv, *p;
	size_t			 xl, l;
	la_int64_t		 off, so, sl;
	uint64_t		 got = 0;
	char			*nb;
	int			 r, sparse, ret;

	memset(fe, 0, sizeof *fe);
	name = archive_entry_pathname(e);
	snprintf(fe->name, sizeof fe->name, "%s", name != NULL ? name : "");
	archive_entry_xattr_reset(e);
	while (archive_entry_xattr_next(e, &xn, &xv, &xl) == ARCHIVE_OK) {
		if (strcmp(xn, "gpuckpt.sha256") == 0)
			(void)gck_digest_parse(GCK_DK_SHA256, xv, xl, &fe->rec);
		else if (strcmp(xn, "gpuckpt.ref") == 0) {
			fe->ref = 1;
			fe->refsize = gck_ref_size(xv, xl);
		} else if (strcmp(xn, "gpuckpt.patch") == 0 &&
		    fe->map == NULL && xl > 0 && xl <= GCK_PATCH_MAP_MAX) {
			if ((fe->map = malloc(xl)) == NULL)
				return gck_set_error(fx->ctx, GCK_ENOMEM,
				    "out of memory");
			memcpy(fe->map, xv, xl);
			fe->maplen = xl;
		}
	}
	/* A patch: its ref record gives the size of its chunk. */
	if (fe->map != NULL) {
		if (!fe->ref || fe->refsize == 0)
			return gck_set_error(fx->ctx, GCK_ECORRUPT, "corrupt "
			    "%s: patch '%.200s' gives no size", ps->what,
			    fe->name);
		fe->ref = 0;
	}
	if (archive_entry_filetype(e) != AE_IFREG ||
	    archive_entry_size(e) < 0 || fe->rec.kind != GCK_DK_SHA256)
		return gck_set_error(fx->ctx, GCK_ECORRUPT, "corrupt %s: "
		    "entry '%.200s' unreadable", ps->what, fe->name);
	fe->size = (uint64_t)archive_entry_size(e);
	if (fe->size > GCK_PART_MAX)
		return gck_set_error(fx->ctx, GCK_ECORRUPT, "corrupt %s: "
		    "entry '%.200s' too large", ps->what, fe->name);
	if (*capp < fe->size + 1) {
		if ((nb = realloc(*bufp, (size_t)fe->size + 1)) == NULL)
			return gck_set_error(fx->ctx, GCK_ENOMEM,
			    "out of memory");
		*bufp = nb;
		*capp = (size_t)fe->size + 1;
	}
	sparse = archive_entry_sparse_count(e) > 0;
	/* Holes read as zeros; the data of the rest covers it all. */
	if (sparse)
		memset(*bufp, 0, (size_t)fe->size);
	(*bufp)[fe->size] = '\0';
	if ((st = gck_dstate_new()) == NULL ||
	    gck_dstate_reset(st, GCK_DK_SHA256) == -1) {
		gck_dstate_free(st);
		return gck_set_error(fx->ctx, GCK_ENOMEM, "out of memory");
	}
	r = GCK_OK;
	while ((ret = archive_read_data_block(a, &p, &l, &off)) ==
	    ARCHIVE_OK) {
		if (off < 0 || (uint64_t)off > fe->size ||
		    l > fe->size - (uint64_t)off || (!sparse &&
		    (uint64_t)off != got)) {
			r = gck_set_error(fx->ctx, GCK_ECORRUPT, "corrupt %s: "
			    "entry '%.200s' longer than declared", ps->what,
			    fe->name);
			break;
		}
		memcpy(*bufp + off, p, l);
		got = (uint64_t)off + l;
		if (sparse)
			gck_dstate_update(st, p, l);
	}
	if (r == GCK_OK && ret == ARCHIVE_EOF && !sparse && got != fe->size)
		r = gck_set_error(fx->ctx, GCK_ECORRUPT, "corrupt %s: entry "
		    "'%.200s' shorter than declared", ps->what, fe->name);
	if (r == GCK_OK && ret != ARCHIVE_EOF)
		r = gck_set_error(fx->ctx, GCK_ECORRUPT, "corrupt %s: entry "
		    "'%.200s': %s", ps->what, fe->name,
		    archive_error_string(a));
	if (r == GCK_OK && sparse) {
		archive_entry_sparse_reset(e);
		while (archive_entry_sparse_next(e, &so, &sl) == ARCHIVE_OK) {
			if (sl <= 0)
				continue;
			gck_dstate_u64(st, (uint64_t)so);
			gck_dstate_u64(st, (uint64_t)sl);
		}
		gck_dstate_u64(st, fe->size);
	} else if (r == GCK_OK)
		gck_dstate_update(st, *bufp, (size_t)fe->size);
	if (r == GCK_OK && fe->map != NULL) {
		gck_dstate_update(st, fe->map, fe->maplen);
		gck_dstate_u64(st, fe->refsize);
	}
	gck_dstate_final(st, &fe->got);
	gck_dstate_free(st);
	return r;
}

/*
 * Opens the image file path (or reads it on fd0 if not -1): its footer,
 * its trailer, its manifest, each checked against its digest.  Returns GCK_OK with *pi filled, or
 * a code.
 */
static int
p_open(struct gck_parents *ps, const char *path, int fd0, struct pimage *pi)
{
	struct gck_manifest	*m = NULL;
	struct fentry		 fe;
	struct stat		 sb;
	struct gck_digest	 d;
	json_t			*t = NULL, *o;
	json_int_t		 at, zsize, fmt;
	const char		*hex, *id;
	char			*buf = NULL;
	size_t			 cap = 0;
	uint64_t		 tat;
	int			 r;

	memset(pi, 0, sizeof *pi);
	memset(&fe, 0, sizeof fe);
	pi->fd = -1;
	if ((pi->path = strdup(path)) == NULL)
		return gck_set_error(ps->ctx, GCK_ENOMEM, "out of memory");
	if ((pi->fd = fd0 != -1 ? fcntl(fd0, F_DUPFD_CLOEXEC, 0) :
	    open(path, O_RDONLY | O_CLOEXEC)) == -1 ||
	    fstat(pi->fd, &sb) == -1) {
		r = gck_set_syserr(ps->ctx, errno, "cannot open parent image "
		    "'%s': %s", path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(sb.st_mode) || gck_zio_footer(pi->fd,
	    (uint64_t)sb.st_size, &tat) == -1) {
		r = gck_set_error(ps->ctx, GCK_EFORMAT, "cannot use '%s' as a "
		    "parent image: not an image file of format 2 or 3 with a "
		    "footer (a compressed image written by gpuckpt %s or "
		    "later)", path, PACKAGE_VERSION);
		goto out;
	}
	if ((r = p_frame_entry(ps, &ps->fx, pi, tat, (uint64_t)sb.st_size -
	    tat - gck_zio_footer_len(), GCK_META_MAX, &fe, &buf, &cap)) !=
	    GCK_OK)
		goto out;
	if (strcmp(fe.name, GCK_ENTRY_TRAILER) != 0 || fe.ref ||
	    fe.map != NULL || !gck_digest_equal(&fe.rec, &fe.got) ||
	    (t = json_loadb(buf, (size_t)fe.size, 0, NULL)) == NULL ||
	    json_unpack(t, "{s:I, s:o}", "format", &fmt, "entries", &o) != 0 ||
	    (fmt != 2 && fmt != 3) || !json_is_array(o) ||
	    json_array_size(o) == 0) {
		r = gck_set_error(ps->ctx, GCK_ECORRUPT, "corrupt parent image "
		    "'%s': its footer names no trailer", path);
		goto out;
	}
	pi->entries = json_incref(o);
	o = json_array_get(pi->entries, 0);
	hex = json_string_value(json_object_get(o, "sha256"));
	if (json_unpack(o, "{s:I, s:I}", "at", &at, "zsize", &zsize) != 0 ||
	    at < 0 || zsize <= 0 || hex == NULL ||
	    gck_digest_parse(GCK_DK_SHA256, hex, strlen(hex), &d) == -1 ||
	    (r = p_frame_entry(ps, &ps->fx, pi, (uint64_t)at,
	    (uint64_t)zsize, GCK_META_MAX, &fe, &buf, &cap)) != GCK_OK ||
	    strcmp(fe.name, GCK_ENTRY_MANIFEST) != 0 || fe.map != NULL ||
	    !gck_digest_equal(&fe.got, &d) ||
	    !gck_digest_equal(&fe.rec, &d)) {
		r = gck_set_error(ps->ctx, GCK_ECORRUPT, "corrupt parent image "
		    "'%s': its manifest does not match its trailer", path);
		goto out;
	}
	if ((r = gck_manifest_parse(ps->ctx, buf, (size_t)fe.size, &m)) !=
	    GCK_OK)
		goto out;
	if ((id = gck_manifest_id(m)) == NULL) {
		r = gck_set_error(ps->ctx, GCK_EFORMAT, "parent image '%s' has "
		    "no id", path);
		goto out;
	}
	snprintf(pi->id, sizeof pi->id, "%s", id);
	if (gck_manifest_chain(m) != NULL)
		pi->chain = json_incref(gck_manifest_chain(m));
	pi->m = m;
	m = NULL;
	r = GCK_OK;
out:
	free(fe.map);
	gck_manifest_free(m);
	json_decref(t);
	free(buf);
	return r;
}

/* Adds the digests of pi's entries: all of them, or those it stores. */
static int
p_index(struct gck_parents *ps, size_t img, int stored)
{
	struct pimage	*pi = &ps->img[img];
	struct gck_digest d;
	struct pchunk	*nc;
	struct gck_digest *na;
	json_t		*o;
	json_int_t	 at, zsize, size;
	const char	*hex;
	size_t		 i, n = json_array_size(pi->entries);
	int		 ref;

	if (stored && (nc = reallocarray(ps->chunk, ps->nchunk + n,
	    sizeof *nc)) != NULL)
		ps->chunk = nc;
	else if (!stored && (na = reallocarray(ps->all, ps->nall + n,
	    sizeof *na)) != NULL)
		ps->all = na;
	else
		return gck_set_error(ps->ctx, GCK_ENOMEM, "out of memory");
	json_array_foreach(pi->entries, i, o) {
		hex = json_string_value(json_object_get(o, "sha256"));
		ref = json_is_true(json_object_get(o, "ref"));
		if (json_unpack(o, "{s:I, s:I, s:I}", "at", &at, "zsize",
		    &zsize, "size", &size) != 0 || hex == NULL || at < 0 ||
		    zsize <= 0 || size < 0 || size > GCK_PART_MAX ||
		    gck_digest_parse(GCK_DK_SHA256, hex, strlen(hex), &d) == -1)
			return gck_set_error(ps->ctx, GCK_ECORRUPT, "corrupt "
			    "parent image '%s': bad trailer entry %zu",
			    pi->path, i + 1);
		if (!stored) {
			ps->all[ps->nall++] = d;
			continue;
		}
		if (ref)
			continue;
		nc = &ps->chunk[ps->nchunk++];
		nc->d = d;
		nc->img = img;
		nc->at = (uint64_t)at;
		nc->zsize = (uint64_t)zsize;
		nc->size = (uint64_t)size;
	}
	return GCK_OK;
}

/*
 * Adds to ps->ptab the pages of the memory of image img, as its page
 * index lists them (format 3), so that a writer finds them by their
 * digests; nothing for an image that has no index.  Returns GCK_OK or a
 * code.
 */
static int
p_pages(struct gck_parents *ps, size_t img)
{
	struct pimage	*pi = &ps->img[img];
	struct fentry	 fe;
	struct gck_digest d, *md = NULL;
	uint64_t	*msize = NULL, pages = 0, off = 0, k;
	unsigned char	*idx = NULL, *skip = NULL;
	char		*buf = NULL, file[GCK_NAME_MAX + 1];
	size_t		 cap = 0, i, nm = 0, np = 0;
	json_t		*o;
	json_int_t	 at, zsize, size;
	const char	*hex, *name;
	long		 part;
	int		 r = GCK_OK, chunks = gck_manifest_chunks_only(pi->m);

	memset(&fe, 0, sizeof fe);
	if (gck_manifest_format(pi->m) < 3)
		return GCK_OK;
	if ((md = calloc(json_array_size(pi->entries) + 1, sizeof *md)) ==
	    NULL || (msize = calloc(json_array_size(pi->entries) + 1,
	    sizeof *msize)) == NULL || (skip = calloc(
	    json_array_size(pi->entries) + 1, 1)) == NULL) {
		r = gck_set_error(ps->ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	/* its memory's chunks, and how many pages */
	json_array_foreach(pi->entries, i, o) {
		name = json_string_value(json_object_get(o, "name"));
		hex = json_string_value(json_object_get(o, "sha256"));
		if (name == NULL || hex == NULL || json_unpack(o, "{s:I}",
		    "size", &size) != 0 || gck_digest_parse(GCK_DK_SHA256, hex,
		    strlen(hex), &d) == -1 || gck_entry_parse(name, file,
		    sizeof file, &part) == -1 || (!chunks &&
		    gck_manifest_file_memory(pi->m, file) != 1))
			continue;
		if (size <= 0 || size % GCK_PAGE != 0)
			goto bad;
		/*
		 * A pool reads no image's chain: of an image of a
		 * checkpoint, the chunks it stores whole are bases, not
		 * its references or its patches, whose chunks other
		 * images hold.  (Its pages still count, for the index.)
		 */
		skip[nm] = ps->pool && !pi->parent && (json_is_true(
		    json_object_get(o, "ref")) || (!chunks &&
		    json_is_true(json_object_get(o, "patch"))));
		md[nm] = d;
		msize[nm++] = (uint64_t)size;
		pages += (uint64_t)size / GCK_PAGE;
	}
	if (pages == 0)
		goto out;
	if (pages > UINT32_MAX / 2 || (idx = malloc((size_t)pages *
	    GCK_PDIG)) == NULL) {
		r = gck_set_error(ps->ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	/* the parts of its index, in order */
	json_array_foreach(pi->entries, i, o) {
		name = json_string_value(json_object_get(o, "name"));
		if (name == NULL || strncmp(name, GCK_ENTRY_PAGES,
		    strlen(GCK_ENTRY_PAGES)) != 0)
			continue;
		hex = json_string_value(json_object_get(o, "sha256"));
		if (hex == NULL || json_unpack(o, "{s:I, s:I, s:I}", "at", &at,
		    "zsize", &zsize, "size", &size) != 0 || at < 0 ||
		    zsize <= 0 || size <= 0 || (uint64_t)size > pages *
		    GCK_PDIG - off || gck_digest_parse(GCK_DK_SHA256, hex,
		    strlen(hex), &d) == -1 || gck_pidx_part(name) != (long)np)
			goto bad;
		if ((r = p_frame_entry(ps, &ps->fx, pi, (uint64_t)at,
		    (uint64_t)zsize, (uint64_t)GCK_PIDX_PART * GCK_PDIG, &fe,
		    &buf, &cap)) != GCK_OK)
			goto out;
		if (strcmp(fe.name, name) != 0 || fe.ref || fe.map != NULL ||
		    fe.size != (uint64_t)size ||
		    !gck_digest_equal(&fe.got, &d) ||
		    !gck_digest_equal(&fe.rec, &d))
			goto bad;
		memcpy(idx + off, buf, (size_t)size);
		off += (uint64_t)size;
		np++;
	}
	if (off != pages * GCK_PDIG)
		goto bad;
	for (i = 0, k = 0; i < nm; k += msize[i++] / GCK_PAGE)
		if (!skip[i] && gck_ptab_add(&ps->ptab, &md[i], msize[i], idx +
		    k * GCK_PDIG) != GCK_OK) {
			r = gck_set_error(ps->ctx, GCK_ENOMEM, "out of memory");
			goto out;
		}
	goto out;
bad:
	r = gck_set_error(ps->ctx, GCK_ECORRUPT, "corrupt %s '%s': its page "
	    "index does not match its trailer", ps->what, pi->path);
out:
	free(fe.map);
	free(buf);
	free(idx);
	free(md);
	free(msize);
	free(skip);
	return r;
}

/*
 * The pages of the images of ps, for a writer to find by their digests
 * (gck_patch_plan()): empty where they have no page index.
 */
const struct gck_ptab *
gck_parents_ptab(const struct gck_parents *ps)
{
	return ps != NULL ? &ps->ptab : NULL;
}

/*
 * The pages of src, the chunks an earlier image sent to the same place
 * held, that ps has (gck_parents_has()): the bases a writer over ps may
 * name, where ps has no page index of its own (a remote's cache).
 * Returns GCK_OK or a code.
 */
int
gck_parents_use_pages(struct gck_parents *ps, const struct gck_ptab *src)
{
	size_t	i;

	gck_ptab_clear(&ps->ptab);
	for (i = 0; src != NULL && i < src->nent; i++)
		if (gck_parents_has(ps, &src->ent[i].d) &&
		    gck_ptab_add(&ps->ptab, &src->ent[i].d, src->ent[i].size,
		    src->dig + src->ent[i].first * GCK_PDIG) != GCK_OK)
			return gck_set_error(ps->ctx, GCK_ENOMEM,
			    "out of memory");
	if (gck_ptab_build(&ps->ptab) != GCK_OK)
		return gck_set_error(ps->ctx, GCK_ENOMEM, "out of memory");
	return GCK_OK;
}

/*
 * The images whose chunks the patches that ps's images hold stand on,
 * when they are not ps's own: the chain of the image ps reads itself
 * (gck_parents_self()).
 */
void
gck_parents_set_bases(struct gck_parents *ps, const struct gck_parents *bases)
{
	ps->bases = bases;
}

/*
 * The parent of an image to write: the image file path, whose chunks
 * the new image refers to rather than store again.  Returns GCK_OK or a
 * code.
 */
int
gck_parents_base(struct gck_parents *ps, const char *path)
{
	int	r;

	if ((ps->img = calloc(1, sizeof *ps->img)) == NULL)
		return gck_set_error(ps->ctx, GCK_ENOMEM, "out of memory");
	ps->nimg = 1;
	if ((r = p_open(ps, path, -1, &ps->img[0])) != GCK_OK ||
	    (r = p_index(ps, 0, 0)) != GCK_OK ||
	    (r = p_pages(ps, 0)) != GCK_OK)
		return r;
	if (gck_ptab_build(&ps->ptab) != GCK_OK)
		return gck_set_error(ps->ctx, GCK_ENOMEM, "out of memory");
	if (ps->img[0].chain != NULL &&
	    json_array_size(ps->img[0].chain) >= CHAIN_MAX)
		return gck_set_error(ps->ctx, GCK_EINVAL, "parent image '%s' "
		    "ends a chain of %d images already", path, CHAIN_MAX);
	if (ps->nall > 1)
		qsort(ps->all, ps->nall, sizeof *ps->all, digest_cmp);
	return GCK_OK;
}

/* Whether the parent of the image being written lists digest d. */
int
gck_parents_has(const struct gck_parents *ps, const struct gck_digest *d)
{
	return d->kind == GCK_DK_SHA256 && ps->nall > 0 && bsearch(d, ps->all,
	    ps->nall, sizeof *ps->all, digest_cmp) != NULL;
}

/*
 * The "parent" key of the manifest of an image written over the base:
 * its id, and the chain of ids whose data a reference may need.
 */
json_t *
gck_parents_json(const struct gck_parents *ps)
{
	json_t	*chain, *v;
	size_t	 i;

	if (ps == NULL || ps->nimg == 0 || (chain = json_array()) == NULL)
		return NULL;
	if (ps->pool) {
		for (i = 0; i < ps->nimg; i++)
			if (json_array_append_new(chain,
			    json_string(ps->img[i].id)) != 0)
				goto bad;
		return json_pack("{s:s, s:o, s:b}", "id", ps->img[0].id,
		    "chain", chain, "cache", 1);
	}
	if (json_array_append_new(chain, json_string(ps->img[0].id)) != 0)
		goto bad;
	json_array_foreach(ps->img[0].chain, i, v)
		if (json_array_append(chain, v) != 0)
			goto bad;
	return json_pack("{s:s, s:o}", "id", ps->img[0].id, "chain", chain);
bad:
	json_decref(chain);
	return NULL;
}

/* Whether id is in the chain (json array of strings) at or after from. */
static ssize_t
chain_find(json_t *chain, size_t from, const char *id)
{
	size_t	i;

	for (i = from; i < json_array_size(chain); i++)
		if (strcmp(json_string_value(json_array_get(chain, i)), id) ==
		    0)
			return (ssize_t)i;
	return -1;
}

/*
 * Considers the image file path for the chain: kept at its place in
 * the chain if its id is there and the place is free.
 */
static int
p_consider(struct gck_parents *ps, json_t *chain, const char *path,
    int named)
{
	struct pimage	 pi;
	ssize_t		 k;
	int		 r;

	if ((r = p_open(ps, path, -1, &pi)) != GCK_OK) {
		pimage_clear(&pi);
		/* In a directory, what is no parent is passed over. */
		return named ? r : GCK_OK;
	}
	if ((k = chain_find(chain, 0, pi.id)) == -1 ||
	    ps->img[k].path != NULL) {
		pimage_clear(&pi);
		return GCK_OK;
	}
	ps->img[k] = pi;
	return GCK_OK;
}

/* Looks at the image files of directory path for the chain. */
static int
p_scan(struct gck_parents *ps, json_t *chain, const char *path)
{
	DIR		*d;
	struct dirent	*de;
	char		*full;
	size_t		 l;
	int		 r = GCK_OK;

	if ((d = opendir(path)) == NULL)
		return gck_set_syserr(ps->ctx, errno, "cannot open '%s': %s",
		    path, strerror(errno));
	while (r == GCK_OK && (de = readdir(d)) != NULL) {
		l = strlen(de->d_name);
		if (l < 5 || strcmp(de->d_name + l - 4, ".gck") != 0)
			continue;
		if (asprintf(&full, "%s/%s", path, de->d_name) == -1) {
			r = gck_set_error(ps->ctx, GCK_ENOMEM, "out of memory");
			break;
		}
		r = p_consider(ps, chain, full, 0);
		free(full);
	}
	closedir(d);
	return r;
}

/*
 * Finds the images of m's chain among the places given, checks that
 * each is the image the chain says, and learns where each stores its
 * chunks.  An image with no chain needs none.  Returns GCK_OK or a code.
 */
int
gck_parents_resolve(struct gck_parents *ps, const struct gck_manifest *m)
{
	json_t		*chain = gck_manifest_chain(m);
	struct stat	 sb;
	const char	*id = gck_manifest_id(m);
	size_t		 i, j, n;
	int		 r, cached = gck_manifest_cached(m);

	snprintf(ps->want, sizeof ps->want, "%s", id != NULL ? id : "?");
	if (chain == NULL)
		return GCK_OK;
	ps->cached = cached;
	n = json_array_size(chain);
	for (i = 0; i < n; i++)
		if ((id != NULL && strcmp(json_string_value(json_array_get(
		    chain, i)), id) == 0) || chain_find(chain, i + 1,
		    json_string_value(json_array_get(chain, i))) != -1)
			return gck_set_error(ps->ctx, GCK_EFORMAT, "corrupt "
			    "image %s: its chain of parents has a cycle",
			    ps->want);
	if ((ps->img = calloc(n, sizeof *ps->img)) == NULL)
		return gck_set_error(ps->ctx, GCK_ENOMEM, "out of memory");
	for (i = 0; i < n; i++)
		ps->img[i].fd = -1;
	ps->nimg = n;
	for (i = 0; i < ps->npaths; i++) {
		if (stat(ps->paths[i], &sb) == -1)
			return gck_set_syserr(ps->ctx, errno, "cannot open "
			    "parent '%s': %s", ps->paths[i], strerror(errno));
		r = S_ISDIR(sb.st_mode) ? p_scan(ps, chain, ps->paths[i]) :
		    p_consider(ps, chain, ps->paths[i], 1);
		if (r != GCK_OK)
			return r;
	}
	for (i = 0; i < n; i++) {
		id = json_string_value(json_array_get(chain, i));
		/*
		 * A cache's images are where its chunks may be: one that
		 * is gone is missed only if a chunk of it is needed.
		 */
		if (ps->img[i].path == NULL && cached && ps->npaths > 0)
			continue;
		if (ps->img[i].path == NULL && cached)
			return gck_set_error(ps->ctx, GCK_EINVAL, "image %s "
			    "refers to the cached image %s of the host it was "
			    "sent to: not found (give that host's cache "
			    "directory with --parent)", ps->want, id);
		if (ps->img[i].path == NULL)
			return gck_set_error(ps->ctx, GCK_EINVAL, "image %s "
			    "needs its parent image %s: not found (give it "
			    "with --parent)", ps->want, id);
		/*
		 * Its own chain is the rest of this one; the images of a
		 * cache each stand alone.
		 */
		if (cached) {
			if ((r = p_index(ps, i, 1)) != GCK_OK)
				return r;
			continue;
		}
		j = ps->img[i].chain != NULL ?
		    json_array_size(ps->img[i].chain) : 0;
		if (j != n - i - 1)
			goto differs;
		for (j = i + 1; j < n; j++)
			if (strcmp(json_string_value(json_array_get(
			    ps->img[i].chain, j - i - 1)), json_string_value(
			    json_array_get(chain, j))) != 0)
				goto differs;
		if ((r = p_index(ps, i, 1)) != GCK_OK)
			return r;
	}
	if (ps->nchunk > 1)
		qsort(ps->chunk, ps->nchunk, sizeof *ps->chunk, pchunk_cmp);
	return GCK_OK;
differs:
	return gck_set_error(ps->ctx, GCK_EFORMAT, "parent image %s ('%s') "
	    "does not have the parents image %s says it has", id,
	    ps->img[i].path, ps->want);
}

/*
 * The chunk whose digest is d, where the images of ps store it, or NULL;
 * a pool notes that it was needed (gck_parents_pool_covered()).
 */
static const struct pchunk *
p_find(const struct gck_parents *ps, const struct gck_digest *d)
{
	const struct pchunk	*c;
	struct pchunk		 key;

	if (ps->nchunk == 0)
		return NULL;
	key.d = *d;
	c = bsearch(&key, ps->chunk, ps->nchunk, sizeof *ps->chunk,
	    pchunk_cmp);
	if (c != NULL && ps->need != NULL)
		__atomic_store_n(&ps->need[c - ps->chunk], 1,
		    __ATOMIC_RELAXED);
	return c;
}

/*
 * Whether image i of ps stands on the image whose id is id: its chain
 * names it.
 */
int
gck_parents_stands_on(const struct gck_parents *ps, size_t i, const char *id)
{
	return i < ps->nimg && ps->img[i].chain != NULL &&
	    chain_find(ps->img[i].chain, 0, id) >= 0;
}

/*
 * Whether every chunk fetched from the pool ps so far is still stored
 * by one of its images that gone (one flag an image) does not mark:
 * the image read from it could still be read without those.
 */
int
gck_parents_pool_covered(const struct gck_parents *ps,
    const unsigned char *gone)
{
	size_t	a, b;
	int	needed, held;

	if (ps->need == NULL)		/* none noted: any may be needed */
		return ps->nchunk == 0;
	for (a = 0; a < ps->nchunk; a = b) {
		needed = held = 0;
		for (b = a; b < ps->nchunk && pchunk_cmp(&ps->chunk[a],
		    &ps->chunk[b]) == 0; b++) {
			needed |= __atomic_load_n(&ps->need[b],
			    __ATOMIC_RELAXED);
			held |= !gone[ps->chunk[b].img];
		}
		if (needed && !held)
			return 0;
	}
	return 1;
}

/*
 * The data of the chunk whose digest is d and size size, read from the
 * image of the chain that stores it and checked.  Returns GCK_OK with
 * *datap (valid until the next call), or a code.
 */
int
gck_parents_fetch(struct gck_parents *ps, const struct gck_digest *d,
    uint64_t size, const char **datap)
{
	const struct pchunk	*c;
	struct fentry		 fe;
	char			 hex[GCK_DIGEST_HEX];
	int			 r;

	gck_digest_hex(d, hex);
	if ((c = p_find(ps, d)) == NULL) {
		if (ps->nimg == 0)
			return gck_set_error(ps->ctx, GCK_EINVAL, "image %s "
			    "refers to its parent images: give them with "
			    "--parent", ps->want);
		if (ps->cached)
			return gck_set_error(ps->ctx, GCK_EINVAL, "image %s "
			    "refers to a chunk (sha256 %.16s...) that none of "
			    "the cached images found stores", ps->want, hex);
		return gck_set_error(ps->ctx, GCK_ECORRUPT, "corrupt image "
		    "%s: it refers to a chunk (sha256 %.16s...) that none of "
		    "its parent images stores", ps->want, hex);
	}
	memset(&fe, 0, sizeof fe);
	if ((r = p_frame_entry(ps, &ps->fx, &ps->img[c->img], c->at,
	    c->zsize, GCK_PART_MAX, &fe, &ps->data, &ps->datacap)) !=
	    GCK_OK) {
		free(fe.map);
		if (r != GCK_ENOMEM && r != GCK_ESYS)
			ps->bad = (ssize_t)c->img;
		return r;
	}
	if (fe.ref || (fe.map != NULL ? fe.refsize : fe.size) != size ||
	    c->size != size || !gck_digest_equal(&fe.got, d) ||
	    !gck_digest_equal(&fe.rec, d)) {
		free(fe.map);
		ps->bad = (ssize_t)c->img;
		return gck_set_error(ps->ctx, GCK_ECORRUPT, "corrupt %s %s "
		    "('%s'): its chunk at offset %" PRIu64 " does not match "
		    "its digest (sha256 %.16s...)", ps->what,
		    ps->img[c->img].id, ps->img[c->img].path, c->at, hex);
	}
	r = fe.map != NULL ? p_patch(ps, &ps->fx, &fe, &ps->data,
	    &ps->datacap, 0) : GCK_OK;
	free(fe.map);
	if (r != GCK_OK) {
		if (r != GCK_ENOMEM && r != GCK_ESYS)
			ps->bad = (ssize_t)c->img;
		return r;
	}
	__atomic_add_fetch(&ps->img[c->img].used, size, __ATOMIC_RELAXED);
	*datap = ps->data;
	return GCK_OK;
}

/*
 * Each thread that loads chunks (gck_parents_load()) keeps the buffers
 * it reads and decompresses them in, for the next: a chunk is read in a
 * frame of up to 1 MiB, and fresh memory for each would be most of the
 * cost.  They go when the thread does.
 */
static pthread_key_t	pfetch_key;
static pthread_once_t	pfetch_once = PTHREAD_ONCE_INIT;
static int		pfetch_keyed;

static void
pfetch_end(void *p)
{
	pfetch_clear(p);
	free(p);
}

static void
pfetch_init(void)
{
	pfetch_keyed = pthread_key_create(&pfetch_key, pfetch_end) == 0;
}

/* This thread's fetch state, or NULL. */
static struct pfetch *
pfetch_mine(void)
{
	struct pfetch	*fx;

	if (pthread_once(&pfetch_once, pfetch_init) != 0 || !pfetch_keyed)
		return NULL;
	if ((fx = pthread_getspecific(pfetch_key)) != NULL)
		return fx;
	if ((fx = calloc(1, sizeof *fx)) == NULL)
		return NULL;
	if (pthread_setspecific(pfetch_key, fx) != 0) {
		free(fx);
		return NULL;
	}
	return fx;
}

/*
 * As gck_parents_fetch(), but on any thread, while others fetch: into
 * *bufp (*capp bytes, grown as needed), touching nothing of ps that a
 * fetch changes, and saying nothing.  The caller notes what it used
 * with gck_parents_note().  Returns 0 with the index of the image read
 * in *imgp, or -1, where gck_parents_fetch() would say why.
 */
int
gck_parents_load(const struct gck_parents *ps, const struct gck_digest *d,
    uint64_t size, char **bufp, size_t *capp, size_t *imgp)
{
	struct gck_ctx		 ctx;
	struct pfetch		*fx;
	int			 r;

	if ((fx = pfetch_mine()) == NULL)
		return -1;
	memset(&ctx, 0, sizeof ctx);
	fx->ctx = &ctx;
	r = p_load(ps, fx, d, size, bufp, capp, imgp, 0);
	fx->ctx = NULL;
	return r == GCK_OK ? 0 : -1;
}

/*
 * The chunk whose digest is d and size size into *bufp (*capp bytes,
 * grown as needed), read from the image of ps that stores it with fx,
 * and checked; a patch made whole, its bases read too, depth patches
 * down already.  Returns GCK_OK with the image in *imgp, or a code (on
 * fx's context).
 */
static int
p_load(const struct gck_parents *ps, struct pfetch *fx,
    const struct gck_digest *d, uint64_t size, char **bufp, size_t *capp,
    size_t *imgp, int depth)
{
	const struct pchunk	*c;
	struct fentry		 fe;
	char			 hex[GCK_DIGEST_HEX];
	int			 r;

	if ((c = p_find(ps, d)) == NULL || c->size != size)
		return gck_set_error(fx->ctx, GCK_ECORRUPT, "corrupt image: "
		    "a patch names a chunk (sha256 %.16s...) that no image "
		    "of its chain stores", gck_digest_hex(d, hex));
	memset(&fe, 0, sizeof fe);
	r = p_frame_entry(ps, fx, &ps->img[c->img], c->at, c->zsize,
	    GCK_PART_MAX, &fe, bufp, capp);
	if (r == GCK_OK && (fe.ref || (fe.map != NULL ? fe.refsize :
	    fe.size) != size || !gck_digest_equal(&fe.got, d) ||
	    !gck_digest_equal(&fe.rec, d)))
		r = gck_set_error(fx->ctx, GCK_ECORRUPT, "corrupt %s %s "
		    "('%s'): its chunk at offset %" PRIu64 " does not match "
		    "its digest (sha256 %.16s...)", ps->what,
		    ps->img[c->img].id, ps->img[c->img].path, c->at,
		    gck_digest_hex(d, hex));
	if (r == GCK_OK && fe.map != NULL)
		r = p_patch(ps, fx, &fe, bufp, capp, depth);
	free(fe.map);
	if (r == GCK_OK)
		*imgp = c->img;
	return r;
}

/*
 * The chunk of a patch of the image being read, entry name, whose map
 * is len bytes of text and which stores the n bytes of pages at stored,
 * made whole into *bufp (*capp bytes, grown as needed): size bytes, its
 * bases read from the images of ps and checked.  The caller has checked
 * the patch's own digest.  Returns GCK_OK or a code.
 */
int
gck_parents_assemble(struct gck_parents *ps, const char *name,
    const char *map, size_t len, const char *stored, uint64_t n,
    uint64_t size, char **bufp, size_t *capp)
{
	struct fentry	 fe;

	if (p_patch_entry(&fe, name, map, len, stored, n, size, bufp,
	    capp) == -1)
		return gck_set_error(ps->ctx, GCK_ENOMEM, "out of memory");
	return p_patch(ps, &ps->fx, &fe, bufp, capp, 0);
}

/*
 * Copies n pages of the chunk whose digest is d and size size, pages[i]
 * to to[i], from the image of ps that stores it, checked: of a patch,
 * only the pages it stores and those its bases give for the pages
 * asked, as a patch's bases are read (p_take()).  Returns GCK_OK or a
 * code.
 */
int
gck_parents_pages(struct gck_parents *ps, const struct gck_digest *d,
    uint64_t size, const uint32_t *pages, char *const *to, size_t n)
{
	const struct gck_parents *pb = ps->bases != NULL ? ps->bases : ps;
	struct pwant		 w[GCK_PATCH_RUNS];
	size_t			 i;

	if (n > GCK_PATCH_RUNS)
		return gck_set_error(ps->ctx, GCK_EINVAL, "%zu pages asked "
		    "of a chunk", n);
	for (i = 0; i < n; i++) {
		w[i].page = pages[i];
		w[i].to = to[i];
	}
	return p_take(pb, &ps->fx, d, size, w, n, 0);
}

/*
 * The patch named name, whose map is len bytes and which stores the n
 * bytes at stored, of a chunk of size bytes, as p_patch() takes it: fe,
 * and the pages in *bufp (*capp bytes, grown as needed).  Returns 0, or
 * -1 when out of memory.
 */
static int
p_patch_entry(struct fentry *fe, const char *name, const char *map,
    size_t len, const char *stored, uint64_t n, uint64_t size, char **bufp,
    size_t *capp)
{
	char	*nb;

	memset(fe, 0, sizeof *fe);
	snprintf(fe->name, sizeof fe->name, "%s", name);
	fe->map = (char *)map;
	fe->maplen = len;
	fe->size = n;
	fe->refsize = size;
	if (*capp < n + 1) {
		if ((nb = realloc(*bufp, (size_t)n + 1)) == NULL)
			return -1;
		*bufp = nb;
		*capp = (size_t)n + 1;
	}
	memcpy(*bufp, stored, (size_t)n);
	return 0;
}

/*
 * As gck_parents_assemble(), but on any thread, while others fetch, as
 * gck_parents_load() does: saying nothing, into *bufp (*capp bytes).
 * Returns 0, or -1 where gck_parents_assemble() would say why.
 */
int
gck_parents_assemble_any(const struct gck_parents *ps, const char *name,
    const char *map, size_t len, const char *stored, uint64_t n,
    uint64_t size, char **bufp, size_t *capp)
{
	struct gck_ctx	 ctx;
	struct pfetch	*fx;
	struct fentry	 fe;
	int		 r;

	if ((fx = pfetch_mine()) == NULL || p_patch_entry(&fe, name, map, len,
	    stored, n, size, bufp, capp) == -1)
		return -1;
	memset(&ctx, 0, sizeof ctx);
	fx->ctx = &ctx;
	r = p_patch(ps, fx, &fe, bufp, capp, 0);
	fx->ctx = NULL;
	return r == GCK_OK ? 0 : -1;
}

/*
 * Makes the chunk of patch fe whole: *bufp holds the pages it stores,
 * and then the chunk, its bases read from the images of ps (or of those
 * ps names for them), each checked, depth patches down already.
 * Returns GCK_OK or a code (on fx's context).
 */
static int
p_patch(const struct gck_parents *ps, struct pfetch *fx,
    const struct fentry *fe, char **bufp, size_t *capp, int depth)
{
	const struct gck_parents *pb = ps->bases != NULL ? ps->bases : ps;
	struct gck_patch	*p = NULL;
	struct pwant		 w[GCK_PATCH_RUNS];
	char			 why[160], *out = NULL;
	size_t			 i, b, nw;
	uint32_t		 j;
	uint64_t		 at, from;
	int			 r;

	if (depth >= (int)pb->nimg + 1)
		return gck_set_error(fx->ctx, GCK_ECORRUPT, "corrupt image: "
		    "patch '%.200s' stands on patches %d deep, more than its "
		    "chain has images", fe->name, depth);
	if ((p = malloc(sizeof *p)) == NULL || (out = malloc((size_t)
	    fe->refsize + 1)) == NULL) {
		r = gck_set_error(fx->ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	if (gck_patch_parse(fe->map, fe->maplen, fe->refsize, fe->size, p,
	    why, sizeof why) == -1) {
		r = gck_set_error(fx->ctx, GCK_ECORRUPT, "corrupt image: "
		    "patch '%.200s': %s", fe->name, why);
		goto out;
	}
	/* the pages it stores, and zeros, in their places */
	for (i = 0, at = 0, from = 0; i < p->nrun; i++) {
		if (p->run[i].kind == GCK_RUN_STORED) {
			memcpy(out + at, *bufp + from, (size_t)p->run[i].count *
			    GCK_PAGE);
			from += (uint64_t)p->run[i].count * GCK_PAGE;
		} else if (p->run[i].kind == GCK_RUN_ZERO)
			memset(out + at, 0, (size_t)p->run[i].count *
			    GCK_PAGE);
		at += (uint64_t)p->run[i].count * GCK_PAGE;
	}
	/* then each base's pages, one base at a time */
	for (b = 0; b < p->nbase; b++) {
		for (i = 0, at = 0, nw = 0; i < p->nrun; i++) {
			for (j = 0; p->run[i].kind == GCK_RUN_BASE &&
			    p->run[i].base == b && j < p->run[i].count &&
			    nw < GCK_PATCH_RUNS; j++, nw++) {
				w[nw].page = p->run[i].page + j;
				w[nw].to = out + at + (uint64_t)j * GCK_PAGE;
			}
			at += (uint64_t)p->run[i].count * GCK_PAGE;
		}
		if ((r = p_take(pb, fx, &p->base[b], p->bsize[b], w, nw,
		    depth + 1)) != GCK_OK)
			goto out;
	}
	free(*bufp);
	*bufp = out;
	*capp = (size_t)fe->refsize + 1;
	out = NULL;
	r = GCK_OK;
out:
	free(out);
	free(p);
	return r;
}

/*
 * Copies the n pages w wants of the chunk whose digest is d and size
 * size, each where it goes, the chunk read from the image of ps that
 * stores it (or kept by fx) and checked; of a patch, the pages it
 * stores, and those of its bases taken from them in turn, depth patches
 * down already.  Returns GCK_OK or a code (on fx's context).
 */
static int
p_take(const struct gck_parents *ps, struct pfetch *fx,
    const struct gck_digest *d, uint64_t size, const struct pwant *w,
    size_t n, int depth)
{
	const struct pchunk	*c;
	const struct pkept	*k;
	struct fentry		 fe;
	struct gck_patch	*p = NULL;
	struct gck_digest	 bd[GCK_PATCH_BASES];
	struct pwant		 sub[GCK_PATCH_RUNS];
	uint64_t		 bs[GCK_PATCH_BASES], off[GCK_PATCH_RUNS], at;
	unsigned char		 kind[GCK_PATCH_RUNS];
	unsigned char		 base[GCK_PATCH_RUNS];
	char			 hex[GCK_DIGEST_HEX], why[160], *buf = NULL;
	size_t			 cap = 0, i, b, nb, m;
	size_t			 np = size / GCK_PAGE;
	uint32_t		 j;
	int			 r = GCK_OK;

	if (depth >= (int)ps->nimg + 1)
		return gck_set_error(fx->ctx, GCK_ECORRUPT, "corrupt image: "
		    "a patch stands on patches %d deep, more than its chain "
		    "has images", depth);
	if (size % GCK_PAGE != 0 || np > GCK_PATCH_RUNS)
		return gck_set_error(fx->ctx, GCK_ECORRUPT, "corrupt image: "
		    "a patch names a chunk of %" PRIu64 " bytes as a base",
		    size);
	if ((k = pfetch_kept(fx, d, size)) == NULL) {
		if ((c = p_find(ps, d)) == NULL || c->size != size)
			return gck_set_error(fx->ctx, GCK_ECORRUPT, "corrupt "
			    "image: a patch names a chunk (sha256 %.16s...) "
			    "that no image of its chain stores",
			    gck_digest_hex(d, hex));
		memset(&fe, 0, sizeof fe);
		r = p_frame_entry(ps, fx, &ps->img[c->img], c->at, c->zsize,
		    GCK_PART_MAX, &fe, &buf, &cap);
		if (r == GCK_OK && (fe.ref || (fe.map != NULL ? fe.refsize :
		    fe.size) != size || !gck_digest_equal(&fe.got, d) ||
		    !gck_digest_equal(&fe.rec, d)))
			r = gck_set_error(fx->ctx, GCK_ECORRUPT, "corrupt %s "
			    "%s ('%s'): its chunk at offset %" PRIu64 " does "
			    "not match its digest (sha256 %.16s...)",
			    ps->what, ps->img[c->img].id, ps->img[c->img].path,
			    c->at, gck_digest_hex(d, hex));
		if (r == GCK_OK && fe.map != NULL && (p = malloc(sizeof *p)) ==
		    NULL)
			r = gck_set_error(fx->ctx, GCK_ENOMEM, "out of memory");
		if (r == GCK_OK && fe.map != NULL && gck_patch_parse(fe.map,
		    fe.maplen, fe.refsize, fe.size, p, why, sizeof why) == -1)
			r = gck_set_error(fx->ctx, GCK_ECORRUPT, "corrupt "
			    "image: patch '%.200s': %s", fe.name, why);
		if (r == GCK_OK && (k = pfetch_keep(fx, d, size, buf,
		    fe.map != NULL ? fe.size : size, p)) == NULL)
			r = gck_set_error(fx->ctx, GCK_ENOMEM, "out of memory");
		/* what it gave counts as used (a cache keeps it longer) */
		if (r == GCK_OK)
			__atomic_add_fetch(&((struct gck_parents *)ps)->img[
			    c->img].used, size, __ATOMIC_RELAXED);
		free(fe.map);
		free(buf);
		free(p);
		if (r != GCK_OK)
			return r;
	}
	for (i = 0; i < n; i++)
		if (w[i].page >= np)
			return gck_set_error(fx->ctx, GCK_ECORRUPT, "corrupt "
			    "image: a patch takes page %u of a base of %zu",
			    (unsigned)w[i].page, np);
	if (k->p == NULL) {
		for (i = 0; i < n; i++)
			memcpy(w[i].to, k->data + (size_t)w[i].page * GCK_PAGE,
			    GCK_PAGE);
		return GCK_OK;
	}
	/*
	 * A patch: where each of its pages is, noted before its bases are
	 * read (which may take its place among those kept).
	 */
	for (i = 0, m = 0, at = 0; i < k->p->nrun; i++)
		for (j = 0; j < k->p->run[i].count && m < np; j++, m++) {
			kind[m] = (unsigned char)k->p->run[i].kind;
			base[m] = (unsigned char)k->p->run[i].base;
			if (kind[m] == GCK_RUN_STORED) {
				off[m] = at;
				at += GCK_PAGE;
			} else
				off[m] = k->p->run[i].page + j;
		}
	nb = k->p->nbase;
	for (b = 0; b < nb; b++) {
		bd[b] = k->p->base[b];
		bs[b] = k->p->bsize[b];
	}
	for (i = 0; i < n; i++)
		if (kind[w[i].page] == GCK_RUN_STORED)
			memcpy(w[i].to, k->data + off[w[i].page], GCK_PAGE);
		else if (kind[w[i].page] == GCK_RUN_ZERO)
			memset(w[i].to, 0, GCK_PAGE);
	for (b = 0; b < nb && r == GCK_OK; b++) {
		for (i = 0, m = 0; i < n; i++)
			if (kind[w[i].page] == GCK_RUN_BASE &&
			    base[w[i].page] == b) {
				sub[m].page = (uint32_t)off[w[i].page];
				sub[m++].to = w[i].to;
			}
		if (m > 0)
			r = p_take(ps, fx, &bd[b], bs[b], sub, m, depth + 1);
	}
	return r;
}

/* Notes that size bytes of image i were used (gck_parents_load()). */
void
gck_parents_note(struct gck_parents *ps, size_t i, uint64_t size)
{
	__atomic_add_fetch(&ps->img[i].used, size, __ATOMIC_RELAXED);
}

/*
 * The end of the image file on fd (name, for messages), found from its
 * footer: the trailer's text, in *tp (*tlenp bytes and a NUL), and the
 * signature that follows it, in *sigp (*siglenp bytes and a NUL), or
 * NULL when the image is not signed; each checked against the digest
 * of its header.  Both are to be freed.  Returns GCK_OK, GCK_EFORMAT
 * for an image with no footer, or another code.
 */
int
gck_image_tail(struct gck_ctx *ctx, int fd, const char *name, char **tp,
    size_t *tlenp, char **sigp, size_t *siglenp)
{
	struct gck_parents	*ps = NULL;
	struct pimage		 pi;
	struct fentry		 fe, fs;
	struct stat		 sb;
	char			*buf = NULL, *sbuf = NULL;
	size_t			 cap = 0, scap = 0;
	uint64_t		 tat;
	int			 r;

	*tp = *sigp = NULL;
	*tlenp = *siglenp = 0;
	memset(&pi, 0, sizeof pi);
	memset(&fe, 0, sizeof fe);
	memset(&fs, 0, sizeof fs);
	pi.path = (char *)name;
	pi.fd = fd;
	if (fstat(fd, &sb) == -1)
		return gck_set_syserr(ctx, errno, "cannot read '%s': %s",
		    name, strerror(errno));
	if (!S_ISREG(sb.st_mode) || gck_zio_footer(fd, (uint64_t)sb.st_size,
	    &tat) == -1)
		return gck_set_error(ctx, GCK_EFORMAT, "'%s' has no footer: "
		    "not a compressed image file of format 2 or 3", name);
	if ((r = gck_parents_new(ctx, &ps)) != GCK_OK)
		return r;
	ps->what = "image";
	if ((r = p_frame_entries(ps, &ps->fx, &pi, tat, (uint64_t)sb.st_size -
	    tat - gck_zio_footer_len(), GCK_META_MAX, &fe, &buf, &cap, &fs,
	    &sbuf, &scap)) != GCK_OK)
		goto out;
	if (strcmp(fe.name, GCK_ENTRY_TRAILER) != 0 || fe.ref ||
	    fe.map != NULL || !gck_digest_equal(&fe.rec, &fe.got)) {
		r = gck_set_error(ctx, GCK_ECORRUPT, "corrupt image '%s': its "
		    "footer names no trailer", name);
		goto out;
	}
	if (fs.name[0] != '\0' && (strcmp(fs.name, GCK_ENTRY_SIG) != 0 ||
	    fs.ref || fs.map != NULL || fs.size > GCK_SIG_MAX ||
	    !gck_digest_equal(&fs.rec,
	    &fs.got))) {
		r = gck_set_error(ctx, GCK_ECORRUPT, "corrupt image '%s': what "
		    "follows its trailer is no signature", name);
		goto out;
	}
	*tp = buf;
	*tlenp = (size_t)fe.size;
	buf = NULL;
	if (fs.name[0] != '\0') {
		*sigp = sbuf;
		*siglenp = (size_t)fs.size;
		sbuf = NULL;
	}
	r = GCK_OK;
out:
	free(fe.map);
	free(fs.map);
	free(buf);
	free(sbuf);
	gck_parents_free(ps);
	return r;
}

/*
 * The image file on fd itself (name, for messages), read as a parent is
 * read: its footer, its trailer, its manifest, and where it stores each
 * chunk, so that gck_parents_fetch() reads any chunk of it by itself and
 * gck_parents_entry() lists its entries.  Returns GCK_OK with *psp, or
 * a code (an image with no footer, or no file).
 */
int
gck_parents_self(struct gck_ctx *ctx, int fd, const char *name,
    struct gck_parents **psp)
{
	struct gck_parents	*ps = NULL;
	int			 r;

	*psp = NULL;
	if ((r = gck_parents_new(ctx, &ps)) != GCK_OK)
		return r;
	ps->what = "image";
	if ((ps->img = calloc(1, sizeof *ps->img)) == NULL) {
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	ps->img[0].fd = -1;
	ps->nimg = 1;
	if ((r = p_open(ps, name, fd, &ps->img[0])) != GCK_OK ||
	    (r = p_index(ps, 0, 1)) != GCK_OK)
		goto out;
	snprintf(ps->want, sizeof ps->want, "%s", ps->img[0].id);
	if (ps->nchunk > 1)
		qsort(ps->chunk, ps->nchunk, sizeof *ps->chunk, pchunk_cmp);
	*psp = ps;
	ps = NULL;
out:
	gck_parents_free(ps);
	return r;
}

/* How many entries the trailer of the first image of ps lists. */
size_t
gck_parents_nentries(const struct gck_parents *ps)
{
	return ps->nimg > 0 ? json_array_size(ps->img[0].entries) : 0;
}

/*
 * Entry i of the trailer of the first image of ps into *e.  Returns 0,
 * or -1 for an entry the trailer does not give all of.
 */
int
gck_parents_entry(const struct gck_parents *ps, size_t i,
    struct gck_tentry *e)
{
	json_t		*o;
	json_int_t	 size, at, zsize;
	const char	*hex, *name;

	if (ps->nimg == 0 || (o = json_array_get(ps->img[0].entries, i)) ==
	    NULL)
		return -1;
	hex = json_string_value(json_object_get(o, "sha256"));
	name = json_string_value(json_object_get(o, "name"));
	if (name == NULL || hex == NULL || json_unpack(o, "{s:I, s:I, s:I}",
	    "size", &size, "at", &at, "zsize", &zsize) != 0 || size < 0 ||
	    at < 0 || zsize <= 0 ||
	    gck_digest_parse(GCK_DK_SHA256, hex, strlen(hex), &e->d) == -1)
		return -1;
	e->name = name;
	e->size = (uint64_t)size;
	e->at = (uint64_t)at;
	e->zsize = (uint64_t)zsize;
	e->ref = json_is_true(json_object_get(o, "ref"));
	return 0;
}

/* The images of the chain, found: how many, each one's path and id. */
size_t
gck_parents_count(const struct gck_parents *ps)
{
	return ps != NULL ? ps->nimg : 0;
}

const char *
gck_parents_path(const struct gck_parents *ps, size_t i)
{
	return ps->img[i].path;
}

const char *
gck_parents_id(const struct gck_parents *ps, size_t i)
{
	return ps->img[i].id;
}

/*
 * The parents of the image whose manifest is m, looked for in the n
 * places of paths (image files or directories): *psp is NULL for an
 * image that has none.  Returns GCK_OK or a code.
 */
int
gck_parents_open(struct gck_ctx *ctx, const struct gck_manifest *m,
    char *const *paths, size_t n, struct gck_parents **psp)
{
	struct gck_parents	*ps = NULL;
	size_t			 i;
	int			 r;

	*psp = NULL;
	if (gck_manifest_chain(m) == NULL)
		return GCK_OK;
	if ((r = gck_parents_new(ctx, &ps)) != GCK_OK)
		return r;
	for (i = 0; i < n; i++)
		if ((r = gck_parents_add(ps, paths[i])) != GCK_OK)
			goto out;
	if ((r = gck_parents_resolve(ps, m)) != GCK_OK)
		goto out;
	*psp = ps;
	ps = NULL;
out:
	gck_parents_free(ps);
	return r;
}

/*
 * How much of the image file on fd (named name) its trailer says it
 * stores, and how much it leaves to its parents: the sizes of its
 * entries, and of those that are references.  Returns GCK_OK, or a code
 * for an image that has no footer (or that is no file).
 */
int
gck_parents_sizes(struct gck_ctx *ctx, int fd, const char *name,
    uint64_t *storedp, uint64_t *refp)
{
	struct gck_parents	*ps = NULL;
	struct pimage		 pi;
	json_t			*o;
	size_t			 i;
	int			 r;

	*storedp = *refp = 0;
	memset(&pi, 0, sizeof pi);
	pi.fd = -1;
	if ((r = gck_parents_new(ctx, &ps)) != GCK_OK ||
	    (r = p_open(ps, name, fd, &pi)) != GCK_OK)
		goto out;
	json_array_foreach(pi.entries, i, o) {
		if (json_is_true(json_object_get(o, "ref")))
			*refp += (uint64_t)json_integer_value(
			    json_object_get(o, "size"));
		else
			*storedp += (uint64_t)json_integer_value(
			    json_object_get(o, "size"));
	}
out:
	pimage_clear(&pi);
	gck_parents_free(ps);
	return r;
}

/*
 * A pool: the images a receiver's cache holds.  An image sent to that
 * receiver may refer to any chunk one of them stores, by its digest
 * alone (its manifest's parent says "cache"): they need not be a chain.
 */

/*
 * Adds the image file path to the pool ps, with the chunks it stores.
 * Returns GCK_OK, or a code and the pool as it was (an image that is
 * damaged, gone, or not of format 2 with a footer).
 */
int
gck_parents_pool_add(struct gck_parents *ps, const char *path)
{
	return p_pool_add(ps, path);
}

/*
 * As gck_parents_pool_add(), for the parent of the image to be written
 * over the pool, and the images of its chain, found beside it: then the
 * chunks it refers to and its patches are chunks of the pool too, and
 * its page index, which lists all of its memory, tells the pages of
 * each.  Where its chain is not beside it, only the chunks it stores
 * are the pool's.  Returns GCK_OK or a code.
 */
int
gck_parents_pool_parent(struct gck_parents *ps, const char *path)
{
	struct gck_parents	*chain = NULL;
	struct gck_ctx		 lctx;
	char			 dir[PATH_MAX], *sl, *dirs[1];
	size_t			 at = ps->nimg, i;
	int			 r;

	if ((r = p_pool_add(ps, path)) != GCK_OK || ps->nimg == at)
		return r;
	if (ps->img[at].chain != NULL && json_array_size(ps->img[at].chain) >
	    0) {
		snprintf(dir, sizeof dir, "%s", path);
		if ((sl = strrchr(dir, '/')) == NULL)
			snprintf(dir, sizeof dir, ".");
		else if (sl == dir)
			sl[1] = '\0';
		else
			*sl = '\0';
		dirs[0] = dir;
		memset(&lctx, 0, sizeof lctx);
		if (gck_parents_open(&lctx, ps->img[at].m, dirs, 1, &chain) !=
		    GCK_OK || chain == NULL) {
			gck_parents_free(chain);
			return GCK_OK;
		}
		for (i = 0; i < gck_parents_count(chain); i++)
			if ((r = p_pool_add(ps, gck_parents_path(chain,
			    i))) != GCK_OK)
				break;
		gck_parents_free(chain);
		if (r != GCK_OK)
			return r;
	}
	ps->img[at].parent = 1;
	return GCK_OK;
}

static int
p_pool_add(struct gck_parents *ps, const char *path)
{
	struct pimage	*ni;
	size_t		 i, n0 = ps->nchunk;
	int		 r;

	if ((ni = reallocarray(ps->img, ps->nimg + 1, sizeof *ni)) == NULL)
		return gck_set_error(ps->ctx, GCK_ENOMEM, "out of memory");
	ps->img = ni;
	ps->pool = 1;
	ps->what = "cached image";
	if ((r = p_open(ps, path, -1, &ps->img[ps->nimg])) != GCK_OK) {
		pimage_clear(&ps->img[ps->nimg]);
		return r;
	}
	for (i = 0; i < ps->nimg; i++)
		if (strcmp(ps->img[i].id, ps->img[ps->nimg].id) == 0) {
			pimage_clear(&ps->img[ps->nimg]);
			return GCK_OK;
		}
	if ((r = p_index(ps, ps->nimg++, 1)) != GCK_OK) {
		ps->nchunk = n0;
		pimage_clear(&ps->img[--ps->nimg]);
	}
	return r;
}

/*
 * The first image of the pool ps whose chain names an image that the
 * pool does not hold, which then cannot be read whole, nor its patches
 * be bases; or -1.
 */
ssize_t
gck_parents_pool_orphan(const struct gck_parents *ps)
{
	const char	*id;
	size_t		 i, j, k;

	for (i = 0; i < ps->nimg; i++)
		for (k = 0; ps->img[i].chain != NULL &&
		    k < json_array_size(ps->img[i].chain); k++) {
			id = json_string_value(json_array_get(ps->img[i].chain,
			    k));
			for (j = 0; j < ps->nimg && (id == NULL ||
			    strcmp(ps->img[j].id, id) != 0); j++)
				;
			if (j == ps->nimg)
				return (ssize_t)i;
		}
	return -1;
}

/*
 * Once every image is added: the pool is ready for fetches, and notes
 * which of its chunks they need from now on (out of memory, it cannot:
 * any image it holds may then be needed).
 */
void
gck_parents_pool_done(struct gck_parents *ps)
{
	if (ps->nchunk > 1)
		qsort(ps->chunk, ps->nchunk, sizeof *ps->chunk, pchunk_cmp);
	free(ps->need);
	ps->need = ps->nchunk > 0 ? calloc(ps->nchunk, 1) : NULL;
}

/*
 * Once every image is added: the pool offers the chunks it stores to an
 * image being written, which refers to them (gck_writer_set_parents())
 * rather than store them again.  Returns GCK_OK or a code.
 */
int
gck_parents_pool_offer(struct gck_parents *ps)
{
	struct gck_digest	*d;
	size_t			 n;
	int			 r;

	size_t			 i;

	if ((r = gck_parents_pool_digests(ps, &d, &n)) != GCK_OK)
		return r;
	free(ps->all);
	ps->all = d;
	ps->nall = n;
	gck_ptab_clear(&ps->ptab);
	for (i = 0; i < ps->nimg; i++)
		if ((r = p_pages(ps, i)) != GCK_OK)
			return r;
	if (gck_ptab_build(&ps->ptab) != GCK_OK)
		return gck_set_error(ps->ctx, GCK_ENOMEM, "out of memory");
	return GCK_OK;
}

/*
 * The digests of the chunks the pool stores, each once, sorted, into
 * *dp (n of them, to be freed).  Returns GCK_OK or a code.
 */
int
gck_parents_pool_digests(const struct gck_parents *ps,
    struct gck_digest **dp, size_t *np)
{
	struct gck_digest	*d;
	size_t			 i, n = 0;

	*dp = NULL;
	*np = 0;
	if (ps->nchunk == 0)
		return GCK_OK;
	if ((d = calloc(ps->nchunk, sizeof *d)) == NULL)
		return gck_set_error(ps->ctx, GCK_ENOMEM, "out of memory");
	for (i = 0; i < ps->nchunk; i++)
		if (n == 0 || digest_cmp(&d[n - 1], &ps->chunk[i].d) != 0)
			d[n++] = ps->chunk[i].d;
	*dp = d;
	*np = n;
	return GCK_OK;
}

/*
 * Checks that the images of m's chain, an image of the cache, are all
 * in the pool ps.  Returns GCK_OK or a code.
 */
int
gck_parents_pool_check(struct gck_parents *ps, const struct gck_manifest *m)
{
	json_t		*chain = gck_manifest_chain(m);
	const char	*id = gck_manifest_id(m), *cid;
	size_t		 i, j;

	snprintf(ps->want, sizeof ps->want, "%s", id != NULL ? id : "?");
	if (!gck_manifest_cached(m))
		return gck_set_error(ps->ctx, GCK_EFORMAT, "image %s refers "
		    "to parent images, not to this host's cache", ps->want);
	for (i = 0; i < json_array_size(chain); i++) {
		cid = json_string_value(json_array_get(chain, i));
		for (j = 0; j < ps->nimg; j++)
			if (strcmp(ps->img[j].id, cid) == 0)
				break;
		if (j == ps->nimg)
			return gck_set_error(ps->ctx, GCK_EINVAL, "image %s "
			    "refers to the cached image %s, which this host's "
			    "cache does not hold", ps->want, cid);
	}
	return GCK_OK;
}

/* How many bytes of the chunks of image i were fetched. */
uint64_t
gck_parents_used(const struct gck_parents *ps, size_t i)
{
	return __atomic_load_n(&ps->img[i].used, __ATOMIC_RELAXED);
}

/* The path of the image a fetch found damaged, or NULL. */
const char *
gck_parents_bad(const struct gck_parents *ps)
{
	return ps != NULL && ps->bad >= 0 ? ps->img[ps->bad].path : NULL;
}

/*
 * What the sender knows of a receiver's cache: the ids of its images,
 * and the n digests (sorted, each once) of the chunks they store;
 * *psp takes d.  An image written over it refers to those chunks.
 * Returns GCK_OK or a code (d freed).
 */
int
gck_parents_remote(struct gck_ctx *ctx, json_t *ids, struct gck_digest *d,
    size_t n, struct gck_parents **psp)
{
	struct gck_parents	*ps;
	const char		*id;
	size_t			 i;
	int			 r;

	*psp = NULL;
	if ((r = gck_parents_new(ctx, &ps)) != GCK_OK) {
		free(d);
		return r;
	}
	ps->all = d;
	ps->nall = n;
	ps->pool = 1;
	if ((ps->img = calloc(json_array_size(ids) + 1, sizeof *ps->img)) ==
	    NULL) {
		gck_parents_free(ps);
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	}
	for (i = 0; i < json_array_size(ids); i++) {
		ps->img[i].fd = -1;
		id = json_string_value(json_array_get(ids, i));
		if (id == NULL || strlen(id) != 32) {
			ps->nimg = i;
			gck_parents_free(ps);
			return gck_set_error(ctx, GCK_EFORMAT, "bad cached "
			    "image id from the remote");
		}
		snprintf(ps->img[i].id, sizeof ps->img[i].id, "%s", id);
		ps->nimg = i + 1;
	}
	*psp = ps;
	return GCK_OK;
}

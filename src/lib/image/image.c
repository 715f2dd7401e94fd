/*
 * image.c: the image format, v1 (see gpuckpt-image(5)).
 *
 * A pax tar stream: gpuckpt.json first, the CRIU files (large ones split
 * into parts), the gpuckpt.sums trailer last.  Every entry carries its
 * XXH3-64 digest in a pax record, so a reader checks each part as it
 * arrives; the trailer lists them all and so proves the stream complete
 * and in order.
 */
#include "config.h"

#include <sys/stat.h>
#include <sys/types.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <jansson.h>
#include "private.h"
#include "core/util.h"
#include "image/digest.h"
#include "image/image.h"
#include "image/manifest.h"
#include "image/names.h"
#include "image/parent.h"
#include "image/patch.h"
#include "image/sign.h"
#include "image/zio.h"

#define XATTR_PREFIX	"gpuckpt."
#define FILES_MAX	65536
#define TAIL_SLACK	(1u << 16)
#define GCK_HOLE_PAGE	4096
#define REF_AHEAD	32	/* MiB of chunks workers fetch ahead, a thread */
#define REF_POOL	64	/* buffers of such chunks kept for reuse */
#define USTAR_SIZE_MAX	077777777777LL	/* the most a ustar size holds */

struct seen {
	char		*name;
	uint64_t	 size;
	struct gck_digest digest;
	int		 ref;		/* GCK_EK_*: a reference, a patch */
};

struct gck_writer {
	struct gck_ctx	*ctx;
	struct archive	*a;
	struct gck_zout	*z;
	json_t		*entries;
	uint64_t	*frame;		/* each entry's zstd frame (v2) */
	size_t		 capframe;
	uint64_t	 count, bytes, holes;
	size_t		 part_size;
	char		*buf;		/* gck_writer_add_file()'s, on first use */
	time_t		 mtime;
	int		 ioerr;
	int		 finished, abandoned;
	int		 format, dk;	/* version, its digest kind */
	int		 level;		/* of compression, 0: none */
	struct gck_dstate *ds;
	const struct gck_parents *parents;	/* chunks not stored again */
	struct gck_memo	*memo;		/* digests of chunks known, or NULL */
	uint64_t	 refbytes;	/* bytes left to the parents */
	uint64_t	 pagebytes;	/* bytes of memory pages added */
	const char	*sign;		/* the key to sign with, or NULL */
	const struct gck_ptab *ptab;	/* the parents' pages (format 3) */
	unsigned char	*pidx;		/* the page index so far */
	uint64_t	 npidx, capidx;	/* pages in it, room */
	unsigned char	*pdz;		/* a chunk's pages: digests, */
	unsigned char	*pzero;		/* which are zeros, */
	char		*pstore;	/* and a patch's pages */
	char		*pfill;		/* a chunk, its stored pages only */
	uint64_t	 npatch;	/* patches written */
	struct gck_digest patchd;	/* the last patch's digest */
	struct gck_digest *mdig;	/* each chunk of memory's digest, */
	uint64_t	*msize;		/* and size, in order */
	size_t		 nmem, capmem;
};

struct gck_reader {
	struct gck_ctx		*ctx;
	struct archive		*a;
	struct gck_zin		*z;
	char			*mtext;		/* manifest JSON */
	size_t			 mlen;
	struct gck_manifest	*m;
	struct seen		*seen;
	size_t			 nseen, capseen;
	uint64_t		 bytes;
	struct hsearch_data	 files;
	int			 files_ok;
	char			**fkeys;	/* keys of files */
	size_t			 nfiles;
	int			 ioerr;
	int			 no_ahead;	/* gck_reader_no_ahead() */
	int			 no_fetch;	/* gck_reader_no_fetch() */
	uint64_t		 cread;		/* gck_reader_copy(): memory
						   read, */
	uint64_t		 cplan;		/* and written from the
						   digests of its pages */
	uint64_t		 trailer_end;	/* tar offset, padded */
	uint64_t		 entry_end;	/* tar offset after last entry */
	uint64_t		 data_start;	/* tar offset of entry data */
	int			 dk;		/* digest kind, 0 till known */
	int			 epre;		/* a worker digested the entry */
	struct gck_digest	 epred;		/* what it found */
	struct gck_dstate	*ds;		/* digest of the entry */
	char			 cur[GCK_NAME_MAX + 1];	/* current file */
	char			 ename[GCK_NAME_MAX + 32];	/* its entry */
	uint64_t		 esize, egot;
	struct gck_digest	 edigest;
	uint64_t		 ehdr;		/* tar offset of its header */
	int			 nextpart;
	int			 indata;	/* entry data to read */
	int			 newfile;	/* at a file's first entry */
	uint64_t		 fbytes;	/* its entries' sizes so far */
	int			 done;		/* trailer checked */
	int			 esparse;	/* the entry has holes */
	uint64_t		 estored;	/* bytes it takes in the tar */
	const char		*bp;		/* its current data block */
	size_t			 bleft;
	uint64_t		 boff;		/* offset of bp in the entry */
	int			 beof;		/* no more blocks */
	uint64_t		*reg;		/* a sparse entry's regions */
	size_t			 nreg, capreg;
	uint64_t		 trailer_at;	/* where its frame starts */
	int			 trailer_framed;	/* a frame of its own */
	int			 eref;		/* the entry is a reference */
	uint64_t		 erefsize;	/* the size of its chunk */
	const char		*refdata;	/* the chunk, from a parent */
	char			*refown;	/* or fetched by a worker */
	size_t			 refowncap;
	size_t			 refimg;	/* from this parent */
	uint64_t		 refownsz;
	pthread_mutex_t		 poolmu;	/* buffers for what workers */
	char			*pool[REF_POOL];	/* fetch */
	size_t			 poolcap[REF_POOL];
	size_t			 npool;
	uint64_t		 ahead;		/* bytes workers fetched;
						   atomic */
	uint64_t		 ahead_max;	/* atomic */
	struct gck_parents	*parents;	/* where chunks are, or NULL;
						   atomic */
	int			 own_parents;	/* ours to free */
	uint64_t		 refbytes;	/* bytes read from parents */
	uint64_t		 refahead;	/* of them, by workers */
	const struct gck_taker	*taker;		/* or NULL; atomic */
	int			 etaken;	/* a worker took the entry */
	int			 eterr;		/* and failed */
	char			*epatch;	/* the entry is a patch: its map */
	size_t			 epatchlen;
	char			*pstored;	/* the pages it stores */
	uint64_t		 pstoredlen;
	char			*pchunk;	/* and its chunk, made whole */
	size_t			 pchunkcap;
	uint64_t		 membytes;	/* bytes of memory entries */
	uint64_t		 pidxbytes;	/* of the page index so far */
	long			 pidxpart;	/* its next part */
	int			 etbegun;	/* we asked the taker */
	void			*eth;		/* it takes it: the handle */
	int			 etfail;	/* and failed */
	char			*tkbuf;		/* the entry, for a checked */
	size_t			 tkcap;		/* taker */
	char			*ttext;		/* the trailer read, or NULL */
	size_t			 tlen;
	char			*sig;		/* its signature, or NULL */
	size_t			 siglen;
	struct seen		*exp;		/* the entries signed, or NULL */
	size_t			 nexp;
	struct gck_digest	 expt;		/* the trailer signed */
	uint64_t		 edata;		/* its bytes of data */
};

static int	w_archive_error(struct gck_writer *);
static int	w_add_planned(struct gck_writer *, const char *, size_t,
		    const unsigned char *, int (*)(void *, const uint32_t *,
		    char *const *, size_t), void *);
static int	r_archive_error(struct gck_reader *, int);
static int	r_next(struct gck_reader *, struct archive_entry **);
static int	r_check_entry(struct gck_reader *, struct archive_entry *,
		    uint64_t, struct gck_digest *);
static int	r_data(struct gck_reader *, const char *, uint64_t,
		    char *, const struct gck_digest *);
static int	r_record(struct gck_reader *, const char *, uint64_t,
		    const struct gck_digest *, int);
static int	r_trailer(struct gck_reader *, const char *, size_t);
static int	r_finish(struct gck_reader *);
static int	r_entry_sig(struct gck_reader *, struct archive_entry *);
static void	r_where(const struct gck_reader *, char *, size_t);
static int	r_layout(struct gck_reader *, struct archive_entry *);
static void	r_predigest(struct gck_reader *);
static void	r_ref_take(struct gck_reader *);
static void	r_ref_drop(struct gck_reader *);
static void	r_take(struct gck_reader *, uint64_t, const void *, size_t);
static void	r_take_begin(struct gck_reader *, const struct gck_taker *);
static int	r_taken(struct gck_reader *);
static int	r_sparse_map(struct gck_reader *, uint64_t, uint64_t);
static int	r_padding(struct gck_reader *, uint64_t);
static int	r_unverifiable(struct gck_reader *);
static int	r_file_done(struct gck_reader *);
static int	r_entry_trailer(struct gck_reader *, struct archive_entry *,
		    const char *);
static int	r_entry_file(struct gck_reader *, char *);
static int	r_entry_part(struct gck_reader *, struct archive_entry *,
		    const char *);
static int	r_pax_records(struct gck_reader *, uint64_t, uint64_t);
static int	r_not_image(struct gck_reader *);
static int	head_could_be(const unsigned char *, size_t, int);
static int	name_could_be(const char *, const unsigned char *, size_t,
		    int);
static const char *printable(const char *, char *, size_t);

/* libarchive output callback: into the compression layer. */
static la_ssize_t
w_write_cb(struct archive *a, void *arg, const void *buf, size_t len)
{
	struct gck_writer	*w = arg;

	if (w->abandoned)
		return -1;
	if (gck_zout_write(w->z, buf, len) != GCK_OK) {
		w->ioerr = 1;
		return -1;
	}
	return (la_ssize_t)len;
}

static int
w_archive_error(struct gck_writer *w)
{
	if (w->ioerr)
		return w->ctx->code;
	return gck_set_error(w->ctx, GCK_EFORMAT, "cannot write image: %s",
	    archive_error_string(w->a));
}

/*
 * Starts an image on fd, zstd-compressed at level (0: not compressed),
 * files split into parts of part_size bytes (0: the default).  Returns
 * GCK_OK with *wp set, or a code.
 */
int
gck_writer_new(struct gck_ctx *ctx, int fd, int level, size_t part_size,
    struct gck_writer **wp)
{
	return gck_writer_new2(ctx, fd, level, part_size, GCK_FORMAT_VERSION,
	    0, wp);
}

/*
 * As gck_writer_new(), of format version format (1 or 2), compressing
 * on threads threads (0: one per CPU).
 */
int
gck_writer_new2(struct gck_ctx *ctx, int fd, int level, size_t part_size,
    int format, int threads, struct gck_writer **wp)
{
	struct gck_writer	*w = NULL;
	int			 r;

	*wp = NULL;
	if (part_size == 0)
		part_size = GCK_PART_SIZE;
	if (part_size > GCK_PART_MAX) {
		r = gck_set_error(ctx, GCK_EINVAL, "part size %zu is larger "
		    "than %u bytes", part_size, GCK_PART_MAX);
		goto out;
	}
	if ((w = calloc(1, sizeof *w)) == NULL ||
	    (w->ds = gck_dstate_new()) == NULL ||
	    (w->entries = json_array()) == NULL) {
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	w->ctx = ctx;
	w->part_size = part_size;
	w->mtime = time(NULL);
	w->format = format;
	w->level = level;
	w->dk = format == 1 ? GCK_DK_XXH3 : GCK_DK_SHA256;
	/*
	 * Version 1 is one zstd frame; version 2 a frame for each entry,
	 * each compressed on its own, so that a reader decompresses them
	 * on all its CPUs and finds each again by where it starts.
	 */
	if ((r = gck_zout_new(ctx, fd, level, format == 1 ? -1 : threads,
	    &w->z)) != GCK_OK)
		goto out;
	if (format > 1)
		gck_zout_set_footer(w->z);
	if ((w->a = archive_write_new()) == NULL) {
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	if (archive_write_set_format_pax(w->a) != ARCHIVE_OK ||
	    archive_write_set_format_option(w->a, "pax", "xattrheader",
	    "SCHILY") != ARCHIVE_OK ||
	    archive_write_set_bytes_per_block(w->a, format == 1 ?
	    GCK_TAR_RECORD : 512) != ARCHIVE_OK ||
	    archive_write_open2(w->a, w, NULL, w_write_cb, NULL, NULL) !=
	    ARCHIVE_OK) {
		r = w_archive_error(w);
		goto out;
	}
	*wp = w;
	w = NULL;
	r = GCK_OK;
out:
	gck_writer_free(w);
	return r;
}

/* Whether the page at p (len bytes, 8-byte aligned) is all zero. */
int
gck_zero_page(const char *p, size_t len)
{
	const uint64_t	*q = (const uint64_t *)(const void *)p;
	size_t		 i;

	if (len % sizeof *q != 0)
		return 0;
	for (i = 0; i < len / sizeof *q; i += 4)
		if ((q[i] | q[i + 1] | q[i + 2] | q[i + 3]) != 0)
			return 0;
	return 1;
}

/*
 * Records, as holes of entry e, the zero pages of buf: they are neither
 * compressed nor stored, and a reader recreates them.  The digest of
 * such an entry covers the bytes stored, then the offset and length of
 * each region stored and the whole size, so that zero pages cost no
 * hashing.  Returns the bytes left out (0: no holes, *dp untouched).
 */
static uint64_t
add_holes(struct archive_entry *e, const char *buf, size_t len,
    struct gck_dstate *st, int dk, struct gck_digest *dp)
{
	size_t		 off, start = 0, pg = GCK_HOLE_PAGE, i, n = 0, cap = 0;
	uint64_t	 holes = 0, *reg = NULL, *nr;
	int		 indata = 0, any = 0;

	if (len % pg != 0 || ((uintptr_t)buf & 7) != 0)
		return 0;
	for (off = 0; off < len; off += pg)
		if (gck_zero_page(buf + off, pg)) {
			any = 1;
			break;
		}
	if (!any || gck_dstate_reset(st, dk) == -1)
		return 0;
	for (off = 0; off <= len; off += pg) {
		if (off < len && !gck_zero_page(buf + off, pg)) {
			if (!indata)
				start = off;
			indata = 1;
			continue;
		}
		if (off < len)
			holes += pg;
		if (!indata)
			continue;
		indata = 0;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			if ((nr = reallocarray(reg, cap, 2 * sizeof *reg)) ==
			    NULL) {
				free(reg);
				return 0;	/* stored whole, then */
			}
			reg = nr;
		}
		reg[2 * n] = start;
		reg[2 * n + 1] = off - start;
		n++;
		gck_dstate_update(st, buf + start, off - start);
	}
	for (i = 0; i < n; i++) {
		archive_entry_sparse_add_entry(e, (la_int64_t)reg[2 * i],
		    (la_int64_t)reg[2 * i + 1]);
		gck_dstate_u64(st, reg[2 * i]);
		gck_dstate_u64(st, reg[2 * i + 1]);
	}
	if (n == 0 || reg[2 * (n - 1)] + reg[2 * (n - 1) + 1] < len)
		archive_entry_sparse_add_entry(e, (la_int64_t)len, 0);
	gck_dstate_u64(st, len);
	gck_dstate_final(st, dp);
	free(reg);
	return holes;
}

/* Notes the frame the entry just written starts. */
static int
w_note_frame(struct gck_writer *w, uint64_t fr)
{
	uint64_t	*nf;
	size_t		 nc;

	if (w->count == w->capframe) {
		nc = w->capframe ? w->capframe * 2 : 256;
		if ((nf = reallocarray(w->frame, nc, sizeof *nf)) == NULL)
			return GCK_ENOMEM;
		w->frame = nf;
		w->capframe = nc;
	}
	w->frame[w->count] = fr;
	return GCK_OK;
}

/*
 * Notes the digests of the n pages of a chunk of memory in the page
 * index (format 3), from w->pdz.  Returns GCK_OK or a code.
 */
static int
w_pidx(struct gck_writer *w, size_t n)
{
	unsigned char	*np;
	uint64_t	 nc;

	if (w->npidx + n > w->capidx) {
		nc = w->capidx ? w->capidx : 4096;
		while (nc < w->npidx + n)
			nc *= 2;
		if ((np = realloc(w->pidx, (size_t)nc * GCK_PDIG)) == NULL)
			return gck_set_error(w->ctx, GCK_ENOMEM,
			    "out of memory");
		w->pidx = np;
		w->capidx = nc;
	}
	memcpy(w->pidx + w->npidx * GCK_PDIG, w->pdz, n * GCK_PDIG);
	w->npidx += n;
	return GCK_OK;
}

/*
 * The digests of the pages of a chunk of memory, buf (len bytes, whole
 * pages), into w->pdz, and into w->pzero which of them hold only
 * zeros.  Returns GCK_OK or a code.
 */
static int
w_pages(struct gck_writer *w, const char *buf, size_t len)
{
	size_t	 n = len / GCK_PAGE;

	if (len % GCK_PAGE != 0 || len > GCK_CHUNK_SIZE)
		return gck_set_error(w->ctx, GCK_EINVAL, "a chunk of memory of "
		    "%zu bytes, not whole pages of at most %u", len,
		    GCK_CHUNK_SIZE);
	if (w->pdz == NULL && ((w->pdz = malloc(GCK_PATCH_RUNS * GCK_PDIG)) ==
	    NULL || (w->pzero = malloc(GCK_PATCH_RUNS)) == NULL))
		return gck_set_error(w->ctx, GCK_ENOMEM, "out of memory");
	gck_pages_digest(buf, n, w->pdz, w->pzero);
	return GCK_OK;
}

/*
 * The digests of the n pages at buf into pd (GCK_PDIG bytes each), and
 * into zero which of them hold only zeros.
 */
void
gck_pages_digest(const char *buf, size_t n, unsigned char *pd,
    unsigned char *zero)
{
	size_t	i;

	for (i = 0; i < n; i++) {
		zero[i] = (unsigned char)gck_zero_page(buf + i * GCK_PAGE,
		    GCK_PAGE);
		if (zero[i])
			memcpy(pd + i * GCK_PDIG, gck_page_zero_digest(),
			    GCK_PDIG);
		else
			gck_page_digest(buf + i * GCK_PAGE, pd + i * GCK_PDIG);
	}
}

/*
 * As w_pages(), for a chunk of n pages whose digests are known, pdig.
 * Returns GCK_OK or a code.
 */
static int
w_pages_of(struct gck_writer *w, const unsigned char *pdig, size_t n)
{
	size_t	i;

	if (w->pdz == NULL && ((w->pdz = malloc(GCK_PATCH_RUNS * GCK_PDIG)) ==
	    NULL || (w->pzero = malloc(GCK_PATCH_RUNS)) == NULL))
		return gck_set_error(w->ctx, GCK_ENOMEM, "out of memory");
	memcpy(w->pdz, pdig, n * GCK_PDIG);
	for (i = 0; i < n; i++)
		w->pzero[i] = memcmp(pdig + i * GCK_PDIG,
		    gck_page_zero_digest(), GCK_PDIG) == 0;
	return GCK_OK;
}

/*
 * Writes entry e, named name, whose header is set but for its digest d
 * (and its holes, if any), with n bytes of data at buf, and notes it
 * for the trailer as len bytes of kind GCK_EK_*.  Returns GCK_OK or a
 * code.
 */
static int
w_entry(struct gck_writer *w, struct archive_entry *e, const char *name,
    const void *buf, size_t n, size_t len, const struct gck_digest *d,
    int kind)
{
	char		 hex[GCK_DIGEST_HEX], xname[32];
	uint64_t	 fr;
	json_t		*o;
	la_ssize_t	 k;
	size_t		 off = 0;

	gck_digest_hex(d, hex);
	snprintf(xname, sizeof xname, XATTR_PREFIX "%s",
	    gck_digest_name(w->dk));
	fr = gck_zout_frames(w->z);
	archive_entry_set_uid(e, 0);
	archive_entry_set_gid(e, 0);
	archive_entry_set_uname(e, "root");
	archive_entry_set_gname(e, "root");
	archive_entry_set_mtime(e, w->mtime, 0);
	archive_entry_xattr_add_entry(e, xname, hex, strlen(hex));
	if (archive_write_header(w->a, e) != ARCHIVE_OK)
		return w_archive_error(w);
	while (off < n) {
		k = archive_write_data(w->a, (const char *)buf + off, n - off);
		if (k <= 0)
			return w_archive_error(w);
		off += (size_t)k;
	}
	/* The trailer and its signature share the last frame. */
	if (strcmp(name, GCK_ENTRY_TRAILER) == 0 ||
	    strcmp(name, GCK_ENTRY_SIG) == 0)
		return GCK_OK;
	if (w->format > 1) {
		if (archive_write_finish_entry(w->a) != ARCHIVE_OK)
			return w_archive_error(w);
		if (gck_zout_frame_end(w->z) != GCK_OK)
			return w->ctx->code;
	}
	o = json_pack("{s:s, s:I, s:s}", "name", name, "size",
	    (json_int_t)len, gck_digest_name(w->dk), hex);
	if (o != NULL && kind != GCK_EK_DATA && json_object_set_new(o,
	    kind == GCK_EK_REF ? "ref" : "patch", json_true()) != 0) {
		json_decref(o);
		o = NULL;
	}
	if (o == NULL || json_array_append_new(w->entries, o) != 0 ||
	    w_note_frame(w, fr) != GCK_OK)
		return gck_set_error(w->ctx, GCK_ENOMEM, "out of memory");
	w->count++;
	w->bytes += len;
	return GCK_OK;
}

/*
 * A new entry of a regular file named name, or NULL with the error set.
 */
static struct archive_entry *
w_entry_new(struct gck_writer *w, const char *name)
{
	struct archive_entry	*e;

	if ((e = archive_entry_new()) == NULL) {
		gck_set_error(w->ctx, GCK_ENOMEM, "out of memory");
		return NULL;
	}
	archive_entry_set_pathname(e, name);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0600);
	return e;
}

/*
 * Writes chunk buf (len bytes), whose pages w->pdz and w->pzero give,
 * as the patch p of the chunks of the parents.  Returns GCK_OK or a
 * code.
 */
static int
w_patch(struct gck_writer *w, struct archive_entry *e, const char *name,
    const char *buf, size_t len, const struct gck_patch *p)
{
	struct gck_digest d;
	char		  map[GCK_PATCH_MAP_MAX + 1], rsize[24];
	size_t		  i, j, at = 0, n = 0;
	int		  ml, r;

	if ((ml = gck_patch_text(p, map, sizeof map)) < 0)
		return gck_set_error(w->ctx, GCK_EINVAL, "a patch's map too "
		    "long");
	if (w->pstore == NULL && (w->pstore = malloc(GCK_CHUNK_SIZE)) == NULL)
		return gck_set_error(w->ctx, GCK_ENOMEM, "out of memory");
	for (i = 0; i < p->nrun; i++) {
		if (p->run[i].kind == GCK_RUN_STORED)
			for (j = 0; j < p->run[i].count; j++) {
				memcpy(w->pstore + n, buf + at, GCK_PAGE);
				n += GCK_PAGE;
				at += GCK_PAGE;
			}
		else
			at += (size_t)p->run[i].count * GCK_PAGE;
	}
	if (gck_patch_digest(w->pstore, n, map, (size_t)ml, len, &d) == -1)
		return gck_set_error(w->ctx, GCK_ENOMEM, "out of memory");
	archive_entry_set_size(e, (la_int64_t)n);
	snprintf(rsize, sizeof rsize, "%zu", len);
	archive_entry_xattr_add_entry(e, XATTR_PREFIX "ref", rsize,
	    strlen(rsize));
	archive_entry_xattr_add_entry(e, XATTR_PREFIX "patch", map,
	    (size_t)ml);
	if ((r = w_entry(w, e, name, w->pstore, n, len, &d, GCK_EK_PATCH)) !=
	    GCK_OK)
		return r;
	w->patchd = d;
	w->pagebytes += len;
	w->refbytes += len - n;
	w->npatch++;
	return GCK_OK;
}

/* Notes a chunk of memory written, of digest d and len bytes. */
static int
w_mem(struct gck_writer *w, const struct gck_digest *d, size_t len)
{
	struct gck_digest	*nd;
	uint64_t		*ns;
	size_t			 nc;

	if (w->nmem == w->capmem) {
		nc = w->capmem ? w->capmem * 2 : 256;
		if ((nd = reallocarray(w->mdig, nc, sizeof *nd)) == NULL)
			return gck_set_error(w->ctx, GCK_ENOMEM,
			    "out of memory");
		w->mdig = nd;
		if ((ns = reallocarray(w->msize, nc, sizeof *ns)) == NULL)
			return gck_set_error(w->ctx, GCK_ENOMEM,
			    "out of memory");
		w->msize = ns;
		w->capmem = nc;
	}
	w->mdig[w->nmem] = *d;
	w->msize[w->nmem++] = len;
	return GCK_OK;
}

/*
 * Adds the chunks of memory w wrote (format 3), their pages' digests
 * with them, to t: what a later image sent to the same place may name
 * as the bases of its patches.  Returns GCK_OK or a code.
 */
int
gck_writer_pages(const struct gck_writer *w, struct gck_ptab *t)
{
	uint64_t	pg = 0;
	size_t		i;

	for (i = 0; i < w->nmem; pg += w->msize[i++] / GCK_PAGE)
		if (gck_ptab_add(t, &w->mdig[i], w->msize[i], w->pidx + pg *
		    GCK_PDIG) != GCK_OK)
			return gck_set_error(w->ctx, GCK_ENOMEM,
			    "out of memory");
	return GCK_OK;
}

/*
 * Adds entry name of len bytes of buf: sparse 0 a file, 1 pages, 2 a
 * chunk of memory, 3 a chunk of memory whole (no holes); given, if not
 * NULL, the digest of buf, known already.
 */
static int
w_add(struct gck_writer *w, const char *name, const void *buf, size_t len,
    int sparse, const struct gck_digest *given)
{
	struct archive_entry	*e = NULL;
	struct gck_patch	*p = NULL;
	struct gck_digest	 d;
	char			 rsize[24];
	uint64_t		 h = 0;
	size_t			 ent;
	int			 r, ref = 0, plan = GCK_PLAN_FULL;

	if ((r = gck_check_interrupt(w->ctx)) != GCK_OK)
		goto out;
	if ((e = w_entry_new(w, name)) == NULL) {
		r = w->ctx->code;
		goto out;
	}
	archive_entry_set_size(e, (la_int64_t)len);
	/* Format 3: each page's digest, in the index, and against the
	 * pages of the parents. */
	if (sparse >= 2 && w->format > 2) {
		if ((r = w_pages(w, buf, len)) != GCK_OK ||
		    (r = w_pidx(w, len / GCK_PAGE)) != GCK_OK)
			goto out;
		if (w->ptab != NULL && w->ptab->slot != NULL) {
			if ((p = malloc(sizeof *p)) == NULL) {
				r = gck_set_error(w->ctx, GCK_ENOMEM,
				    "out of memory");
				goto out;
			}
			plan = gck_patch_plan(w->ptab, w->pdz, w->pzero,
			    len / GCK_PAGE, p, &ent);
		}
	}
	if (plan == GCK_PLAN_PATCH) {
		if ((r = w_patch(w, e, name, buf, len, p)) == GCK_OK)
			r = w_mem(w, &w->patchd, len);
		goto out;
	}
	if (plan == GCK_PLAN_REF) {
		d = w->ptab->ent[ent].d;
		ref = 1;
	} else {
		/* (holes are checked against the size: it comes first) */
		if (sparse == 1 || sparse == 2)
			h = add_holes(e, buf, len, w->ds, w->dk, &d);
		if (given != NULL && given->kind == w->dk)
			d = *given;		/* the caller's, of buf */
		else if (h == 0 && (sparse && w->memo != NULL &&
		    w->dk == GCK_DK_SHA256 ?
		    gck_memo_digest(w->memo, buf, len, &d) :
		    gck_digest_buf(w->dk, buf, len, &d)) == -1) {
			r = gck_set_error(w->ctx, GCK_ENOMEM, "out of memory");
			goto out;
		}
		/* A chunk the parent has already: a reference to it. */
		ref = sparse && w->parents != NULL && len > 0 &&
		    gck_parents_has(w->parents, &d);
	}
	if (ref) {
		h = 0;
		archive_entry_sparse_clear(e);
		archive_entry_set_size(e, 0);
		snprintf(rsize, sizeof rsize, "%zu", len);
		archive_entry_xattr_add_entry(e, XATTR_PREFIX "ref", rsize,
		    strlen(rsize));
	}
	if ((r = w_entry(w, e, name, buf, ref ? 0 : len, len, &d, ref ?
	    GCK_EK_REF : GCK_EK_DATA)) != GCK_OK ||
	    (sparse >= 2 && w->format > 2 && (r = w_mem(w, &d, len)) !=
	    GCK_OK))
		goto out;
	w->holes += h;
	if (sparse)
		w->pagebytes += len;
	if (ref)
		w->refbytes += len;
	r = GCK_OK;
out:
	free(p);
	archive_entry_free(e);
	return r;
}

/*
 * Adds one entry, name, holding len bytes of buf.  Returns GCK_OK or a
 * code.
 */
int
gck_writer_add(struct gck_writer *w, const char *name, const void *buf,
    size_t len)
{
	return w_add(w, name, buf, len, 0, NULL);
}

/*
 * Adds one chunk of a process's memory (a file the manifest marks
 * memory): its zero pages become holes, and in format 3 its pages go
 * into the page index and may be a patch of the parents' chunks.
 * Returns GCK_OK or a code.
 */
int
gck_writer_add_memory(struct gck_writer *w, const char *name,
    const void *buf, size_t len)
{
	return w_add(w, name, buf, len, 2, NULL);
}

/*
 * As gck_writer_add_memory(), its zero pages left as they are: an entry
 * of its data whole, whatever a parent has (w has none), whose frame
 * gck_writer_add_memory_frame() can take into another image as it is.
 * d, if not NULL, is its digest, known already.
 */
int
gck_writer_add_memory_whole(struct gck_writer *w, const char *name,
    const void *buf, size_t len, const struct gck_digest *d)
{
	return w_add(w, name, buf, len, 3, d);
}

/*
 * As gck_writer_add_memory(), for a chunk of len bytes of digest d
 * whose pages' digests are pdig (format 3), that another writer of the
 * same format and level wrote with gck_writer_add_memory_whole() as
 * frame (flen bytes).  A chunk the parents of w have, or of which they
 * have pages, is written as a reference or a patch of theirs (the
 * patch's pages through fetch(), as in w_add_planned()); any other
 * takes frame as its own, not compressed again (frame NULL: none to
 * take).  Returns GCK_OK, 1 with
 * nothing written when the chunk is to be added from its data, or a
 * code.
 */
int
gck_writer_add_memory_frame(struct gck_writer *w, const char *name,
    size_t len, const struct gck_digest *d, const unsigned char *pdig,
    const void *frame, size_t flen, int (*fetch)(void *, const uint32_t *,
    char *const *, size_t), void *arg)
{
	char		 hex[GCK_DIGEST_HEX];
	uint64_t	 fr;
	json_t		*o;
	size_t		 n = len / GCK_PAGE;
	int		 r;

	if (w->format < 2 || d->kind != w->dk || len == 0 ||
	    (w->format > 2 && (len % GCK_PAGE != 0 || len > GCK_CHUNK_SIZE)))
		return 1;
	if ((r = gck_check_interrupt(w->ctx)) != GCK_OK)
		return r;
	if (w->parents != NULL && gck_parents_has(w->parents, d))
		return w->format > 2 ? gck_writer_add_memory_ref(w, name, d,
		    len, pdig) : 1;
	if (w->format > 2 && (r = w_add_planned(w, name, len, pdig, fetch,
	    arg)) != 1)
		return r;
	if (frame == NULL)
		return 1;
	if (w->format > 2 && ((r = w_pages_of(w, pdig, n)) != GCK_OK ||
	    (r = w_pidx(w, n)) != GCK_OK))
		return r;
	fr = gck_zout_frames(w->z);
	if ((r = gck_zout_put_frame(w->z, frame, flen)) != GCK_OK)
		return r;
	gck_digest_hex(d, hex);
	o = json_pack("{s:s, s:I, s:s}", "name", name, "size",
	    (json_int_t)len, gck_digest_name(w->dk), hex);
	if (o == NULL || json_array_append_new(w->entries, o) != 0 ||
	    w_note_frame(w, fr) != GCK_OK ||
	    (w->format > 2 && w_mem(w, d, len) != GCK_OK))
		return gck_set_error(w->ctx, GCK_ENOMEM, "out of memory");
	w->count++;
	w->bytes += len;
	w->pagebytes += len;
	return GCK_OK;
}

/* Whether w takes frames of a writer of format and level as they are. */
int
gck_writer_takes_frames(const struct gck_writer *w, int format, int level)
{
	return w->format > 1 && w->format == format && w->level == level;
}

/* Writes out every entry w has compressed so far (gck_writer_entry()). */
int
gck_writer_sync(struct gck_writer *w)
{
	return gck_zout_sync(w->z);
}

/*
 * Entry i of w (from 0), once gck_writer_sync() has written it out: its
 * size, digest, and where its frame is in w's output (format 2 and
 * later).  Returns GCK_OK or a code.
 */
int
gck_writer_entry(struct gck_writer *w, size_t i, uint64_t *sizep,
    struct gck_digest *dp, uint64_t *atp, uint64_t *lenp)
{
	json_t		*o;
	const char	*hex;

	if (i >= w->count || w->format < 2 ||
	    (o = json_array_get(w->entries, i)) == NULL ||
	    (hex = json_string_value(json_object_get(o,
	    gck_digest_name(w->dk)))) == NULL ||
	    gck_digest_parse(w->dk, hex, strlen(hex), dp) == -1 ||
	    gck_zout_frame(w->z, w->frame[i], atp, lenp) == -1)
		return gck_set_error(w->ctx, GCK_EINVAL, "no entry %zu "
		    "written out", i);
	*sizep = (uint64_t)json_integer_value(json_object_get(o, "size"));
	return GCK_OK;
}

/*
 * The digests of the pages of the memory w holds so far, in order
 * (format 3), GCK_PDIG bytes each: *np of them.
 */
const unsigned char *
gck_writer_page_digests(const struct gck_writer *w, uint64_t *np)
{
	*np = w->npidx;
	return w->pidx;
}

/*
 * As gck_writer_add_memory(), for a chunk of len bytes whose digest d a
 * parent of w has, and whose pages' digests are pdig: a reference to
 * it, written without its data.  Returns GCK_OK or a code.
 */
int
gck_writer_add_memory_ref(struct gck_writer *w, const char *name,
    const struct gck_digest *d, size_t len, const unsigned char *pdig)
{
	struct archive_entry	*e;
	char			 rsize[24];
	size_t			 n = len / GCK_PAGE;
	int			 r;

	if (w->format < 3 || w->parents == NULL || len == 0 ||
	    len % GCK_PAGE != 0 || len > GCK_CHUNK_SIZE ||
	    !gck_parents_has(w->parents, d))
		return gck_set_error(w->ctx, GCK_EINVAL, "a reference to a "
		    "chunk of memory its parent does not have");
	if ((r = gck_check_interrupt(w->ctx)) != GCK_OK)
		return r;
	if ((r = w_pages_of(w, pdig, n)) != GCK_OK)
		return r;
	if ((r = w_pidx(w, n)) != GCK_OK)
		return r;
	if ((e = w_entry_new(w, name)) == NULL)
		return w->ctx->code;
	archive_entry_set_size(e, 0);
	snprintf(rsize, sizeof rsize, "%zu", len);
	archive_entry_xattr_add_entry(e, XATTR_PREFIX "ref", rsize,
	    strlen(rsize));
	if ((r = w_entry(w, e, name, "", 0, len, d, GCK_EK_REF)) == GCK_OK &&
	    (r = w_mem(w, d, len)) == GCK_OK) {
		w->pagebytes += len;
		w->refbytes += len;
	}
	archive_entry_free(e);
	return r;
}

/*
 * As gck_writer_add_memory(), for a chunk of len bytes of which only the
 * digests of its pages are known, pdig: a reference to a chunk of w's
 * parents or a patch of theirs, as their page index finds it, whose
 * stored pages fetch(arg, pages, n, to) copies, page pages[i] of the
 * chunk to to[i].  Returns GCK_OK, 1 with nothing written when the chunk
 * is to be stored whole, or a code.
 */
static int
w_add_planned(struct gck_writer *w, const char *name, size_t len,
    const unsigned char *pdig, int (*fetch)(void *, const uint32_t *,
    char *const *, size_t), void *arg)
{
	struct archive_entry	*e = NULL;
	struct gck_patch	*p = NULL;
	uint32_t		 pages[GCK_PATCH_RUNS];
	char			*to[GCK_PATCH_RUNS];
	size_t			 i, j, ent, at, k, n = len / GCK_PAGE;
	int			 plan, r;

	if (w->format < 3 || w->ptab == NULL || w->ptab->slot == NULL ||
	    len == 0 || len % GCK_PAGE != 0 || len > GCK_CHUNK_SIZE)
		return 1;
	if ((r = w_pages_of(w, pdig, n)) != GCK_OK)
		return r;
	if ((p = malloc(sizeof *p)) == NULL)
		return gck_set_error(w->ctx, GCK_ENOMEM, "out of memory");
	if ((plan = gck_patch_plan(w->ptab, w->pdz, w->pzero, n, p, &ent)) ==
	    GCK_PLAN_FULL) {
		free(p);
		return 1;
	}
	if (plan == GCK_PLAN_REF) {
		free(p);
		return gck_writer_add_memory_ref(w, name, &w->ptab->ent[ent].d,
		    len, pdig);
	}
	if (w->pfill == NULL && (w->pfill = malloc(GCK_CHUNK_SIZE)) == NULL) {
		r = gck_set_error(w->ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	for (i = 0, at = 0, k = 0; i < p->nrun; i++) {
		for (j = 0; p->run[i].kind == GCK_RUN_STORED &&
		    j < p->run[i].count; j++, k++) {
			pages[k] = (uint32_t)(at + j);
			to[k] = w->pfill + (at + j) * GCK_PAGE;
		}
		at += p->run[i].count;
	}
	if ((r = fetch(arg, pages, to, k)) != GCK_OK ||
	    (r = gck_check_interrupt(w->ctx)) != GCK_OK ||
	    (r = w_pidx(w, n)) != GCK_OK)
		goto out;
	if ((e = w_entry_new(w, name)) == NULL) {
		r = w->ctx->code;
		goto out;
	}
	if ((r = w_patch(w, e, name, w->pfill, len, p)) == GCK_OK)
		r = w_mem(w, &w->patchd, len);
out:
	archive_entry_free(e);
	free(p);
	return r;
}

/*
 * Adds one entry of other memory pages: its zero pages become holes.
 * Returns GCK_OK or a code.
 */
int
gck_writer_add_pages(struct gck_writer *w, const char *name, const void *buf,
    size_t len)
{
	return w_add(w, name, buf, len, 1, NULL);
}

/*
 * Writes the chunks of memory that parent ps lists as references to
 * them rather than store them again (format 2).
 */
void
gck_writer_set_parents(struct gck_writer *w, const struct gck_parents *ps)
{
	w->parents = ps;
	w->ptab = w->format > 2 ? gck_parents_ptab(ps) : NULL;
}

/*
 * Takes the digest of a chunk of memory from memo when it has its bytes,
 * rather than computing it, and notes there those it computes
 * (gck_memo_digest()).
 */
void
gck_writer_set_memo(struct gck_writer *w, struct gck_memo *memo)
{
	w->memo = memo;
}

/* The bytes of memory left to the parents so far. */
uint64_t
gck_writer_refbytes(const struct gck_writer *w)
{
	return w->refbytes;
}

/*
 * The bytes of memory pages added so far (holes and references
 * included), and the bytes of image written out.
 */
void
gck_writer_counts(const struct gck_writer *w, uint64_t *pagesp,
    uint64_t *outp)
{
	*pagesp = w->pagebytes;
	*outp = gck_zout_bytes(w->z);
}

/* The bytes of image read from the input so far. */
uint64_t
gck_reader_inbytes(const struct gck_reader *r)
{
	return gck_zin_inbytes(r->z);
}

/* The bytes added so far, and of those the bytes left out as holes. */
void
gck_writer_stats(const struct gck_writer *w, uint64_t *bytesp,
    uint64_t *holesp)
{
	*bytesp = w->bytes;
	*holesp = w->holes;
}

/*
 * Adds the CRIU image file open on fd as criu/name, split into parts
 * criu/name.partNNNNN when larger than the part size.  Returns GCK_OK or
 * a code.
 */
int
gck_writer_add_file(struct gck_writer *w, const char *name, int fd)
{
	struct stat	 st;
	char		 ename[GCK_NAME_MAX + 32];
	uint64_t	 left;
	ssize_t		 n;
	unsigned	 part;
	int		 r;

	if (!gck_criu_name_ok(name))
		return gck_set_error(w->ctx, GCK_EINVAL,
		    "cannot store '%s': not a CRIU image file name", name);
	if (fstat(fd, &st) == -1)
		return gck_set_syserr(w->ctx, errno, "cannot stat '%s': %s",
		    name, strerror(errno));
	if (w->buf == NULL && (w->buf = malloc(w->part_size)) == NULL)
		return gck_set_error(w->ctx, GCK_ENOMEM, "out of memory");
	left = (uint64_t)st.st_size;
	if (left <= w->part_size) {
		if ((n = gck_read_full(w->ctx, fd, w->buf, (size_t)left,
		    name)) == -1)
			return w->ctx->code;
		if ((uint64_t)n != left)
			return gck_set_syserr(w->ctx, EIO,
			    "'%s' shrank while being read", name);
		gck_entry_name(ename, sizeof ename, name, -1);
		return gck_writer_add(w, ename, w->buf, (size_t)n);
	}
	for (part = 0; left > 0; part++) {
		size_t	want = left < w->part_size ? (size_t)left :
		    w->part_size;

		if (part > 99999)
			return gck_set_error(w->ctx, GCK_EINVAL,
			    "'%s' has too many parts", name);
		if ((n = gck_read_full(w->ctx, fd, w->buf, want,
		    name)) == -1)
			return w->ctx->code;
		if ((size_t)n != want)
			return gck_set_syserr(w->ctx, EIO,
			    "'%s' shrank while being read", name);
		gck_entry_name(ename, sizeof ename, name, (long)part);
		if ((r = gck_writer_add(w, ename, w->buf, want)) != GCK_OK)
			return r;
		left -= want;
	}
	return GCK_OK;
}

/*
 * Once every entry is written out: where each one's frame is in the
 * output, in the trailer, so that a reader can fetch one by itself.
 */
static int
w_frames(struct gck_writer *w)
{
	uint64_t	at, len, i;
	int		r;

	if ((r = gck_zout_sync(w->z)) != GCK_OK)
		return r;
	for (i = 0; i < w->count; i++) {
		if (gck_zout_frame(w->z, w->frame[i], &at, &len) == -1)
			return gck_set_error(w->ctx, GCK_EFORMAT, "entry %"
			    PRIu64 " of the image has no frame", i + 1);
		if (json_object_set_new(json_array_get(w->entries, (size_t)i),
		    "at", json_integer((json_int_t)at)) != 0 ||
		    json_object_set_new(json_array_get(w->entries, (size_t)i),
		    "zsize", json_integer((json_int_t)len)) != 0)
			return gck_set_error(w->ctx, GCK_ENOMEM,
			    "out of memory");
	}
	return GCK_OK;
}

/*
 * Format 3: the page index, the digests of the pages of every chunk of
 * memory in order, in parts of at most GCK_PIDX_PART of them, before
 * the trailer.  Returns GCK_OK or a code.
 */
static int
w_index(struct gck_writer *w)
{
	char		name[64];
	uint64_t	off, n;
	unsigned	part;
	int		r;

	for (off = 0, part = 0; off < w->npidx; off += n, part++) {
		n = w->npidx - off < GCK_PIDX_PART ? w->npidx - off :
		    GCK_PIDX_PART;
		gck_pidx_name(name, sizeof name, part);
		if ((r = w_add(w, name, w->pidx + off * GCK_PDIG, (size_t)n *
		    GCK_PDIG, 0, NULL)) != GCK_OK)
			return r;
	}
	return GCK_OK;
}

/*
 * Adds the trailer, closes the tar stream and the compressed frame and
 * writes everything out.  Returns GCK_OK or a code.
 */
int
gck_writer_finish(struct gck_writer *w)
{
	json_t	*t = NULL;
	char	*text = NULL, *sig = NULL;
	size_t	 siglen = 0;
	int	 r;

	if ((r = w_index(w)) != GCK_OK ||
	    (w->format > 1 && (r = w_frames(w)) != GCK_OK))
		goto out;
	t = json_pack("{s:i, s:O, s:I, s:I}", "format", w->format,
	    "entries", w->entries, "count", (json_int_t)w->count, "bytes",
	    (json_int_t)w->bytes);
	if (t == NULL || (text = json_dumps(t, JSON_COMPACT)) == NULL) {
		r = gck_set_error(w->ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	if (w->sign != NULL && (r = gck_sig_sign(w->ctx, w->sign, text,
	    strlen(text), &sig, &siglen)) != GCK_OK)
		goto out;
	if ((r = gck_writer_add(w, GCK_ENTRY_TRAILER, text, strlen(text))) !=
	    GCK_OK)
		goto out;
	if (sig != NULL && (r = gck_writer_add(w, GCK_ENTRY_SIG, sig,
	    siglen)) != GCK_OK)
		goto out;
	if (archive_write_close(w->a) != ARCHIVE_OK) {
		r = w_archive_error(w);
		goto out;
	}
	r = gck_zout_finish(w->z);
	w->finished = r == GCK_OK;
out:
	free(sig);
	free(text);
	json_decref(t);
	return r;
}

/*
 * Signs the image with key (gpuckpt-image(5), The signature) when it is
 * finished: only an image of format 2, compressed, which a reader can
 * find the signature of from its end.  Returns GCK_OK or GCK_EINVAL.
 */
int
gck_writer_set_sign(struct gck_writer *w, const char *key)
{
	if (key != NULL && (w->format < 2 || w->z == NULL ||
	    !gck_zout_footer(w->z)))
		return gck_set_error(w->ctx, GCK_EINVAL, "only a compressed "
		    "image of format 2 or 3 can be signed");
	w->sign = key;
	return GCK_OK;
}

void
gck_writer_free(struct gck_writer *w)
{
	if (w == NULL)
		return;
	/* An unfinished image stays so: nothing more is written. */
	w->abandoned = !w->finished;
	/*
	 * archive_write_free() does not close an archive that a failed
	 * write left in ARCHIVE_STATE_FATAL, and libarchive before pull
	 * request #2729 (3.6.2 in Debian 12) then leaks the output block
	 * buffer that archive_write_open2() allocated: close it first.
	 */
	if (w->a != NULL) {
		archive_write_close(w->a);
		archive_write_free(w->a);
	}
	gck_zout_free(w->z);
	json_decref(w->entries);
	gck_dstate_free(w->ds);
	free(w->frame);
	free(w->buf);
	free(w->pidx);
	free(w->pdz);
	free(w->pzero);
	free(w->pstore);
	free(w->pfill);
	free(w->mdig);
	free(w->msize);
	free(w);
}

/* Copies s into buf with control characters as '?'. */
static const char *
printable(const char *s, char *buf, size_t len)
{
	size_t	i;

	for (i = 0; s[i] != '\0' && i + 1 < len; i++)
		buf[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' :
		    s[i];
	buf[i] = '\0';
	return buf;
}

/* libarchive input callback: from the decompression layer. */
static la_ssize_t
r_read_cb(struct archive *a, void *arg, const void **bufp)
{
	struct gck_reader	*r = arg;
	ssize_t			 n;

	if ((n = gck_zin_next(r->z, bufp, 1u << 16)) == -1) {
		r->ioerr = 1;
		return -1;
	}
	return n;
}

/*
 * A buffer for a worker to fetch a chunk into (*bufp, NULL if none is
 * kept, and its size *capp): the chunks fetched ahead are many and
 * short-lived, and fresh memory for each would cost more than reading.
 */
static void
r_buf_get(struct gck_reader *r, char **bufp, size_t *capp)
{
	*bufp = NULL;
	*capp = 0;
	pthread_mutex_lock(&r->poolmu);
	if (r->npool > 0) {
		r->npool--;
		*bufp = r->pool[r->npool];
		*capp = r->poolcap[r->npool];
	}
	pthread_mutex_unlock(&r->poolmu);
}

/* Keeps buffer buf of cap bytes for the next fetch, or frees it. */
static void
r_buf_put(struct gck_reader *r, char *buf, size_t cap)
{
	if (buf == NULL)
		return;
	pthread_mutex_lock(&r->poolmu);
	if (r->npool < REF_POOL) {
		r->pool[r->npool] = buf;
		r->poolcap[r->npool++] = cap;
		buf = NULL;
	}
	pthread_mutex_unlock(&r->poolmu);
	free(buf);
}

/*
 * Run by a decompressing worker on a frame that holds a reference to a
 * parent's chunk of size bytes, whose digest res->d is: the chunk, read
 * and checked (gck_parents_load()), while the reader's thread goes on,
 * so that the chunks of a long run of references are read on every
 * CPU; a taker (t, for entry name) may take the chunk there too.  Not
 * once the workers hold r->ahead_max bytes the reader has not taken:
 * the reader then reads it itself.
 */
static void
frame_fetch(struct gck_reader *r, const struct gck_taker *t, const char *name,
    struct gck_zres *res, uint64_t size)
{
	struct gck_parents	*ps;
	char			*buf;
	void			*h;
	size_t			 cap, img;

	if ((ps = __atomic_load_n(&r->parents, __ATOMIC_ACQUIRE)) == NULL)
		return;
	if (__atomic_add_fetch(&r->ahead, size, __ATOMIC_ACQ_REL) >
	    __atomic_load_n(&r->ahead_max, __ATOMIC_RELAXED)) {
		__atomic_sub_fetch(&r->ahead, size, __ATOMIC_ACQ_REL);
		return;
	}
	r_buf_get(r, &buf, &cap);
	if (gck_parents_load(ps, &res->d, size, &buf, &cap, &img) == -1) {
		r_buf_put(r, buf, cap);
		__atomic_sub_fetch(&r->ahead, size, __ATOMIC_ACQ_REL);
		return;
	}
	res->ref = buf;
	res->refcap = cap;
	res->refimg = img;
	res->size = size;
	/* A taker may take the chunk, checked, as the data of the entry. */
	if (t != NULL && name != NULL && (h = t->begin(t->arg, name)) != NULL) {
		res->taken = 1;
		res->terr = t->take(t->arg, h, 0, buf, (size_t)size) == -1;
	}
}

/*
 * Run by a decompressing worker on a frame that holds a patch (a, at
 * its entry e, whose digest res->d its header gives), of a chunk of
 * size bytes: the pages it stores read and checked with its map, then
 * the chunk made whole from its bases (gck_parents_assemble_any()),
 * as frame_fetch() does a reference's chunk.
 */
static void
frame_patch(struct gck_reader *r, const struct gck_taker *t,
    struct archive *a, struct archive_entry *e, struct gck_zres *res,
    const void *map, size_t maplen, uint64_t size)
{
	struct gck_parents	*ps;
	struct gck_digest	 d;
	const char		*name = archive_entry_pathname(e);
	char			*stored, *buf;
	void			*h;
	la_ssize_t		 k;
	size_t			 cap, n = 0, want;

	if ((ps = __atomic_load_n(&r->parents, __ATOMIC_ACQUIRE)) == NULL ||
	    name == NULL || archive_entry_size(e) < 0 ||
	    (want = (size_t)archive_entry_size(e)) > GCK_CHUNK_SIZE ||
	    size > GCK_CHUNK_SIZE || maplen > GCK_PATCH_MAP_MAX)
		return;
	if (__atomic_add_fetch(&r->ahead, size, __ATOMIC_ACQ_REL) >
	    __atomic_load_n(&r->ahead_max, __ATOMIC_RELAXED)) {
		__atomic_sub_fetch(&r->ahead, size, __ATOMIC_ACQ_REL);
		return;
	}
	if ((stored = malloc(want + 1)) == NULL)
		goto fail;
	while ((k = archive_read_data(a, stored + n, want + 1 - n)) > 0 &&
	    (n += (size_t)k) <= want)
		;
	if (k < 0 || n != want || gck_patch_digest(stored, n, map, maplen,
	    size, &d) == -1 || !gck_digest_equal(&d, &res->d)) {
		free(stored);
		goto fail;
	}
	r_buf_get(r, &buf, &cap);
	if (gck_parents_assemble_any(ps, name, map, maplen, stored, n, size,
	    &buf, &cap) == -1) {
		free(stored);
		r_buf_put(r, buf, cap);
		goto fail;
	}
	free(stored);
	res->ref = buf;
	res->refcap = cap;
	res->refimg = 0;
	res->size = size;
	if (t != NULL && (h = t->begin(t->arg, name)) != NULL) {
		res->taken = 1;
		res->terr = t->take(t->arg, h, 0, buf, (size_t)size) == -1;
	}
	return;
fail:
	__atomic_sub_fetch(&r->ahead, size, __ATOMIC_ACQ_REL);
}

/* Frees a chunk a worker fetched that the reader did not take. */
static void
frame_discard(void *arg, struct gck_zres *res)
{
	struct gck_reader	*r = arg;

	r_buf_put(r, res->ref, res->refcap);
	res->ref = NULL;
	__atomic_sub_fetch(&r->ahead, res->size, __ATOMIC_ACQ_REL);
}

/*
 * frame_examine()'s data of entry e (its header digest in res->d): its
 * SHA-256 into res->d, digested by ds, and handed to the taker t as it
 * takes it; a checked one, a copy of it once it has its digest (a hole
 * is zeros).
 */
static void
frame_data(const struct gck_taker *t, struct archive *a,
    struct archive_entry *e, struct gck_dstate *ds, struct gck_zres *res)
{
	struct gck_digest	 hd;
	const char		*name;
	const void		*p;
	void			*h = NULL;
	char			*copy = NULL;
	int			 lent = 0, ret;
	uint64_t		 filled = 0;
	size_t			 l;
	la_int64_t		 off, so, sl;

	res->data_off = (uint64_t)archive_filter_bytes(a, 0);
	res->size = (uint64_t)archive_entry_size(e);
	hd = res->d;
	/* (a taker may take the data as it is digested) */
	if (t != NULL && (name = archive_entry_pathname(e)) != NULL &&
	    (h = t->begin(t->arg, name)) != NULL) {
		if (!t->checked)
			res->taken = 1;
		else if (res->size > GCK_PART_MAX)
			h = NULL;
		else if (t->buf_get != NULL && res->size > 0 && (copy =
		    t->buf_get(t->arg, (size_t)res->size)) != NULL)
			lent = 1;
		else if ((copy = calloc(1, res->size > 0 ? (size_t)res->size :
		    1)) == NULL)
			h = NULL;
	}
	while ((ret = archive_read_data_block(a, &p, &l, &off)) == ARCHIVE_OK) {
		gck_dstate_update(ds, p, l);
		if (copy != NULL) {
			if (off < 0 || (uint64_t)off > res->size ||
			    l > res->size - (uint64_t)off) {
				h = NULL;
			} else if (l > 0) {
				/* (a hole before it: zeros) */
				if ((uint64_t)off > filled)
					memset(copy + filled, 0,
					    (size_t)((uint64_t)off - filled));
				memcpy(copy + off, p, l);
				if ((uint64_t)off + l > filled)
					filled = (uint64_t)off + l;
			}
		} else if (h != NULL && !res->terr && l > 0 && (off < 0 ||
		    t->take(t->arg, h, (uint64_t)off, p, l) == -1))
			res->terr = 1;
	}
	if (ret != ARCHIVE_EOF)
		goto out;
	if (archive_entry_sparse_count(e) > 0) {
		archive_entry_sparse_reset(e);
		while (archive_entry_sparse_next(e, &so, &sl) == ARCHIVE_OK)
			if (sl > 0) {
				gck_dstate_u64(ds, (uint64_t)so);
				gck_dstate_u64(ds, (uint64_t)sl);
			}
		gck_dstate_u64(ds, res->size);
	}
	gck_dstate_final(ds, &res->d);
	res->ok = 1;
	if (copy != NULL && h != NULL && gck_digest_equal(&hd, &res->d)) {
		if (filled < res->size)
			memset(copy + filled, 0, (size_t)(res->size - filled));
		res->taken = 1;
		res->terr = t->take(t->arg, h, 0, copy, (size_t)res->size) ==
		    -1;
	}
out:
	if (lent)
		t->buf_put(t->arg, copy);
	else
		free(copy);
}

/*
 * Run by a decompressing worker on a frame of format 2, which holds one
 * tar entry: where its data starts, and its SHA-256 as gpuckpt-image(5)
 * defines it (with holes, the regions stored and the size after the
 * bytes stored), so that the reader's thread need not digest it.  The
 * reader still parses the entry itself and uses this only where it
 * finds the same entry at the same place.
 */
static void
frame_examine(void *arg, const char *buf, size_t len, struct gck_zres *res)
{
	struct gck_reader	*r = arg;
	const struct gck_taker	*t;
	struct archive		*a;
	struct archive_entry	*e;
	struct gck_dstate	*ds = NULL;
	const char		*xn;
	const void		*xv, *pmap = NULL;
	size_t			 xl, pmaplen = 0;
	uint64_t		 refsize = 0;
	int			 sha = 0;

	res->ok = 0;
	t = __atomic_load_n(&r->taker, __ATOMIC_ACQUIRE);
	if ((a = archive_read_new()) == NULL)
		return;
	if (archive_read_support_format_tar(a) != ARCHIVE_OK ||
	    archive_read_open_memory(a, buf, len) != ARCHIVE_OK ||
	    archive_read_next_header(a, &e) != ARCHIVE_OK ||
	    (ds = gck_dstate_new()) == NULL ||
	    gck_dstate_reset(ds, GCK_DK_SHA256) == -1)
		goto out;
	archive_entry_xattr_reset(e);
	while (archive_entry_xattr_next(e, &xn, &xv, &xl) == ARCHIVE_OK)
		if (strcmp(xn, XATTR_PREFIX "sha256") == 0)
			sha = gck_digest_parse(GCK_DK_SHA256, xv, xl,
			    &res->d) == 0;
		else if (strcmp(xn, XATTR_PREFIX "ref") == 0)
			refsize = gck_ref_size(xv, xl);
		else if (strcmp(xn, XATTR_PREFIX "patch") == 0) {
			pmap = xv;
			pmaplen = xl;
		}
	if (pmap != NULL) {
		if (sha && refsize > 0 &&
		    !__atomic_load_n(&r->no_fetch, __ATOMIC_RELAXED))
			frame_patch(r, t, a, e, res, pmap, pmaplen, refsize);
		goto out;
	}
	if (sha && refsize > 0 && archive_entry_size(e) == 0) {
		if (!__atomic_load_n(&r->no_fetch, __ATOMIC_RELAXED))
			frame_fetch(r, t, archive_entry_pathname(e), res,
			    refsize);
		goto out;
	}
	if (!sha || archive_entry_size(e) < 0)
		goto out;
	frame_data(t, a, e, ds, res);
out:
	gck_dstate_free(ds);
	archive_read_free(a);
}

int
gck_reader_new(struct gck_ctx *ctx, int fd, struct gck_reader **rp)
{
	struct gck_reader	*r = NULL;
	int			 ret;

	*rp = NULL;
	if ((r = calloc(1, sizeof *r)) == NULL ||
	    (r->ds = gck_dstate_new()) == NULL) {
		ret = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	r->ctx = ctx;
	pthread_mutex_init(&r->poolmu, NULL);
	if (hcreate_r(FILES_MAX * 2, &r->files) == 0) {
		ret = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	r->files_ok = 1;
	if ((r->fkeys = calloc(FILES_MAX, sizeof *r->fkeys)) == NULL) {
		ret = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	if ((ret = gck_zin_new(ctx, fd, &r->z)) != GCK_OK)
		goto out;
	gck_zin_set_examine(r->z, frame_examine, frame_discard, r);
	r->ahead_max = (uint64_t)REF_AHEAD * (unsigned)gck_zio_cpus() << 20;
	if ((r->a = archive_read_new()) == NULL) {
		ret = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	archive_read_support_format_tar(r->a);
	*rp = r;
	r = NULL;
	ret = GCK_OK;
out:
	gck_reader_free(r);
	return ret;
}

/*
 * Reads no frame ahead of what is asked for, after the head as before
 * it: for a reader that stops early (gpuinspect's summary).
 */
void
gck_reader_no_ahead(struct gck_reader *r)
{
	r->no_ahead = 1;
	gck_zin_set_ahead(r->z, 0);
}

/*
 * Has the decompressing workers fetch no chunk that a reference or a
 * patch names: for gck_reader_copy() into a writer whose parents hold
 * most of them, which reads of each only the pages they lack.  Before
 * gck_reader_head().
 */
void
gck_reader_no_fetch(struct gck_reader *r)
{
	__atomic_store_n(&r->no_fetch, 1, __ATOMIC_RELAXED);
}

/* How many threads decompress the stream (0: one per CPU). */
void
gck_reader_set_threads(struct gck_reader *r, int n)
{
	gck_zin_set_threads(r->z, n);
	__atomic_store_n(&r->ahead_max, (uint64_t)REF_AHEAD * (unsigned)(n >
	    0 ? n : gck_zio_cpus()) << 20, __ATOMIC_RELAXED);
}

/*
 * A copy of the whole stream, for a restore that must be able to keep
 * the image: gck_reader_keep_raw(), before gck_reader_head(), keeps what
 * the head takes; gck_reader_spool() writes that to fd, then all that
 * is read after; gck_reader_nospool() lets it be.
 */
void
gck_reader_keep_raw(struct gck_reader *r)
{
	gck_zin_keep_raw(r->z);
}

int
gck_reader_spool(struct gck_reader *r, int fd)
{
	return gck_zin_spool(r->z, fd);
}

void
gck_reader_nospool(struct gck_reader *r)
{
	gck_zin_nospool(r->z);
}

void
gck_reader_free(struct gck_reader *r)
{
	size_t	i;

	if (r == NULL)
		return;
	if (r->a != NULL)
		archive_read_free(r->a);
	gck_zin_free(r->z);
	r_ref_drop(r);
	free(r->epatch);
	free(r->tkbuf);
	free(r->pstored);
	free(r->pchunk);
	if (r->own_parents)
		gck_parents_free(r->parents);
	for (i = 0; i < r->nseen; i++)
		free(r->seen[i].name);
	free(r->seen);
	for (i = 0; i < r->nexp; i++)
		free(r->exp[i].name);
	free(r->exp);
	free(r->ttext);
	free(r->sig);
	if (r->files_ok)
		hdestroy_r(&r->files);
	for (i = 0; i < r->nfiles; i++)
		free(r->fkeys[i]);
	free(r->fkeys);
	gck_manifest_free(r->m);
	free(r->mtext);
	gck_dstate_free(r->ds);
	free(r->reg);
	while (r->npool > 0)
		free(r->pool[--r->npool]);
	pthread_mutex_destroy(&r->poolmu);
	free(r);
}

/* Says where the stream is: "after 'pages-1.img' part 12". */
static void
r_where(const struct gck_reader *r, char *buf, size_t len)
{
	char	d[GCK_NAME_MAX + 48];

	if (r->nseen == 0) {
		snprintf(buf, len, "at the start");
		return;
	}
	gck_entry_display(r->seen[r->nseen - 1].name, d, sizeof d);
	snprintf(buf, len, "after %s", d);
}

/*
 * The names that tar writers give the first header of an image: that of
 * the manifest, or that of its pax extended header (libarchive's, GNU
 * tar's, Python's).  '#' stands for one or more decimal digits.
 */
static const char *const head_names[] = { GCK_ENTRY_MANIFEST,
	"PaxHeader/" GCK_ENTRY_MANIFEST, "./PaxHeaders/" GCK_ENTRY_MANIFEST,
	"./PaxHeaders.#/" GCK_ENTRY_MANIFEST, "././@PaxHeader", NULL };

/*
 * Whether the name s, n bytes, is pattern pat (see head_names) when
 * complete, or can begin it when not.
 */
static int
name_could_be(const char *pat, const unsigned char *s, size_t n,
    int complete)
{
	size_t	i = 0, d;

	for (; *pat != '\0'; pat++) {
		if (*pat == '#') {
			for (d = i; i < n && isdigit(s[i]); i++)
				;
			if (i == n)
				return !complete;
			if (i == d)
				return 0;
			continue;
		}
		if (i == n)
			return !complete;
		if (s[i++] != (unsigned char)*pat)
			return 0;
	}
	return i == n;
}

/*
 * Whether b, the first n bytes of the tar stream, can begin an image: a
 * tar header of the manifest, or of its pax extended header, as far as
 * b goes: its name, its type and the ustar magic.  In an uncompressed
 * stream, the first bytes of the zstd magic can also begin one.
 */
static int
head_could_be(const unsigned char *b, size_t n, int compressed)
{
	static const unsigned char zmagic[4] = { 0x28, 0xb5, 0x2f, 0xfd };
	const unsigned char	*nul;
	size_t			 l, i;

	if (!compressed && n < sizeof zmagic && memcmp(b, zmagic, n) == 0)
		return 1;
	l = n < 100 ? n : 100;
	if ((nul = memchr(b, '\0', l)) != NULL)
		l = (size_t)(nul - b);
	for (i = 0; head_names[i] != NULL; i++)
		if (name_could_be(head_names[i], b, l, nul != NULL ||
		    n >= 100))
			break;
	if (head_names[i] == NULL)
		return 0;
	if (n > 156 && b[156] != 'x' && b[156] != '0' && b[156] != '\0')
		return 0;
	for (i = 257; i < n && i < 262; i++)
		if (b[i] != (unsigned char)"ustar"[i - 257])
			return 0;
	return 1;
}

/*
 * Before the manifest's header has been read, when the stream failed:
 * whether what it held cannot begin an image, which then is no image
 * rather than a truncated or damaged one.  Returns the code, the error
 * set, if so; GCK_OK if it can, or if there is no telling.
 */
static int
r_not_image(struct gck_reader *r)
{
	unsigned char	b[512];
	uint64_t	n = gck_zin_total(r->z);
	int		z = gck_zin_compressed(r->z);

	if (n == 0) {
		/* a whole zstd frame, which holds nothing */
		if (z && !r->ioerr && gck_zin_eof(r->z))
			return gck_set_error(r->ctx, GCK_EFORMAT,
			    "not a gpuckpt image: the zstd stream is empty");
		return GCK_OK;
	}
	if (n > sizeof b)
		n = sizeof b;
	if (gck_zin_peek(r->z, 0, b, (size_t)n) == -1 ||
	    head_could_be(b, (size_t)n, z))
		return GCK_OK;
	return gck_set_error(r->ctx, GCK_EFORMAT, "not a gpuckpt image: no tar "
	    "header for '" GCK_ENTRY_MANIFEST "' at the start%s",
	    z ? " of the zstd stream" : "");
}

/* Turns a libarchive failure into our error, saying where. */
static int
r_archive_error(struct gck_reader *r, int during_data)
{
	char	where[GCK_NAME_MAX + 64];
	int	ret;

	r_where(r, where, sizeof where);
	if (r->ioerr && r->ctx->code != GCK_ETRUNC)
		return r->ctx->code;
	if (r->mtext == NULL && (ret = r_not_image(r)) != GCK_OK)
		return ret;
	if (gck_zin_total(r->z) == 0 && gck_zin_eof(r->z) &&
	    !gck_zin_compressed(r->z))
		return gck_set_error(r->ctx, GCK_EFORMAT, "empty input: no image");
	if (r->ioerr || gck_zin_eof(r->z))
		return gck_set_error(r->ctx, GCK_ETRUNC, "image truncated %s%s "
		    "(tar offset %" PRIu64 ")", where, during_data ?
		    ": entry incomplete" : "", gck_zin_total(r->z));
	if (gck_zin_total(r->z) == 0)
		return gck_set_error(r->ctx, GCK_EFORMAT, "empty input: no image");
	return gck_set_error(r->ctx, GCK_EFORMAT, "corrupt image %s: %s",
	    where, archive_error_string(r->a));
}

/* Returns 0 with *ep, 1 at the end of the archive, or a code. */
static int
r_next(struct gck_reader *r, struct archive_entry **ep)
{
	int	ret;

	if ((ret = gck_check_interrupt(r->ctx)) != GCK_OK)
		return ret;
	ret = archive_read_next_header(r->a, ep);
	if (ret == ARCHIVE_EOF) {
		if (gck_zin_total(r->z) == 0 && r->mtext == NULL)
			return (ret = r_not_image(r)) != GCK_OK ? ret :
			    gck_set_error(r->ctx, GCK_EFORMAT,
			    "empty input: no image");
		return 1;
	}
	if (ret < ARCHIVE_WARN || ret == ARCHIVE_RETRY)
		return r_archive_error(r, 0);
	return r_layout(r, *ep);
}

static int
r_unverifiable(struct gck_reader *r)
{
	char	where[GCK_NAME_MAX + 64];

	r_where(r, where, sizeof where);
	return gck_set_error(r->ctx, GCK_EFORMAT, "corrupt image %s: "
	    "unexpected tar layout", where);
}

/*
 * Every byte of the tar stream is accounted for: headers carry their
 * checksums, data its digest, and the padding around them must be zero.
 * (A compressed stream's frame checksum shows only that it is the
 * stream its writer made, who may be hostile.)  Checks the headers of
 * the entry just read: a ustar header, or a pax header, its records and
 * zero padding, then a ustar header whose size is the entry's.
 */
static int
r_layout(struct gck_reader *r, struct archive_entry *e)
{
	unsigned char	 h[512];
	uint64_t	 p, ds, l, padded, hend;
	char		 size[13], *end, pbuf[201];
	int		 z;

	p = (uint64_t)archive_read_header_position(r->a);
	r->ehdr = p;
	ds = (uint64_t)archive_filter_bytes(r->a, 0);
	r->esparse = archive_entry_sparse_count(e) > 0;
	r->nreg = 0;
	if (r->esparse) {
		la_int64_t	 so, sl;
		uint64_t	*nr;

		archive_entry_sparse_reset(e);
		while (archive_entry_sparse_next(e, &so, &sl) == ARCHIVE_OK) {
			if (sl <= 0)
				continue;
			if (r->nreg == r->capreg) {
				size_t	nc = r->capreg ? r->capreg * 2 : 256;

				if (nc > GCK_PART_MAX / 512 || (nr = reallocarray(
				    r->reg, nc, 2 * sizeof *nr)) == NULL)
					return gck_set_error(r->ctx, GCK_EFORMAT,
					    "corrupt image: too many holes");
				r->reg = nr;
				r->capreg = nc;
			}
			r->reg[2 * r->nreg] = (uint64_t)so;
			r->reg[2 * r->nreg + 1] = (uint64_t)sl;
			r->nreg++;
		}
	}
	if (p != r->entry_end || ds < p + 512)
		return r_unverifiable(r);
	hend = p + 512;
	if (ds > p + 512) {
		if (gck_zin_peek(r->z, p, h, sizeof h) == -1 || h[156] != 'x')
			return r_unverifiable(r);
		memcpy(size, h + 124, 12);
		size[12] = '\0';
		l = strtoull(size, &end, 8);
		padded = (l + 511) / 512 * 512;
		hend = p + 512 + padded + 512;
		if (end == size || ds < hend || (ds != hend && !r->esparse))
			return r_unverifiable(r);
		if ((z = gck_zin_zero_range(r->z, p + 512 + l,
		    p + 512 + padded)) != 1)
			return z == 0 ? gck_set_error(r->ctx, GCK_ECORRUPT,
			    "corrupt image: non-zero padding in a header") :
			    r_unverifiable(r);
		if ((z = r_pax_records(r, p + 512, l)) != GCK_OK)
			return z;
	}
	if (!r->esparse && archive_entry_size(e) < USTAR_SIZE_MAX) {
		/*
		 * Two sizes, the pax record's and the ustar field's, where it
		 * can hold it: one value.  (A larger entry is refused later.)
		 */
		if (gck_zin_peek(r->z, hend - 512, h, sizeof h) == -1)
			return r_unverifiable(r);
		memcpy(size, h + 124, 12);
		size[12] = '\0';
		l = strtoull(size, &end, 8);
		if (end == size || (*end != '\0' && *end != ' ') ||
		    l != (uint64_t)archive_entry_size(e))
			return gck_set_error(r->ctx, GCK_EFORMAT, "corrupt "
			    "image: entry '%s' has two sizes", printable(
			    archive_entry_pathname(e) != NULL ?
			    archive_entry_pathname(e) : "", pbuf,
			    sizeof pbuf));
	}
	if (r->esparse) {
		/* The map of holes, read with the header, and what follows. */
		if (gck_zin_peek(r->z, hend - 512, h, sizeof h) == -1)
			return r_unverifiable(r);
		memcpy(size, h + 124, 12);
		size[12] = '\0';
		l = strtoull(size, &end, 8);
		if (end == size || ds == hend || l < ds - hend ||
		    (z = r_sparse_map(r, hend, ds)) != GCK_OK)
			return end == size || ds == hend || l < ds - hend ?
			    r_unverifiable(r) : z;
		r->estored = l - (ds - hend);
	}
	r->data_start = ds;
	return GCK_OK;
}

/*
 * The records of a pax header, len bytes at tar offset from: each
 * "LEN KEY=VALUE\n" with LEN its own length, filling the header exactly,
 * and each KEY one that a tar writer puts there for a regular file.  No
 * checksum covers them, so nothing else may hide there.
 */
static int
r_pax_records(struct gck_reader *r, uint64_t from, uint64_t len)
{
	static const char *const keys[] = { "SCHILY.xattr." XATTR_PREFIX
	    "xxh3", "SCHILY.xattr." XATTR_PREFIX "sha256",
	    "SCHILY.xattr." XATTR_PREFIX "ref",
	    "SCHILY.xattr." XATTR_PREFIX "patch",
	    "GNU.sparse.major", "GNU.sparse.minor", "GNU.sparse.name",
	    "GNU.sparse.realsize", "path", "size", "mtime", "atime",
	    "ctime", "uid", "gid", "uname", "gname", NULL };
	char		*buf, *q, *end, *eq;
	unsigned long	 n;
	size_t		 i, kl;
	int		 ret = GCK_OK;

	if (len > GCK_META_MAX || (buf = malloc((size_t)len + 1)) == NULL)
		return r_unverifiable(r);
	if (gck_zin_peek(r->z, from, buf, (size_t)len) == -1) {
		free(buf);
		return r_unverifiable(r);
	}
	buf[len] = '\0';
	for (q = buf; q < buf + len; q += n) {
		if (!isdigit((unsigned char)*q) || (n = strtoul(q, &end, 10),
		    *end != ' ') || n == 0 || n > (size_t)(buf + len - q) ||
		    q[n - 1] != '\n' || (eq = memchr(end, '=', (size_t)(q +
		    n - end))) == NULL) {
			ret = r_unverifiable(r);
			break;
		}
		kl = (size_t)(eq - end - 1);
		for (i = 0; keys[i] != NULL; i++)
			if (strlen(keys[i]) == kl &&
			    memcmp(keys[i], end + 1, kl) == 0)
				break;
		if (keys[i] == NULL) {
			char	pbuf[64];

			snprintf(pbuf, sizeof pbuf, "%.*s", (int)(kl < 40 ?
			    kl : 40), end + 1);
			ret = gck_set_error(r->ctx, GCK_EFORMAT, "corrupt "
			    "image: unexpected pax record '%s'",
			    printable(pbuf, pbuf, sizeof pbuf));
			break;
		}
	}
	free(buf);
	return ret;
}

/* After the data of an entry of size bytes: its padding must be zero. */
static int
r_padding(struct gck_reader *r, uint64_t size)
{
	uint64_t	de = (uint64_t)archive_filter_bytes(r->a, 0);
	int		z;

	r->entry_end = de;
	if (r->esparse)
		size = r->estored;	/* the map, then the data kept */
	if (de < r->data_start + size)
		return r_unverifiable(r);
	if ((z = gck_zin_zero_range(r->z, r->data_start + size, de)) != 1)
		return z == 0 ? gck_set_error(r->ctx, GCK_ECORRUPT,
		    "corrupt image: non-zero padding after an entry") :
		    r_unverifiable(r);
	return GCK_OK;
}

/*
 * The map of an entry with holes, in the
 * blocks [from, to) before its data: a count, then offsets and lengths,
 * one decimal number a line, then zeros to the end of its last block.
 */
static int
r_sparse_map(struct gck_reader *r, uint64_t from, uint64_t to)
{
	uint64_t	 at, lines = 1, n, cnt;
	char		 c, num[24];
	int		 digits = 0, z;

	for (at = from, n = 0; n < lines; at++) {
		if (at >= to || gck_zin_peek(r->z, at, &c, 1) == -1)
			return r_unverifiable(r);
		if (c == '\n') {
			if (digits == 0 || digits > 20)
				return r_unverifiable(r);
			if (n == 0) {
				if (gck_zin_peek(r->z, at - (uint64_t)digits,
				    num, (size_t)digits) == -1)
					return r_unverifiable(r);
				num[digits] = '\0';
				cnt = strtoull(num, NULL, 10);
				if (cnt > GCK_PART_MAX / 512)
					return r_unverifiable(r);
				lines = 1 + 2 * cnt;
			}
			n++;
			digits = 0;
		} else if (c >= '0' && c <= '9')
			digits++;
		else
			return r_unverifiable(r);
	}
	if ((at - from + 511) / 512 * 512 != to - from)
		return r_unverifiable(r);
	if ((z = gck_zin_zero_range(r->z, at, to)) != 1)
		return z == 0 ? gck_set_error(r->ctx, GCK_ECORRUPT,
		    "corrupt image: non-zero padding after a map of holes") :
		    r_unverifiable(r);
	return GCK_OK;
}

/* What an entry of a trailer says it is: GCK_EK_*. */
static int
t_kind(const json_t *o)
{
	if (json_is_true(json_object_get(o, "ref")))
		return json_object_get(o, "patch") != NULL ? -1 : GCK_EK_REF;
	if (json_object_get(o, "patch") != NULL)
		return json_is_true(json_object_get(o, "patch")) ?
		    GCK_EK_PATCH : -1;
	return GCK_EK_DATA;
}

/*
 * Checks what the header of e says before its data is read: a regular
 * file, a sane size, a digest.  Returns GCK_OK with *digestp or a code.
 */
static int
r_check_entry(struct gck_reader *r, struct archive_entry *e, uint64_t max,
    struct gck_digest *digestp)
{
	const char	*name = archive_entry_pathname(e), *xn, *shown;
	const void	*xv;
	char		 pbuf[201];
	size_t		 xl;
	la_int64_t	 size;
	int		 have = 0, dk;

	if (name == NULL)
		name = "";
	shown = printable(name, pbuf, sizeof pbuf);
	if (name[0] == '/')
		return gck_set_error(r->ctx, GCK_EUNSAFE,
		    "unsafe entry '%s': absolute path", shown);
	if (strcmp(name, "..") == 0 || strncmp(name, "../", 3) == 0 ||
	    strstr(name, "/../") != NULL ||
	    (strlen(name) >= 3 && strcmp(name + strlen(name) - 3,
	    "/..") == 0))
		return gck_set_error(r->ctx, GCK_EUNSAFE,
		    "unsafe entry '%s': path with '..'", shown);
	if (archive_entry_hardlink(e) != NULL)
		return gck_set_error(r->ctx, GCK_EUNSAFE,
		    "unsafe entry '%s': hard link", shown);
	switch (archive_entry_filetype(e)) {
	case AE_IFREG:
		break;
	case AE_IFLNK:
		return gck_set_error(r->ctx, GCK_EUNSAFE,
		    "unsafe entry '%s': symbolic link", shown);
	case AE_IFCHR:
	case AE_IFBLK:
		return gck_set_error(r->ctx, GCK_EUNSAFE,
		    "unsafe entry '%s': device node", shown);
	case AE_IFIFO:
		return gck_set_error(r->ctx, GCK_EUNSAFE,
		    "unsafe entry '%s': fifo", shown);
	case AE_IFDIR:
		return gck_set_error(r->ctx, GCK_EUNSAFE,
		    "unsafe entry '%s': directory", shown);
	default:
		return gck_set_error(r->ctx, GCK_EUNSAFE,
		    "unsafe entry '%s': not a regular file", shown);
	}
	size = archive_entry_size(e);
	if (!archive_entry_size_is_set(e) || size < 0)
		return gck_set_error(r->ctx, GCK_EFORMAT,
		    "corrupt image: entry '%s' has no size", shown);
	if ((uint64_t)size > max)
		return gck_set_error(r->ctx, GCK_EFORMAT,
		    "entry '%s' too large (%lld bytes, limit %llu)", shown,
		    (long long)size, (unsigned long long)max);
	archive_entry_xattr_reset(e);
	r->eref = 0;
	free(r->epatch);
	r->epatch = NULL;
	r->epatchlen = 0;
	/*
	 * The manifest's digest tells the kind (the version); every entry
	 * after it carries one of that kind.
	 */
	while (archive_entry_xattr_next(e, &xn, &xv, &xl) == ARCHIVE_OK) {
		if (strncmp(xn, XATTR_PREFIX, strlen(XATTR_PREFIX)) != 0)
			continue;
		xn += strlen(XATTR_PREFIX);
		if (strcmp(xn, "ref") == 0) {
			if ((r->erefsize = gck_ref_size(xv, xl)) == 0 || r->eref)
				return gck_set_error(r->ctx, GCK_EFORMAT,
				    "corrupt image: entry '%s' has a bad "
				    "reference", shown);
			r->eref = 1;
			continue;
		}
		if (strcmp(xn, "patch") == 0) {
			if (r->epatch != NULL || xl == 0 ||
			    xl > GCK_PATCH_MAP_MAX)
				return gck_set_error(r->ctx, GCK_EFORMAT,
				    "corrupt image: entry '%s' has a bad "
				    "patch", shown);
			if ((r->epatch = malloc(xl)) == NULL)
				return gck_set_error(r->ctx, GCK_ENOMEM,
				    "out of memory");
			memcpy(r->epatch, xv, xl);
			r->epatchlen = xl;
			continue;
		}
		dk = strcmp(xn, "xxh3") == 0 ? GCK_DK_XXH3 :
		    strcmp(xn, "sha256") == 0 ? GCK_DK_SHA256 : 0;
		if (dk == 0 || (r->dk != 0 && dk != r->dk) || have)
			continue;
		if (gck_digest_parse(dk, xv, xl, digestp) == 0)
			have = 1;
	}
	if (have && r->dk == 0)
		r->dk = digestp->kind;
	if (!have)
		return gck_set_error(r->ctx, GCK_ECORRUPT,
		    "corrupt image: entry '%s' has no checksum", shown);
	if (r->epatch != NULL && !r->eref)
		return gck_set_error(r->ctx, GCK_EFORMAT, "corrupt image: "
		    "patch '%s' gives no size", shown);
	return GCK_OK;
}

/*
 * Reads the data of the current entry (size bytes) into keep, which
 * holds size bytes and one more, and checks it against digest.  Returns
 * GCK_OK or a code.
 */
static int
r_data(struct gck_reader *r, const char *name, uint64_t size, char *keep,
    const struct gck_digest *digest)
{
	struct gck_digest	 got_d;
	char		 d[GCK_NAME_MAX + 48], where[GCK_NAME_MAX + 64];
	uint64_t	 got = 0;
	la_ssize_t	 n;
	int		 ret;

	for (;;) {
		n = archive_read_data(r->a, keep + got, (size_t)(size - got) +
		    1);
		if (n < 0)
			return r_archive_error(r, 1);
		if (n == 0)
			break;
		if (got + (uint64_t)n > size)
			return gck_set_error(r->ctx, GCK_EFORMAT, "corrupt image: "
			    "entry '%.200s' longer than declared", name);
		got += (uint64_t)n;
		if ((ret = gck_check_interrupt(r->ctx)) != GCK_OK)
			return ret;
	}
	if (got != size) {
		r_where(r, where, sizeof where);
		return gck_set_error(r->ctx, GCK_ETRUNC,
		    "image truncated %s: entry incomplete (tar offset %"
		    PRIu64 ")", where, gck_zin_total(r->z));
	}
	if (gck_digest_buf(digest->kind, keep, (size_t)size, &got_d) == -1)
		return gck_set_error(r->ctx, GCK_ENOMEM, "out of memory");
	if (!gck_digest_equal(&got_d, digest)) {
		gck_entry_display(name, d, sizeof d);
		return gck_set_error(r->ctx, GCK_ECORRUPT,
		    "corrupt image: checksum mismatch in %s (entry at tar "
		    "offset %" PRIu64 ")", d, r->ehdr);
	}
	return r_padding(r, size);
}

/*
 * Where the trailer was known, and signed, before the stream was read
 * (gck_reader_expect()): the entry about to be read, number r->nseen,
 * must be the one it lists there, with the same size and digest, before
 * anything of it is used.
 */
static int
r_expected(struct gck_reader *r, const char *name, uint64_t size,
    const struct gck_digest *digest, int ref)
{
	const struct seen	*x;
	char			 d[GCK_NAME_MAX + 48];

	if (r->exp == NULL)
		return GCK_OK;
	x = r->nseen < r->nexp ? &r->exp[r->nseen] : NULL;
	if (x != NULL && strcmp(x->name, name) == 0 && x->size == size &&
	    x->ref == ref && gck_digest_equal(&x->digest, digest))
		return GCK_OK;
	gck_entry_display(name, d, sizeof d);
	return gck_set_error(r->ctx, GCK_ESIGN, "corrupt image: %s is not "
	    "what was signed", d);
}

static int
r_record(struct gck_reader *r, const char *name, uint64_t size,
    const struct gck_digest *digest, int ref)
{
	struct seen	*ns;

	if (r->nseen == r->capseen) {
		size_t	nc = r->capseen ? r->capseen * 2 : 256;

		if ((ns = reallocarray(r->seen, nc, sizeof *ns)) == NULL)
			return gck_set_error(r->ctx, GCK_ENOMEM,
			    "out of memory");
		r->seen = ns;
		r->capseen = nc;
	}
	if ((r->seen[r->nseen].name = strdup(name)) == NULL)
		return gck_set_error(r->ctx, GCK_ENOMEM, "out of memory");
	r->seen[r->nseen].size = size;
	r->seen[r->nseen].digest = *digest;
	r->seen[r->nseen].ref = ref;
	r->nseen++;
	r->bytes += size;
	return GCK_OK;
}

/*
 * Reads and checks the manifest, which must come first.  Returns GCK_OK
 * with *mp set (owned by the reader) or a code.
 */
int
gck_reader_head(struct gck_reader *r, const struct gck_manifest **mp)
{
	struct archive_entry	*e;
	const char		*name;
	char			 why[GCK_ERRMAX];
	struct gck_digest	 digest;
	uint64_t		 size;
	int			 ret, vret;

	*mp = NULL;
	if (archive_read_open2(r->a, r, NULL, r_read_cb, NULL, NULL) !=
	    ARCHIVE_OK)
		return r_archive_error(r, 0);
	if ((ret = r_next(r, &e)) != 0) {
		if (ret == 1)
			return gck_set_error(r->ctx, GCK_EFORMAT,
			    "not a gpuckpt image: no entries");
		return ret;
	}
	name = archive_entry_pathname(e);
	if (name == NULL || strcmp(name, GCK_ENTRY_MANIFEST) != 0) {
		char	pbuf[201];

		return gck_set_error(r->ctx, GCK_EFORMAT,
		    "not a gpuckpt image: first entry is '%s', not '"
		    GCK_ENTRY_MANIFEST "'", printable(name != NULL ? name : "",
		    pbuf, sizeof pbuf));
	}
	if ((ret = r_check_entry(r, e, GCK_META_MAX, &digest)) != GCK_OK)
		return ret;
	if (r->eref)
		return gck_set_error(r->ctx, GCK_EFORMAT, "corrupt image: the "
		    "manifest is a reference");
	size = (uint64_t)archive_entry_size(e);
	if ((ret = r_expected(r, name, size, &digest, 0)) != GCK_OK)
		return ret;
	if ((r->mtext = malloc((size_t)size + 2)) == NULL)
		return gck_set_error(r->ctx, GCK_ENOMEM, "out of memory");
	ret = r_data(r, name, size, r->mtext, &digest);
	if (ret != GCK_OK && ret != GCK_ECORRUPT)
		return ret;
	if (ret == GCK_ECORRUPT)	/* its digest, or its padding */
		snprintf(why, sizeof why, "%s", gck_error_string(r->ctx));
	r->mtext[size] = '\0';
	r->mlen = (size_t)size;
	/* A newer format is said first: its reader would know the rest. */
	vret = gck_manifest_parse(r->ctx, r->mtext, r->mlen, &r->m);
	if (vret == GCK_EVERSION)
		return vret;
	if (ret == GCK_ECORRUPT)
		return gck_set_error(r->ctx, GCK_ECORRUPT, "%s", why);
	if (vret != GCK_OK)
		return vret;
	if ((gck_manifest_format(r->m) == 1) != (r->dk == GCK_DK_XXH3))
		return gck_set_error(r->ctx, GCK_EFORMAT, "corrupt image: a "
		    "manifest of format version %d with %s digests",
		    gck_manifest_format(r->m), gck_digest_name(r->dk));
	if ((ret = r_record(r, name, size, &digest, 0)) != GCK_OK)
		return ret;
	gck_zin_set_ahead(r->z, !r->no_ahead);	/* the rest is read on */
	*mp = r->m;
	return GCK_OK;
}

void
gck_reader_manifest_text(const struct gck_reader *r, const char **textp,
    size_t *lenp)
{
	*textp = r->mtext;
	*lenp = r->mlen;
}

static int
r_trailer(struct gck_reader *r, const char *text, size_t len)
{
	json_t		*t = NULL, *es, *o, *hv;
	json_error_t	 jerr;
	const char	*name, *hex;
	json_int_t	 size, count, bytes, at, zsize;
	struct gck_digest d;
	size_t		 i;
	int		 fmt, ret;

	if ((t = json_loadb(text, len, 0, &jerr)) == NULL ||
	    json_unpack(t, "{s:i, s:o, s:I, s:I}", "format", &fmt,
	    "entries", &es, "count", &count, "bytes", &bytes) != 0 ||
	    !json_is_array(es)) {
		ret = gck_set_error(r->ctx, GCK_EFORMAT,
		    "corrupt image: unreadable checksum trailer");
		goto out;
	}
	if (fmt != gck_manifest_format(r->m)) {
		ret = gck_set_error(r->ctx, GCK_EFORMAT, "corrupt image: "
		    "trailer of format version %d in an image of version %d",
		    fmt, gck_manifest_format(r->m));
		goto out;
	}
	if (json_array_size(es) != r->nseen || (uint64_t)count != r->nseen ||
	    (uint64_t)bytes != r->bytes) {
		ret = gck_set_error(r->ctx, GCK_ECORRUPT, "corrupt image: "
		    "trailer lists %zu entries (%lld bytes), the stream has "
		    "%zu (%llu bytes)", json_array_size(es), (long long)bytes,
		    r->nseen, (unsigned long long)r->bytes);
		goto out;
	}
	json_array_foreach(es, i, o) {
		hv = json_object_get(o, gck_digest_name(r->dk));
		hex = json_string_value(hv);
		if (json_unpack(o, "{s:s, s:I}", "name", &name, "size",
		    &size) != 0 || hex == NULL ||
		    gck_digest_parse(r->dk, hex, strlen(hex), &d) == -1 ||
		    (fmt > 1 && (json_unpack(o, "{s:I, s:I}", "at", &at,
		    "zsize", &zsize) != 0 || at < 0 || zsize <= 0)) ||
		    strcmp(name, r->seen[i].name) != 0 ||
		    t_kind(o) != r->seen[i].ref ||
		    (uint64_t)size != r->seen[i].size ||
		    !gck_digest_equal(&d, &r->seen[i].digest)) {
			ret = gck_set_error(r->ctx, GCK_ECORRUPT,
			    "corrupt image: trailer does not match entry %zu "
			    "('%.200s')", i + 1, r->seen[i].name);
			goto out;
		}
	}
	ret = GCK_OK;
out:
	json_decref(t);
	return ret;
}

/*
 * The signature after the trailer, entry e: read, checked against its
 * digest and kept, for whoever asks who signed.  Returns GCK_OK or a
 * code.
 */
static int
r_entry_sig(struct gck_reader *r, struct archive_entry *e)
{
	struct gck_digest	 digest;
	uint64_t		 size;
	int			 ret;

	if ((ret = r_check_entry(r, e, GCK_SIG_MAX, &digest)) != GCK_OK)
		return ret;
	if (r->eref)
		return gck_set_error(r->ctx, GCK_EFORMAT, "corrupt image: the "
		    "signature is a reference");
	size = (uint64_t)archive_entry_size(e);
	if ((r->sig = malloc((size_t)size + 1)) == NULL)
		return gck_set_error(r->ctx, GCK_ENOMEM, "out of memory");
	if ((ret = r_data(r, GCK_ENTRY_SIG, size, r->sig, &digest)) !=
	    GCK_OK)
		return ret;
	r->sig[size] = '\0';
	r->siglen = (size_t)size;
	r->trailer_end = ((uint64_t)archive_filter_bytes(r->a, 0) + 511) /
	    512 * 512;
	return GCK_OK;
}

/*
 * After the trailer: the tar stream must end there, complete (a whole
 * number of records, two zero blocks), with nothing after it.
 */
static int
r_finish(struct gck_reader *r)
{
	struct archive_entry	*e;
	char			 buf[4096];
	uint64_t		 extra = 0, at;
	ssize_t			 n;
	int			 ret;

	/* In version 2, the trailer's signature may follow it. */
	if ((ret = r_next(r, &e)) == 0 && gck_manifest_format(r->m) > 1 &&
	    archive_entry_pathname(e) != NULL &&
	    strcmp(archive_entry_pathname(e), GCK_ENTRY_SIG) == 0) {
		if ((ret = r_entry_sig(r, e)) != GCK_OK)
			return ret;
		ret = r_next(r, &e);
	}
	if (ret == 0)
		return gck_set_error(r->ctx, GCK_EFORMAT,
		    "corrupt image: entry '%s' after the trailer",
		    printable(archive_entry_pathname(e) != NULL ?
		    archive_entry_pathname(e) : "", buf, 201));
	if (ret != 1)
		return ret;
	while ((n = gck_zin_read(r->z, buf, sizeof buf)) > 0) {
		extra += (uint64_t)n;
		if (extra > TAIL_SLACK)
			break;
	}
	if (n == -1)
		return r->ctx->code;
	if (extra > TAIL_SLACK || gck_zin_total(r->z) -
	    gck_zin_zero_tail(r->z) > r->trailer_end)
		return gck_set_error(r->ctx, GCK_EFORMAT,
		    "corrupt image: data after the end of the image");
	/* Version 1: one frame, whole records; 2: blocks, any frames. */
	if (gck_zin_total(r->z) < r->trailer_end + 1024 ||
	    (gck_manifest_format(r->m) == 1 &&
	    gck_zin_total(r->z) % GCK_TAR_RECORD != 0))
		return gck_set_error(r->ctx, GCK_ETRUNC,
		    "image truncated after the trailer");
	if (gck_manifest_format(r->m) == 1 && gck_zin_frames(r->z) > 1)
		return gck_set_error(r->ctx, GCK_EFORMAT,
		    "corrupt image: data after the end of the compressed "
		    "stream");
	/* A footer names the frame that begins with the trailer. */
	if (gck_zin_footer(r->z, &at) && (gck_manifest_format(r->m) == 1 ||
	    !r->trailer_framed || at != r->trailer_at))
		return gck_set_error(r->ctx, GCK_EFORMAT,
		    "corrupt image: the footer does not name the trailer's "
		    "frame");
	return GCK_OK;
}

/*
 * At the end of the current CRIU file (none before the first): its parts
 * add up to the size the manifest's file list gives it.
 */
static int
r_file_done(struct gck_reader *r)
{
	int64_t	size;

	if (r->nfiles == 0 || !gck_manifest_has_file_list(r->m))
		return GCK_OK;
	size = gck_manifest_file_size(r->m, r->cur);
	if (size < 0 || (uint64_t)size != r->fbytes)
		return gck_set_error(r->ctx, GCK_EFORMAT, "corrupt image: "
		    "'%s' holds %" PRIu64 " bytes, the manifest says %lld",
		    r->cur, r->fbytes, (long long)size);
	return GCK_OK;
}

/*
 * At the trailer, entry e: every file the manifest lists has come; the
 * trailer is read, checked against the entries, and so is the end of the
 * stream.  Returns GCK_OK or a code.
 */
static int
r_entry_trailer(struct gck_reader *r, struct archive_entry *e,
    const char *name)
{
	char		*text = NULL;
	struct gck_digest digest;
	uint64_t	 size;
	int		 ret;

	if ((ret = r_file_done(r)) != GCK_OK)
		return ret;
	if (gck_manifest_has_file_list(r->m) &&
	    r->nfiles != gck_manifest_nfiles(r->m))
		return gck_set_error(r->ctx, GCK_EFORMAT, "corrupt image: %zu "
		    "of the %zu files the manifest lists are missing",
		    gck_manifest_nfiles(r->m) - r->nfiles,
		    gck_manifest_nfiles(r->m));
	if (gck_manifest_format(r->m) > 2 && r->pidxbytes != r->membytes /
	    GCK_PAGE * GCK_PDIG)
		return gck_set_error(r->ctx, GCK_EFORMAT, "corrupt image: its "
		    "page index lists %" PRIu64 " pages, its memory has %"
		    PRIu64, r->pidxbytes / GCK_PDIG, r->membytes / GCK_PAGE);
	if ((ret = r_check_entry(r, e, GCK_META_MAX, &digest)) != GCK_OK)
		return ret;
	if (r->eref)
		return gck_set_error(r->ctx, GCK_EFORMAT, "corrupt image: the "
		    "trailer is a reference");
	if (gck_zin_compressed(r->z) && gck_manifest_format(r->m) > 1) {
		uint64_t	tar;

		gck_zin_cur_frame(r->z, &r->trailer_at, &tar);
		r->trailer_framed = tar == r->ehdr;
	}
	size = (uint64_t)archive_entry_size(e);
	if (r->exp != NULL && !gck_digest_equal(&digest, &r->expt))
		return gck_set_error(r->ctx, GCK_ESIGN, "corrupt image: its "
		    "trailer is not the one signed");
	if ((text = malloc((size_t)size + 1)) == NULL)
		return gck_set_error(r->ctx, GCK_ENOMEM, "out of memory");
	if ((ret = r_data(r, name, size, text, &digest)) == GCK_OK &&
	    (ret = r_trailer(r, text, (size_t)size)) == GCK_OK) {
		text[size] = '\0';
		r->ttext = text;
		r->tlen = (size_t)size;
		text = NULL;
		r->trailer_end = ((uint64_t)archive_filter_bytes(r->a, 0) +
		    511) / 512 * 512;
		ret = r_finish(r);
	}
	free(text);
	if (ret == GCK_OK)
		r->done = 1;
	if (ret == GCK_OK && r->refbytes > 0)
		gck_log(r->ctx, 2, "%" PRIu64 " bytes read from parent images, "
		    "%" PRIu64 " of them ahead, by the decompressing workers",
		    r->refbytes, r->refahead);
	return ret;
}

/*
 * At the first part of CRIU file file: it has not come before, and it
 * comes where the manifest's file list says; the file before it is
 * whole.  It becomes the current file.  Returns GCK_OK or a code.
 */
static int
r_entry_file(struct gck_reader *r, char *file)
{
	ENTRY	 item, *found;
	int	 ret;

	item.key = file;
	item.data = NULL;
	if (hsearch_r(item, FIND, &found, &r->files) != 0)
		return gck_set_error(r->ctx, GCK_EFORMAT,
		    "corrupt image: '%s' appears twice", file);
	if ((ret = r_file_done(r)) != GCK_OK)
		return ret;
	/* The files the manifest lists, in the order it gives. */
	if (gck_manifest_has_file_list(r->m)) {
		if (!gck_manifest_has_file(r->m, file))
			return gck_set_error(r->ctx, GCK_EFORMAT,
			    "corrupt image: '%s' is not in the manifest's "
			    "file list", file);
		if (gck_manifest_file_pos(r->m, file) != (int64_t)r->nfiles)
			return gck_set_error(r->ctx, GCK_EFORMAT,
			    "corrupt image: '%s' out of order", file);
	}
	r->fbytes = 0;
	/* item.key is file, the caller's, until strdup'ed. */
	if (r->nfiles >= FILES_MAX || (item.key = strdup(file)) == NULL ||
	    hsearch_r(item, ENTER, &found, &r->files) == 0) {
		if (item.key != file)
			free(item.key);
		return gck_set_error(r->ctx, GCK_EFORMAT,
		    "corrupt image: too many files");
	}
	r->fkeys[r->nfiles++] = item.key;
	snprintf(r->cur, sizeof r->cur, "%s", file);
	r->newfile = 1;
	return GCK_OK;
}

/*
 * At a part of a CRIU file, entry e named name: a name of the image's,
 * and the next part of the current file or the first of a new one.
 * Then its data is next.  Returns GCK_OK or a code.
 */
static int
r_entry_part(struct gck_reader *r, struct archive_entry *e, const char *name)
{
	char		 file[GCK_NAME_MAX + 1], buf[300];
	struct gck_digest digest;
	long		 part;
	int		 ret;

	if ((ret = r_check_entry(r, e, GCK_PART_MAX, &digest)) != GCK_OK)
		return ret;
	if (strcmp(name, GCK_ENTRY_MANIFEST) == 0)
		return gck_set_error(r->ctx, GCK_EFORMAT,
		    "corrupt image: second manifest");
	if (gck_entry_parse(name, file, sizeof file, &part) == -1)
		return gck_set_error(r->ctx, GCK_EUNSAFE,
		    "unsafe entry '%s': unexpected name",
		    printable(name, buf, 201));
	if (r->nseen >= GCK_ENTRIES_MAX)
		return gck_set_error(r->ctx, GCK_EFORMAT,
		    "corrupt image: more than %d entries", GCK_ENTRIES_MAX);
	if (part > 0) {
		if (strcmp(file, r->cur) != 0 || part != r->nextpart)
			return gck_set_error(r->ctx, GCK_EFORMAT,
			    "corrupt image: part %ld of '%s' out of order",
			    part, file);
	} else if ((ret = r_entry_file(r, file)) != GCK_OK)
		return ret;
	/* A reference: a chunk of memory that a parent image holds. */
	if (r->eref && ((archive_entry_size(e) != 0 && r->epatch == NULL) ||
	    gck_manifest_chain(r->m) == NULL ||
	    (gck_manifest_file_memory(r->m, file) != 1 &&
	    !gck_manifest_chunks_only(r->m))))
		return gck_set_error(r->ctx, GCK_EFORMAT, "corrupt image: "
		    "entry '%s' is a reference where data must be",
		    printable(name, buf, 201));
	/* A patch: of format 3, of whole pages, its map in its one form. */
	if (r->epatch != NULL) {
		struct gck_patch	*pt;
		char			 why[160];

		if (gck_manifest_format(r->m) < 3 || r->esparse)
			return gck_set_error(r->ctx, GCK_EFORMAT, "corrupt "
			    "image: entry '%s' is a patch in an image of "
			    "format %d", printable(name, buf, 201),
			    gck_manifest_format(r->m));
		if ((pt = malloc(sizeof *pt)) == NULL)
			return gck_set_error(r->ctx, GCK_ENOMEM,
			    "out of memory");
		ret = gck_patch_parse(r->epatch, r->epatchlen, r->erefsize,
		    (uint64_t)archive_entry_size(e), pt, why, sizeof why);
		free(pt);
		r->pstoredlen = (uint64_t)archive_entry_size(e);
		if (ret == -1)
			return gck_set_error(r->ctx, GCK_EFORMAT, "corrupt "
			    "image: patch '%s': %s", printable(name, buf,
			    201), why);
	}
	if (gck_manifest_format(r->m) > 2 && r->pidxpart > 0)
		return gck_set_error(r->ctx, GCK_EFORMAT, "corrupt image: '%s' "
		    "after the page index", printable(name, buf, 201));
	r->nextpart = part >= 0 ? (int)part + 1 : -1;
	snprintf(r->ename, sizeof r->ename, "%s", name);
	r->esize = r->eref ? r->erefsize : (uint64_t)archive_entry_size(e);
	if ((ret = r_expected(r, name, r->esize, &digest, r->epatch != NULL ?
	    GCK_EK_PATCH : r->eref ? GCK_EK_REF : GCK_EK_DATA)) != GCK_OK)
		return ret;
	if (gck_manifest_file_memory(r->m, file) == 1 ||
	    gck_manifest_chunks_only(r->m)) {
		if (gck_manifest_format(r->m) > 2 && r->esize % GCK_PAGE != 0)
			return gck_set_error(r->ctx, GCK_EFORMAT, "corrupt "
			    "image: entry '%s' of memory is not whole pages",
			    printable(name, buf, 201));
		r->membytes += r->esize;
	}
	r->refdata = NULL;
	r_ref_drop(r);
	/* Format 2 cuts a process's memory in chunks of at most 1 MiB. */
	if (gck_manifest_format(r->m) > 1 && r->esize > GCK_CHUNK_SIZE &&
	    gck_manifest_file_memory(r->m, file) == 1)
		return gck_set_error(r->ctx, GCK_EFORMAT, "corrupt image: "
		    "entry '%s' is a chunk of %" PRIu64 " bytes, more than %u",
		    printable(name, buf, 201), r->esize, GCK_CHUNK_SIZE);
	r->fbytes += r->esize;
	r->edigest = digest;
	r->egot = 0;
	r->edata = 0;
	r->indata = 1;
	r->bleft = 0;
	r->beof = 0;
	r->etbegun = 0;
	r->eth = NULL;
	r->etfail = 0;
	r_predigest(r);
	r_ref_take(r);
	if (gck_dstate_reset(r->ds, r->dk) == -1)
		return gck_set_error(r->ctx, GCK_ENOMEM, "out of memory");
	return GCK_OK;
}

/*
 * Whether a worker has digested the entry just read, in the frame that
 * starts with its header: then its data need not be digested again.
 */
static void
r_predigest(struct gck_reader *r)
{
	struct gck_zres	zr;

	r->epre = 0;
	r->etaken = r->eterr = 0;
	if (r->eref || r->dk != GCK_DK_SHA256 ||
	    gck_zin_result(r->z, r->ehdr, &zr) == -1 || !zr.ok ||
	    zr.data_off != r->data_start - r->ehdr || zr.size != r->esize)
		return;
	r->epre = 1;
	r->epred = zr.d;
	r->etaken = zr.taken;
	r->eterr = zr.terr;
}

/*
 * The chunk a worker fetched for the reference just read, if it fetched
 * the one the reference names, as this thread read it.
 */
static void
r_ref_take(struct gck_reader *r)
{
	struct gck_zres	zr;

	if (!r->eref || gck_zin_take(r->z, r->ehdr, &zr) == -1 ||
	    zr.ref == NULL)
		return;
	if (zr.size != r->esize || !gck_digest_equal(&zr.d, &r->edigest)) {
		frame_discard(r, &zr);
		return;
	}
	r->refown = zr.ref;
	r->refowncap = zr.refcap;
	r->refimg = zr.refimg;
	r->refownsz = zr.size;
	r->etaken = zr.taken;
	r->eterr = zr.terr;
}

/* Lets go of the chunk r_ref_take() took. */
static void
r_ref_drop(struct gck_reader *r)
{
	if (r->refown == NULL)
		return;
	r_buf_put(r, r->refown, r->refowncap);
	r->refown = NULL;
	__atomic_sub_fetch(&r->ahead, r->refownsz, __ATOMIC_ACQ_REL);
}

/*
 * Hands the entry's next n bytes of data at p, at offset off of it, to
 * the taker, if it takes the entry and no worker has; the entry's first
 * data asks first whether it does.
 */
static void
r_take(struct gck_reader *r, uint64_t off, const void *p, size_t n)
{
	const struct gck_taker	*t = r->taker;

	if (t == NULL || r->etaken)
		return;
	if (!r->etbegun)
		r_take_begin(r, t);
	if (r->eth == NULL || r->etfail)
		return;
	if (!t->checked) {
		if (t->take(t->arg, r->eth, off, p, n) == -1)
			r->etfail = 1;
	} else if (off > r->esize || n > r->esize - off)
		r->etfail = 1;
	else
		memcpy(r->tkbuf + off, p, n);
}

/*
 * Asks the taker whether it takes the entry; one that is checked has it
 * kept whole, from zeros, till it is.
 */
static void
r_take_begin(struct gck_reader *r, const struct gck_taker *t)
{
	char	*nb;

	r->etbegun = 1;
	if ((r->eth = t->begin(t->arg, r->ename)) == NULL || !t->checked)
		return;
	if (r->esize > GCK_PART_MAX) {
		r->etfail = 1;
		return;
	}
	if (r->tkcap < r->esize) {
		if ((nb = realloc(r->tkbuf, (size_t)r->esize)) == NULL) {
			r->etfail = 1;
			return;
		}
		r->tkbuf = nb;
		r->tkcap = (size_t)r->esize;
	}
	if (r->esize > 0)
		memset(r->tkbuf, 0, (size_t)r->esize);
}

/*
 * Tells the taker that the entry just checked is in the image, and who
 * handed its data on.  Returns GCK_OK or its code.
 */
static int
r_taken(struct gck_reader *r)
{
	const struct gck_taker	*t = r->taker;
	int			 by;

	if (t == NULL)
		return GCK_OK;
	/* A checked taker has the entry now: all of it, holes and all. */
	if (t->checked && !r->etaken) {
		if (!r->etbegun)
			r_take_begin(r, t);
		if (r->eth != NULL && !r->etfail && t->take(t->arg, r->eth, 0,
		    r->tkbuf, (size_t)r->esize) == -1)
			r->etfail = 1;
	}
	if (r->etaken)
		by = r->eterr ? GCK_TAKEN_FAILED : GCK_TAKEN_WORKER;
	else if (r->eth != NULL || r->etfail)
		by = r->etfail ? GCK_TAKEN_FAILED : GCK_TAKEN_READER;
	else
		by = GCK_TAKEN_NONE;
	r->etbegun = 0;
	r->eth = NULL;
	r->etfail = 0;
	return t->accepted(t->arg, r->ename, &r->edigest, r->edata, by);
}

/*
 * Reads the next entry's header and checks it: a part of a CRIU file,
 * in order, or the trailer, which is read and checked along with the end
 * of the stream.  Returns 0 at a part (its data next), 1 after the
 * trailer, or a code.
 */
static int	r_entry_index(struct gck_reader *, struct archive_entry *,
		    const char *);

static int
r_entry(struct gck_reader *r)
{
	struct archive_entry	*e;
	char			 name[GCK_NAME_MAX + 32], where[300];
	const char		*n;
	int			 ret;

again:
	if ((ret = r_next(r, &e)) == 1) {
		r_where(r, where, sizeof where);
		return gck_set_error(r->ctx, GCK_ETRUNC,
		    "image truncated %s: no checksum trailer (tar offset %"
		    PRIu64 ")", where, gck_zin_total(r->z));
	}
	if (ret != GCK_OK)
		return ret;
	if ((n = archive_entry_pathname(e)) == NULL)
		n = "";
	snprintf(name, sizeof name, "%s", n);
	if (strcmp(name, GCK_ENTRY_TRAILER) == 0) {
		if ((ret = r_entry_trailer(r, e, name)) != GCK_OK)
			return ret;
		return 1;
	}
	if (gck_pidx_part(name) >= 0 && gck_manifest_format(r->m) > 2) {
		if ((ret = r_entry_index(r, e, name)) != GCK_OK)
			return ret;
		goto again;
	}
	return r_entry_part(r, e, name);
}

/*
 * At a part of the page index (format 3), entry e named name: after
 * every CRIU file, the parts in order, each of GCK_PIDX_PART digests
 * but the last, as many in all as the memory has pages (checked at the
 * trailer).  Only a writer uses it: it is read and checked, and goes no
 * further.  Returns GCK_OK or a code.
 */
static int
r_entry_index(struct gck_reader *r, struct archive_entry *e, const char *name)
{
	struct gck_digest	 digest;
	uint64_t		 size;
	char			*buf;
	int			 ret;

	if ((ret = r_file_done(r)) != GCK_OK)
		return ret;
	if (gck_manifest_has_file_list(r->m) &&
	    r->nfiles != gck_manifest_nfiles(r->m))
		return gck_set_error(r->ctx, GCK_EFORMAT, "corrupt image: the "
		    "page index before %zu of the files the manifest lists",
		    gck_manifest_nfiles(r->m) - r->nfiles);
	if ((ret = r_check_entry(r, e, (uint64_t)GCK_PIDX_PART * GCK_PDIG,
	    &digest)) != GCK_OK)
		return ret;
	size = (uint64_t)archive_entry_size(e);
	if (r->eref || r->esparse || gck_pidx_part(name) != r->pidxpart ||
	    size == 0 || size % GCK_PDIG != 0 || (r->pidxpart > 0 &&
	    r->pidxbytes != (uint64_t)r->pidxpart * GCK_PIDX_PART * GCK_PDIG))
		return gck_set_error(r->ctx, GCK_EFORMAT, "corrupt image: "
		    "page index part '%.40s' out of order or of %" PRIu64
		    " bytes", name, size);
	if (r->nseen >= GCK_ENTRIES_MAX)
		return gck_set_error(r->ctx, GCK_EFORMAT,
		    "corrupt image: more than %d entries", GCK_ENTRIES_MAX);
	if ((ret = r_expected(r, name, size, &digest, GCK_EK_DATA)) != GCK_OK)
		return ret;
	if ((buf = malloc((size_t)size + 1)) == NULL)
		return gck_set_error(r->ctx, GCK_ENOMEM, "out of memory");
	ret = r_data(r, name, size, buf, &digest);
	free(buf);
	if (ret != GCK_OK || (ret = r_record(r, name, size, &digest,
	    GCK_EK_DATA)) != GCK_OK)
		return ret;
	r->pidxbytes += size;
	r->pidxpart++;
	return GCK_OK;
}

/*
 * Reads up to len bytes of the current entry's data; at its end checks
 * its digest and records it.  Returns the bytes read, 0 at the end, or
 * -1 with the error set.
 */
static const char	zeros[1u << 16];

/*
 * Gets the next piece of the current entry's data, at most max bytes:
 * data, pointed to in *pp (valid until the next call), or, with *holep
 * set, a hole, that many zero bytes.  At the end of the data checks its
 * digest and records it.  Returns the bytes, 0 at the end, or -1 with
 * the error set.
 */
static ssize_t	r_ref_chunk(struct gck_reader *, const void **, size_t);
static int	r_patch(struct gck_reader *);
static int	r_patch_read(struct gck_reader *);

static ssize_t
r_chunk(struct gck_reader *r, const void **pp, size_t max, int *holep)
{
	struct gck_digest fin;
	char		 d[GCK_NAME_MAX + 48], where[GCK_NAME_MAX + 64];
	const void	*p;
	size_t		 l, i, z;
	la_int64_t	 off;
	uint64_t	 n;
	int		 ret;

	*holep = 0;
	*pp = NULL;
	if (!r->indata)
		return 0;
	if (gck_check_interrupt(r->ctx) != GCK_OK)
		return -1;
	if (r->eref)
		return r_ref_chunk(r, pp, max);
	/* The entry's data comes in blocks; a hole between them is zeros. */
	while (r->bleft == 0 && !r->beof) {
		ret = archive_read_data_block(r->a, &p, &l, &off);
		if (ret == ARCHIVE_EOF)
			r->beof = 1;
		else if (ret < ARCHIVE_WARN || ret == ARCHIVE_RETRY) {
			r_archive_error(r, 1);
			return -1;
		} else if (off < 0 || (uint64_t)off < r->egot ||
		    (uint64_t)off > r->esize || l > r->esize - (uint64_t)off) {
			gck_set_error(r->ctx, GCK_EFORMAT, "corrupt image: "
			    "entry '%.200s' longer than declared", r->ename);
			return -1;
		} else {
			r->bp = p;
			r->bleft = l;
			r->boff = (uint64_t)off;
		}
	}
	if (r->egot < (r->beof ? r->esize : r->boff)) {
		/* a hole: zeros, which a sparse entry's digest leaves out */
		n = (r->beof ? r->esize : r->boff) - r->egot;
		if (n > max)
			n = max;
		*holep = 1;
		for (i = 0; !r->esparse && !r->epre && i < n; i += z) {
			z = n - i < sizeof zeros ? (size_t)(n - i) :
			    sizeof zeros;
			gck_dstate_update(r->ds, zeros, z);
		}
	} else if (!r->beof) {
		n = r->bleft < max ? r->bleft : max;
		*pp = r->bp;
		if (!r->epre)
			gck_dstate_update(r->ds, r->bp, (size_t)n);
		r_take(r, r->boff, r->bp, (size_t)n);
		r->edata += n;
		r->bp += n;
		r->bleft -= (size_t)n;
		r->boff += n;
	} else
		n = 0;
	if (n > 0) {
		r->egot += n;
		return (ssize_t)n;
	}
	if (r->esparse) {
		/* then the regions stored, and the size */
		for (i = 0; i < r->nreg; i++) {
			gck_dstate_u64(r->ds, r->reg[2 * i]);
			gck_dstate_u64(r->ds, r->reg[2 * i + 1]);
		}
		gck_dstate_u64(r->ds, r->esize);
	}
	r->indata = 0;
	if (r->egot != r->esize) {
		r_where(r, where, sizeof where);
		gck_set_error(r->ctx, GCK_ETRUNC,
		    "image truncated %s: entry incomplete (tar offset %"
		    PRIu64 ")", where, gck_zin_total(r->z));
		return -1;
	}
	if (r->epre)
		fin = r->epred;		/* the worker's */
	else
		gck_dstate_final(r->ds, &fin);
	if (!gck_digest_equal(&fin, &r->edigest)) {
		gck_entry_display(r->ename, d, sizeof d);
		gck_set_error(r->ctx, GCK_ECORRUPT,
		    "corrupt image: checksum mismatch in %s (entry at tar "
		    "offset %" PRIu64 ")", d, r->ehdr);
		return -1;
	}
	if (r_padding(r, r->esize) != GCK_OK ||
	    r_record(r, r->ename, r->esize, &r->edigest, 0) != GCK_OK ||
	    r_taken(r) != GCK_OK)
		return -1;
	return 0;
}

/*
 * As r_chunk(), for a reference: the chunk is read from the parent that
 * stores it, and checked against the digest of the reference, before
 * any of it is handed out.
 */
static ssize_t
r_ref_chunk(struct gck_reader *r, const void **pp, size_t max)
{
	uint64_t	n;

	if (r->refdata == NULL) {
		if (r->parents == NULL) {
			gck_set_error(r->ctx, GCK_EINVAL, "image %s refers to "
			    "its parent images: give them with --parent",
			    gck_manifest_id(r->m));
			return -1;
		}
		if (r->epatch != NULL && r->refown != NULL) {
			/* a worker made it whole: its data need not be read */
			if (archive_read_data_skip(r->a) != ARCHIVE_OK) {
				r_archive_error(r, 1);
				return -1;
			}
			r->refdata = r->refown;
			r->refahead += r->esize;
		} else if (r->epatch != NULL) {
			if (r_patch(r) != GCK_OK)
				return -1;
		} else if (r->refown != NULL) {
			r->refdata = r->refown;
			r->refahead += r->esize;
			gck_parents_note(r->parents, r->refimg, r->esize);
		} else if (gck_parents_fetch(r->parents, &r->edigest, r->esize,
		    &r->refdata) != GCK_OK)
			return -1;
	}
	if ((n = r->esize - r->egot) > max)
		n = max;
	if (n > 0) {
		*pp = r->refdata + r->egot;
		r_take(r, r->egot, *pp, (size_t)n);
		r->egot += n;
		r->edata += n;
		return (ssize_t)n;
	}
	r->indata = 0;
	r->refdata = NULL;
	r_ref_drop(r);
	r->refbytes += r->esize;
	if (r_padding(r, r->epatch != NULL ? r->pstoredlen : 0) != GCK_OK ||
	    r_record(r, r->ename, r->esize, &r->edigest, r->epatch != NULL ?
	    GCK_EK_PATCH : GCK_EK_REF) != GCK_OK ||
	    r_taken(r) != GCK_OK)
		return -1;
	return 0;
}

/*
 * As r_ref_chunk() to the reference's end, for a reference handed on as
 * one (gck_reader_copy()): its chunk is not read, and the image that
 * the reference is copied into refers to it in turn.  Returns GCK_OK or
 * a code.
 */
static int
r_ref_pass(struct gck_reader *r)
{
	r->egot = r->esize;
	r->edata += r->esize;
	r->indata = 0;
	r->refdata = NULL;
	r_ref_drop(r);
	r->refbytes += r->esize;
	if (r_padding(r, r->epatch != NULL ? r->pstoredlen : 0) != GCK_OK ||
	    r_record(r, r->ename, r->esize, &r->edigest, r->epatch != NULL ?
	    GCK_EK_PATCH : GCK_EK_REF) != GCK_OK || r_taken(r) != GCK_OK)
		return r->ctx->code != GCK_OK ? r->ctx->code : GCK_ECORRUPT;
	return GCK_OK;
}

/*
 * The chunk of the patch just read, made whole: the pages it stores,
 * read and checked with its map against its digest, then those of its
 * bases, each read from the image that stores it and checked
 * (gck_parents_assemble()).  Then r->refdata is the chunk.  Returns
 * GCK_OK or a code.
 */
static int
r_patch(struct gck_reader *r)
{
	int	ret;

	if ((ret = r_patch_read(r)) != GCK_OK)
		return ret;
	if ((ret = gck_parents_assemble(r->parents, r->ename, r->epatch,
	    r->epatchlen, r->pstored, r->pstoredlen, r->esize, &r->pchunk,
	    &r->pchunkcap)) != GCK_OK)
		return ret;
	r->refdata = r->pchunk;
	return GCK_OK;
}

/*
 * The pages the patch just read stores, into r->pstored, read and
 * checked with its map against its digest.  Returns GCK_OK or a code.
 */
static int
r_patch_read(struct gck_reader *r)
{
	struct gck_digest	 got;
	char			 d[GCK_NAME_MAX + 48];
	uint64_t		 n = 0;
	la_ssize_t		 k;

	free(r->pstored);
	if ((r->pstored = malloc(GCK_CHUNK_SIZE + 1)) == NULL)
		return gck_set_error(r->ctx, GCK_ENOMEM, "out of memory");
	for (;;) {
		k = archive_read_data(r->a, r->pstored + n, GCK_CHUNK_SIZE + 1 -
		    (size_t)n);
		if (k < 0)
			return r_archive_error(r, 1);
		if (k == 0)
			break;
		if ((n += (uint64_t)k) > GCK_CHUNK_SIZE)
			return gck_set_error(r->ctx, GCK_EFORMAT, "corrupt "
			    "image: entry '%.200s' longer than declared",
			    r->ename);
	}
	if (n != r->pstoredlen) {
		char	where[GCK_NAME_MAX + 64];

		r_where(r, where, sizeof where);
		return gck_set_error(r->ctx, GCK_ETRUNC, "image truncated %s: "
		    "entry incomplete (tar offset %" PRIu64 ")", where,
		    gck_zin_total(r->z));
	}
	if (gck_patch_digest(r->pstored, (size_t)n, r->epatch, r->epatchlen,
	    r->esize, &got) == -1)
		return gck_set_error(r->ctx, GCK_ENOMEM, "out of memory");
	if (!gck_digest_equal(&got, &r->edigest)) {
		gck_entry_display(r->ename, d, sizeof d);
		return gck_set_error(r->ctx, GCK_ECORRUPT, "corrupt image: "
		    "checksum mismatch in %s (entry at tar offset %" PRIu64
		    ")", d, r->ehdr);
	}
	return GCK_OK;
}

/*
 * Reads the chunks that the image refers to from the images of ps, its
 * parents (found with gck_parents_resolve()).
 */
void
gck_reader_set_parents(struct gck_reader *r, struct gck_parents *ps)
{
	__atomic_store_n(&r->parents, ps, __ATOMIC_RELEASE);
}

/*
 * Where the reader finds, from now on, the next n frames of the image
 * file it reads, as its trailer says (at[], zsize[]): the decompressing
 * workers read them themselves.  Returns GCK_OK or a code.
 */
int
gck_reader_set_frames(struct gck_reader *r, const uint64_t *at,
    const uint64_t *zsize, size_t n)
{
	return gck_zin_set_index(r->z, at, zsize, n);
}

/*
 * Hands the data of the entries t takes to t, from now on: the frames
 * the workers decompress from now on, and the entries no worker handed
 * on as the reader reads them (see struct gck_taker).
 */
void
gck_reader_set_taker(struct gck_reader *r, const struct gck_taker *t)
{
	__atomic_store_n(&r->taker, t, __ATOMIC_RELEASE);
}

/*
 * After gck_reader_head(): finds the parents of an incremental image
 * among the n image files or directories of paths, as
 * gck_parents_open() does, for the reader to read its chunks from.
 * Returns GCK_OK (at once for an image with no parents) or a code.
 */
int
gck_reader_use_parents(struct gck_reader *r, char *const *paths, size_t n)
{
	int	ret;

	if (r->m == NULL)
		return gck_set_error(r->ctx, GCK_EINVAL, "no manifest read");
	if ((ret = gck_parents_open(r->ctx, r->m, paths, n, &r->parents)) ==
	    GCK_OK)
		r->own_parents = 1;
	return ret;
}

/* The manifest of r without its parent: that of a flattened image. */
static char *
flat_manifest(struct gck_reader *r, const struct gck_parents *ps, int format)
{
	json_t		*m, *parent;
	char		*text = NULL, id[33];

	/* (of the format w writes, which may be older: no index then) */
	if ((m = json_loadb(r->mtext, r->mlen, 0, NULL)) == NULL ||
	    (json_object_get(m, "parent") != NULL &&
	    json_object_del(m, "parent") != 0) ||
	    json_object_set_new(m, "format", json_integer(format)) != 0)
		goto out;
	/* Written over ps: another image, which refers to it. */
	if (ps != NULL && (gck_new_id(id) == -1 ||
	    json_object_set_new(m, "id", json_string(id)) != 0 ||
	    (parent = gck_parents_json(ps)) == NULL ||
	    json_object_set_new(m, "parent", parent) != 0))
		goto out;
	text = json_dumps(m, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
out:
	json_decref(m);
	return text;
}

/*
 * After gck_reader_head(), with its parents found: copies every entry
 * of the image into w, each reference as the chunk it stands for, and
 * the manifest without its parent, so that w's image needs none; or,
 * when w has parents, an image of its own (a new id) that refers to
 * theirs.  Returns GCK_OK once the trailer is checked and w finished,
 * or a code.
 */
/*
 * Where each page of the chunk that gck_reader_copy() copies comes from,
 * for r_copy_fetch(): a chunk of the images of r->parents (a reference),
 * or of a patch, the pages it stores (in r->pstored) and those of its
 * bases.
 */
struct rcopy {
	struct gck_reader	*r;
	struct gck_patch	*p;		/* or NULL: a reference */
	unsigned char		 kind[GCK_PATCH_RUNS];
	unsigned char		 base[GCK_PATCH_RUNS];
	uint32_t		 off[GCK_PATCH_RUNS];	/* stored: its page
							   there; base: its
							   page of the base */
};

/* Copies n of the chunk's pages, pages[i] to to[i] (w_add_planned()). */
static int
r_copy_fetch(void *arg, const uint32_t *pages, char *const *to, size_t n)
{
	struct rcopy	*c = arg;
	struct gck_reader *r = c->r;
	uint32_t	 sub[GCK_PATCH_RUNS];
	char		*sto[GCK_PATCH_RUNS];
	size_t		 i, b, m;
	int		 ret;

	r->cread += (uint64_t)n * GCK_PAGE;
	if (c->p == NULL)
		return gck_parents_pages(r->parents, &r->edigest, r->esize,
		    pages, to, n);
	for (i = 0; i < n; i++)
		if (c->kind[pages[i]] == GCK_RUN_STORED)
			memcpy(to[i], r->pstored + (size_t)c->off[pages[i]] *
			    GCK_PAGE, GCK_PAGE);
		else if (c->kind[pages[i]] == GCK_RUN_ZERO)
			memset(to[i], 0, GCK_PAGE);
	for (b = 0; b < c->p->nbase; b++) {
		for (i = 0, m = 0; i < n; i++)
			if (c->kind[pages[i]] == GCK_RUN_BASE &&
			    c->base[pages[i]] == b) {
				sub[m] = c->off[pages[i]];
				sto[m++] = to[i];
			}
		if (m > 0 && (ret = gck_parents_pages(r->parents,
		    &c->p->base[b], c->p->bsize[b], sub, sto, m)) != GCK_OK)
			return ret;
	}
	return GCK_OK;
}

/*
 * For gck_reader_copy() into w, whose parents hold most of it: the chunk
 * of memory of the entry just begun, a reference to a chunk of the
 * images of r->parents or a patch of theirs, written from the digests of
 * its pages (their page indexes), as a reference to a chunk of w's
 * parents or a patch of theirs, of its pages only those read that w's
 * parents lack (w_add_planned()).  Returns GCK_OK, 1 when the chunk is
 * to be read whole (r->refdata, of a patch, then holds it), or a code.
 */
static int
r_copy_planned(struct gck_reader *r, struct gck_writer *w)
{
	const struct gck_ptab	*pt;
	const unsigned char	*bp[GCK_PATCH_BASES], *pd;
	unsigned char		*dig = NULL;
	struct rcopy		*c = NULL;
	char			 why[160];
	size_t			 i, m, np = (size_t)(r->esize / GCK_PAGE), s;
	uint32_t		 j;
	int			 ret;

	if (r->parents == NULL || (pt = gck_parents_ptab(r->parents)) ==
	    NULL || r->esize == 0 || r->esize % GCK_PAGE != 0 ||
	    np > GCK_PATCH_RUNS)
		return 1;
	if (r->epatch == NULL) {
		if ((pd = gck_ptab_pages(pt, &r->edigest, r->esize)) == NULL)
			return 1;
		if ((c = calloc(1, sizeof *c)) == NULL)
			return gck_set_error(r->ctx, GCK_ENOMEM,
			    "out of memory");
		c->r = r;
		ret = w_add_planned(w, r->ename, (size_t)r->esize, pd,
		    r_copy_fetch, c);
		free(c);
		if (ret == GCK_OK) {
			r->cplan += r->esize;
			ret = r_ref_pass(r);
		}
		return ret;
	}
	/* A patch: its stored pages read and checked, then its map. */
	if ((ret = r_patch_read(r)) != GCK_OK)
		return ret;
	if ((c = calloc(1, sizeof *c)) == NULL || (c->p = malloc(sizeof
	    *c->p)) == NULL || (dig = malloc(np * GCK_PDIG)) == NULL) {
		ret = gck_set_error(r->ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	c->r = r;
	if (gck_patch_parse(r->epatch, r->epatchlen, r->esize, r->pstoredlen,
	    c->p, why, sizeof why) == -1) {
		ret = gck_set_error(r->ctx, GCK_ECORRUPT, "corrupt image: "
		    "patch '%.200s': %s", r->ename, why);
		goto out;
	}
	for (i = 0; i < c->p->nbase; i++)
		bp[i] = gck_ptab_pages(pt, &c->p->base[i], c->p->bsize[i]);
	ret = GCK_OK;
	for (i = 0, m = 0, s = 0; i < c->p->nrun && ret == GCK_OK; i++)
		for (j = 0; j < c->p->run[i].count && m < np; j++, m++) {
			c->kind[m] = (unsigned char)c->p->run[i].kind;
			c->base[m] = (unsigned char)c->p->run[i].base;
			if (c->kind[m] == GCK_RUN_STORED) {
				c->off[m] = (uint32_t)s;
				gck_page_digest(r->pstored + s * GCK_PAGE,
				    dig + m * GCK_PDIG);
				s++;
			} else if (c->kind[m] == GCK_RUN_ZERO)
				memcpy(dig + m * GCK_PDIG,
				    gck_page_zero_digest(), GCK_PDIG);
			else if (bp[c->base[m]] == NULL ||
			    c->p->run[i].page + j >= c->p->bsize[c->base[m]] /
			    GCK_PAGE)
				ret = 1;	/* a base without a page index */
			else {
				c->off[m] = c->p->run[i].page + j;
				memcpy(dig + m * GCK_PDIG, bp[c->base[m]] +
				    (size_t)c->off[m] * GCK_PDIG, GCK_PDIG);
			}
		}
	if (ret == GCK_OK && m != np)
		ret = 1;
	if (ret == GCK_OK && (ret = w_add_planned(w, r->ename,
	    (size_t)r->esize, dig, r_copy_fetch, c)) == GCK_OK) {
		r->cplan += r->esize;
		ret = r_ref_pass(r);
		goto out;
	}
	if (ret == 1) {
		/* to be read whole: made whole from the pages read */
		if ((ret = gck_parents_assemble(r->parents, r->ename,
		    r->epatch, r->epatchlen, r->pstored, r->pstoredlen,
		    r->esize, &r->pchunk, &r->pchunkcap)) == GCK_OK) {
			r->refdata = r->pchunk;
			ret = 1;
		}
	}
out:
	if (c != NULL)
		free(c->p);
	free(c);
	free(dig);
	return ret;
}

int
gck_reader_copy(struct gck_reader *r, struct gck_writer *w)
{
	const unsigned char *pd;
	char		*buf = NULL, *text = NULL;
	size_t		 cap = 0;
	const void	*p;
	ssize_t		 n;
	int		 ret, hole;

	if ((text = flat_manifest(r, w->parents, w->format)) == NULL) {
		ret = gck_set_error(r->ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	if ((ret = gck_writer_add(w, GCK_ENTRY_MANIFEST, text,
	    strlen(text))) != GCK_OK)
		goto out;
	while ((ret = r_entry(r)) == 0) {
		/*
		 * A chunk of memory the parent of the image being written
		 * has, as the parent's page index lists it: a reference
		 * again, its data not read.
		 */
		if (r->eref && r->epatch == NULL && r->indata && r->egot == 0 &&
		    w->format > 2 && w->ptab != NULL &&
		    gck_manifest_file_memory(r->m, r->cur) == 1 &&
		    gck_parents_has(w->parents, &r->edigest) &&
		    (pd = gck_ptab_pages(w->ptab, &r->edigest, r->esize)) !=
		    NULL) {
			if ((ret = r_ref_pass(r)) != GCK_OK ||
			    (ret = gck_writer_add_memory_ref(w, r->ename,
			    &r->edigest, (size_t)r->esize, pd)) != GCK_OK)
				goto out;
			continue;
		}
		/*
		 * A chunk of memory of the images the image read refers to
		 * (the rounds of a snapshot), that the parent lacks as a
		 * whole: of its pages, only those the parent lacks are read.
		 */
		if (r->eref && r->indata && r->egot == 0 && r->refdata ==
		    NULL && r->refown == NULL && r->no_fetch &&
		    gck_manifest_file_memory(r->m, r->cur) == 1) {
			if ((ret = r_copy_planned(r, w)) == GCK_OK)
				continue;
			if (ret != 1)
				goto out;
		}
		if (cap < r->esize) {
			free(buf);
			cap = (size_t)r->esize;
			if (posix_memalign((void **)&buf, 4096, cap) != 0) {
				buf = NULL;
				ret = gck_set_error(r->ctx, GCK_ENOMEM,
				    "out of memory");
				goto out;
			}
		}
		if (gck_manifest_file_memory(r->m, r->cur) == 1)
			r->cread += r->esize;
		while ((n = r_chunk(r, &p, SIZE_MAX, &hole)) > 0)
			if (hole)
				memset(buf + r->egot - (size_t)n, 0, (size_t)n);
			else
				memcpy(buf + r->egot - (size_t)n, p, (size_t)n);
		if (n < 0) {
			ret = r->ctx->code;
			goto out;
		}
		if ((ret = gck_manifest_file_memory(r->m, r->cur) == 1 ?
		    gck_writer_add_memory(w, r->ename, buf, (size_t)r->esize) :
		    gck_writer_add(w, r->ename, buf, (size_t)r->esize)) !=
		    GCK_OK)
			goto out;
	}
	if (ret == 1)
		ret = gck_writer_finish(w);
out:
	free(buf);
	free(text);
	return ret;
}

/*
 * Of the memory gck_reader_copy() copied, the bytes it read, into
 * *readp, and those it wrote from the digests of their pages, into
 * *planp.
 */
void
gck_reader_copy_stats(const struct gck_reader *r, uint64_t *readp,
    uint64_t *planp)
{
	*readp = r->cread;
	*planp = r->cplan;
}

/*
 * Moves to the next CRIU file, reading and checking whatever is left of
 * the current one.  Returns 0 with its name and the size of its first
 * part, 1 at the end of the image (the trailer checked), or a code.
 */
int
gck_reader_file(struct gck_reader *r, char *name, size_t len,
    uint64_t *sizep)
{
	const void	*p;
	ssize_t		 n;
	int		 ret, hole;

	for (;;) {
		if (r->done)
			return 1;
		if (r->newfile && r->indata && r->egot == 0) {
			r->newfile = 0;
			snprintf(name, len, "%s", r->cur);
			*sizep = r->esize;
			return 0;
		}
		while ((n = r_chunk(r, &p, SIZE_MAX, &hole)) > 0)
			;
		if (n < 0)
			return r->ctx->code;
		if ((ret = r_entry(r)) != 0)
			return ret;
	}
}

/*
 * Reads up to len bytes of the current file, across its parts.  Returns
 * the bytes read, 0 at its end, or -1 with the error set.
 */
ssize_t
gck_reader_file_read(struct gck_reader *r, void *buf, size_t len)
{
	const void	*p;
	ssize_t		 n;
	int		 hole;

	if ((n = gck_reader_file_chunk(r, &p, len, &hole)) > 0) {
		if (hole)
			memset(buf, 0, (size_t)n);
		else
			memcpy(buf, p, (size_t)n);
	}
	return n;
}

/*
 * Gets the next piece of the current file, across its parts, at most
 * max bytes: data pointed to in *pp, valid until the next call on the
 * reader, or a hole (*holep set) of that many zeros.  Returns the bytes,
 * 0 at its end, or -1 with the error set.
 */
ssize_t
gck_reader_file_chunk(struct gck_reader *r, const void **pp, size_t max,
    int *holep)
{
	ssize_t	n;
	int	ret;

	for (;;) {
		*holep = 0;
		if (r->done || r->newfile)
			return 0;
		if ((n = r_chunk(r, pp, max, holep)) != 0)
			return n;
		if ((ret = r_entry(r)) < 0)
			return -1;
		if (ret == 1 || r->newfile)
			return 0;
	}
}

/*
 * Reads the rest of the current entry of the current file into buf, at
 * most len bytes (holes as zeros), and returns only once the entry has
 * been checked against its digest: what is given is what was written.
 * Returns the bytes, 0 at the end of the file, or -1 with the error set
 * (an entry longer than len too).
 */
ssize_t
gck_reader_file_entry(struct gck_reader *r, void *buf, size_t len)
{
	const void	*p;
	ssize_t		 n;
	size_t		 got = 0;
	int		 ret, hole;

	for (;;) {
		if (r->done || r->newfile)
			return 0;
		if (r->indata && r->egot < r->esize)
			break;
		if (r->indata) {
			/* (an entry of nothing: checked, and passed) */
			if (r_chunk(r, &p, SIZE_MAX, &hole) < 0)
				return -1;
			continue;
		}
		if ((ret = r_entry(r)) < 0)
			return -1;
		if (ret == 1 || r->newfile)
			return 0;
	}
	if (r->esize - r->egot > len)
		return gck_set_error(r->ctx, GCK_EFORMAT, "corrupt image: "
		    "entry '%.200s' is larger than a chunk", r->ename), -1;
	while ((n = r_chunk(r, &p, len - got, &hole)) > 0) {
		if (hole)
			memset((char *)buf + got, 0, (size_t)n);
		else
			memcpy((char *)buf + got, p, (size_t)n);
		got += (size_t)n;
	}
	if (n < 0)
		return -1;
	return (ssize_t)got;
}

/* Whether file name has been read already. */
int
gck_reader_file_seen(struct gck_reader *r, const char *name)
{
	ENTRY	item, *found;

	item.key = (char *)name;
	item.data = NULL;
	if (r->newfile && strcmp(name, r->cur) == 0)
		return 0;
	return hsearch_r(item, FIND, &found, &r->files) != 0;
}

/*
 * Reads every entry after the manifest, writes the CRIU files under
 * dirfd (-1: none), and checks the trailer and the end of the stream.
 * Returns GCK_OK or a code.
 */
int
gck_reader_extract(struct gck_reader *r, int dirfd)
{
	char		 file[GCK_NAME_MAX + 1];
	const void	*p;
	uint64_t	 size, off;
	ssize_t		 n;
	int		 ret = GCK_OK, fd = -1, hole;

	for (;;) {
		if ((ret = gck_reader_file(r, file, sizeof file, &size)) != 0)
			return ret == 1 ? GCK_OK : ret;
		if (dirfd != -1 && (fd = openat(dirfd, file,
		    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		    0600)) == -1)
			return gck_set_syserr(r->ctx, errno,
			    "cannot create work file '%s': %s", file,
			    strerror(errno));
		/* holes stay holes: skipped, and the size set at the end */
		off = 0;
		while ((n = gck_reader_file_chunk(r, &p, SIZE_MAX, &hole)) >
		    0) {
			if (fd != -1 && !hole && ((uint64_t)lseek(fd,
			    (off_t)off, SEEK_SET) != off ||
			    (ret = gck_write_all(r->ctx, fd, p, (size_t)n,
			    "a work file")) != GCK_OK)) {
				if (ret == GCK_OK)
					ret = gck_set_syserr(r->ctx, errno,
					    "cannot write work file '%s': %s",
					    file, strerror(errno));
				break;
			}
			off += (uint64_t)n;
		}
		if (fd != -1 && n == 0 && ret == GCK_OK &&
		    ftruncate(fd, (off_t)off) == -1)
			ret = gck_set_syserr(r->ctx, errno,
			    "cannot write work file '%s': %s", file,
			    strerror(errno));
		if (fd != -1)
			close(fd);
		fd = -1;
		if (n < 0)
			return r->ctx->code;
		if (ret != GCK_OK)
			return ret;
	}
}

/*
 * Before gck_reader_head(): the trailer (text, len bytes) that the image
 * read must end with, its signature checked: every entry is then held
 * to it as its header is read, before its data is used.  Returns GCK_OK
 * or a code.
 */
int
gck_reader_expect(struct gck_reader *r, const char *text, size_t len)
{
	json_t		*t, *es, *o, *hv;
	const char	*name, *hex;
	json_int_t	 size;
	struct seen	*x;
	size_t		 i;
	int		 ret = GCK_OK;

	if ((t = json_loadb(text, len, 0, NULL)) == NULL ||
	    (es = json_object_get(t, "entries")) == NULL ||
	    !json_is_array(es) || json_array_size(es) == 0 ||
	    json_array_size(es) > GCK_ENTRIES_MAX) {
		json_decref(t);
		return gck_set_error(r->ctx, GCK_EFORMAT, "corrupt image: "
		    "unreadable checksum trailer");
	}
	if ((r->exp = calloc(json_array_size(es), sizeof *r->exp)) == NULL) {
		json_decref(t);
		return gck_set_error(r->ctx, GCK_ENOMEM, "out of memory");
	}
	json_array_foreach(es, i, o) {
		x = &r->exp[i];
		hv = json_object_get(o, "sha256");
		if (json_unpack(o, "{s:s, s:I}", "name", &name, "size",
		    &size) != 0 || size < 0 || (hex = json_string_value(hv)) ==
		    NULL || gck_digest_parse(GCK_DK_SHA256, hex, strlen(hex),
		    &x->digest) == -1) {
			ret = gck_set_error(r->ctx, GCK_EFORMAT, "corrupt "
			    "image: unreadable checksum trailer");
			break;
		}
		if ((x->name = strdup(name)) == NULL) {
			ret = gck_set_error(r->ctx, GCK_ENOMEM,
			    "out of memory");
			break;
		}
		r->nexp = i + 1;
		x->size = (uint64_t)size;
		x->ref = t_kind(o);
	}
	json_decref(t);
	if (ret == GCK_OK && gck_digest_buf(GCK_DK_SHA256, text, len,
	    &r->expt) == -1)
		ret = gck_set_error(r->ctx, GCK_ENOMEM, "out of memory");
	return ret;
}

/* The context the reader reports on. */
struct gck_ctx *
gck_reader_ctx(const struct gck_reader *r)
{
	return r->ctx;
}

/*
 * Once the image is read: its trailer and the signature that followed
 * it (NULL when none did, or not read yet).
 */
void
gck_reader_signature(const struct gck_reader *r, const char **sigp,
    size_t *siglenp, const char **tp, size_t *tlenp)
{
	*sigp = r->sig;
	*siglenp = r->siglen;
	*tp = r->ttext;
	*tlenp = r->tlen;
}

void
gck_reader_stats(const struct gck_reader *r, struct gck_image_stats *st)
{
	st->entries = r->nseen + 1;	/* and the trailer */
	st->bytes = r->bytes;
	st->stream_bytes = gck_zin_total(r->z);
	st->compressed = gck_zin_compressed(r->z);
	st->ref_bytes = r->refbytes;
}

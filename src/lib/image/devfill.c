/*
 * devfill.c: a restore gives the device memory that went through custom
 * storage to its GPUs on every CPU.
 *
 * The image holds each GPU's memory as a file of chunks (devspool.c),
 * one file after the other; read one entry after the other, each chunk
 * would be decompressed, checked and copied on the reader's one thread.
 * But an image file's trailer says where each chunk is and what it is,
 * so, as fill.c does for the processes' memory, the decompressing
 * workers (image.c) each write the chunk they decompress straight into
 * its GPU, at the offset the trailer gives, while the reader's thread
 * goes on: the chunks of the GPUs are decompressed, digested and copied
 * many at once, a GPU's next while its last are still being copied, and
 * across the GPUs where one's file ends and the next begins.  A chunk
 * is written only once it is checked: the taker is a checked one
 * (struct gck_taker), so a worker hands it on once the frame's data has
 * the digest its header gives, and the reader's thread, what no worker
 * handed on, once it has checked it.
 * The reader then checks every entry as ever; each chunk must have the
 * digest the trailer names, and be written exactly once, whole, before
 * the driver is told the memory is there.
 *
 * A stream has no trailer to read first, but its manifest gives each
 * GPU's file's size and the size of its chunks (every one but the last,
 * devspool.c): where each chunk goes is known all the same, and the
 * workers write the chunks they decompress as they do from a file, as
 * the stream comes.  Their digests are checked as each entry's is, and
 * against the trailer at the end, before any process is unlocked.
 *
 * An image read whole first (its source was on this host) is in files,
 * each checked as it came: a thread a GPU's file gives it to its GPU,
 * all the GPUs at once (gck_devfill_dir()).
 */
#include "config.h"

#include <sys/types.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda.h>

#include "private.h"
#include "core/util.h"
#include "gpu/cuda.h"
#include "image/devfill.h"
#include "image/digest.h"
#include "image/image.h"
#include "image/manifest.h"
#include "image/names.h"
#include "image/parent.h"
#include "image/zio.h"

struct dffile;

/* A chunk of a GPU's memory: a part of its file. */
struct dfpart {
	struct dffile		*file;
	uint64_t		 off, size;	/* in the GPU's memory */
	struct gck_digest	 d;		/* the trailer's, if known */
	atomic_uint_fast64_t	 taken;		/* bytes written */
	int			 accepted;	/* 1 + GCK_TAKEN_*, once checked */
	atomic_int		 over;		/* holds more than size */
};

/*
 * The memory of GPU k of a process, or a segment of it that starts at
 * base: a file of the image.
 */
struct dffile {
	char		 name[GCK_NAME_MAX + 1];	/* cuda-PID-K.mem[.N] */
	int		 whole;		/* one entry, not in parts */
	size_t		 proc;		/* its process, in the caller's list */
	unsigned int	 k;
	uint64_t	 base;
	uint64_t	 size;
	struct dfpart	*part;
	size_t		 npart, cappart;
};

struct gck_devfill {
	struct gck_ctx		*ctx;
	struct gck_cuda		*cu;
	struct gck_cproc	*cp;
	struct dffile		*file;
	size_t			 nfile, capfile;
	struct dffile		**byname;	/* the files, sorted */
	uint64_t		*at, *zsize;	/* the frames, in order */
	size_t			 nframes, capat, capzsize;
	struct gck_taker	 taker;
	atomic_int		 fail;		/* the first CUresult, or 0 */
	struct dfpart		*failpart;
	int			 stream;	/* planned from the manifest */
	struct gck_pinpool	*pool;		/* the workers' buffers */
	atomic_uint_fast64_t	 pinned;	/* bytes given from them */
	uint64_t		 byw, byr;	/* bytes by workers, by reader */
};

static int
df_cmp(const void *a, const void *b)
{
	return strcmp((*(struct dffile *const *)a)->name,
	    (*(struct dffile *const *)b)->name);
}

/* File name, once df_sort() has sorted the files, else NULL. */
static struct dffile *
df_file(struct gck_devfill *df, const char *name)
{
	struct dffile	 key, *kp = &key, **f;

	if (df->byname == NULL || strlen(name) >= sizeof key.name)
		return NULL;
	memcpy(key.name, name, strlen(name) + 1);
	f = bsearch(&kp, df->byname, df->nfile, sizeof *df->byname, df_cmp);
	return f != NULL ? *f : NULL;
}

/*
 * Once every file is noted: each part knows its file where it now is,
 * and the files are sorted by name, none twice.  Returns 1, 0 where a
 * file came twice, or a code.
 */
static int
df_sort(struct gck_devfill *df)
{
	size_t	i, j;

	for (i = 0; i < df->nfile; i++)
		for (j = 0; j < df->file[i].npart; j++)
			df->file[i].part[j].file = &df->file[i];
	if ((df->byname = calloc(df->nfile + 1, sizeof *df->byname)) == NULL)
		return gck_set_error(df->ctx, GCK_ENOMEM, "out of memory");
	for (i = 0; i < df->nfile; i++)
		df->byname[i] = &df->file[i];
	qsort(df->byname, df->nfile, sizeof *df->byname, df_cmp);
	for (i = 1; i < df->nfile; i++)
		if (strcmp(df->byname[i - 1]->name, df->byname[i]->name) == 0)
			return 0;
	return 1;
}

/* The chunk that entry name is, or NULL if none of ours. */
static struct dfpart *
df_part(struct gck_devfill *df, const char *name)
{
	struct dffile	*ff;
	char		 file[GCK_NAME_MAX + 1];
	long		 part;

	if (gck_entry_parse(name, file, sizeof file, &part) == -1 ||
	    (ff = df_file(df, file)) == NULL)
		return NULL;
	if (ff->whole)
		return part == -1 ? &ff->part[0] : NULL;
	if (part < 0 || (size_t)part >= ff->npart)
		return NULL;
	return &ff->part[part];
}

/*
 * Notes chunk e, part part of file, a file of a GPU's memory: the parts
 * of a file one after the other.  Returns 1, 0 where the parts are not
 * in order, or a code.
 */
static int
df_add(struct gck_devfill *df, const char *file, long part,
    const struct gck_tentry *e)
{
	struct dffile	*ff = NULL;
	struct dfpart	*p;
	int		 r;

	if (df->nfile > 0 && strcmp(df->file[df->nfile - 1].name, file) == 0)
		ff = &df->file[df->nfile - 1];
	if (ff == NULL) {
		if (part > 0 || (r = gck_grow(df->ctx, &df->file,
		    &df->capfile, df->nfile, sizeof *df->file)) != GCK_OK)
			return part > 0 ? 0 : r;
		ff = &df->file[df->nfile++];
		memset(ff, 0, sizeof *ff);
		snprintf(ff->name, sizeof ff->name, "%s", file);
		ff->whole = part == -1;
		ff->proc = SIZE_MAX;
	} else if (ff->whole || part != (long)ff->npart)
		return 0;
	if ((r = gck_grow(df->ctx, &ff->part, &ff->cappart, ff->npart,
	    sizeof *ff->part)) != GCK_OK || (r = gck_grow(df->ctx, &df->at,
	    &df->capat, df->nframes, sizeof *df->at)) != GCK_OK ||
	    (r = gck_grow(df->ctx, &df->zsize, &df->capzsize, df->nframes,
	    sizeof *df->zsize)) != GCK_OK)
		return r;
	p = &ff->part[ff->npart++];
	memset(p, 0, sizeof *p);
	p->file = ff;
	p->off = ff->size;
	p->size = e->size;
	p->d = e->d;
	atomic_init(&p->taken, 0);
	atomic_init(&p->over, 0);
	ff->size += e->size;
	df->at[df->nframes] = e->at;
	df->zsize[df->nframes++] = e->zsize;
	return 1;
}

/*
 * The next GPU, from GPU *kp of process *ip on, of a process of cp (n of
 * them, as mc lists them) whose memory went through custom storage: sets
 * *ip, *kp and the name of its file.  Returns 1, or 0 past the last.
 */
static int
df_gpu(const struct gck_mcuda *mc, const struct gck_cproc *cp, size_t n,
    size_t *ip, unsigned int *kp, char *name, size_t len)
{
	for (; *ip < n && *ip < mc->nprocs; (*ip)++, *kp = 0)
		if (cp[*ip].custom && *kp < cp[*ip].ndev) {
			gck_cuda_dev_file(name, len, mc->procs[*ip].pid, *kp);
			return 1;
		}
	return 0;
}

/*
 * Binds each file to its process among cp (n of them, in the order of
 * the manifest's CUDA processes), GPU and place: every GPU of each
 * process whose memory went through custom storage has its files, its
 * segments, of the sizes the manifest gives, and they make the size the
 * driver will map.  Returns 1, 0, or a code.
 */
static int
df_bind(struct gck_devfill *df, const struct gck_mcuda *mc,
    const struct gck_cproc *cp, size_t n)
{
	const struct gck_mcproc	*mp;
	char			 name[64];
	struct dffile		*ff;
	uint64_t		 s, seg, nseg;
	size_t			 i, nbound = 0;
	unsigned int		 k;
	int			 r;

	if ((r = df_sort(df)) != 1)
		return r;
	for (i = 0, k = 0; df_gpu(mc, cp, n, &i, &k, name, sizeof name);
	    k++) {
		mp = &mc->procs[i];
		seg = mp->devseg[k];
		if (mp->devsize[k] != cp[i].devsize[k])
			return 0;
		nseg = gck_cuda_nsegs(mp->devsize[k], seg);
		for (s = 0; s < nseg; s++) {
			gck_cuda_seg_file(name, sizeof name, mp->pid, k, seg,
			    s);
			if ((ff = df_file(df, name)) == NULL ||
			    ff->proc != SIZE_MAX || ff->size !=
			    gck_cuda_seg_size(mp->devsize[k], seg, s))
				return 0;
			ff->proc = i;
			ff->k = k;
			ff->base = s * seg;
			nbound++;
		}
	}
	return nbound > 0 && nbound == df->nfile;
}

/*
 * Plans, from the manifest alone, the files of the processes of cp (n
 * of them, as mc lists them): each GPU's file in chunks of the size the
 * manifest gives, the last the rest; one of a chunk or less, one entry.
 * Returns 1, 0 where the manifest does not give the chunks' size (an
 * older image), or a code.
 */
static int
df_plan_manifest(struct gck_devfill *df, const struct gck_mcuda *mc,
    const struct gck_cproc *cp, size_t n)
{
	const struct gck_mcproc	*mp;
	struct gck_tentry	 e;
	char			 file[64];
	uint64_t		 off, c, s, nseg, size;
	size_t			 i;
	unsigned int		 k;
	long			 part;
	int			 r;

	for (i = 0; i < n && i < mc->nprocs; i++) {
		if (!cp[i].custom)
			continue;
		mp = &mc->procs[i];
		for (k = 0; k < mp->ndev; k++) {
			if ((c = mp->devchunk[k]) == 0)
				return 0;
			nseg = gck_cuda_nsegs(mp->devsize[k], mp->devseg[k]);
			for (s = 0; s < nseg; s++) {
				gck_cuda_seg_file(file, sizeof file, mp->pid,
				    k, mp->devseg[k], s);
				size = gck_cuda_seg_size(mp->devsize[k],
				    mp->devseg[k], s);
				memset(&e, 0, sizeof e);
				e.size = size;
				if (size <= c &&
				    (r = df_add(df, file, -1, &e)) != 1)
					return r;
				for (off = 0, part = 0; size > c &&
				    off < size; off += c, part++) {
					e.size = size - off < c ?
					    size - off : c;
					if ((r = df_add(df, file, part,
					    &e)) != 1)
						return r;
				}
			}
		}
	}
	return 1;
}

static void	*df_begin(void *, const char *);
static int	 df_take(void *, void *, uint64_t, const void *, size_t);
static void	*df_buf_get(void *, size_t);
static void	 df_buf_put(void *, void *);
static int	 df_accepted(void *, const char *, const struct gck_digest *,
		    uint64_t, int);

static struct gck_devfill *
df_new(struct gck_ctx *ctx)
{
	struct gck_devfill	*df;

	if ((df = calloc(1, sizeof *df)) == NULL) {
		gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		return NULL;
	}
	df->ctx = ctx;
	atomic_init(&df->fail, 0);
	atomic_init(&df->pinned, 0);
	return df;
}

/*
 * Notes, from the trailer self of the image file being read (m its
 * manifest), where each chunk of its device memory is and what it is,
 * so that self need not be kept: gck_devfill_plan() then plans with
 * that.  Returns GCK_OK with *dfp, or with *dfp NULL where the trailer
 * is not as this needs (the memory is then given to the GPUs in the
 * image's order, and the reader says what is wrong), or a code.
 */
int
gck_devfill_index(struct gck_ctx *ctx, const struct gck_manifest *m,
    const struct gck_parents *self, struct gck_devfill **dfp)
{
	struct gck_devfill	*df;
	struct gck_tentry	 e;
	char			 file[GCK_NAME_MAX + 1];
	size_t			 i, ne = gck_parents_nentries(self);
	long			 part;
	int			 r = GCK_OK;

	*dfp = NULL;
	if (gck_manifest_cuda(m) == NULL)
		return GCK_OK;
	if ((df = df_new(ctx)) == NULL)
		return ctx->code;
	for (i = 0; i < ne; i++) {
		if (gck_parents_entry(self, i, &e) == -1)
			goto none;
		if (gck_entry_parse(e.name, file, sizeof file, &part) == -1 ||
		    !gck_manifest_file_cuda(m, file))
			continue;
		if ((r = df_add(df, file, part, &e)) != 1)
			goto none;
	}
	*dfp = df;
	return GCK_OK;
none:
	gck_devfill_free(df);
	return r == 0 || r == 1 ? GCK_OK : r;
}

/*
 * Plans the restore of the device memory of the processes of cp (n of
 * them, as the manifest m lists its CUDA processes, cu their driver):
 * *dfp is what gck_devfill_index() noted of an image file, or NULL for
 * a stream, whose manifest gives the chunks.  Returns GCK_OK with *dfp,
 * or with *dfp NULL (freed) where the image is not as this needs, as
 * gck_devfill_index(), or a code.
 */
int
gck_devfill_plan(struct gck_ctx *ctx, const struct gck_manifest *m,
    struct gck_cuda *cu, struct gck_cproc *cp, size_t n,
    struct gck_devfill **dfp)
{
	const struct gck_mcuda	*mc = gck_manifest_cuda(m);
	struct gck_devfill	*df = *dfp;
	size_t			 i;
	int			 r = GCK_OK;

	*dfp = NULL;
	if (mc == NULL) {
		gck_devfill_free(df);
		return GCK_OK;
	}
	if (df == NULL) {
		if ((df = df_new(ctx)) == NULL)
			return ctx->code;
		df->stream = 1;
	}
	df->cu = cu;
	df->cp = cp;
	if ((df->stream && (r = df_plan_manifest(df, mc, cp, n)) != 1) ||
	    (r = df_bind(df, mc, cp, n)) != 1)
		goto none;
	df->taker.begin = df_begin;
	df->taker.take = df_take;
	df->taker.accepted = df_accepted;
	df->taker.arg = df;
	df->taker.checked = 1;
	/*
	 * The workers check each chunk in a page-locked buffer, one a worker
	 * at most at a time, for the copy to go straight to the GPU.
	 */
	i = (size_t)gck_zio_cpus();
	if ((df->pool = gck_cuda_pinpool_new(cu, i < 64 ? i : 64,
	    GCK_CHUNK_SIZE)) != NULL) {
		df->taker.buf_get = df_buf_get;
		df->taker.buf_put = df_buf_put;
	}
	*dfp = df;
	return GCK_OK;
none:
	gck_devfill_free(df);
	return r == 0 || r == 1 ? GCK_OK : r;
}

/*
 * Where the chunks' frames are in the image file, in the image's order
 * (none, for a stream).
 */
void
gck_devfill_frames(const struct gck_devfill *df, const uint64_t **atp,
    const uint64_t **zsizep, size_t *np)
{
	*atp = df->at;
	*zsizep = df->zsize;
	*np = df->stream ? 0 : df->nframes;
}

const struct gck_taker *
gck_devfill_taker(struct gck_devfill *df)
{
	return &df->taker;
}

/* The GPUs to be given memory, and the processes they are of. */
void
gck_devfill_counts(const struct gck_devfill *df, size_t *ngpup,
    size_t *nprocp)
{
	size_t	i, np = 0, ng = 0, last = SIZE_MAX;

	/*
	 * A GPU's first segment starts at 0; the first segments come in
	 * the order of the processes, a process's GPUs together.
	 */
	for (i = 0; i < df->nfile; i++) {
		if (df->file[i].base != 0)
			continue;
		ng++;
		np += df->file[i].proc != last;
		last = df->file[i].proc;
	}
	*ngpup = ng;
	*nprocp = np;
}

static void *
df_begin(void *arg, const char *name)
{
	return df_part(arg, name);
}

static void *
df_buf_get(void *arg, size_t len)
{
	struct gck_devfill	*df = arg;

	return gck_cuda_pinpool_get(df->pool, len);
}

static void
df_buf_put(void *arg, void *buf)
{
	struct gck_devfill	*df = arg;

	gck_cuda_pinpool_put(df->pool, buf);
}

/*
 * Writes len bytes at data, bytes [off, off + len) of chunk h, checked,
 * to its GPU.  Run by any thread.  Returns 0 or -1.
 */
static int
df_take(void *arg, void *h, uint64_t off, const void *data, size_t len)
{
	struct gck_devfill	*df = arg;
	struct dfpart		*p = h;
	int			 r, none = 0;

	atomic_fetch_add(&p->taken, len);
	if (off > p->size || len > p->size - off) {
		atomic_store(&p->over, 1);
		return -1;
	}
	r = gck_cuda_store_write(df->cu, &df->cp[p->file->proc], p->file->k,
	    p->file->base + p->off + off, data, len);
	if (r == CUDA_SUCCESS) {
		if (gck_cuda_pinpool_owns(df->pool, data))
			atomic_fetch_add(&df->pinned, len);
		return 0;
	}
	if (atomic_compare_exchange_strong(&df->fail, &none, r))
		df->failpart = p;
	return -1;
}

/*
 * A write of process p's memory of GPU k at offset off that failed with
 * CUresult cuerr, as the error of ctx.  Returns its code.
 */
static int
df_write_error(struct gck_ctx *ctx, struct gck_cuda *cu,
    const struct gck_cproc *p, unsigned int k, uint64_t off, int cuerr)
{
	return gck_set_error(ctx, GCK_ECUDA, "cannot give process %d ('%s') "
	    "its memory of GPU %u at offset %" PRIu64 ": %s", (int)p->pid,
	    p->comm, k, off, gck_cuda_errname(cu, cuerr));
}

/* The first write that failed.  Returns its code. */
static int
df_error(struct gck_devfill *df)
{
	const struct dfpart	*p = df->failpart;

	return df_write_error(df->ctx, df->cu, &df->cp[p->file->proc],
	    p->file->k, p->file->base + p->off, atomic_load(&df->fail));
}

/*
 * The reader has checked entry name, whose digest is d and which holds
 * data bytes of data, given to its GPU by.  Returns GCK_OK or a code.
 */
static int
df_accepted(void *arg, const char *name, const struct gck_digest *d,
    uint64_t data, int by)
{
	struct gck_devfill	*df = arg;
	struct dfpart		*p;
	char			 shown[GCK_ENAME_MAX + 16];
	char			 file[GCK_NAME_MAX + 1];
	long			 part;

	(void)data;
	gck_entry_display(name, shown, sizeof shown);
	if ((p = df_part(df, name)) == NULL) {
		if (gck_entry_parse(name, file, sizeof file, &part) == 0 &&
		    df_file(df, file) != NULL)
			return gck_set_error(df->ctx, GCK_ECORRUPT, "corrupt "
			    "image: %s is not a chunk its %s gives", shown,
			    df->stream ? "manifest" : "trailer");
		return GCK_OK;
	}
	if (p->accepted)
		return gck_set_error(df->ctx, GCK_ECORRUPT, "corrupt image: %s "
		    "twice", shown);
	p->accepted = 1 + by;
	if (!df->stream && !gck_digest_equal(d, &p->d))
		return gck_set_error(df->ctx, GCK_ECORRUPT, "corrupt image: %s "
		    "is not the chunk its trailer names", shown);
	if (atomic_load(&p->over))
		return gck_set_error(df->ctx, GCK_ECORRUPT, "corrupt image: %s "
		    "holds more than the %" PRIu64 " bytes its %s gives", shown,
		    p->size, df->stream ? "manifest" : "trailer");
	if (by == GCK_TAKEN_FAILED)
		return atomic_load(&df->fail) != 0 ? df_error(df) :
		    gck_set_error(df->ctx, GCK_ENOMEM, "out of memory");
	if (by == GCK_TAKEN_NONE)
		return gck_set_error(df->ctx, GCK_ECORRUPT, "corrupt image: %s "
		    "was not given to its GPU", shown);
	if (by == GCK_TAKEN_WORKER)
		df->byw += p->size;
	else
		df->byr += p->size;
	return GCK_OK;
}

/*
 * The reader has read the whole image: checks that every chunk was
 * checked and written once, whole, to its GPU.  Returns GCK_OK or a
 * code.
 */
int
gck_devfill_finish(struct gck_devfill *df)
{
	struct dfpart	*p;
	char		 name[GCK_ENAME_MAX], shown[GCK_ENAME_MAX + 16];
	size_t		 i, k;

	if (atomic_load(&df->fail) != 0)
		return df_error(df);
	for (i = 0; i < df->nfile; i++)
		for (k = 0; k < df->file[i].npart; k++) {
			p = &df->file[i].part[k];
			gck_entry_name(name, sizeof name, df->file[i].name,
			    df->file[i].whole ? -1 : (long)k);
			gck_entry_display(name, shown, sizeof shown);
			if (!p->accepted)
				return gck_set_error(df->ctx, GCK_ECORRUPT,
				    "corrupt image: %s is missing", shown);
			if (atomic_load(&p->taken) != p->size)
				return gck_set_error(df->ctx, GCK_ECORRUPT,
				    "corrupt image: %" PRIu64 " bytes were "
				    "given to a GPU for %s, which holds %"
				    PRIu64, (uint64_t)atomic_load(&p->taken),
				    shown, p->size);
		}
	gck_log(df->ctx, 1, "device memory given to the GPUs: %" PRIu64
	    " bytes by the decompressing workers (%" PRIu64 " from page-locked "
	    "buffers), %" PRIu64 " by the reader", df->byw,
	    (uint64_t)atomic_load(&df->pinned), df->byr);
	return GCK_OK;
}

void
gck_devfill_free(struct gck_devfill *df)
{
	size_t	i;

	if (df == NULL)
		return;
	gck_cuda_pinpool_free(df->pool);
	for (i = 0; i < df->nfile; i++)
		free(df->file[i].part);
	free(df->file);
	free(df->byname);
	free(df->at);
	free(df->zsize);
	free(df);
}

/*
 * From an image extracted whole first (each entry checked as it came,
 * the trailer last), each GPU's file is given to its GPU by a thread of
 * its own, all the GPUs at once, through page-locked buffers.
 */
#define DD_THREADS	64	/* at most */

/*
 * A GPU's file, or a segment of its memory, at base: opened by the
 * thread that takes it, for the time it reads it (a GPU of 80 GiB has
 * 1280 segments, more than a process may hold open).
 */
struct ddjob {
	size_t		 proc;	/* among the caller's processes */
	unsigned int	 k;
	char		 name[64];
	uint64_t	 base, size;
};

struct ddrun {
	struct gck_cuda		*cu;
	struct gck_cproc	*cp;
	struct gck_pinpool	*pool;
	int			 dfd;	/* the image's directory */
	struct ddjob		*job;	/* a segment of each GPU after the
					   other */
	size_t			 njob, ngpu;
	atomic_size_t		 next;
	atomic_int		 stop;
	atomic_uint_fast64_t	 bytes, pinned;
	pthread_mutex_t		 mu;
	/* The first failure: */
	size_t			 fjob;
	uint64_t		 foff;
	int			 ferrno;	/* of a read, or 0 */
	int			 fcuda;		/* of a write, or 0 */
};

/* Notes the first failure, at offset off of job j. */
static void
dd_fail(struct ddrun *d, size_t j, uint64_t off, int eno, int cuerr)
{
	pthread_mutex_lock(&d->mu);
	if (!atomic_load(&d->stop)) {
		d->fjob = j;
		d->foff = off;
		d->ferrno = eno;
		d->fcuda = cuerr;
		atomic_store(&d->stop, 1);
	}
	pthread_mutex_unlock(&d->mu);
}

/* One job after another, each read whole and written to its GPU. */
static void *
dd_thread(void *arg)
{
	struct ddrun	*d = arg;
	struct ddjob	*jb;
	char		*buf, *own = NULL;
	uint64_t	 off;
	size_t		 j, want;
	ssize_t		 n;
	int		 r, fd;

	if ((buf = gck_cuda_pinpool_get(d->pool, GCK_CHUNK_SIZE)) == NULL &&
	    (buf = own = malloc(GCK_CHUNK_SIZE)) == NULL) {
		dd_fail(d, SIZE_MAX, 0, ENOMEM, 0);
		return NULL;
	}
	while (!atomic_load(&d->stop) &&
	    (j = atomic_fetch_add(&d->next, 1)) < d->njob) {
		jb = &d->job[j];
		if ((fd = openat(d->dfd, jb->name, O_RDONLY | O_CLOEXEC |
		    O_NOFOLLOW)) == -1) {
			dd_fail(d, j, jb->base, errno, 0);
			break;
		}
		for (off = 0; off < jb->size && !atomic_load(&d->stop);
		    off += (uint64_t)n) {
			want = jb->size - off < GCK_CHUNK_SIZE ?
			    (size_t)(jb->size - off) : GCK_CHUNK_SIZE;
			do
				n = pread(fd, buf, want, (off_t)off);
			while (n == -1 && errno == EINTR);
			if (n <= 0) {
				dd_fail(d, j, jb->base + off, n == 0 ? EIO :
				    errno, 0);
				break;
			}
			r = gck_cuda_store_write(d->cu, &d->cp[jb->proc],
			    jb->k, jb->base + off, buf, (size_t)n);
			if (r != CUDA_SUCCESS) {
				dd_fail(d, j, jb->base + off, 0, r);
				break;
			}
			atomic_fetch_add(&d->bytes, (uint64_t)n);
			if (own == NULL)
				atomic_fetch_add(&d->pinned, (uint64_t)n);
		}
		close(fd);
	}
	if (own == NULL)
		gck_cuda_pinpool_put(d->pool, buf);
	free(own);
	return NULL;
}

/* The first failure, as the error of ctx.  Returns its code. */
static int
dd_error(struct gck_ctx *ctx, const struct ddrun *d, const char *dir)
{
	const struct ddjob	*jb;
	const struct gck_cproc	*p;

	if (d->fjob == SIZE_MAX)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	jb = &d->job[d->fjob];
	p = &d->cp[jb->proc];
	if (d->fcuda != 0)
		return df_write_error(ctx, d->cu, p, jb->k, d->foff, d->fcuda);
	return gck_set_syserr(ctx, d->ferrno, "cannot read the memory of GPU "
	    "%u of process %d at offset %" PRIu64 " in '%s': %s", jb->k,
	    (int)p->pid, d->foff, dir, d->ferrno == EIO ? "it ends there" :
	    strerror(d->ferrno));
}

/*
 * The GPUs' files of the processes of cp, checked, in d->job: the first
 * segment of every GPU, then the second of each that has one, and so on,
 * for the threads to take them in turn.
 */
static int
dd_jobs(struct gck_ctx *ctx, const struct gck_mcuda *mc,
    struct gck_cproc *cp, size_t n, int dfd, struct ddrun *d)
{
	const struct gck_mcproc	*mp;
	char		 name[64];
	struct stat	 sb;
	struct ddjob	*jb;
	uint64_t	 s, want;
	size_t		 i, cap = 0;
	unsigned int	 k;
	int		 r, more;

	for (s = 0, more = 1; more; s++)
		for (i = 0, k = 0, more = 0; df_gpu(mc, cp, n, &i, &k, name,
		    sizeof name); k++) {
			mp = &mc->procs[i];
			d->ngpu += s == 0;
			if (s >= gck_cuda_nsegs(mp->devsize[k],
			    mp->devseg[k]))
				continue;
			more = 1;
			gck_cuda_seg_file(name, sizeof name, mp->pid, k,
			    mp->devseg[k], s);
			want = gck_cuda_seg_size(mp->devsize[k],
			    mp->devseg[k], s);
			if ((r = gck_grow(ctx, &d->job, &cap, d->njob,
			    sizeof *d->job)) != GCK_OK)
				return r;
			jb = &d->job[d->njob];
			jb->proc = i;
			jb->k = k;
			jb->base = s * mp->devseg[k];
			snprintf(jb->name, sizeof jb->name, "%s", name);
			if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) == -1)
				return gck_set_syserr(ctx, errno, "cannot open "
				    "'%s' of the image: %s", name,
				    strerror(errno));
			d->njob++;
			jb->size = (uint64_t)sb.st_size;
			if (!S_ISREG(sb.st_mode) || jb->size != want ||
			    mp->devsize[k] != cp[i].devsize[k])
				return gck_set_error(ctx, GCK_ECORRUPT,
				    "corrupt image: '%s' holds %" PRIu64
				    " bytes where the manifest gives %" PRIu64,
				    name, jb->size, want);
		}
	return GCK_OK;
}

/*
 * Gives the device memory of the processes of cp (n of them, as the
 * manifest m lists its CUDA processes) that went through custom storage
 * to their GPUs, from the image extracted in directory dfd (dir, its
 * name, for messages): all their GPUs mapped, then a thread a GPU's
 * file, then the complete calls.  Returns GCK_OK or a code; on failure
 * the mappings stay for gck_cuda_end_in() to let go.
 */
int
gck_devfill_dir(struct gck_ctx *ctx, const struct gck_manifest *m,
    struct gck_cuda *cu, struct gck_cproc *cp, size_t n, int dfd,
    const char *dir)
{
	const struct gck_mcuda	*mc = gck_manifest_cuda(m);
	struct ddrun		 d;
	pthread_t		 tid[DD_THREADS];
	size_t			 i, nt = 0, want;
	int			 r;

	if (mc == NULL)
		return GCK_OK;
	memset(&d, 0, sizeof d);
	d.cu = cu;
	d.cp = cp;
	d.dfd = dfd;
	atomic_init(&d.next, 0);
	atomic_init(&d.stop, 0);
	atomic_init(&d.bytes, 0);
	atomic_init(&d.pinned, 0);
	pthread_mutex_init(&d.mu, NULL);
	if ((r = dd_jobs(ctx, mc, cp, n, dfd, &d)) != GCK_OK ||
	    (r = gck_cuda_map_in(ctx, cu, cp, n)) != GCK_OK)
		goto out;
	/* (a thread a GPU) */
	want = d.ngpu < DD_THREADS ? d.ngpu : DD_THREADS;
	d.pool = gck_cuda_pinpool_new(cu, want, GCK_CHUNK_SIZE);
	for (nt = 0; nt < want; nt++)
		if (pthread_create(&tid[nt], NULL, dd_thread, &d) != 0)
			break;
	if (nt == 0 && want > 0)
		dd_thread(&d);
	for (i = 0; i < nt; i++)
		pthread_join(tid[i], NULL);
	if (atomic_load(&d.stop)) {
		r = dd_error(ctx, &d, dir);
		goto out;
	}
	gck_log(ctx, 1, "device memory given to the GPUs from the extracted "
	    "image: %" PRIu64 " bytes (%" PRIu64 " from page-locked buffers), "
	    "%zu GPU%s, %zu at once", (uint64_t)atomic_load(&d.bytes),
	    (uint64_t)atomic_load(&d.pinned), d.ngpu, d.ngpu == 1 ? "" : "s",
	    nt > 0 ? nt : (size_t)1);
	r = gck_cuda_end_in(ctx, cu, cp, n, 1);
out:
	gck_cuda_pinpool_free(d.pool);
	free(d.job);
	pthread_mutex_destroy(&d.mu);
	return r;
}

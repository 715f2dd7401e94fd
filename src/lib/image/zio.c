/*
 * zio.c: the compression layer between the tar layer and the file
 * descriptor.  Output is a series of zstd frames, each with its content
 * size and checksum, compressed by worker threads (format 2), one frame
 * streamed (format 1), or the plain tar stream.  Input detects which by
 * the zstd magic number, reads ahead the frames whose header gives a
 * size, has worker threads decompress them, and hands them out in
 * order; a frame too large for that is decoded as a stream.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zstd.h>
#include <zstd_errors.h>

#include "private.h"
#include "core/util.h"
#include "image/zio.h"

#define ZIO_BUFSZ	(1u << 17)
#define ZIO_RING	(1u << 20)	/* recent bytes kept for checks */
#define ZIO_KEEP_MAX	(64u << 20)	/* input kept for a spool, at most */
#define ZIO_SLOTS	256		/* frames in flight, at most */
#define ZIO_AHEAD	32		/* of them, per thread */
#define ZIO_FRAME_MAX	(GCK_PART_MAX + (1u << 20))	/* decoded whole */
#define ZIO_WINDOW	(16u << 20)	/* decoded bytes ahead, per thread */
#define ZIO_BLOCK_MAX	(128u << 10)	/* zstd's largest block */
#define ZIO_SPARES	16		/* buffers kept to use again */
#define ZIO_FOOTER_LEN	24		/* the skippable frame at the end */
#define ZIO_EDGE	(64u << 10)	/* of a frame, kept for checks */
#define ZIO_GAPS	8		/* bytes not kept, the last few */
#define ZIO_IX_EST	(GCK_CHUNK_SIZE + (64u << 10))	/* a chunk's frame,
							   decoded */

/* The footer: a zstd skippable frame of 16 bytes naming the trailer. */
static const unsigned char footer_magic[4] = { 0x5e, 0x2a, 0x4d, 0x18 };
static const char footer_tag[8] = "gpuckpt";

/* Buffers kept to use again: few frames are ever in flight at once. */
struct zspares {
	struct {
		char		*p;
		size_t		 cap;
	}		 b[ZIO_SPARES];
	unsigned	 n;
};

/* A frame being compressed or decompressed by a worker. */
struct zslot {
	char		*src, *dst;
	size_t		 slen, dlen, cap, scap;
	int		 state;		/* S_* */
	size_t		 err;		/* zstd's error, or 0 */
	int		 lies;		/* decoded size is not the header's */
	struct gck_zres	 res;		/* what examine found */
	uint64_t	 at;		/* where the frame starts in the input */
	int		 fd;		/* >= 0: the worker reads the frame */
	int		 eno;		/* and failed: errno, -1 at EOF */
	int		 bad;		/* or it is no whole frame */
	uint64_t	 acct;		/* decoded bytes it counts for */
};
#define S_FREE		0
#define S_QUEUED	1
#define S_BUSY		2
#define S_DONE		3

/*
 * Worker threads over a ring of slots, filled and emptied in order by
 * the thread that owns the stream; each worker takes the oldest queued
 * slot and runs fn on it.
 */
struct zpool {
	pthread_mutex_t	 mu;
	pthread_cond_t	 work, done;
	pthread_t	*th;
	int		 nth, stop;
	struct zslot	 slot[ZIO_SLOTS];
	uint64_t	 head, tail;	/* oldest in use, next to fill */
	void		(*fn)(struct zpool *, struct zslot *, void *);
	int		 level;
	gck_zexamine	*examine;	/* run on what is decompressed */
	gck_zdiscard	*discard;	/* frees what it fetched */
	void		*examine_arg;
};

struct gck_zout {
	struct gck_ctx	*ctx;
	int		 fd;
	int		 level;		/* 0: no compression */
	struct zpool	*pool;		/* NULL: compress here */
	ZSTD_CCtx	*cctx;		/* for compressing here */
	int		 stream;	/* one frame, streamed (format 1) */
	char		*sbuf;		/* its output */
	char		*cur;		/* the frame being assembled */
	size_t		 curlen, curcap;
	uint64_t	 off;		/* bytes written to fd */
	uint64_t	*at;		/* each frame: where it starts */
	uint64_t	 nframes, capframes;
	uint64_t	 written;	/* frames written out */
	int		 footer;	/* end with a footer */
	struct zspares	 spares;
};

/* What the header of a zstd frame says (RFC 8878, 3.1.1.1). */
struct zhdr {
	size_t		 hsize;		/* its length */
	int		 checksum;	/* the frame ends with one */
	int		 has_size;	/* it gives the content size */
	uint64_t	 size;
};
#define ZHDR_MAX	18
#define ZFR_HDR		ZIO_FOOTER_LEN	/* room for a header or the footer */

/* A frame being read in, a piece at a time. */
struct zfr {
	int		 stage;		/* 0 header, 1 block header, 2 block,
					   3 checksum */
	unsigned char	 hdr[ZFR_HDR];
	size_t		 hlen, want, bound;
	int		 last;		/* in the last block */
	struct zhdr	 fh;
};

struct gck_zin {
	struct gck_ctx	*ctx;
	int		 fd;
	ZSTD_DCtx	*dctx;		/* NULL: no compression */
	char		*buf;		/* raw input */
	size_t		 bufsz, pos, len;
	int		 detected, eof;
	int		 streaming;	/* inside a frame decoded as a stream */
	int		 threads;
	int		 ahead;		/* read frames ahead */
	gck_zexamine	*examine;
	gck_zdiscard	*discard;
	void		*examine_arg;
	struct {
		uint64_t	 start;	/* where the frame is in the output */
		struct gck_zres	 res;
	}		 recent[8];	/* the frames handed out last */
	unsigned	 nrecent;
	struct zspares	 spares;
	struct zpool	*pool;
	uint64_t	 inflight;	/* decoded bytes of frames in the ring */
	uint64_t	 frames;	/* frames begun */
	struct zfr	 fr;		/* the frame being read in */
	int		 lagerr;	/* reading ahead failed: this code */
	char		*lagmsg;	/* and message, for when it is due */
	char		*obuf;		/* a streamed frame's output */
	const char	*piece;		/* handed out, to go on from */
	size_t		 pleft;
	struct zslot	*given;		/* whose dst piece points into */
	uint64_t	 total;		/* bytes handed out */
	uint64_t	 nonzero_end;	/* offset after last non-zero byte */
	char		*ring;		/* the last ZIO_RING bytes handed out */
	struct {
		uint64_t	 from, to;
	}		 gap[ZIO_GAPS];	/* of them, those not in the ring */
	unsigned	 ngap;
	char		*raw;		/* the input read, kept for a spool */
	size_t		 rawlen, rawcap;
	int		 keep;		/* keep what is read in raw */
	int		 spoolfd;	/* copy what is read there, or -1 */
	uint64_t	 inbytes;	/* raw bytes read from fd */
	uint64_t	 fr_at;		/* where the frame being read starts */
	uint64_t	 last_at;	/* where the last frame read in starts */
	uint64_t	 cur_at;	/* the frame handed out: where it starts */
	uint64_t	 cur_tar;	/* and where its output starts */
	uint64_t	*ix_at, *ix_zs;	/* frames known to be there: */
	size_t		 nix, ix;	/* how many, the next */
	int		 ix_on;		/* being read by the workers */
	int		 has_footer;	/* the stream ended with a footer */
	uint64_t	 footer_at;	/* the frame it names */
};

/* The CPUs this process may run on. */
int
gck_zio_cpus(void)
{
	cpu_set_t	set;
	int		n;

	if (sched_getaffinity(0, sizeof set, &set) == 0 &&
	    (n = CPU_COUNT(&set)) > 0)
		return n;
	return 1;
}

static void *
pool_main(void *arg)
{
	struct zpool	*p = arg;
	struct zslot	*s;
	uint64_t	 i;
	void		*wctx = NULL;

	pthread_mutex_lock(&p->mu);
	for (;;) {
		s = NULL;
		for (i = p->head; i < p->tail; i++)
			if (p->slot[i % ZIO_SLOTS].state == S_QUEUED) {
				s = &p->slot[i % ZIO_SLOTS];
				break;
			}
		if (s == NULL) {
			if (p->stop)
				break;
			pthread_cond_wait(&p->work, &p->mu);
			continue;
		}
		s->state = S_BUSY;
		pthread_mutex_unlock(&p->mu);
		p->fn(p, s, &wctx);
		pthread_mutex_lock(&p->mu);
		s->state = S_DONE;
		pthread_cond_broadcast(&p->done);
	}
	pthread_mutex_unlock(&p->mu);
	p->fn(p, NULL, &wctx);		/* lets go of its context */
	return NULL;
}

static void
pool_free(struct zpool *p)
{
	int	i;

	if (p == NULL)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = 1;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->mu);
	for (i = 0; i < p->nth; i++)
		pthread_join(p->th[i], NULL);
	for (i = 0; i < ZIO_SLOTS; i++) {
		free(p->slot[i].src);
		free(p->slot[i].dst);
		if (p->slot[i].res.ref != NULL && p->discard != NULL)
			p->discard(p->examine_arg, &p->slot[i].res);
	}
	pthread_cond_destroy(&p->work);
	pthread_cond_destroy(&p->done);
	pthread_mutex_destroy(&p->mu);
	free(p->th);
	free(p);
}

/* Starts n workers running fn.  Returns the pool, or NULL. */
static struct zpool *
pool_new(int n, void (*fn)(struct zpool *, struct zslot *, void *),
    int level, gck_zexamine *examine, gck_zdiscard *discard,
    void *examine_arg)
{
	struct zpool	*p;

	if ((p = calloc(1, sizeof *p)) == NULL)
		return NULL;
	if ((p->th = calloc((size_t)n, sizeof *p->th)) == NULL) {
		free(p);
		return NULL;
	}
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->work, NULL);
	pthread_cond_init(&p->done, NULL);
	p->fn = fn;
	p->level = level;
	p->examine = examine;
	p->discard = discard;
	p->examine_arg = examine_arg;
	for (p->nth = 0; p->nth < n; p->nth++)
		if (pthread_create(&p->th[p->nth], NULL, pool_main, p) != 0)
			break;
	if (p->nth == 0) {
		pool_free(p);
		return NULL;
	}
	return p;
}

/* Queues the slot just filled, at the tail. */
static void
pool_queue(struct zpool *p)
{
	pthread_mutex_lock(&p->mu);
	p->slot[p->tail % ZIO_SLOTS].state = S_QUEUED;
	p->tail++;
	pthread_cond_signal(&p->work);
	pthread_mutex_unlock(&p->mu);
}

/* Waits for the oldest slot to be done, and returns it. */
static struct zslot *
pool_wait_head(struct zpool *p)
{
	struct zslot	*s = &p->slot[p->head % ZIO_SLOTS];

	pthread_mutex_lock(&p->mu);
	while (s->state != S_DONE)
		pthread_cond_wait(&p->done, &p->mu);
	pthread_mutex_unlock(&p->mu);
	return s;
}

/* Whether the oldest slot is done (without waiting). */
static int
pool_head_done(struct zpool *p)
{
	int	done;

	pthread_mutex_lock(&p->mu);
	done = p->head < p->tail &&
	    p->slot[p->head % ZIO_SLOTS].state == S_DONE;
	pthread_mutex_unlock(&p->mu);
	return done;
}

/*
 * Lets go of the oldest slot; its owner has taken its buffers back to
 * its spares first.
 */
static void
pool_release_head(struct zpool *p)
{
	pthread_mutex_lock(&p->mu);
	p->slot[p->head % ZIO_SLOTS].state = S_FREE;
	p->head++;
	pthread_mutex_unlock(&p->mu);
}

/* Keeps buffer *pp of *capp bytes to use again, or frees it. */
static void
zio_unbuf(struct zspares *sp, char **pp, size_t *capp)
{
	if (*pp != NULL && sp->n < ZIO_SPARES) {
		sp->b[sp->n].p = *pp;
		sp->b[sp->n++].cap = *capp;
	} else
		free(*pp);
	*pp = NULL;
	*capp = 0;
}

static void
zio_spares_free(struct zspares *sp)
{
	while (sp->n > 0)
		free(sp->b[--sp->n].p);
}

/*
 * Gives *pp (of *capp bytes) at least need bytes: itself, a buffer kept
 * to use again, or a new one.  Returns 0, or -1 when out of memory.
 */
static int
zio_buf(struct zspares *sp, char **pp, size_t *capp, size_t need)
{
	unsigned	i;

	if (*capp >= need)
		return 0;
	zio_unbuf(sp, pp, capp);
	for (i = sp->n; i-- > 0; )
		if (sp->b[i].cap >= need) {
			*pp = sp->b[i].p;
			*capp = sp->b[i].cap;
			sp->b[i] = sp->b[--sp->n];
			return 0;
		}
	if ((*pp = malloc(need)) == NULL)
		return -1;
	*capp = need;
	return 0;
}

/* A worker's compression of one frame: checksum and size in its header. */
static void
compress_slot(struct zpool *p, struct zslot *s, void *arg)
{
	ZSTD_CCtx	**cp = arg;
	size_t		  need, e;

	if (s == NULL) {
		ZSTD_freeCCtx(*cp);
		return;
	}
	s->err = 0;
	if (*cp == NULL) {
		if ((*cp = ZSTD_createCCtx()) == NULL) {
			s->err = (size_t)-1;
			return;
		}
		e = ZSTD_CCtx_setParameter(*cp, ZSTD_c_compressionLevel,
		    p->level);
		if (!ZSTD_isError(e))
			e = ZSTD_CCtx_setParameter(*cp, ZSTD_c_checksumFlag, 1);
		if (ZSTD_isError(e)) {
			s->err = e;
			return;
		}
	}
	need = ZSTD_compressBound(s->slen);
	if (s->cap < need) {
		free(s->dst);
		if ((s->dst = malloc(need)) == NULL) {
			s->cap = 0;
			s->err = (size_t)-1;
			return;
		}
		s->cap = need;
	}
	e = ZSTD_compress2(*cp, s->dst, s->cap, s->src, s->slen);
	if (ZSTD_isError(e))
		s->err = e;
	else
		s->dlen = e;
}

static const char *
zerr(size_t e)
{
	return e == (size_t)-1 ? "out of memory" : ZSTD_getErrorName(e);
}

int
gck_zout_new(struct gck_ctx *ctx, int fd, int level, int threads,
    struct gck_zout **zp)
{
	struct gck_zout	*z = NULL;
	size_t		 e;
	int		 r;

	*zp = NULL;
	if ((z = calloc(1, sizeof *z)) == NULL) {
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	z->ctx = ctx;
	z->fd = fd;
	z->level = level;
	z->stream = threads < 0 && level > 0;
	if (threads <= 0)
		threads = gck_zio_cpus();
	if (level > 0 && threads > 1 && !z->stream)
		z->pool = pool_new(threads > 64 ? 64 : threads, compress_slot,
		    level, NULL, NULL, NULL);
	if (level > 0 && z->pool == NULL) {
		if ((z->cctx = ZSTD_createCCtx()) == NULL) {
			r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
			goto out;
		}
		e = ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_compressionLevel,
		    level);
		if (!ZSTD_isError(e))
			e = ZSTD_CCtx_setParameter(z->cctx,
			    ZSTD_c_checksumFlag, 1);
		if (ZSTD_isError(e)) {
			r = gck_set_error(ctx, GCK_EINVAL, "zstd: %s",
			    ZSTD_getErrorName(e));
			goto out;
		}
		/* One frame: zstd's own workers compress it. */
		if (z->stream && threads > 1)
			(void)ZSTD_CCtx_setParameter(z->cctx,
			    ZSTD_c_nbWorkers, threads > 64 ? 64 : threads);
		if (z->stream && (z->sbuf = malloc(ZSTD_CStreamOutSize())) ==
		    NULL) {
			r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
			goto out;
		}
	}
	*zp = z;
	z = NULL;
	r = GCK_OK;
out:
	gck_zout_free(z);
	return r;
}

/* Notes that a frame starts at offset at of the output. */
static int
zout_note(struct gck_zout *z, uint64_t at)
{
	uint64_t	*na;
	size_t		 nc;

	if (z->nframes == z->capframes) {
		nc = z->capframes ? z->capframes * 2 : 1024;
		if ((na = reallocarray(z->at, nc, sizeof *na)) == NULL)
			return gck_set_error(z->ctx, GCK_ENOMEM,
			    "out of memory");
		z->at = na;
		z->capframes = nc;
	}
	z->at[z->nframes++] = at;
	return GCK_OK;
}

static int
zout_put(struct gck_zout *z, const void *p, size_t len)
{
	int	r;

	if ((r = gck_write_all(z->ctx, z->fd, p, len, "image")) == GCK_OK) {
		z->off += len;
		gck_meter_add(z->ctx, len);
	}
	return r;
}

/* Writes out the oldest frame of the pool, waiting for it. */
static int
zout_write_head(struct gck_zout *z)
{
	struct zslot	*s = pool_wait_head(z->pool);
	int		 r;

	if (s->err != 0)
		r = gck_set_error(z->ctx, s->err == (size_t)-1 ? GCK_ENOMEM :
		    GCK_EFORMAT, "zstd: %s", zerr(s->err));
	else if ((r = zout_note(z, z->off)) == GCK_OK)
		r = zout_put(z, s->dst, s->dlen);
	zio_unbuf(&z->spares, &s->src, &s->scap);
	zio_unbuf(&z->spares, &s->dst, &s->cap);
	pool_release_head(z->pool);
	return r;
}

/* Compresses into the one frame of a streamed output. */
static int
zout_stream(struct gck_zout *z, const void *p, size_t len,
    ZSTD_EndDirective mode)
{
	ZSTD_inBuffer	in = { p, len, 0 };
	ZSTD_outBuffer	out;
	size_t		left;
	int		r;

	do {
		out.dst = z->sbuf;
		out.size = ZSTD_CStreamOutSize();
		out.pos = 0;
		left = ZSTD_compressStream2(z->cctx, &out, &in, mode);
		if (ZSTD_isError(left))
			return gck_set_error(z->ctx, GCK_EFORMAT, "zstd: %s",
			    ZSTD_getErrorName(left));
		if (out.pos > 0 && (r = zout_put(z, z->sbuf, out.pos)) !=
		    GCK_OK)
			return r;
	} while (mode == ZSTD_e_continue ? in.pos < in.size : left != 0);
	return GCK_OK;
}

int
gck_zout_write(struct gck_zout *z, const void *p, size_t len)
{
	char	*nc;
	size_t	 cap;

	if (z->stream) {
		if (z->nframes == 0 && zout_note(z, 0) != GCK_OK)
			return z->ctx->code;
		return zout_stream(z, p, len, ZSTD_e_continue);
	}

	if (z->level == 0) {
		if (z->curlen == 0 && len > 0 && zout_note(z, z->off) != GCK_OK)
			return z->ctx->code;
		z->curlen += len;
		return zout_put(z, p, len);
	}
	if (z->curlen + len > z->curcap) {
		for (cap = z->curcap ? z->curcap : (1u << 20);
		    cap < z->curlen + len; cap *= 2)
			;
		if ((nc = realloc(z->cur, cap)) == NULL)
			return gck_set_error(z->ctx, GCK_ENOMEM,
			    "out of memory");
		z->cur = nc;
		z->curcap = cap;
	}
	memcpy(z->cur + z->curlen, p, len);
	z->curlen += len;
	return GCK_OK;
}

/*
 * Ends the frame being written, a frame of its own whatever follows:
 * compressed by a worker while the caller goes on.  Returns GCK_OK or a
 * code.
 */
int
gck_zout_frame_end(struct gck_zout *z)
{
	struct zslot	*s;
	size_t		 e;
	char		*t;
	int		 r;

	if (z->curlen == 0 || z->stream)
		return GCK_OK;
	if (z->level == 0) {
		z->curlen = 0;
		z->written = z->nframes;
		return GCK_OK;
	}
	if (z->pool == NULL) {
		e = ZSTD_compressBound(z->curlen);
		if ((t = malloc(e)) == NULL)
			return gck_set_error(z->ctx, GCK_ENOMEM,
			    "out of memory");
		e = ZSTD_compress2(z->cctx, t, e, z->cur, z->curlen);
		z->curlen = 0;
		if (ZSTD_isError(e)) {
			free(t);
			return gck_set_error(z->ctx, GCK_EFORMAT, "zstd: %s",
			    ZSTD_getErrorName(e));
		}
		if ((r = zout_note(z, z->off)) == GCK_OK)
			r = zout_put(z, t, e);
		free(t);
		z->written = z->nframes;
		return r;
	}
	/* A slot free for it; frames already done go out meanwhile. */
	while (z->pool->tail - z->pool->head >= ZIO_SLOTS ||
	    (z->pool->tail - z->pool->head >= (uint64_t)4 * z->pool->nth &&
	    !pool_head_done(z->pool)) || pool_head_done(z->pool)) {
		if ((r = zout_write_head(z)) != GCK_OK)
			return r;
		z->written++;
	}
	s = &z->pool->slot[z->pool->tail % ZIO_SLOTS];
	zio_unbuf(&z->spares, &s->src, &s->scap);
	s->src = z->cur;
	s->scap = z->curcap;
	s->slen = z->curlen;
	z->cur = NULL;
	z->curcap = z->curlen = 0;
	e = ZSTD_compressBound(s->slen);
	if (zio_buf(&z->spares, &z->cur, &z->curcap, 1u << 20) == -1 ||
	    zio_buf(&z->spares, &s->dst, &s->cap, e) == -1)
		return gck_set_error(z->ctx, GCK_ENOMEM, "out of memory");
	pool_queue(z->pool);
	return GCK_OK;
}

/*
 * Writes out every frame ended so far.  Returns GCK_OK or a code; then
 * gck_zout_frame() knows where each of them is.
 */
int
gck_zout_sync(struct gck_zout *z)
{
	int	r;

	if (z->pool == NULL)
		return GCK_OK;
	while (z->pool->head < z->pool->tail) {
		if ((r = zout_write_head(z)) != GCK_OK)
			return r;
		z->written++;
	}
	return GCK_OK;
}

/*
 * Writes out frame (len bytes) as the next frame, after every frame
 * ended so far: one compressed elsewhere as this stream's are (its
 * checksum and size in its header), or, this stream not compressed,
 * the bytes themselves.  Returns GCK_OK or a code.
 */
int
gck_zout_put_frame(struct gck_zout *z, const void *p, size_t len)
{
	int	r;

	if (z->stream || z->curlen != 0)
		return gck_set_error(z->ctx, GCK_EINVAL, "a frame put in the "
		    "middle of another");
	if ((r = gck_zout_sync(z)) != GCK_OK ||
	    (r = zout_note(z, z->off)) != GCK_OK ||
	    (r = zout_put(z, p, len)) != GCK_OK)
		return r;
	if (z->pool != NULL)
		z->written++;
	else
		z->written = z->nframes;
	return GCK_OK;
}

/* The bytes written to the output so far. */
uint64_t
gck_zout_bytes(const struct gck_zout *z)
{
	return z->off;
}

/* The bytes read from the input so far, or skipped to be read apart. */
uint64_t
gck_zin_inbytes(const struct gck_zin *z)
{
	return z->inbytes;
}

/* How many frames have been ended so far: the next one's number. */
uint64_t
gck_zout_frames(const struct gck_zout *z)
{
	return z->pool != NULL ? z->written + (z->pool->tail - z->pool->head) :
	    z->nframes;
}

/*
 * Where frame i (from 0) starts in the output and how many bytes it
 * takes, once written out.  Returns 0, or -1 if it is not.
 */
int
gck_zout_frame(const struct gck_zout *z, uint64_t i, uint64_t *atp,
    uint64_t *lenp)
{
	if (i >= z->nframes)
		return -1;
	*atp = z->at[i];
	*lenp = (i + 1 < z->nframes ? z->at[i + 1] : z->off) - z->at[i];
	return 0;
}

/*
 * Ends the stream of frames with the footer, a skippable frame that
 * names where the last frame starts, so that a reader finds that
 * frame, the trailer's, from the end of a file.
 */
void
gck_zout_set_footer(struct gck_zout *z)
{
	z->footer = !z->stream && z->level > 0;
}

/* Whether the stream is to end with a footer. */
int
gck_zout_footer(const struct gck_zout *z)
{
	return z->footer;
}

/* Ends the last frame and writes out everything.  Returns GCK_OK or a code. */
int
gck_zout_finish(struct gck_zout *z)
{
	unsigned char	f[ZIO_FOOTER_LEN];
	uint64_t	at;
	int		i, r;

	if (z->stream)
		return zout_stream(z, NULL, 0, ZSTD_e_end);
	if ((r = gck_zout_frame_end(z)) != GCK_OK ||
	    (r = gck_zout_sync(z)) != GCK_OK)
		return r;
	if (!z->footer || z->nframes == 0)
		return GCK_OK;
	memcpy(f, footer_magic, 4);
	f[4] = 16;
	f[5] = f[6] = f[7] = 0;
	memcpy(f + 8, footer_tag, sizeof footer_tag);
	at = z->at[z->nframes - 1];
	for (i = 0; i < 8; i++)
		f[16 + i] = (unsigned char)(at >> (8 * i));
	return zout_put(z, f, sizeof f);
}

/*
 * Reads the footer of the image file open on fd, whose size is size.
 * Returns 0 with *atp, where its trailer's frame starts, or -1 if it
 * has none.
 */
int
gck_zio_footer(int fd, uint64_t size, uint64_t *atp)
{
	unsigned char	f[ZIO_FOOTER_LEN];
	uint64_t	at = 0;
	int		i;

	if (size < ZIO_FOOTER_LEN || pread(fd, f, sizeof f,
	    (off_t)(size - ZIO_FOOTER_LEN)) != (ssize_t)sizeof f ||
	    memcmp(f, footer_magic, 4) != 0 || f[4] != 16 || f[5] != 0 ||
	    f[6] != 0 || f[7] != 0 || memcmp(f + 8, footer_tag,
	    sizeof footer_tag) != 0)
		return -1;
	for (i = 7; i >= 0; i--)
		at = at << 8 | f[16 + i];
	if (at >= size - ZIO_FOOTER_LEN)
		return -1;
	*atp = at;
	return 0;
}

/* The length of the footer. */
size_t
gck_zio_footer_len(void)
{
	return ZIO_FOOTER_LEN;
}

void
gck_zout_free(struct gck_zout *z)
{
	if (z == NULL)
		return;
	pool_free(z->pool);
	zio_spares_free(&z->spares);
	ZSTD_freeCCtx(z->cctx);
	free(z->sbuf);
	free(z->cur);
	free(z->at);
	free(z);
}

int
gck_zin_new(struct gck_ctx *ctx, int fd, struct gck_zin **zp)
{
	struct gck_zin	*z;

	*zp = NULL;
	if ((z = calloc(1, sizeof *z)) == NULL ||
	    (z->buf = malloc(ZIO_BUFSZ)) == NULL) {
		free(z);
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	}
	z->ctx = ctx;
	z->fd = fd;
	z->bufsz = ZIO_BUFSZ;
	z->spoolfd = -1;
	*zp = z;
	return GCK_OK;
}

/*
 * Whether to read frames ahead of what is asked for (not at first, so
 * that reading an image's head reads no more than that).
 */
void
gck_zin_set_ahead(struct gck_zin *z, int on)
{
	z->ahead = on;
}

/*
 * A function the decompressing workers run on each frame they
 * decompress whole, to examine it while this thread goes on: fn(arg,
 * the frame's content, its length, what it found); dfn(arg, what it
 * found) frees a reference's data that no one took.
 */
void
gck_zin_set_examine(struct gck_zin *z, gck_zexamine *fn, gck_zdiscard *dfn,
    void *arg)
{
	z->examine = fn;
	z->discard = dfn;
	z->examine_arg = arg;
}

/*
 * What the workers found in the frame that starts at offset start of
 * the output, one of the last few handed out.  Returns 0, or -1 if
 * there is no such frame at hand.
 */
int
gck_zin_result(const struct gck_zin *z, uint64_t start, struct gck_zres *rp)
{
	unsigned	i;

	for (i = 0; i < 8 && i < z->nrecent; i++)
		if (z->recent[(z->nrecent - 1 - i) % 8].start == start) {
			*rp = z->recent[(z->nrecent - 1 - i) % 8].res;
			return 0;
		}
	return -1;
}

/*
 * As gck_zin_result(), but the data of a reference that a worker
 * fetched becomes the caller's, to free with the discard function.
 */
int
gck_zin_take(struct gck_zin *z, uint64_t start, struct gck_zres *rp)
{
	unsigned	i, k;

	for (i = 0; i < 8 && i < z->nrecent; i++) {
		k = (z->nrecent - 1 - i) % 8;
		if (z->recent[k].start == start) {
			*rp = z->recent[k].res;
			z->recent[k].res.ref = NULL;
			return 0;
		}
	}
	return -1;
}

/* How many threads decompress (0: as many as there are CPUs). */
void
gck_zin_set_threads(struct gck_zin *z, int n)
{
	z->threads = n;
}

/*
 * Notes n bytes just read at p: into the spool, or kept for one (up to
 * ZIO_KEEP_MAX, beyond which no spool can be had).  Returns 0, or -1
 * with the error set.
 */
static int
zin_raw(struct gck_zin *z, const char *p, size_t n)
{
	char	*nr;
	size_t	 nc;

	if (z->spoolfd != -1)
		return gck_write_all(z->ctx, z->spoolfd, p, n, "the copy of "
		    "the image") == GCK_OK ? 0 : -1;
	if (!z->keep || n == 0)
		return 0;
	if (z->rawlen + n > ZIO_KEEP_MAX) {
		free(z->raw);
		z->raw = NULL;
		z->rawlen = z->rawcap = 0;
		z->keep = 0;
		return 0;
	}
	if (z->rawlen + n > z->rawcap) {
		for (nc = z->rawcap ? z->rawcap : ZIO_BUFSZ; nc < z->rawlen + n;
		    nc *= 2)
			;
		if ((nr = realloc(z->raw, nc)) == NULL) {
			gck_set_error(z->ctx, GCK_ENOMEM, "out of memory");
			return -1;
		}
		z->raw = nr;
		z->rawcap = nc;
	}
	memcpy(z->raw + z->rawlen, p, n);
	z->rawlen += n;
	return 0;
}

/* Keeps what is read from now on, for gck_zin_spool(). */
void
gck_zin_keep_raw(struct gck_zin *z)
{
	z->keep = 1;
}

/*
 * Copies the whole input to fd: what was read so far (kept since the
 * start by gck_zin_keep_raw()), then whatever is read.  Returns GCK_OK
 * or a code.
 */
int
gck_zin_spool(struct gck_zin *z, int fd)
{
	int	r;

	if (!z->keep)
		return gck_set_error(z->ctx, GCK_EINVAL, "cannot copy the "
		    "image: its head was not kept");
	if ((r = gck_write_all(z->ctx, fd, z->raw, z->rawlen, "the copy of "
	    "the image")) != GCK_OK)
		return r;
	gck_zin_nospool(z);
	z->spoolfd = fd;
	return GCK_OK;
}

/* Keeps nothing more for a spool, and lets go of what was kept. */
void
gck_zin_nospool(struct gck_zin *z)
{
	free(z->raw);
	z->raw = NULL;
	z->rawlen = z->rawcap = 0;
	z->keep = 0;
}

/* Refills the raw buffer.  Returns bytes available, 0 at EOF, -1. */
static ssize_t
zin_fill(struct gck_zin *z)
{
	ssize_t	n;

	if (z->pos < z->len)
		return (ssize_t)(z->len - z->pos);
	if (z->eof)
		return 0;
	z->pos = z->len = 0;
	if ((n = gck_read_full(z->ctx, z->fd, z->buf, z->bufsz,
	    "image")) == -1 || zin_raw(z, z->buf, (size_t)n) == -1)
		return -1;
	if ((size_t)n < z->bufsz)
		z->eof = 1;
	z->len = (size_t)n;
	z->inbytes += (uint64_t)n;
	gck_meter_add(z->ctx, (uint64_t)n);
	return n;
}

/* Copies the n bytes at p into the ring, as bytes from z->total on. */
static void
zin_ring(struct gck_zin *z, const char *p, size_t n)
{
	size_t	at, k;

	if (n > ZIO_RING) {
		p += n - ZIO_RING;
		z->total += n - ZIO_RING;
		n = ZIO_RING;
	}
	at = (size_t)(z->total % ZIO_RING);
	k = n < ZIO_RING - at ? n : ZIO_RING - at;
	memcpy(z->ring + at, p, k);
	memcpy(z->ring, p + k, n - k);
	z->total += n;
}

/*
 * Accounts for the n bytes at p handed out next: the ring keeps them for
 * the tar layer's checks, but for those at [skip, skip + nskip) of them,
 * which it notes it does not have.
 */
static void
zin_account(struct gck_zin *z, const char *p, size_t n, size_t skip,
    size_t nskip)
{
	size_t	i;

	for (i = n; i > 0; i--)
		if (p[i - 1] != 0) {
			z->nonzero_end = z->total + i;
			break;
		}
	if (z->ring == NULL) {
		z->total += n;
		return;
	}
	if (nskip == 0) {
		zin_ring(z, p, n);
		return;
	}
	zin_ring(z, p, skip);
	z->gap[z->ngap % ZIO_GAPS].from = z->total;
	z->gap[z->ngap % ZIO_GAPS].to = z->total + nskip;
	z->ngap++;
	z->total += nskip;
	zin_ring(z, p + skip + nskip, n - skip - nskip);
}

/* Whether the ring holds all of [from, to), as far as gaps go. */
static int
zin_held(const struct gck_zin *z, uint64_t from, uint64_t to)
{
	unsigned	i;

	for (i = 0; i < ZIO_GAPS && i < z->ngap; i++)
		if (z->gap[i].from < to && from < z->gap[i].to)
			return 0;
	return 1;
}

/*
 * Says whether the bytes [from, to) of the tar stream are all zero: 1 if
 * they are, 0 if not, -1 if they are no longer (or not yet) at hand.
 */
int
gck_zin_zero_range(const struct gck_zin *z, uint64_t from, uint64_t to)
{
	uint64_t	o;

	if (z->ring == NULL)
		return 1;
	if (to > z->total || from > to || z->total - from > ZIO_RING ||
	    !zin_held(z, from, to))
		return -1;
	for (o = from; o < to; o++)
		if (z->ring[o % ZIO_RING] != 0)
			return 0;
	return 1;
}

/*
 * Copies the bytes [from, from + len) of the tar stream into buf.  Returns 0, or -1 if they are not at hand.
 */
int
gck_zin_peek(const struct gck_zin *z, uint64_t from, void *buf, size_t len)
{
	size_t	i;

	if (z->ring == NULL || from + len > z->total ||
	    z->total - from > ZIO_RING || !zin_held(z, from, from + len))
		return -1;
	for (i = 0; i < len; i++)
		((char *)buf)[i] = z->ring[(from + i) % ZIO_RING];
	return 0;
}

/*
 * Makes n bytes of raw input (if the input has them) contiguous at
 * buf + pos.  Returns how many there are, fewer only at the end of the
 * input, or -1 with the error set.
 */
static ssize_t
zin_need(struct gck_zin *z, size_t n)
{
	ssize_t	r;

	while (z->len - z->pos < n && !z->eof) {
		if (z->pos > 0) {
			memmove(z->buf, z->buf + z->pos, z->len - z->pos);
			z->len -= z->pos;
			z->pos = 0;
		}
		r = read(z->fd, z->buf + z->len, z->bufsz - z->len);
		if (r == -1 && errno == EINTR) {
			if (gck_check_interrupt(z->ctx) != GCK_OK)
				return -1;
			continue;
		}
		if (r == -1) {
			gck_set_syserr(z->ctx, errno, "cannot read image: %s",
			    strerror(errno));
			return -1;
		}
		if (r == 0)
			z->eof = 1;
		if (zin_raw(z, z->buf + z->len, (size_t)r) == -1)
			return -1;
		z->len += (size_t)r;
		z->inbytes += (uint64_t)r;
		gck_meter_add(z->ctx, (uint64_t)r);
	}
	return (ssize_t)(z->len - z->pos < n ? z->len - z->pos : n);
}

static int
zin_truncated(struct gck_zin *z)
{
	return gck_set_error(z->ctx, GCK_ETRUNC,
	    "image truncated: compressed stream ends early");
}

/*
 * Reads the frame header of len bytes at b (the magic number first).
 * Returns 0, or -1 if it does not fit in them.
 */
static int
zhdr_parse(const unsigned char *b, size_t len, struct zhdr *h)
{
	static const size_t	did[4] = { 0, 1, 2, 4 };
	unsigned		fd, fcs, single;
	size_t			at, n, i;

	if (len < 5)
		return -1;
	fd = b[4];
	fcs = fd >> 6;
	single = (fd >> 5) & 1;
	h->checksum = (fd >> 2) & 1;
	at = 5 + (single ? 0 : 1) + did[fd & 3];
	n = fcs == 0 ? (single ? 1 : 0) : (size_t)1 << fcs;
	h->hsize = at + n;
	if (h->hsize > len)
		return -1;
	h->has_size = n > 0;
	h->size = 0;
	for (i = 0; i < n; i++)
		h->size |= (uint64_t)b[at + i] << (8 * i);
	if (n == 2)
		h->size += 256;
	return 0;
}

/*
 * Raw input at hand: buffered, or read now, in one read(2), if block is
 * set or input is ready.  Returns the bytes at buf + pos, 0 at the end,
 * -1 with the error set, or -2 when reading would wait.
 */
static ssize_t
zin_more(struct gck_zin *z, int block)
{
	struct pollfd	pfd;
	ssize_t		r;

	if (z->pos < z->len)
		return (ssize_t)(z->len - z->pos);
	if (z->eof)
		return 0;
	pfd.fd = z->fd;
	pfd.events = POLLIN;
	if (!block && poll(&pfd, 1, 0) == 0)
		return -2;
	z->pos = z->len = 0;
	while ((r = read(z->fd, z->buf, z->bufsz)) == -1 && errno == EINTR)
		if (gck_check_interrupt(z->ctx) != GCK_OK)
			return -1;
	if (r == -1) {
		gck_set_syserr(z->ctx, errno, "cannot read image: %s",
		    strerror(errno));
		return -1;
	}
	if (r == 0)
		z->eof = 1;
	if (zin_raw(z, z->buf, (size_t)r) == -1)
		return -1;
	z->len = (size_t)r;
	z->inbytes += (uint64_t)r;
	gck_meter_add(z->ctx, (uint64_t)r);
	return r;
}

/*
 * Copies up to *wantp bytes of raw input to dst + *lenp, counting them
 * off.  Returns 0 when all are there, 3 when reading would wait, or -1
 * (truncated, or the error set).
 */
static int
zin_copy(struct gck_zin *z, char *dst, size_t *wantp, size_t *lenp,
    int block)
{
	ssize_t	a;
	size_t	k;

	while (*wantp > 0) {
		if ((a = zin_more(z, block)) == -2)
			return 3;
		if (a == -1)
			return -1;
		if (a == 0) {
			zin_truncated(z);
			return -1;
		}
		k = (size_t)a < *wantp ? (size_t)a : *wantp;
		memcpy(dst + *lenp, z->buf + z->pos, k);
		z->pos += k;
		*lenp += k;
		*wantp -= k;
	}
	return 0;
}

/* The length of a frame header, from its first 5 bytes. */
static size_t
zhdr_len(const unsigned char *b)
{
	static const size_t	did[4] = { 0, 1, 2, 4 };
	unsigned		fd = b[4], fcs = fd >> 6, single = (fd >> 5) & 1;

	return 5 + (single ? 0 : 1) + did[fd & 3] +
	    (fcs == 0 ? (single ? 1 : 0) : (size_t)1 << fcs);
}

/*
 * The footer, a skippable frame that only the end of a stream of
 * frames may hold: 16 bytes, "gpuckpt" and a NUL then where the last
 * frame (the trailer's) starts, as a 64-bit little-endian number.  Any
 * other skippable frame, or anything after it, is refused.  Returns 4
 * at the end of the input (the footer read), 3 when reading would wait,
 * or -1.
 */
static int
zin_footer(struct gck_zin *z, int block)
{
	struct zfr	*f = &z->fr;
	ssize_t		 a;
	uint64_t	 at = 0;
	int		 i, r;

	if (f->stage != 4) {
		if (f->hlen < ZIO_FOOTER_LEN && f->want == 0)
			f->want = ZIO_FOOTER_LEN - f->hlen;
		if ((r = zin_copy(z, (char *)f->hdr, &f->want, &f->hlen,
		    block)) != 0)
			return r;
		if (f->hdr[4] != 16 || f->hdr[5] != 0 || f->hdr[6] != 0 ||
		    f->hdr[7] != 0 || memcmp(f->hdr + 8, footer_tag,
		    sizeof footer_tag) != 0) {
			gck_set_error(z->ctx, GCK_EFORMAT, "corrupt image: a "
			    "skippable zstd frame that is not the footer");
			return -1;
		}
		for (i = 7; i >= 0; i--)
			at = at << 8 | f->hdr[16 + i];
		if (at != z->last_at) {
			gck_set_error(z->ctx, GCK_EFORMAT, "corrupt image: the "
			    "footer does not name the last frame");
			return -1;
		}
		z->footer_at = at;
		f->stage = 4;
	}
	if ((a = zin_more(z, block)) == -2)
		return 3;
	if (a == -1)
		return -1;
	if (a > 0) {
		gck_set_error(z->ctx, GCK_EFORMAT, "corrupt image: data after "
		    "the footer");
		return -1;
	}
	z->has_footer = 1;
	return 4;
}

/* A frame's header, read in: to take whole into s, or to stream. */
static int
zin_frame_head(struct gck_zin *z, struct zslot *s, int block)
{
	static const unsigned char magic[4] = { 0x28, 0xb5, 0x2f, 0xfd };
	struct zfr	*f = &z->fr;
	ssize_t		 a;
	int		 r;

	if (f->hlen == 0 && f->want == 0) {
		if ((a = zin_more(z, block)) == -2)
			return 3;
		if (a <= 0)
			return a == 0 ? 4 : -1;	/* the end, or an error */
		f->want = 5;
		z->fr_at = z->inbytes - (z->len - z->pos);
	}
	r = f->hlen < 5 ? zin_copy(z, (char *)f->hdr, &f->want, &f->hlen,
	    block) : 0;
	if (f->hlen >= 4 && memcmp(f->hdr, footer_magic, 4) == 0 &&
	    z->frames > 0)
		return zin_footer(z, block);
	if (memcmp(f->hdr, magic, f->hlen < 4 ? f->hlen : 4) != 0 &&
	    (z->frames == 0 || memcmp(f->hdr, footer_magic, f->hlen < 4 ?
	    f->hlen : 4) != 0)) {
		gck_set_error(z->ctx, GCK_EFORMAT, "corrupt image: data "
		    "after the end of the compressed stream");
		return -1;
	}
	if (r != 0)
		return r;
	z->last_at = z->fr_at;
	s->at = z->fr_at;
	if (f->hlen == 5)
		f->want = zhdr_len(f->hdr) - 5;
	if ((r = zin_copy(z, (char *)f->hdr, &f->want, &f->hlen, block)) != 0)
		return r;
	zhdr_parse(f->hdr, f->hlen, &f->fh);
	/* The frame's checksum must cover every byte. */
	if (!f->fh.checksum) {
		gck_set_error(z->ctx, GCK_ECORRUPT, "corrupt image: "
		    "zstd frame without a content checksum");
		return -1;
	}
	if (!f->fh.has_size || f->fh.size > ZIO_FRAME_MAX)
		return 2;			/* the header stays in hdr */
	f->bound = ZSTD_compressBound((size_t)f->fh.size) + f->hlen + 4;
	if (zio_buf(&z->spares, &s->src, &s->scap, f->bound) == -1) {
		gck_set_error(z->ctx, GCK_ENOMEM, "out of memory");
		return -1;
	}
	memcpy(s->src, f->hdr, f->hlen);
	s->slen = f->hlen;
	s->dlen = (size_t)f->fh.size;
	f->stage = 1;
	f->want = 3;
	return 0;
}

/* A block header just read, at the end of s->src. */
static int
zin_block_head(struct gck_zin *z, struct zslot *s)
{
	struct zfr	*f = &z->fr;
	unsigned char	*h = (unsigned char *)s->src + s->slen - 3;
	uint32_t	 bh = (uint32_t)h[0] | (uint32_t)h[1] << 8 |
			    (uint32_t)h[2] << 16;
	size_t		 bsz = bh >> 3;

	f->last = bh & 1;
	if (((bh >> 1) & 3) == 3 || bsz > ZIO_BLOCK_MAX)
		return gck_set_error(z->ctx, GCK_ECORRUPT, "corrupt image: "
		    "zstd frame %" PRIu64 " has a corrupt block", z->frames);
	f->want = ((bh >> 1) & 3) == 1 ? 1 : bsz;
	if (s->slen + f->want + 4 > f->bound)
		return gck_set_error(z->ctx, GCK_ECORRUPT, "corrupt image: "
		    "zstd frame %" PRIu64 " larger than its content could "
		    "need", z->frames);
	f->stage = 2;
	return GCK_OK;
}

/*
 * Reads on the frame being read in, into slot s, as far as the input
 * goes without waiting, unless block is set.  Its block headers are
 * walked to find where it ends.  Returns 1 when it is whole, 3 when
 * reading would wait, 2 for a frame to decode as a stream (its header
 * read), 0 at the end of the input, or -1.
 */
static int
zin_frame(struct gck_zin *z, struct zslot *s, int block)
{
	struct zfr	*f = &z->fr;
	int		 r;

	for (;;) {
		switch (f->stage) {
		case 0:
			if ((r = zin_frame_head(z, s, block)) != 0)
				return r == 4 ? 0 : r;
			break;
		case 1:			/* a block header */
			if ((r = zin_copy(z, s->src, &f->want, &s->slen,
			    block)) != 0)
				return r;
			if (zin_block_head(z, s) != GCK_OK)
				return -1;
			break;
		case 2:			/* its data */
			if ((r = zin_copy(z, s->src, &f->want, &s->slen,
			    block)) != 0)
				return r;
			f->stage = f->last ? 3 : 1;
			f->want = f->last ? 4 : 3;
			break;
		case 4:			/* the footer, read */
			r = zin_footer(z, block);
			return r == 4 ? 0 : r;
		default:		/* the checksum */
			if ((r = zin_copy(z, s->src, &f->want, &s->slen,
			    block)) != 0)
				return r;
			memset(f, 0, sizeof *f);
			z->frames++;
			return 1;
		}
	}
}

/*
 * A worker reads the frame of s itself, from where the index says (see
 * gck_zin_set_index()): it must be one whole frame, with its content
 * size and a checksum, as the reader's thread checks the frames it
 * reads.  Returns 0, or -1 with s->eno or s->bad set.
 */
static int
zin_read_slot(struct zslot *s)
{
	struct zhdr	h;
	size_t		got;
	ssize_t		n;

	for (got = 0; got < s->slen; got += (size_t)n)
		if ((n = pread(s->fd, s->src + got, s->slen - got,
		    (off_t)(s->at + got))) <= 0) {
			if (n == -1 && errno == EINTR) {
				n = 0;
				continue;
			}
			s->eno = n == 0 ? -1 : errno;
			return -1;
		}
	if (s->slen < 5 || zhdr_len((unsigned char *)s->src) > s->slen ||
	    zhdr_parse((unsigned char *)s->src, s->slen, &h) == -1 ||
	    memcmp(s->src, "\x28\xb5\x2f\xfd", 4) != 0 || !h.checksum ||
	    !h.has_size || h.size > ZIO_FRAME_MAX ||
	    ZSTD_findFrameCompressedSize(s->src, s->slen) != s->slen) {
		s->bad = 1;
		return -1;
	}
	s->dlen = (size_t)h.size;
	return 0;
}

/* A worker's decompression of one frame, checked against its header. */
static void
decompress_slot(struct zpool *p, struct zslot *s, void *arg)
{
	ZSTD_DCtx	**dp = arg;
	size_t		  e;

	if (s == NULL) {
		ZSTD_freeDCtx(*dp);
		return;
	}
	s->err = 0;
	s->lies = 0;
	if (*dp == NULL && (*dp = ZSTD_createDCtx()) == NULL) {
		s->err = (size_t)-1;
		return;
	}
	if (s->fd >= 0 && zin_read_slot(s) == -1)
		return;
	if (s->cap < s->dlen + 1) {
		free(s->dst);
		if ((s->dst = malloc(s->dlen + 1)) == NULL) {
			s->cap = 0;
			s->err = (size_t)-1;
			return;
		}
		s->cap = s->dlen + 1;
	}
	e = ZSTD_decompressDCtx(*dp, s->dst, s->dlen, s->src, s->slen);
	if (ZSTD_isError(e) &&
	    ZSTD_getErrorCode(e) == ZSTD_error_dstSize_tooSmall)
		s->lies = 1;
	else if (ZSTD_isError(e))
		s->err = e;
	else if (e != s->dlen)
		s->lies = 1;
	if (s->res.ref != NULL && p->discard != NULL)
		p->discard(p->examine_arg, &s->res);
	memset(&s->res, 0, sizeof s->res);
	if (s->err == 0 && !s->lies && p->examine != NULL)
		p->examine(p->examine_arg, s->dst, s->dlen, &s->res);
}

/* Hands out n bytes at p as the next of the tar stream. */
static ssize_t
zin_give(struct gck_zin *z, const char *p, size_t n, size_t max,
    const void **pp)
{
	size_t	o, a, b;

	if (n > max)
		n = max;
	*pp = p;
	z->piece = p + n;
	z->pleft -= n;
	/*
	 * Of a frame decoded whole that holds one entry, as a worker found
	 * (format 2), the checks of the tar layer look at the head and the
	 * end only: the headers, the map of the holes, the padding.  The
	 * rest need not be copied into the ring.
	 */
	if (z->given != NULL && z->given->res.ok && p >= z->given->dst &&
	    p < z->given->dst + z->given->dlen &&
	    z->given->dlen > 2 * ZIO_EDGE) {
		o = (size_t)(p - z->given->dst);
		a = o > ZIO_EDGE ? o : ZIO_EDGE;
		b = o + n < z->given->dlen - ZIO_EDGE ? o + n :
		    z->given->dlen - ZIO_EDGE;
		if (a < b) {
			zin_account(z, p, n, a - o, b - a);
			return (ssize_t)n;
		}
	}
	zin_account(z, p, n, 0, 0);
	return (ssize_t)n;
}

/* Decodes some of a frame too large to take whole, into obuf. */
static ssize_t
zin_stream(struct gck_zin *z, size_t max, const void **pp)
{
	ZSTD_inBuffer	 in;
	ZSTD_outBuffer	 out;
	ssize_t		 n;
	size_t		 ret;

	if (z->obuf == NULL && (z->obuf = malloc(ZIO_BUFSZ)) == NULL) {
		gck_set_error(z->ctx, GCK_ENOMEM, "out of memory");
		return -1;
	}
	/* no more than asked for: what lies beyond may be damaged */
	out.dst = z->obuf;
	out.size = max < ZIO_BUFSZ ? max : ZIO_BUFSZ;
	out.pos = 0;
	while (out.pos == 0 && z->streaming) {
		if (z->fr.hlen > 0) {
			/* first the header, read already */
			in.src = z->fr.hdr;
			in.size = z->fr.hlen;
			in.pos = 0;
			ret = ZSTD_decompressStream(z->dctx, &out, &in);
			memmove(z->fr.hdr, z->fr.hdr + in.pos, in.size -
			    in.pos);
			z->fr.hlen -= in.pos;
			if (z->fr.hlen == 0)
				memset(&z->fr, 0, sizeof z->fr);
		} else {
			if ((n = zin_fill(z)) == -1)
				return -1;
			if (n == 0) {
				zin_truncated(z);
				return -1;
			}
			in.src = z->buf;
			in.size = z->len;
			in.pos = z->pos;
			ret = ZSTD_decompressStream(z->dctx, &out, &in);
			z->pos = in.pos;
		}
		if (ZSTD_isError(ret)) {
			gck_set_error(z->ctx, GCK_ECORRUPT,
			    "corrupt image: zstd: %s", ZSTD_getErrorName(ret));
			return -1;
		}
		if (ret == 0)
			z->streaming = 0;
	}
	z->pleft = out.pos;
	return zin_give(z, z->obuf, out.pos, max, pp);
}

/* Lets go of the frame handed out last. */
static void
zin_release(struct gck_zin *z)
{
	if (z->given == NULL)
		return;
	z->inflight -= z->given->acct;
	/* its buffers, for the frames to come: few are ever in use */
	zio_unbuf(&z->spares, &z->given->src, &z->given->scap);
	zio_unbuf(&z->spares, &z->given->dst, &z->given->cap);
	pool_release_head(z->pool);
	z->given = NULL;
}

/*
 * The frames of the index, once the input is at the first of them: each
 * next one is given to a worker to read itself, and after the last the
 * input goes on from its end.  Returns 1 with s queued to be read, 0
 * when the reader's thread reads the next frame, or -1.
 */
static int
zin_ix_slot(struct gck_zin *z, struct zslot *s)
{
	uint64_t	pos, end;
	size_t		k;

	if (z->ix == z->nix || z->fr.stage != 0 || z->fr.hlen != 0 ||
	    z->fr.want != 0 || z->keep || z->spoolfd != -1)
		return 0;
	pos = z->inbytes - (z->len - z->pos);
	if (!z->ix_on) {
		/* The input must be at a frame of the index. */
		for (k = z->ix; k < z->nix && z->ix_at[k] < pos; k++)
			;
		if (k == z->nix || z->ix_at[k] != pos) {
			z->ix = z->nix;
			return 0;
		}
		z->ix = k;
		z->ix_on = 1;
	}
	if (zio_buf(&z->spares, &s->src, &s->scap, z->ix_zs[z->ix]) == -1) {
		gck_set_error(z->ctx, GCK_ENOMEM, "out of memory");
		return -1;
	}
	s->fd = z->fd;
	s->at = z->ix_at[z->ix];
	s->slen = z->ix_zs[z->ix];
	s->dlen = 0;
	s->eno = s->bad = 0;
	s->acct = ZIO_IX_EST;
	z->last_at = s->at;
	/* (read by a worker: counted as it is given out) */
	gck_meter_add(z->ctx, s->slen);
	z->frames++;
	if (++z->ix == z->nix) {
		/* The input goes on after the last of them. */
		end = s->at + s->slen;
		if (end >= pos && end - pos <= z->len - z->pos)
			z->pos += (size_t)(end - pos);
		else if (lseek(z->fd, (off_t)end, SEEK_SET) == -1) {
			gck_set_syserr(z->ctx, errno, "cannot read image: %s",
			    strerror(errno));
			return -1;
		} else {
			z->pos = z->len = 0;
			z->inbytes = end;
			z->eof = 0;
		}
		z->ix_on = 0;
	}
	return 1;
}

/*
 * From now on, where the input is at the first of the n frames at at[],
 * of zsize[] bytes each, back to back, each holding at most a chunk of
 * memory (a file's input, its trailer read): the workers read each of
 * them themselves (pread(2)), so that this thread need not.  Returns
 * GCK_OK or a code.
 */
int
gck_zin_set_index(struct gck_zin *z, const uint64_t *at,
    const uint64_t *zsize, size_t n)
{
	size_t	i;

	/* (not while the frames of an index given before are read) */
	if (z->ix_on)
		return GCK_OK;
	for (i = 0; i < n; i++)
		if (zsize[i] == 0 || zsize[i] > ZIO_FRAME_MAX ||
		    (i > 0 && at[i] != at[i - 1] + zsize[i - 1]))
			return GCK_OK;
	free(z->ix_at);
	free(z->ix_zs);
	z->ix_at = z->ix_zs = NULL;
	z->nix = z->ix = 0;
	if (n == 0)
		return GCK_OK;
	if ((z->ix_at = calloc(n, sizeof *at)) == NULL ||
	    (z->ix_zs = calloc(n, sizeof *zsize)) == NULL)
		return gck_set_error(z->ctx, GCK_ENOMEM, "out of memory");
	memcpy(z->ix_at, at, n * sizeof *at);
	memcpy(z->ix_zs, zsize, n * sizeof *zsize);
	z->nix = n;
	return GCK_OK;
}

/*
 * Reads frames ahead into the ring, for the workers, as far as the
 * window allows and the input has them at hand: it waits for input
 * only when there is nothing to hand out.  Returns 0, 1 when the input
 * has ended, 2 when the next frame must be decoded as a stream, or -1.
 */
static int
zin_ahead(struct gck_zin *z)
{
	uint64_t	 window = (uint64_t)ZIO_WINDOW * (unsigned)z->pool->nth;
	uint64_t	 slots = (uint64_t)ZIO_AHEAD * (unsigned)z->pool->nth;
	struct zslot	*s;
	int		 r;

	if (slots > ZIO_SLOTS)
		slots = ZIO_SLOTS;
	/*
	 * No more frames than the window's worth of whole chunks either:
	 * a worker's frame may bring a parent's chunk (image.c).
	 */
	while (z->pool->tail - z->pool->head < slots &&
	    (z->inflight == 0 || (z->ahead && z->inflight < window)) &&
	    z->lagerr == 0) {
		s = &z->pool->slot[z->pool->tail % ZIO_SLOTS];
		s->fd = -1;
		if ((r = zin_ix_slot(z, s)) == -1)
			return -1;
		if (r == 1) {
			z->inflight += s->acct;
			pool_queue(z->pool);
			continue;
		}
		r = zin_frame(z, &z->pool->slot[z->pool->tail % ZIO_SLOTS],
		    z->pool->tail == z->pool->head);
		if (r == -1 && z->pool->tail > z->pool->head) {
			/* The frames before it are handed out first. */
			z->lagerr = gck_error_code(z->ctx);
			if ((z->lagmsg = strdup(gck_error_string(z->ctx))) ==
			    NULL)
				return -1;
			return 0;
		}
		if (r == 3)
			return 0;
		if (r != 1)
			return r == 0 ? 1 : r;
		s = &z->pool->slot[z->pool->tail % ZIO_SLOTS];
		if (zio_buf(&z->spares, &s->dst, &s->cap, s->dlen + 1) == -1) {
			gck_set_error(z->ctx, GCK_ENOMEM, "out of memory");
			return -1;
		}
		s->acct = s->dlen;
		z->inflight += s->acct;
		pool_queue(z->pool);
	}
	return 0;
}

static int
zin_detect(struct gck_zin *z)
{
	static const unsigned char magic[4] = { 0x28, 0xb5, 0x2f, 0xfd };
	int	n;

	if (zin_need(z, 5) == -1)
		return -1;
	z->detected = 1;
	if ((z->ring = malloc(ZIO_RING)) == NULL) {
		gck_set_error(z->ctx, GCK_ENOMEM, "out of memory");
		return -1;
	}
	if (z->len - z->pos < 4 || memcmp(z->buf + z->pos, magic, 4) != 0)
		return 0;
	if ((z->dctx = ZSTD_createDCtx()) == NULL) {
		gck_set_error(z->ctx, GCK_ENOMEM, "out of memory");
		return -1;
	}
	n = z->threads > 0 ? z->threads : gck_zio_cpus();
	if ((z->pool = pool_new(n > 64 ? 64 : n, decompress_slot, 0,
	    z->examine, z->discard, z->examine_arg)) == NULL) {
		gck_set_error(z->ctx, GCK_ENOMEM, "cannot start threads");
		return -1;
	}
	return 0;
}

/*
 * Gets the next piece of the tar stream, at most max bytes, pointed to
 * in *pp: valid until the next call.  Returns its length, 0 at the end,
 * or -1 with the error set (truncation, corruption, I/O).
 */
ssize_t
gck_zin_next(struct gck_zin *z, const void **pp, size_t max)
{
	struct zslot	*s;
	ssize_t		 n;
	int		 r;

	if (!z->detected && zin_detect(z) == -1)
		return -1;
	if (z->pleft > 0)
		return zin_give(z, z->piece, z->pleft, max, pp);
	if (z->dctx == NULL) {
		if ((n = zin_fill(z)) <= 0)
			return n;
		z->pleft = (size_t)n;
		z->pos += (size_t)n;
		return zin_give(z, z->buf + z->pos - n, (size_t)n, max, pp);
	}
	if (z->streaming)
		return zin_stream(z, max, pp);
	zin_release(z);
	if ((r = zin_ahead(z)) == -1)
		return -1;
	if (z->pool->head == z->pool->tail && z->lagerr != 0) {
		gck_set_error(z->ctx, z->lagerr, "%s", z->lagmsg);
		return -1;
	}
	if (z->pool->head == z->pool->tail) {
		if (r == 1 && z->frames == 0)
			return zin_truncated(z), -1;
		if (r == 1)
			return 0;
		/* r == 2: a frame too large to take whole */
		z->frames++;
		z->streaming = 1;
		z->cur_at = z->last_at;
		z->cur_tar = z->total;
		ZSTD_DCtx_reset(z->dctx, ZSTD_reset_session_only);
		return zin_stream(z, max, pp);
	}
	s = pool_wait_head(z->pool);
	z->given = s;
	z->cur_at = s->at;
	z->cur_tar = z->total;
	if (s->err != 0) {
		gck_set_error(z->ctx, s->err == (size_t)-1 ? GCK_ENOMEM :
		    GCK_ECORRUPT, s->err == (size_t)-1 ? "out of memory" :
		    "corrupt image: zstd: %s", zerr(s->err));
		return -1;
	}
	if (s->fd >= 0 && s->eno != 0) {
		if (s->eno == -1)
			gck_set_error(z->ctx, GCK_ETRUNC, "image truncated at "
			    "offset %" PRIu64 ", inside a zstd frame", s->at);
		else
			gck_set_syserr(z->ctx, s->eno, "cannot read image: %s",
			    strerror(s->eno));
		return -1;
	}
	if (s->fd >= 0 && s->bad) {
		gck_set_error(z->ctx, GCK_ECORRUPT, "corrupt image: no whole "
		    "zstd frame of %zu bytes at offset %" PRIu64 ", as its "
		    "trailer says", s->slen, s->at);
		return -1;
	}
	if (s->lies) {
		gck_set_error(z->ctx, GCK_ECORRUPT, "corrupt image: a zstd "
		    "frame does not hold the %zu bytes its header says",
		    s->dlen);
		return -1;
	}
	z->pleft = s->dlen;
	if (z->recent[z->nrecent % 8].res.ref != NULL && z->discard != NULL)
		z->discard(z->examine_arg, &z->recent[z->nrecent % 8].res);
	z->recent[z->nrecent % 8].start = z->total;
	z->recent[z->nrecent % 8].res = s->res;
	s->res.ref = NULL;		/* the ring's now */
	z->nrecent++;
	if (s->dlen == 0)
		return gck_zin_next(z, pp, max);
	return zin_give(z, s->dst, s->dlen, max, pp);
}

/*
 * Reads up to len bytes of tar stream.  Returns the count, 0 at the end,
 * or -1 with the error set (truncation, corruption, I/O).
 */
ssize_t
gck_zin_read(struct gck_zin *z, void *p, size_t len)
{
	const void	*q;
	ssize_t		 n;

	if ((n = gck_zin_next(z, &q, len)) > 0)
		memcpy(p, q, (size_t)n);
	return n;
}

/* How many zstd frames the stream has had so far. */
uint64_t
gck_zin_frames(const struct gck_zin *z)
{
	return z->frames;
}

int
gck_zin_compressed(const struct gck_zin *z)
{
	return z->dctx != NULL;
}

uint64_t
gck_zin_total(const struct gck_zin *z)
{
	return z->total;
}

/* Returns how many zero bytes end what was read so far. */
uint64_t
gck_zin_zero_tail(const struct gck_zin *z)
{
	return z->total - z->nonzero_end;
}

/*
 * Where the frame handed out last starts in the input, and where its
 * output starts in the tar stream.
 */
void
gck_zin_cur_frame(const struct gck_zin *z, uint64_t *atp, uint64_t *tarp)
{
	*atp = z->cur_at;
	*tarp = z->cur_tar;
}

/* Whether the stream ended with a footer, and the frame it names. */
int
gck_zin_footer(const struct gck_zin *z, uint64_t *atp)
{
	if (z->has_footer)
		*atp = z->footer_at;
	return z->has_footer;
}

int
gck_zin_eof(const struct gck_zin *z)
{
	return z->eof && z->pos >= z->len;
}

void
gck_zin_free(struct gck_zin *z)
{
	unsigned	i;

	if (z == NULL)
		return;
	pool_free(z->pool);
	for (i = 0; i < 8; i++)
		if (z->recent[i].res.ref != NULL && z->discard != NULL)
			z->discard(z->examine_arg, &z->recent[i].res);
	ZSTD_freeDCtx(z->dctx);
	free(z->obuf);
	free(z->lagmsg);
	zio_spares_free(&z->spares);
	free(z->ring);
	free(z->raw);
	free(z->buf);
	free(z->ix_at);
	free(z->ix_zs);
	free(z);
}

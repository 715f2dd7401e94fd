/*
 * zio.c: the compression layer between the tar layer and the file
 * descriptor.  Output is one zstd frame with a content checksum, or the
 * plain tar stream; input detects which by the zstd magic number.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zstd.h>

#include "private.h"
#include "core/util.h"
#include "image/zio.h"

#define ZIO_BUFSZ	(1u << 17)
#define ZIO_RING	(1u << 20)	/* recent bytes kept for checks */
#define ZIO_KEEP_MAX	(64u << 20)	/* input kept for a spool, at most */

struct gck_zout {
	struct gck_ctx	*ctx;
	int		 fd;
	ZSTD_CCtx	*cctx;		/* NULL: no compression */
	char		*buf;
	size_t		 bufsz;
};

struct gck_zin {
	struct gck_ctx	*ctx;
	int		 fd;
	ZSTD_DCtx	*dctx;		/* NULL: no compression */
	char		*buf;		/* raw input */
	size_t		 bufsz, pos, len;
	int		 detected, eof, frame_done;
	size_t		 frame_left;	/* ZSTD_decompressStream's hint */
	uint64_t	 total;		/* bytes handed out */
	uint64_t	 nonzero_end;	/* offset after last non-zero byte */
	char		*ring;		/* the last ZIO_RING bytes handed out */
	char		*raw;		/* the input read, kept for a spool */
	size_t		 rawlen, rawcap;
	int		 keep;		/* keep what is read in raw */
	int		 spoolfd;	/* copy what is read there, or -1 */
};

int
gck_zout_new(struct gck_ctx *ctx, int fd, int level, struct gck_zout **zp)
{
	struct gck_zout	*z = NULL;
	size_t		 e;
	long		 ncpu;
	int		 r;

	*zp = NULL;
	if ((z = calloc(1, sizeof *z)) == NULL) {
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	z->ctx = ctx;
	z->fd = fd;
	if (level > 0) {
		z->bufsz = ZSTD_CStreamOutSize();
		if ((z->cctx = ZSTD_createCCtx()) == NULL ||
		    (z->buf = malloc(z->bufsz)) == NULL) {
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
		/*
		 * One worker per CPU compresses while this thread goes on
		 * reading; a libzstd built without threads compresses here.
		 */
		if ((ncpu = sysconf(_SC_NPROCESSORS_ONLN)) > 1)
			(void)ZSTD_CCtx_setParameter(z->cctx,
			    ZSTD_c_nbWorkers, ncpu > 64 ? 64 : (int)ncpu);
	}
	*zp = z;
	z = NULL;
	r = GCK_OK;
out:
	gck_zout_free(z);
	return r;
}

static int
zout_stream(struct gck_zout *z, const void *p, size_t len,
    ZSTD_EndDirective mode)
{
	ZSTD_inBuffer	in = { p, len, 0 };
	ZSTD_outBuffer	out;
	size_t		left;
	int		r;

	do {
		out.dst = z->buf;
		out.size = z->bufsz;
		out.pos = 0;
		left = ZSTD_compressStream2(z->cctx, &out, &in, mode);
		if (ZSTD_isError(left))
			return gck_set_error(z->ctx, GCK_EFORMAT, "zstd: %s",
			    ZSTD_getErrorName(left));
		if (out.pos > 0 && (r = gck_write_all(z->ctx, z->fd, z->buf,
		    out.pos, "image")) != GCK_OK)
			return r;
	} while (mode == ZSTD_e_continue ? in.pos < in.size : left != 0);
	return GCK_OK;
}

int
gck_zout_write(struct gck_zout *z, const void *p, size_t len)
{
	if (z->cctx == NULL)
		return gck_write_all(z->ctx, z->fd, p, len, "image");
	return zout_stream(z, p, len, ZSTD_e_continue);
}

/* Ends the frame and writes out everything.  Returns GCK_OK or a code. */
int
gck_zout_finish(struct gck_zout *z)
{
	if (z->cctx == NULL)
		return GCK_OK;
	return zout_stream(z, NULL, 0, ZSTD_e_end);
}

void
gck_zout_free(struct gck_zout *z)
{
	if (z == NULL)
		return;
	ZSTD_freeCCtx(z->cctx);
	free(z->buf);
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
	return n;
}

static void
zin_account(struct gck_zin *z, const char *p, size_t n)
{
	size_t	i, at, k;

	for (i = n; i > 0; i--)
		if (p[i - 1] != 0) {
			z->nonzero_end = z->total + i;
			break;
		}
	if (z->ring != NULL) {
		if (n > ZIO_RING) {
			p += n - ZIO_RING;
			z->total += n - ZIO_RING;
			n = ZIO_RING;
		}
		at = (size_t)(z->total % ZIO_RING);
		k = n < ZIO_RING - at ? n : ZIO_RING - at;
		memcpy(z->ring + at, p, k);
		memcpy(z->ring, p + k, n - k);
	}
	z->total += n;
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
	if (to > z->total || from > to || z->total - from > ZIO_RING)
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
	    z->total - from > ZIO_RING)
		return -1;
	for (i = 0; i < len; i++)
		((char *)buf)[i] = z->ring[(from + i) % ZIO_RING];
	return 0;
}

/*
 * Reads up to len bytes of tar stream.  Returns the count, 0 at the end,
 * or -1 with the error set (truncation, corruption, I/O).
 */
ssize_t
gck_zin_read(struct gck_zin *z, void *p, size_t len)
{
	static const unsigned char magic[4] = { 0x28, 0xb5, 0x2f, 0xfd };
	ZSTD_inBuffer	 in;
	ZSTD_outBuffer	 out;
	ssize_t		 n;
	size_t		 ret;

	if (!z->detected) {
		/* The magic may straddle reads on a pipe: get 4 bytes. */
		while (z->len - z->pos < 4 && !z->eof) {
			if (z->pos > 0) {
				memmove(z->buf, z->buf + z->pos,
				    z->len - z->pos);
				z->len -= z->pos;
				z->pos = 0;
			}
			n = read(z->fd, z->buf + z->len, z->bufsz - z->len);
			if (n == -1 && errno == EINTR) {
				if (gck_check_interrupt(z->ctx) != GCK_OK)
					return -1;
				continue;
			}
			if (n == -1) {
				gck_set_syserr(z->ctx, errno,
				    "cannot read image: %s", strerror(errno));
				return -1;
			}
			if (n == 0)
				z->eof = 1;
			if (zin_raw(z, z->buf + z->len, (size_t)n) == -1)
				return -1;
			z->len += (size_t)n;
		}
		z->detected = 1;
		if (z->len - z->pos >= 4 && memcmp(z->buf + z->pos, magic,
		    4) == 0 && (z->dctx = ZSTD_createDCtx()) == NULL) {
			gck_set_error(z->ctx, GCK_ENOMEM, "out of memory");
			return -1;
		}
		/* The frame's checksum must cover every byte (flag 0x04). */
		if (z->dctx != NULL && z->len - z->pos >= 5 &&
		    !(z->buf[z->pos + 4] & 0x04)) {
			gck_set_error(z->ctx, GCK_ECORRUPT, "corrupt image: "
			    "zstd frame without a content checksum");
			return -1;
		}
		if ((z->ring = malloc(ZIO_RING)) == NULL) {
			gck_set_error(z->ctx, GCK_ENOMEM, "out of memory");
			return -1;
		}
	}
	if (z->dctx == NULL) {
		if ((n = zin_fill(z)) <= 0)
			return n;
		if ((size_t)n > len)
			n = (ssize_t)len;
		memcpy(p, z->buf + z->pos, (size_t)n);
		z->pos += (size_t)n;
		zin_account(z, p, (size_t)n);
		return n;
	}
	out.dst = p;
	out.size = len;
	out.pos = 0;
	while (out.pos == 0) {
		if ((n = zin_fill(z)) == -1)
			return -1;
		if (n == 0) {
			if (!z->frame_done) {
				gck_set_error(z->ctx, GCK_ETRUNC,
				    "image truncated: compressed stream "
				    "ends early");
				return -1;
			}
			return 0;
		}
		if (z->frame_done) {
			gck_set_error(z->ctx, GCK_EFORMAT,
			    "corrupt image: data after the end of the "
			    "compressed stream");
			return -1;
		}
		in.src = z->buf;
		in.size = z->len;
		in.pos = z->pos;
		ret = ZSTD_decompressStream(z->dctx, &out, &in);
		z->pos = in.pos;
		if (ZSTD_isError(ret)) {
			gck_set_error(z->ctx, GCK_ECORRUPT,
			    "corrupt image: zstd: %s", ZSTD_getErrorName(ret));
			return -1;
		}
		if (ret == 0)
			z->frame_done = 1;
	}
	zin_account(z, p, out.pos);
	return (ssize_t)out.pos;
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

int
gck_zin_eof(const struct gck_zin *z)
{
	return z->eof && z->pos >= z->len;
}

void
gck_zin_free(struct gck_zin *z)
{
	if (z == NULL)
		return;
	ZSTD_freeDCtx(z->dctx);
	free(z->ring);
	free(z->raw);
	free(z->buf);
	free(z);
}

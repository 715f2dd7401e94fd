/*
 * serve.c: the serving half of the image streamer (streamer.c): criu
 * restore --stream reads the image's files from here.
 *
 * CRIU asks for files in its own order, and for each waits to be told
 * whether the image has it before it passes the pipe to read it from.
 * Those already read are answered from memory; the rest are fed from the
 * image as it arrives.
 */
#include "config.h"

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "private.h"
#include "core/util.h"
#include "criu/criu.h"
#include "criu/fill.h"
#include "criu/streamer.h"
#include "criu/streamer_private.h"
#include "image/image.h"
#include "image/manifest.h"
#include "criu/criu-images.pb-c.h"

#define SOCK_SERVE	"streamer-serve.sock"
#define PIPE_SIZE	(1 << 20)
#define SPILL_MS	3000		/* wait for a request before keeping */

/* Zeros lent to criu's pipes for the holes of an image: never written. */
static const char	zpages[1u << 16] __attribute__((aligned(4096)));

struct sreq {
	char		 name[GCK_SNAME];
	int		 fd;		/* to criu; -1 once closed */
	const char	*data;		/* kept: what to write */
	size_t		 len, off;
	int		 stream;	/* to come from the image */
};

struct gck_serve {
	struct gck_ctx		*ctx;
	struct gck_sock		 sock;		/* criu's */
	struct gck_sfile	*kept;		/* files read ahead */
	size_t			 nkept, capkept;
	uint64_t		 keptbytes;
	const struct gck_manifest *m;
	struct sreq		*reqs;
	size_t			 nreqs, capreqs;
	const char		*cp;		/* the piece being written: */
	size_t			 clen, coff;	/* data, or */
	int			 chole;		/* zeros */
	int64_t			 fsize;		/* the file's size */
	uint64_t		 fed;		/* bytes of it read */
	char			 held;		/* its last byte, held back */
	int			 hheld;		/* held, and to be written */
	int			 advanced;	/* the file is all read */
	char			 next[GCK_SNAME];	/* and then the image is at */
	int			 next_eoi;
	int			 cur;		/* request being fed, or -1 */
	char			 file[GCK_SNAME];	/* the image is at */
	int			 eoi;		/* the image is read */
	struct timespec		 since;		/* the file waits for criu */
	int			 gone;		/* criu has exited */
	int			 fill;		/* criu gets what is kept only */
};

static struct gck_sfile *serve_kept(struct gck_serve *, const char *);
static int	serve_keep(struct gck_serve *, struct gck_reader *,
		    const char *);
static int	serve_skip(struct gck_serve *, struct gck_reader *);
static int	serve_advance(struct gck_serve *, struct gck_reader *);
static int	serve_reply(struct gck_serve *, const char *, int, int *);
static int	serve_request(struct gck_serve *, const char *, int);
static int	find_req(struct gck_serve *, const char *);
static int	pending_stream(const struct gck_serve *);
static void	serve_drop(struct gck_serve *, struct sreq *);
static int	serve_write(struct gck_serve *, struct sreq *, const char *,
		    size_t, size_t *);
static int	serve_next_piece(struct gck_serve *, struct gck_reader *);
static int	serve_unasked(struct gck_serve *, struct gck_reader *);
static int	serve_step(struct gck_serve *, struct gck_reader *);
static size_t	serve_watch(struct gck_serve *, int *);
static int	serve_criu_gone(struct gck_serve *, struct gck_reader *);
static int	serve_feed(struct gck_serve *, size_t, int);
static int	serve_ask(struct gck_serve *, struct gck_reader *, int);
static void	serve_close(struct gck_serve *);

int
gck_serve_open(struct gck_ctx *ctx, const char *imgdir,
    const struct gck_manifest *m, struct gck_serve **sp)
{
	struct gck_serve	*s;

	*sp = NULL;
	if ((s = calloc(1, sizeof *s)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	s->ctx = ctx;
	s->m = m;
	s->cur = -1;
	if (gck_sock_open(&s->sock, ctx, imgdir, SOCK_SERVE,
	    "stats-restore") != GCK_OK) {
		gck_serve_free(s);
		return ctx->code;
	}
	*sp = s;
	return GCK_OK;
}

void
gck_serve_free(struct gck_serve *s)
{
	size_t	i;

	if (s == NULL)
		return;
	gck_sock_free(&s->sock);
	for (i = 0; i < s->nreqs; i++)
		if (s->reqs[i].fd != -1)
			close(s->reqs[i].fd);
	for (i = 0; i < s->nkept; i++)
		gck_sfile_clear(&s->kept[i]);
	free(s->kept);
	free(s->reqs);
	free(s);
}
static struct gck_sfile *
serve_kept(struct gck_serve *s, const char *name)
{
	size_t	i;

	for (i = 0; i < s->nkept; i++)
		if (strcmp(s->kept[i].name, name) == 0)
			return &s->kept[i];
	return NULL;
}

/*
 * The file name of the image as held in memory, read ahead to be served
 * from there (gck_serve_preload()), or NULL.
 */
const struct gck_sfile *
gck_serve_find(const struct gck_serve *s, const char *name)
{
	size_t	i;

	for (i = 0; i < s->nkept; i++)
		if (strcmp(s->kept[i].name, name) == 0)
			return &s->kept[i];
	return NULL;
}

/*
 * Reads the file the reader is at into memory, to be served from there.
 */
static int
serve_keep(struct gck_serve *s, struct gck_reader *rd, const char *name)
{
	struct gck_sfile	*f;
	ssize_t			 n;
	int			 r;

	if (gck_grow(s->ctx, &s->kept, &s->capkept, s->nkept,
	    sizeof *s->kept) != GCK_OK)
		return s->ctx->code;
	f = &s->kept[s->nkept++];
	memset(f, 0, sizeof *f);
	f->fd = -1;
	snprintf(f->name, sizeof f->name, "%s", name);
	for (;;) {
		if ((r = gck_sfile_room(s->ctx, f, &s->keptbytes)) == 1)
			return gck_set_error(s->ctx, GCK_ENOMEM, "cannot "
			    "restore: more than %u MiB of the image would "
			    "have to be held in memory ('%s')",
			    GCK_KEEP_MAX >> 20, name);
		if (r != GCK_OK)
			return r;
		if ((n = gck_reader_file_read(rd, f->data + f->len,
		    f->cap - f->len)) < 0)
			return s->ctx->code;
		if (n == 0)
			break;
		f->len += (size_t)n;
	}
	gck_log(s->ctx, 2, "read %s (%zu bytes)", name, f->len);
	return GCK_OK;
}

/* Reads the rest of the current file only to check it. */
static int
serve_skip(struct gck_serve *s, struct gck_reader *rd)
{
	const void	*p;
	ssize_t		 n;
	int		 hole;

	while ((n = gck_reader_file_chunk(rd, &p, SIZE_MAX, &hole)) > 0)
		;
	return n < 0 ? s->ctx->code : GCK_OK;
}

/* Moves the image on to its next file, or its end. */
static int
serve_advance(struct gck_serve *s, struct gck_reader *rd)
{
	uint64_t	size;
	int		r;

	if ((r = gck_reader_file(rd, s->file, sizeof s->file, &size)) < 0)
		return r;
	s->eoi = r == 1;
	return GCK_OK;
}

/*
 * Reads ahead, into memory, every file up to the first one of a
 * process's memory pages, which waits for criu to ask for it.
 */
int
gck_serve_preload(struct gck_serve *s, struct gck_reader *rd)
{
	int	r;

	for (;;) {
		if ((r = serve_advance(s, rd)) != GCK_OK || s->eoi ||
		    gck_manifest_file_memory(s->m, s->file))
			return r;
		if ((r = serve_keep(s, rd, s->file)) != GCK_OK)
			return r;
	}
}

/*
 * After gck_serve_preload(), from an image file: plans the restore of
 * the processes' memory in place (fill.c), from the image's own trailer
 * self and its parents (or NULL), and where anything is to be written
 * in place, keeps the pagemaps and pages files the plan gives criu in
 * place of the image's.  Then criu is served only until it exits, and
 * the rest of the image is for the caller to read.  Returns GCK_OK with
 * *fp (NULL where all goes through criu), or a code.
 */
int
gck_serve_fill(struct gck_serve *s, struct gck_parents *self,
    struct gck_parents *parents, struct gck_fill **fp)
{
	struct gck_sfile	*f;
	struct gck_fill		*fill;
	const char		*pmname, *pgname;
	char			*pm, *pg;
	size_t			 pmlen, pglen, i;
	int			 r;

	*fp = NULL;
	if ((r = gck_fill_plan(s->ctx, s->m, self, parents, s->kept, s->nkept,
	    &fill)) != GCK_OK || fill == NULL)
		return r;
	for (i = 0; i < gck_fill_nfiles(fill); i++) {
		gck_fill_file(fill, i, &pmname, &pm, &pmlen, &pgname, &pg,
		    &pglen);
		/* Grown first, as f points into s->kept. */
		f = NULL;
		if ((r = gck_grow(s->ctx, &s->kept, &s->capkept, s->nkept,
		    sizeof *s->kept)) == GCK_OK && ((f = serve_kept(s,
		    pmname)) == NULL || serve_kept(s, pgname) != NULL))
			r = gck_set_error(s->ctx, GCK_ECRIU, "cannot restore "
			    "'%s' %s '%s'", pgname, f == NULL ? "without" :
			    "as well as", pmname);
		if (r != GCK_OK) {
			free(pm);
			free(pg);
			gck_fill_free(fill);
			return r;
		}
		free(f->data);
		f->data = pm;
		f->len = f->cap = pmlen;
		f = &s->kept[s->nkept++];
		memset(f, 0, sizeof *f);
		f->fd = -1;
		snprintf(f->name, sizeof f->name, "%s", pgname);
		f->data = pg;
		f->len = f->cap = pglen;
		s->keptbytes += pglen;
	}
	s->fill = 1;
	*fp = fill;
	return GCK_OK;
}

static int
serve_reply(struct gck_serve *s, const char *name, int exists, int *fdp)
{
	ImgStreamerReplyEntry	 rep = IMG_STREAMER_REPLY_ENTRY__INIT;
	unsigned char		 buf[16];
	uint32_t		 len;
	int			 r;

	*fdp = -1;
	rep.exists = exists;
	len = (uint32_t)img_streamer_reply_entry__get_packed_size(&rep);
	memcpy(buf, &len, sizeof len);
	img_streamer_reply_entry__pack(&rep, buf + sizeof len);
	if (send(s->sock.cfd, buf, sizeof len + len, MSG_NOSIGNAL) !=
	    (ssize_t)(sizeof len + len))
		return gck_set_syserr(s->ctx, errno, "cannot answer criu "
		    "about '%s': %s", name, strerror(errno));
	if (!exists)
		return GCK_OK;
	if ((r = gck_sock_recv_pipe(s->ctx, s->sock.cfd, name, fdp)) !=
	    GCK_OK)
		return r;
	fcntl(*fdp, F_SETPIPE_SZ, PIPE_SIZE);
	return GCK_OK;
}

static int
serve_request(struct gck_serve *s, const char *name, int streamed_past)
{
	struct gck_sfile	*f;
	struct sreq		*q;
	int			 r, fd, stream = 0, exists;

	if (strlen(name) >= GCK_SNAME)
		return serve_reply(s, name, 0, &fd);
	f = serve_kept(s, name);
	if (f == NULL && !streamed_past && gck_manifest_has_file(s->m, name))
		stream = 1;
	exists = f != NULL || stream;
	gck_log(s->ctx, 2, "criu reads %s%s", name, exists ? "" :
	    " (not in the image)");
	if ((r = serve_reply(s, name, exists, &fd)) != GCK_OK || !exists)
		return r;
	if (gck_grow(s->ctx, &s->reqs, &s->capreqs, s->nreqs,
	    sizeof *s->reqs) != GCK_OK) {
		close(fd);
		return s->ctx->code;
	}
	q = &s->reqs[s->nreqs++];
	memset(q, 0, sizeof *q);
	memcpy(q->name, name, strlen(name) + 1);
	q->fd = fd;
	q->stream = stream;
	if (f != NULL) {
		q->data = f->data;
		q->len = f->len;
	}
	return GCK_OK;
}

static int
find_req(struct gck_serve *s, const char *name)
{
	size_t	i;

	for (i = 0; i < s->nreqs; i++)
		if (s->reqs[i].stream && strcmp(s->reqs[i].name, name) == 0)
			return (int)i;
	return -1;
}

static int
pending_stream(const struct gck_serve *s)
{
	size_t	i;

	for (i = 0; i < s->nreqs; i++)
		if (s->reqs[i].stream && s->reqs[i].fd != -1)
			return 1;
	return 0;
}

/*
 * criu closed the pipe of a file it was answered from memory before its
 * end: it reads some files by the size fstat gives, which a pipe's is
 * not (nftables-ID.img, read as empty).  What it read was its choice,
 * and a restore it cannot finish so fails with criu's own words; the
 * pipe is closed here too.  A file fed from the image as it arrives is
 * no such case: its end is the image's proof of being whole.
 */
static void
serve_drop(struct gck_serve *s, struct sreq *q)
{
	gck_log(s->ctx, 1, "criu closed '%s' after %zu of its %zu bytes",
	    q->name, q->off, q->len);
	close(q->fd);
	q->fd = -1;
	q->off = q->len;
}

/*
 * Writes what q's pipe takes of buf, up to len (from *offp on), or, if
 * buf is NULL, of zeros: pages of zeros lent to the pipe, not copied.
 * Returns GCK_OK or a code.
 */
static int
serve_write(struct gck_serve *s, struct sreq *q, const char *buf,
    size_t len, size_t *offp)
{
	struct iovec	iov;
	ssize_t		n;

	while (*offp < len) {
		if (buf != NULL)
			n = write(q->fd, buf + *offp, len - *offp);
		else {
			iov.iov_base = (void *)zpages;
			iov.iov_len = len - *offp < sizeof zpages ?
			    len - *offp : sizeof zpages;
			n = vmsplice(q->fd, &iov, 1, SPLICE_F_NONBLOCK);
			if (n == -1 && errno == EINVAL)
				n = write(q->fd, zpages, iov.iov_len);
		}
		if (n == -1) {
			if (errno == EAGAIN)
				return GCK_OK;
			if (errno == EINTR)
				continue;
			if (errno == EPIPE && !q->stream) {
				serve_drop(s, q);
				return GCK_OK;
			}
			if (errno == EPIPE)
				return gck_set_error(s->ctx, GCK_ECRIU, "criu "
				    "stopped reading '%s'", q->name);
			return gck_set_syserr(s->ctx, errno, "cannot feed "
			    "'%s' to criu: %s", q->name, strerror(errno));
		}
		*offp += (size_t)n;
	}
	return GCK_OK;
}

/*
 * Gets the next piece of the file being fed to criu: data as the reader
 * holds it, or zeros.  The file's last byte is held back until the rest
 * of the image up to the next file (or its end, the trailer checked) has
 * been read: criu cannot finish a restore that the image does not prove
 * whole.
 */
static int
serve_next_piece(struct gck_serve *s, struct gck_reader *rd)
{
	struct sreq	*q = &s->reqs[s->cur];
	const void	*p;
	uint64_t	 size, tail;
	ssize_t		 n;
	int		 r, hole;

	s->cp = NULL;
	s->clen = s->coff = 0;
	s->chole = 0;
	if (s->advanced) {
		if (s->hheld) {
			/* the image is whole so far: the last byte */
			s->hheld = 0;
			s->cp = &s->held;
			s->clen = 1;
			return GCK_OK;
		}
		close(q->fd);
		q->fd = -1;
		s->cur = -1;
		s->advanced = 0;
		s->fed = 0;
		memcpy(s->file, s->next, sizeof s->file);
		s->eoi = s->next_eoi;
		return GCK_OK;
	}
	if (s->fed == 0)
		s->fsize = gck_manifest_file_size(s->m, q->name);
	if ((n = gck_reader_file_chunk(rd, &p, GCK_SCHUNK, &hole)) < 0)
		return s->ctx->code;
	if (s->fsize < 0 || s->fed + (uint64_t)n > (uint64_t)s->fsize ||
	    (n == 0 && s->fed != (uint64_t)s->fsize))
		return gck_set_error(s->ctx, GCK_ECORRUPT, "corrupt image: "
		    "'%s' is not the size the manifest gives", q->name);
	if (n == 0) {
		if ((r = gck_reader_file(rd, s->next, sizeof s->next,
		    &size)) < 0)
			return r;
		s->next_eoi = r == 1;
		s->advanced = 1;
		return GCK_OK;
	}
	tail = (uint64_t)s->fsize - 1;	/* where the last byte is */
	s->cp = p;
	s->chole = hole;
	s->clen = (size_t)n;
	if (s->fed + (uint64_t)n > tail) {
		s->clen = (size_t)(tail - s->fed);
		s->held = hole ? 0 : ((const char *)p)[s->clen];
		s->hheld = 1;
	}
	s->fed += (uint64_t)n;
	return GCK_OK;
}

/*
 * The file the image is at, which criu has not asked for: with no one
 * left to ask, only checked; kept in memory if small, or if criu, not
 * reading it, waits for later ones.  Returns 1 when the image moved
 * on, 0 when it waits for criu, or a code.
 */
static int
serve_unasked(struct gck_serve *s, struct gck_reader *rd)
{
	struct timespec	now;
	long		waited;
	int		r;

	/*
	 * Memory that criu does not get waits for criu to be done, and so
	 * does device memory, which is never criu's: it is for the caller
	 * once the process is there.
	 */
	if ((s->fill && gck_manifest_file_memory(s->m, s->file)) ||
	    gck_manifest_file_cuda(s->m, s->file))
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (s->since.tv_sec == 0)
		s->since = now;
	waited = (now.tv_sec - s->since.tv_sec) * 1000 +
	    (now.tv_nsec - s->since.tv_nsec) / 1000000;
	if (s->gone || s->sock.done) {
		/* No one will ask: the rest is only checked. */
		if ((r = serve_skip(s, rd)) != GCK_OK)
			return r;
	} else if (!gck_manifest_file_memory(s->m, s->file) ||
	    (waited >= SPILL_MS && pending_stream(s))) {
		/*
		 * A small file criu has not asked for yet, or pages criu is
		 * not reading while it waits for later ones: kept in memory.
		 */
		if (gck_manifest_file_memory(s->m, s->file))
			gck_log(s->ctx, 1, "holding %s in memory: criu asks "
			    "for other files first", s->file);
		if ((r = serve_keep(s, rd, s->file)) != GCK_OK)
			return r;
	} else
		return 0;
	if ((r = serve_advance(s, rd)) != GCK_OK)
		return r;
	s->since.tv_sec = 0;
	return 1;
}

/*
 * Moves the image on where that needs no waiting on criu: finds who asked
 * for the file it is at, or what becomes of it, or takes the next piece
 * of it.  Returns 1 when it did (the loop goes round again), 0 when all
 * waits for criu, or a code.
 */
static int
serve_step(struct gck_serve *s, struct gck_reader *rd)
{
	int	r;

	if (s->eoi)
		return 0;
	if (s->cur == -1 && (s->cur = find_req(s, s->file)) == -1)
		return serve_unasked(s, rd);
	if (s->clen != s->coff)
		return 0;
	if ((r = serve_next_piece(s, rd)) != GCK_OK)
		return r;
	return 1;
}

/*
 * Fills the poll set: criu's socket (*sockp its slot, or -1), and the
 * pipes that have something to take now.  Pipes of kept files all
 * written are closed.  Returns how many slots.
 */
static size_t
serve_watch(struct gck_serve *s, int *sockp)
{
	struct sreq	*q;
	size_t		 i, np;

	np = gck_sock_watch(&s->sock, 0, sockp);
	for (i = 0; i < s->nreqs; i++) {
		q = &s->reqs[i];
		if (q->fd == -1)
			continue;
		if (!q->stream && q->off == q->len) {
			close(q->fd);
			q->fd = -1;
			continue;
		}
		if (q->stream && ((int)i != s->cur || s->clen == s->coff))
			continue;
		np = gck_sock_add(&s->sock, np, q->fd, POLLOUT, i);
	}
	return np;
}

/*
 * criu has exited, and did not fail: its pipes are closed, and the file
 * being fed to it is dropped, the image moved past it.
 */
static int
serve_criu_gone(struct gck_serve *s, struct gck_reader *rd)
{
	size_t	i;
	int	r;

	s->gone = 1;
	for (i = 0; i < s->nreqs; i++)
		if (s->reqs[i].fd != -1) {
			close(s->reqs[i].fd);
			s->reqs[i].fd = -1;
		}
	if (s->cur == -1)
		return GCK_OK;
	s->cur = -1;
	s->clen = s->coff = 0;
	s->fed = 0;
	s->hheld = 0;
	if (s->advanced) {
		s->advanced = 0;
		memcpy(s->file, s->next, sizeof s->file);
		s->eoi = s->next_eoi;
		return GCK_OK;
	}
	if ((r = serve_skip(s, rd)) != GCK_OK)
		return r;
	return serve_advance(s, rd);
}

/* Writes to the pipes poll found ready (all slots but sockslot). */
static int
serve_feed(struct gck_serve *s, size_t np, int sockslot)
{
	struct pollfd	*pfd = s->sock.pfd;
	struct sreq	*q;
	size_t		 i;
	int		 r;

	for (i = 0; i < np; i++) {
		if ((int)i == sockslot || pfd[i].revents == 0)
			continue;
		q = &s->reqs[s->sock.idx[i]];
		if ((pfd[i].revents & (POLLERR | POLLHUP)) && !q->stream) {
			serve_drop(s, q);
			continue;
		}
		if (pfd[i].revents & (POLLERR | POLLHUP))
			return gck_set_error(s->ctx, GCK_ECRIU, "criu "
			    "stopped reading '%s'", q->name);
		if (q->stream)
			r = serve_write(s, q, s->chole ? NULL : s->cp, s->clen,
			    &s->coff);
		else
			r = serve_write(s, q, q->data, q->len, &q->off);
		if (r != GCK_OK)
			return r;
	}
	return GCK_OK;
}

/* Takes what criu's socket brings, if poll found it ready: a request. */
static int
serve_ask(struct gck_serve *s, struct gck_reader *rd, int sockslot)
{
	char	name[GCK_SREQ_MAX];
	int	r;

	if (sockslot == -1 || s->sock.pfd[sockslot].revents == 0)
		return GCK_OK;
	if ((r = gck_sock_take(&s->sock, name, sizeof name, NULL)) != 1)
		return r;
	return serve_request(s, name, gck_reader_file_seen(rd, name) &&
	    strcmp(name, s->file) != 0);
}

/* Closes criu's socket and pipes: criu, if still there, fails. */
static void
serve_close(struct gck_serve *s)
{
	size_t	i;

	gck_sock_close(&s->sock);
	for (i = 0; i < s->nreqs; i++)
		if (s->reqs[i].fd != -1) {
			close(s->reqs[i].fd);
			s->reqs[i].fd = -1;
		}
}

/*
 * Serves criu (already started with --stream) until it exits, feeding
 * it the rest of the image as it arrives, and reads the image to its
 * end, so that the reader has checked the trailer.  Returns GCK_OK or a
 * code; criu's own status is for the caller.
 */
int
gck_serve_run(struct gck_serve *s, struct gck_reader *rd,
    struct gck_criu_run *criu)
{
	size_t	np;
	int	r, n, failed, sockslot;

	s->since.tv_sec = s->since.tv_nsec = 0;
	s->gone = 0;
	for (;;) {
		if ((r = gck_check_interrupt(s->ctx)) != GCK_OK ||
		    (r = serve_step(s, rd)) < 0)
			goto out;
		if (r == 1)
			continue;
		if (s->gone && (s->eoi || gck_manifest_file_cuda(s->m,
		    s->file)))
			break;
		if ((r = gck_sock_room(&s->sock, s->nreqs + 1)) != GCK_OK)
			goto out;
		np = serve_watch(s, &sockslot);
		if ((r = gck_sock_poll(&s->sock, np, 50, &n)) != GCK_OK)
			goto out;
		if (n > 0) {
			if ((r = serve_feed(s, np, sockslot)) != GCK_OK ||
			    (r = serve_ask(s, rd, sockslot)) != GCK_OK)
				goto out;
		} else if (!s->gone && gck_criu_ended(criu, &failed)) {
			/*
			 * A failed criu is reported at once: the source,
			 * still writing, learns of it too.
			 */
			if (failed)
				break;
			if ((r = serve_criu_gone(s, rd)) != GCK_OK)
				goto out;
			/* The chunks criu did not get are written now. */
			if (s->fill)
				break;
		}
	}
	r = GCK_OK;
out:
	serve_close(s);
	return r;
}

/*
 * The file the image is at once criu is served (the reader has given
 * its name), or NULL at the image's end.
 */
const char *
gck_serve_file(const struct gck_serve *s)
{
	return s->eoi ? NULL : s->file;
}

/* While criu restores: serves it the image as the reader yields it. */
int
gck_serve_during(void *arg, struct gck_criu_run *criu)
{
	struct gck_serve_job	*job = arg;

	return gck_serve_run(job->s, job->rd, criu);
}

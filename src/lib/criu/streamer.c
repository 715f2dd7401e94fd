/*
 * streamer.c: the image streamer socket of criu --stream.
 *
 * With --stream, CRIU opens no image file itself.  It connects to a unix
 * socket in the images directory (streamer-capture.sock when it dumps,
 * streamer-serve.sock when it restores) and, for every file, sends its
 * name (a length-prefixed img_streamer_request_entry) followed by one end
 * of a pipe (SCM_RIGHTS): it writes the file into that pipe, or reads it
 * from there.  When restoring it first waits for an
 * img_streamer_reply_entry saying whether the file exists.
 *
 * Capture: every file is read as CRIU writes it.  A task's memory pages
 * (pages-N.img, announced by the pagemap-PID.img opened just before it)
 * are only counted, and sampled: of every 64 KiB, the first page is
 * read and digested, part by part, the rest goes to /dev/null without a
 * copy.  The same bytes are read again, later, from the processes
 * themselves (pagemap.c), in the order a restore wants them, and the
 * samples must match.  Everything else is small and kept.
 *
 * The re-reading happens while criu still holds the tree, in its
 * post-dump action script: gpuckpt-hook, run by criu with
 * GCK_CRIU_HOOK naming a socket (gck_dump_hook()).  It asks gpuckpt to
 * go on and waits; criu lets go of the tree only when the image is
 * written, and resumes it if the answer is no or never comes.
 *
 * Serve: CRIU asks for files in its own order.  Those already read are
 * answered from memory; the rest are fed from the image as it arrives.
 */
#include "config.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "private.h"
#include "core/util.h"
#include "criu/criu.h"
#include "criu/streamer.h"
#include "image/image.h"
#include "image/manifest.h"
#include "image/names.h"
#include "criu/criu-images.pb-c.h"

#define SOCK_CAPTURE	"streamer-capture.sock"
#define SOCK_SERVE	"streamer-serve.sock"
#define SOCK_HOOK	"hook.sock"
#define HOOK_ENV	"GCK_CRIU_HOOK"
#define HOOK_ASK	"post-dump"
#define REQ_MAX		4096		/* longest request message */
#define CHUNK		(1u << 20)
#define PIPE_SIZE	(1 << 20)
#define SPILL_MS	3000		/* wait for a request before keeping */

/* Zeros lent to criu's pipes for the holes of an image: never written. */
static const char	zpages[1u << 16] __attribute__((aligned(4096)));

struct gck_capture {
	struct gck_ctx		*ctx;
	int			 lfd, cfd;
	int			 hlfd, hfd;	/* the post-dump hook */
	int			 hooked;	/* it has asked */
	char			 path[PATH_MAX], hpath[PATH_MAX];
	struct gck_sfile	*files;
	size_t			 nfiles, cap;
	size_t			 part_size;
	uint64_t		 kept;
	pid_t			 last_pagemap;	/* 0: none just opened */
	char			*buf;
	int			 devnull;
};

static int	listen_at(struct gck_ctx *, const char *, const char *, char *,
		    size_t);
static int	recv_request(struct gck_ctx *, int, char *, size_t, int *);
static int	recv_pipe(struct gck_ctx *, int, const char *, int *);
static int	accept_criu(struct gck_ctx *, int *, int *);
static int	poll_room(struct gck_ctx *, struct pollfd **, size_t **,
		    size_t *, size_t);
static int	pagemap_pid(const char *, pid_t *);

/*
 * criu also writes its timing statistics (stats-dump, stats-restore)
 * into the images directory: they are no part of the image, and go to
 * /dev/null.
 */
static void
no_stats(const char *dir, const char *name)
{
	char	path[PATH_MAX];

	if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) <
	    sizeof path)
		(void)symlink("/dev/null", path);
}

/* Listens on dir/name; returns the socket or -1 with the error set. */
static int
listen_at(struct gck_ctx *ctx, const char *dir, const char *name, char *path,
    size_t pathlen)
{
	struct sockaddr_un	sun;
	int			fd;

	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	if ((size_t)snprintf(sun.sun_path, sizeof sun.sun_path, "%s/%s", dir,
	    name) >= sizeof sun.sun_path) {
		gck_set_error(ctx, GCK_EINVAL, "work directory path too long "
		    "for a socket: '%s' (set TMPDIR to a shorter one)", dir);
		return -1;
	}
	snprintf(path, pathlen, "%s", sun.sun_path);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
	    0)) == -1 || bind(fd, (struct sockaddr *)&sun, sizeof sun) == -1 ||
	    listen(fd, 1) == -1) {
		gck_set_syserr(ctx, errno, "cannot listen on '%s': %s",
		    sun.sun_path, strerror(errno));
		if (fd != -1)
			close(fd);
		return -1;
	}
	return fd;
}

/*
 * Takes criu's connection on listening socket *lfdp, which is then
 * closed: criu connects once.  Returns GCK_OK (*cfdp still -1 if it has
 * not connected yet) or a code.
 */
static int
accept_criu(struct gck_ctx *ctx, int *lfdp, int *cfdp)
{
	if ((*cfdp = accept4(*lfdp, NULL, NULL, SOCK_CLOEXEC)) == -1) {
		if (errno == EAGAIN || errno == EINTR)
			return GCK_OK;
		return gck_set_syserr(ctx, errno, "cannot accept criu's "
		    "connection: %s", strerror(errno));
	}
	close(*lfdp);
	*lfdp = -1;
	return GCK_OK;
}

/*
 * Makes room for need entries in a poll loop's arrays (the pollfds and
 * what each stands for), kept from one round to the next.
 */
static int
poll_room(struct gck_ctx *ctx, struct pollfd **pfdp, size_t **idxp,
    size_t *capp, size_t need)
{
	struct pollfd	*np;
	size_t		*ni;

	if (need <= *capp)
		return GCK_OK;
	need += 16;
	if ((np = reallocarray(*pfdp, need, sizeof *np)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	*pfdp = np;
	if ((ni = reallocarray(*idxp, need, sizeof *ni)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	*idxp = ni;
	*capp = need;
	return GCK_OK;
}

/* Receives the pipe criu sends for file name. */
static int
recv_pipe(struct gck_ctx *ctx, int s, const char *name, int *fdp)
{
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(sizeof(int))];
	}			 cm;
	struct msghdr		 mh;
	struct iovec		 iov;
	struct cmsghdr		*c;
	ssize_t			 n;
	char			 dummy;

	*fdp = -1;
	memset(&mh, 0, sizeof mh);
	iov.iov_base = &dummy;
	iov.iov_len = 1;
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cm.buf;
	mh.msg_controllen = sizeof cm.buf;
	do
		n = recvmsg(s, &mh, MSG_CMSG_CLOEXEC);
	while (n == -1 && errno == EINTR);
	if (n <= 0)
		return gck_set_error(ctx, GCK_ECRIU, "criu's image streamer "
		    "connection broke: %s", n == 0 ? "closed" :
		    strerror(errno));
	for (c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
		    c->cmsg_len == CMSG_LEN(sizeof(int)))
			memcpy(fdp, CMSG_DATA(c), sizeof(int));
	if (*fdp == -1)
		return gck_set_error(ctx, GCK_ECRIU, "criu sent no pipe for "
		    "'%s'", name);
	return 0;
}

/*
 * Reads one request from CRIU: the file name and, when fdp is not NULL,
 * the pipe that follows it.  Returns 0, 1 when CRIU closed the socket,
 * or a code.
 */
static int
recv_request(struct gck_ctx *ctx, int s, char *name, size_t namelen, int *fdp)
{
	ImgStreamerRequestEntry	*req;
	unsigned char		 msg[REQ_MAX];
	uint32_t		 len;
	size_t			 got;
	ssize_t			 n;

	for (got = 0; got < sizeof len; got += (size_t)n) {
		n = recv(s, (char *)&len + got, sizeof len - got, 0);
		if (n == 0 && got == 0)
			return 1;
		if (n <= 0 && !(n == -1 && errno == EINTR))
			goto broken;
		if (n == -1)
			n = 0;
	}
	if (len == 0 || len > sizeof msg)
		return gck_set_error(ctx, GCK_ECRIU, "criu's image streamer "
		    "request has a bad length (%u)", len);
	for (got = 0; got < len; got += (size_t)n) {
		n = recv(s, msg + got, len - got, 0);
		if (n <= 0 && !(n == -1 && errno == EINTR))
			goto broken;
		if (n == -1)
			n = 0;
	}
	if ((req = img_streamer_request_entry__unpack(NULL, len, msg)) ==
	    NULL)
		return gck_set_error(ctx, GCK_ECRIU, "criu's image streamer "
		    "request cannot be decoded");
	snprintf(name, namelen, "%s", req->filename);
	img_streamer_request_entry__free_unpacked(req, NULL);
	if (fdp == NULL)
		return 0;
	return recv_pipe(ctx, s, name, fdp);
broken:
	return gck_set_error(ctx, GCK_ECRIU, "criu's image streamer "
	    "connection broke: %s", n == 0 ? "closed" : strerror(errno));
}

/* "pagemap-PID.img", a task's (not "pagemap-shmem-N.img"): PID. */
static int
pagemap_pid(const char *name, pid_t *pidp)
{
	char	tail[8];
	int	pid;

	if (sscanf(name, "pagemap-%d%7s", &pid, tail) != 2 || pid <= 0 ||
	    strcmp(tail, ".img") != 0)
		return 0;
	*pidp = (pid_t)pid;
	return 1;
}

int
gck_capture_open(struct gck_ctx *ctx, const char *imgdir,
    const char *workdir, size_t part_size, struct gck_capture **cp)
{
	struct gck_capture	*c;

	*cp = NULL;
	if ((c = calloc(1, sizeof *c)) == NULL ||
	    (c->buf = malloc(CHUNK)) == NULL) {
		if (c != NULL)
			free(c);
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	}
	c->ctx = ctx;
	c->cfd = c->hfd = c->hlfd = -1;
	c->part_size = part_size;
	if ((c->devnull = open("/dev/null", O_WRONLY | O_CLOEXEC)) == -1) {
		free(c->buf);
		free(c);
		return gck_set_syserr(ctx, errno, "cannot open /dev/null: %s",
		    strerror(errno));
	}
	no_stats(imgdir, "stats-dump");
	if ((c->lfd = listen_at(ctx, imgdir, SOCK_CAPTURE, c->path,
	    sizeof c->path)) == -1 || (c->hlfd = listen_at(ctx, workdir,
	    SOCK_HOOK, c->hpath, sizeof c->hpath)) == -1) {
		gck_capture_free(c);
		return ctx->code;
	}
	*cp = c;
	return GCK_OK;
}

void
gck_capture_free(struct gck_capture *c)
{
	size_t	i;

	if (c == NULL)
		return;
	if (c->lfd != -1)
		close(c->lfd);
	if (c->cfd != -1)
		close(c->cfd);
	if (c->hlfd != -1)
		close(c->hlfd);
	if (c->hfd != -1)
		close(c->hfd);
	if (c->devnull != -1)
		close(c->devnull);
	for (i = 0; i < c->nfiles; i++) {
		if (c->files[i].fd != -1)
			close(c->files[i].fd);
		free(c->files[i].data);
		free(c->files[i].digests);
		if (c->files[i].xs != NULL)
			XXH3_freeState(c->files[i].xs);
	}
	free(c->files);
	free(c->buf);
	free(c);
}

size_t
gck_capture_nfiles(const struct gck_capture *c)
{
	return c->nfiles;
}

const struct gck_sfile *
gck_capture_file(const struct gck_capture *c, size_t i)
{
	return &c->files[i];
}

const struct gck_sfile *
gck_capture_find(const struct gck_capture *c, const char *name)
{
	size_t	i;

	for (i = 0; i < c->nfiles; i++)
		if (strcmp(c->files[i].name, name) == 0)
			return &c->files[i];
	return NULL;
}

/*
 * Replaces what is kept of file name by data (len bytes, malloc'ed: the
 * capture owns it from now on).  Returns GCK_OK, or GCK_EINVAL for no
 * such file kept in memory.
 */
int
gck_capture_replace(struct gck_capture *c, const char *name, char *data,
    size_t len)
{
	struct gck_sfile	*f;
	size_t			 i;

	for (i = 0; i < c->nfiles; i++)
		if (strcmp(c->files[i].name, name) == 0)
			break;
	if (i == c->nfiles || (f = &c->files[i])->pages) {
		free(data);
		return gck_set_error(c->ctx, GCK_EINVAL, "criu wrote no '%s' "
		    "to rewrite", name);
	}
	c->kept -= f->cap;
	c->kept += len;
	free(f->data);
	f->data = data;
	f->len = f->cap = f->size = len;
	return GCK_OK;
}

/* A new file announced by CRIU, its data to come on fd. */
static int
capture_add(struct gck_capture *c, const char *name, int fd)
{
	struct gck_sfile	*f;
	unsigned		 id;
	pid_t			 pid;

	if (strlen(name) >= GCK_SNAME || gck_capture_find(c, name) != NULL ||
	    !gck_criu_name_ok(name)) {
		close(fd);
		return gck_set_error(c->ctx, GCK_ECRIU, "criu wrote '%.200s' "
		    "%s", name, gck_capture_find(c, name) != NULL ? "twice" :
		    "(not an image file name)");
	}
	if (gck_grow(c->ctx, &c->files, &c->cap, c->nfiles,
	    sizeof *c->files) != GCK_OK) {
		close(fd);
		return c->ctx->code;
	}
	f = &c->files[c->nfiles++];
	memset(f, 0, sizeof *f);
	memcpy(f->name, name, strlen(name) + 1);
	f->fd = fd;
	if (gck_pages_id(name, &id) && c->last_pagemap > 0) {
		f->pid = c->last_pagemap;
		f->pages = 1;
		if ((f->xs = XXH3_createState()) == NULL)
			return gck_set_error(c->ctx, GCK_ENOMEM,
			    "out of memory");
		XXH3_64bits_reset(f->xs);
	}
	c->last_pagemap = pagemap_pid(name, &pid) ? pid : 0;
	gck_log(c->ctx, 2, "criu writes %s%s", name, f->pages ?
	    " (memory, read again later)" : "");
	return GCK_OK;
}

/* Closes a part of a pages file: its digest is recorded. */
static int
capture_part_done(struct gck_capture *c, struct gck_sfile *f)
{
	if (gck_grow(c->ctx, &f->digests, &f->capdigests, f->ndigests,
	    sizeof *f->digests) != GCK_OK)
		return c->ctx->code;
	f->digests[f->ndigests++] = XXH3_64bits_digest(f->xs);
	XXH3_64bits_reset(f->xs);
	f->partfill = 0;
	return GCK_OK;
}

/*
 * Reads what is there of pages file f: the sampled bytes into the
 * part's digest, the others to /dev/null.
 */
static int
capture_pages(struct gck_capture *c, struct gck_sfile *f)
{
	size_t	at = (size_t)f->partfill, want;
	ssize_t	n;
	int	sample = at % GCK_SAMPLE_STRIDE < GCK_SAMPLE_LEN;

	if (sample)
		want = GCK_SAMPLE_LEN - at % GCK_SAMPLE_STRIDE;
	else
		want = GCK_SAMPLE_STRIDE - at % GCK_SAMPLE_STRIDE;
	if (want > c->part_size - at)
		want = c->part_size - at;
	if (sample)
		n = read(f->fd, c->buf, want);
	else
		n = splice(f->fd, NULL, c->devnull, NULL, want,
		    SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
	if (n == -1) {
		if (errno == EINTR || errno == EAGAIN)
			return GCK_OK;
		return gck_set_syserr(c->ctx, errno, "cannot read '%s' from "
		    "criu: %s", f->name, strerror(errno));
	}
	if (n == 0) {
		close(f->fd);
		f->fd = -1;
		return f->partfill > 0 ? capture_part_done(c, f) : GCK_OK;
	}
	if (sample)
		XXH3_64bits_update(f->xs, c->buf, (size_t)n);
	f->size += (uint64_t)n;
	f->partfill += (uint64_t)n;
	if (f->partfill == c->part_size)
		return capture_part_done(c, f);
	return GCK_OK;
}

/* Reads what is there of file f.  Returns GCK_OK or a code. */
static int
capture_read(struct gck_capture *c, struct gck_sfile *f)
{
	char	*nd;
	ssize_t	 n;

	if (f->pages)
		return capture_pages(c, f);
	if (f->cap - f->len < CHUNK / 4) {
		size_t	nc = f->cap ? f->cap * 2 : CHUNK / 4;

		if (c->kept + (nc - f->cap) > GCK_KEEP_MAX)
			return gck_set_error(c->ctx, GCK_ENOMEM, "criu's image "
			    "data besides memory pages exceeds %u MiB ('%s')",
			    GCK_KEEP_MAX >> 20, f->name);
		if ((nd = realloc(f->data, nc)) == NULL)
			return gck_set_error(c->ctx, GCK_ENOMEM,
			    "out of memory");
		c->kept += nc - f->cap;
		f->data = nd;
		f->cap = nc;
	}
	n = read(f->fd, f->data + f->len, f->cap - f->len);
	if (n == -1) {
		if (errno == EINTR || errno == EAGAIN)
			return GCK_OK;
		return gck_set_syserr(c->ctx, errno, "cannot read '%s' from "
		    "criu: %s", f->name, strerror(errno));
	}
	if (n == 0) {
		close(f->fd);
		f->fd = -1;
		return GCK_OK;
	}
	f->size += (uint64_t)n;
	f->len += (size_t)n;
	return GCK_OK;
}

/* The digest of the samples of a part of a pages file. */
uint64_t
gck_sample_digest(const char *buf, size_t len)
{
	XXH3_state_t	*st;
	uint64_t	 d;
	size_t		 off;

	if ((st = XXH3_createState()) == NULL)
		return 0;
	XXH3_64bits_reset(st);
	for (off = 0; off < len; off += GCK_SAMPLE_STRIDE)
		XXH3_64bits_update(st, buf + off, len - off < GCK_SAMPLE_LEN ?
		    len - off : GCK_SAMPLE_LEN);
	d = XXH3_64bits_digest(st);
	XXH3_freeState(st);
	return d;
}

/* The hook's socket: a connection, or its question.  */
static int
capture_hook(struct gck_capture *c)
{
	char	buf[sizeof HOOK_ASK];
	ssize_t	n;
	int	fd;

	if (c->hfd == -1) {
		if ((fd = accept4(c->hlfd, NULL, NULL, SOCK_CLOEXEC)) == -1)
			return errno == EAGAIN || errno == EINTR ? GCK_OK :
			    gck_set_syserr(c->ctx, errno, "cannot accept "
			    "criu's hook: %s", strerror(errno));
		c->hfd = fd;
		return GCK_OK;
	}
	n = recv(c->hfd, buf, sizeof buf - 1, MSG_WAITALL);
	if (n == (ssize_t)sizeof buf - 1 && memcmp(buf, HOOK_ASK,
	    sizeof buf - 1) == 0) {
		c->hooked = 1;
		return GCK_OK;
	}
	return gck_set_error(c->ctx, GCK_ECRIU, "criu's post-dump hook "
	    "failed");
}

/*
 * Takes what criu (process criu, already started with --stream) writes,
 * until its post-dump hook asks to go on, every file written.  On
 * failure everything is closed, so that criu fails too, and resumes the
 * tree.  Returns GCK_OK when the hook waits (gck_capture_answer() tells
 * it), GCK_ECRIU when criu ended without asking, or a code.
 */
int
gck_capture_run(struct gck_capture *c, struct gck_criu_run *criu)
{
	struct pollfd	*pfd = NULL;
	size_t		*idx = NULL, i, np, open, pcap = 0;
	char		 name[REQ_MAX];
	int		 r, fd, n, sock_done = 0, flags, failed, hookslot;

	for (;;) {
		if ((r = gck_check_interrupt(c->ctx)) != GCK_OK)
			goto out;
		if ((r = poll_room(c->ctx, &pfd, &idx, &pcap,
		    c->nfiles + 2)) != GCK_OK)
			goto out;
		np = open = 0;
		hookslot = -1;
		if (!c->hooked) {
			hookslot = (int)np;
			pfd[np].fd = c->hfd != -1 ? c->hfd : c->hlfd;
			pfd[np++].events = POLLIN;
		}
		if (!sock_done) {
			pfd[np].fd = c->cfd != -1 ? c->cfd : c->lfd;
			pfd[np++].events = POLLIN;
		}
		for (i = 0; i < c->nfiles; i++)
			if (c->files[i].fd != -1) {
				idx[np] = i;
				pfd[np].fd = c->files[i].fd;
				pfd[np++].events = POLLIN;
				open++;
			}
		if (c->hooked && open == 0)
			break;
		if ((n = poll(pfd, np, 100)) == -1 && errno != EINTR) {
			r = gck_set_syserr(c->ctx, errno, "poll: %s",
			    strerror(errno));
			goto out;
		}
		if (n <= 0) {
			if (gck_criu_ended(criu, &failed)) {
				/* criu died: its status tells why */
				r = failed ? GCK_OK : gck_set_error(c->ctx,
				    GCK_ECRIU, "criu ended the dump without "
				    "its post-dump hook");
				goto out;
			}
			continue;
		}
		if (hookslot != -1 && pfd[hookslot].revents != 0 &&
		    (r = capture_hook(c)) != GCK_OK)
			goto out;
		for (i = 0; i < np; i++) {
			if ((int)i == hookslot || pfd[i].revents == 0)
				continue;
			if (pfd[i].fd == c->cfd || pfd[i].fd == c->lfd)
				break;
			if ((r = capture_read(c, &c->files[idx[i]])) != GCK_OK)
				goto out;
		}
		if (i == np)
			continue;
		if (c->cfd == -1) {
			if ((r = accept_criu(c->ctx, &c->lfd,
			    &c->cfd)) != GCK_OK)
				goto out;
			continue;
		}
		if ((r = recv_request(c->ctx, c->cfd, name, sizeof name,
		    &fd)) == 1) {
			sock_done = 1;
			continue;
		}
		if (r != GCK_OK)
			goto out;
		if ((flags = fcntl(fd, F_GETFL)) != -1)
			fcntl(fd, F_SETFL, flags | O_NONBLOCK);
		if ((r = capture_add(c, name, fd)) != GCK_OK)
			goto out;
	}
	r = GCK_OK;
out:
	free(pfd);
	free(idx);
	if (r != GCK_OK || !c->hooked) {
		/*
		 * The listening sockets too: a connection criu made that we
		 * have not accepted yet holds, in its queue, the read ends
		 * of the pipes criu writes into, and criu would wait on them
		 * for ever; and its hook would wait for an answer.
		 */
		if (c->lfd != -1)
			close(c->lfd);
		if (c->cfd != -1)
			close(c->cfd);
		if (c->hlfd != -1)
			close(c->hlfd);
		if (c->hfd != -1)
			close(c->hfd);
		c->lfd = c->cfd = c->hlfd = c->hfd = -1;
		c->hooked = 0;
		for (i = 0; i < c->nfiles; i++)
			if (c->files[i].fd != -1) {
				close(c->files[i].fd);
				c->files[i].fd = -1;
			}
	}
	return r;
}

/* Whether criu's post-dump hook is waiting for an answer. */
int
gck_capture_hooked(const struct gck_capture *c)
{
	return c->hooked;
}

/*
 * Answers criu's post-dump hook: go on (leave the tree as asked) or not
 * (criu resumes it).
 */
void
gck_capture_answer(struct gck_capture *c, int ok)
{
	if (c->hfd == -1)
		return;
	(void)send(c->hfd, ok ? "0" : "1", 1, MSG_NOSIGNAL);
	close(c->hfd);
	c->hfd = -1;
	c->hooked = 0;
}

/* The socket the hook is to connect to. */
const char *
gck_capture_hook_path(const struct gck_capture *c)
{
	return c->hpath;
}

/*
 * The action script criu runs (gpuckpt-hook), with GCK_CRIU_HOOK in its
 * environment: at post-dump, asks whether criu is to go on.  Returns
 * GCK_OK when it is, GCK_ECRIU when not, GCK_EINVAL when criu did not
 * run this process for a checkpoint.
 */
int
gck_dump_hook(void)
{
	struct sockaddr_un	 sun;
	const char		*path = getenv(HOOK_ENV);
	const char		*action = getenv("CRTOOLS_SCRIPT_ACTION");
	ssize_t			 n;
	char			 answer;
	int			 s;

	if (path == NULL || action == NULL)
		return GCK_EINVAL;
	if (strcmp(action, HOOK_ASK) != 0)
		return GCK_OK;
	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof sun.sun_path ||
	    (s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
		return GCK_ECRIU;
	snprintf(sun.sun_path, sizeof sun.sun_path, "%s", path);
	if (connect(s, (struct sockaddr *)&sun, sizeof sun) == -1 ||
	    send(s, HOOK_ASK, strlen(HOOK_ASK), MSG_NOSIGNAL) !=
	    (ssize_t)strlen(HOOK_ASK)) {
		close(s);
		return GCK_ECRIU;
	}
	do
		n = recv(s, &answer, 1, 0);
	while (n == -1 && errno == EINTR);
	close(s);
	return n == 1 && answer == '0' ? GCK_OK : GCK_ECRIU;
}

/* Serve: restore.  */

struct sreq {
	char		 name[GCK_SNAME];
	int		 fd;		/* to criu; -1 once closed */
	const char	*data;		/* kept: what to write */
	size_t		 len, off;
	int		 stream;	/* to come from the image */
};

struct gck_serve {
	struct gck_ctx		*ctx;
	int			 lfd, cfd;
	char			 path[PATH_MAX];
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
};

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
	s->cfd = -1;
	s->cur = -1;
	no_stats(imgdir, "stats-restore");
	if ((s->lfd = listen_at(ctx, imgdir, SOCK_SERVE, s->path,
	    sizeof s->path)) == -1) {
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
	if (s->lfd != -1)
		close(s->lfd);
	if (s->cfd != -1)
		close(s->cfd);
	for (i = 0; i < s->nreqs; i++)
		if (s->reqs[i].fd != -1)
			close(s->reqs[i].fd);
	for (i = 0; i < s->nkept; i++)
		free(s->kept[i].data);
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
 * Reads the file the reader is at into memory, to be served from there.
 */
static int
serve_keep(struct gck_serve *s, struct gck_reader *rd, const char *name)
{
	struct gck_sfile	*f;
	char			*nd;
	ssize_t			 n;

	if (gck_grow(s->ctx, &s->kept, &s->capkept, s->nkept,
	    sizeof *s->kept) != GCK_OK)
		return s->ctx->code;
	f = &s->kept[s->nkept++];
	memset(f, 0, sizeof *f);
	f->fd = -1;
	snprintf(f->name, sizeof f->name, "%s", name);
	for (;;) {
		if (f->cap - f->len < CHUNK / 4) {
			size_t	nc = f->cap ? f->cap * 2 : CHUNK / 4;

			if (s->keptbytes + (nc - f->cap) > GCK_KEEP_MAX)
				return gck_set_error(s->ctx, GCK_ENOMEM,
				    "cannot restore: more than %u MiB of the "
				    "image would have to be held in memory "
				    "('%s')", GCK_KEEP_MAX >> 20, name);
			if ((nd = realloc(f->data, nc)) == NULL)
				return gck_set_error(s->ctx, GCK_ENOMEM,
				    "out of memory");
			s->keptbytes += nc - f->cap;
			f->data = nd;
			f->cap = nc;
		}
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

static int
serve_reply(struct gck_serve *s, const char *name, int exists, int *fdp)
{
	ImgStreamerReplyEntry	 rep = IMG_STREAMER_REPLY_ENTRY__INIT;
	unsigned char		 buf[16];
	uint32_t		 len;
	int			 r, flags;

	*fdp = -1;
	rep.exists = exists;
	len = (uint32_t)img_streamer_reply_entry__get_packed_size(&rep);
	memcpy(buf, &len, sizeof len);
	img_streamer_reply_entry__pack(&rep, buf + sizeof len);
	if (send(s->cfd, buf, sizeof len + len, MSG_NOSIGNAL) !=
	    (ssize_t)(sizeof len + len))
		return gck_set_syserr(s->ctx, errno, "cannot answer criu "
		    "about '%s': %s", name, strerror(errno));
	if (!exists)
		return GCK_OK;
	if ((r = recv_pipe(s->ctx, s->cfd, name, fdp)) != GCK_OK)
		return r;
	fcntl(*fdp, F_SETPIPE_SZ, PIPE_SIZE);
	if ((flags = fcntl(*fdp, F_GETFL)) != -1)
		fcntl(*fdp, F_SETFL, flags | O_NONBLOCK);
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
	if ((n = gck_reader_file_chunk(rd, &p, CHUNK, &hole)) < 0)
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
 * Serves criu (already started with --stream) until it exits, feeding
 * it the rest of the image as it arrives, and reads the image to its
 * end, so that the reader has checked the trailer.  Returns GCK_OK or a
 * code; criu's own status is for the caller.
 */
int
gck_serve_run(struct gck_serve *s, struct gck_reader *rd,
    struct gck_criu_run *criu)
{
	struct pollfd	*pfd = NULL;
	size_t		*idx = NULL, i, np, pcap = 0;
	char		 name[REQ_MAX];
	struct timespec	 since = { 0, 0 }, now;
	int		 r, n, sock_done = 0, gone = 0, failed;
	long		 waited;

	for (;;) {
		if ((r = gck_check_interrupt(s->ctx)) != GCK_OK)
			goto out;
		if (!s->eoi && s->cur == -1 &&
		    (s->cur = find_req(s, s->file)) == -1) {
			clock_gettime(CLOCK_MONOTONIC, &now);
			if (since.tv_sec == 0)
				since = now;
			waited = (now.tv_sec - since.tv_sec) * 1000 +
			    (now.tv_nsec - since.tv_nsec) / 1000000;
			if (gone || sock_done) {
				/* No one will ask: the rest is only checked. */
				if ((r = serve_skip(s, rd)) != GCK_OK ||
				    (r = serve_advance(s, rd)) != GCK_OK)
					goto out;
				since.tv_sec = 0;
				continue;
			}
			if (!gck_manifest_file_memory(s->m, s->file) ||
			    (waited >= SPILL_MS && pending_stream(s))) {
				/*
				 * A small file criu has not asked for yet, or
				 * pages criu is not reading while it waits for
				 * later ones: kept in memory.
				 */
				if (gck_manifest_file_memory(s->m, s->file))
					gck_log(s->ctx, 1, "holding %s in "
					    "memory: criu asks for other files "
					    "first", s->file);
				if ((r = serve_keep(s, rd, s->file)) != GCK_OK ||
				    (r = serve_advance(s, rd)) != GCK_OK)
					goto out;
				since.tv_sec = 0;
				continue;
			}
		} else if (!s->eoi && s->clen == s->coff) {
			if ((r = serve_next_piece(s, rd)) != GCK_OK)
				goto out;
			continue;
		}
		if (gone && s->eoi)
			break;

		if ((r = poll_room(s->ctx, &pfd, &idx, &pcap,
		    s->nreqs + 1)) != GCK_OK)
			goto out;
		np = 0;
		if (!sock_done) {
			pfd[np].fd = s->cfd != -1 ? s->cfd : s->lfd;
			pfd[np++].events = POLLIN;
		}
		for (i = 0; i < s->nreqs; i++) {
			struct sreq	*q = &s->reqs[i];

			if (q->fd == -1)
				continue;
			if (!q->stream && q->off == q->len) {
				close(q->fd);
				q->fd = -1;
				continue;
			}
			if (q->stream && ((int)i != s->cur || s->clen ==
			    s->coff))
				continue;
			idx[np] = i;
			pfd[np].fd = q->fd;
			pfd[np++].events = POLLOUT;
		}
		if ((n = poll(pfd, np, 50)) == -1 && errno != EINTR) {
			r = gck_set_syserr(s->ctx, errno, "poll: %s",
			    strerror(errno));
			goto out;
		}
		if (n <= 0) {
			if (!gone && gck_criu_ended(criu, &failed)) {
				/*
				 * A failed criu is reported at once: the
				 * source, still writing, learns of it too.
				 */
				if (failed) {
					r = GCK_OK;
					goto out;
				}
				gone = 1;
				for (i = 0; i < s->nreqs; i++)
					if (s->reqs[i].fd != -1) {
						close(s->reqs[i].fd);
						s->reqs[i].fd = -1;
					}
				if (s->cur != -1) {
					s->cur = -1;
					s->clen = s->coff = 0;
					s->fed = 0;
					s->hheld = 0;
					if (s->advanced) {
						s->advanced = 0;
						memcpy(s->file, s->next,
						    sizeof s->file);
						s->eoi = s->next_eoi;
						continue;
					}
					if ((r = serve_skip(s, rd)) != GCK_OK ||
					    (r = serve_advance(s, rd)) != GCK_OK)
						goto out;
					continue;
				}
			}
			continue;
		}
		for (i = sock_done ? 0 : 1; i < np; i++) {
			struct sreq	*q = &s->reqs[idx[i]];

			if (pfd[i].revents == 0)
				continue;
			if (pfd[i].revents & (POLLERR | POLLHUP)) {
				r = gck_set_error(s->ctx, GCK_ECRIU, "criu "
				    "stopped reading '%s'", q->name);
				goto out;
			}
			if (q->stream)
				r = serve_write(s, q, s->chole ? NULL : s->cp,
				    s->clen, &s->coff);
			else
				r = serve_write(s, q, q->data, q->len, &q->off);
			if (r != GCK_OK)
				goto out;
		}
		if (sock_done || pfd[0].revents == 0)
			continue;
		if (s->cfd == -1) {
			if ((r = accept_criu(s->ctx, &s->lfd,
			    &s->cfd)) != GCK_OK)
				goto out;
			continue;
		}
		if ((r = recv_request(s->ctx, s->cfd, name, sizeof name,
		    NULL)) == 1) {
			sock_done = 1;
			continue;
		}
		if (r != GCK_OK)
			goto out;
		if ((r = serve_request(s, name, gck_reader_file_seen(rd,
		    name) && strcmp(name, s->file) != 0)) != GCK_OK)
			goto out;
	}
	r = GCK_OK;
out:
	free(pfd);
	free(idx);
	if (s->cfd != -1)
		close(s->cfd);
	if (s->lfd != -1)
		close(s->lfd);
	s->cfd = s->lfd = -1;
	for (i = 0; i < s->nreqs; i++)
		if (s->reqs[i].fd != -1) {
			close(s->reqs[i].fd);
			s->reqs[i].fd = -1;
		}
	return r;
}

/*
 * While criu dumps: takes the images; when criu's post-dump hook asks,
 * runs job->post() while criu still holds the tree, and answers the hook
 * with its outcome.
 */
int
gck_capture_during(void *arg, struct gck_criu_run *criu)
{
	struct gck_capture_job	*job = arg;
	int			 r;

	if ((r = gck_capture_run(job->cap, criu)) != GCK_OK ||
	    !gck_capture_hooked(job->cap))
		return r;
	r = job->post(job->arg);
	gck_capture_answer(job->cap, r == GCK_OK);
	return r;
}

/* While criu restores: serves it the image as the reader yields it. */
int
gck_serve_during(void *arg, struct gck_criu_run *criu)
{
	struct gck_serve_job	*job = arg;

	return gck_serve_run(job->s, job->rd, criu);
}

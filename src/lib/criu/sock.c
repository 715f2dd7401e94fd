/*
 * sock.c: criu's image streamer socket, as both halves of the streamer
 * speak it (streamer.c, serve.c).
 *
 * criu connects once to a socket in the images directory.  A request is
 * a 32-bit length, in the host's byte order, and that many bytes of an
 * img_streamer_request_entry naming a file; when dumping, one end of a
 * pipe follows it (SCM_RIGHTS, with one byte of data).  When restoring,
 * criu waits for the answer (serve.c) and only then sends the pipe.
 */
#include "config.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

#include "private.h"
#include "criu/streamer.h"
#include "criu/streamer_private.h"
#include "criu/criu-images.pb-c.h"

static void	no_stats(const char *, const char *);
static int	accept_criu(struct gck_sock *);
static int	recv_request(struct gck_ctx *, int, char *, size_t, int *);

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

/*
 * Listens on dir/name, its path copied to path; returns the socket or
 * -1 with the error set.
 */
int
gck_sock_listen(struct gck_ctx *ctx, const char *dir, const char *name,
    char *path, size_t pathlen)
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
 * Sends criu's statistics file stats to /dev/null and listens for criu
 * on imgdir/name.  Returns GCK_OK or a code; sc is to be freed either
 * way.
 */
int
gck_sock_open(struct gck_sock *sc, struct gck_ctx *ctx, const char *imgdir,
    const char *name, const char *stats)
{
	memset(sc, 0, sizeof *sc);
	sc->ctx = ctx;
	sc->cfd = -1;
	no_stats(imgdir, stats);
	if ((sc->lfd = gck_sock_listen(ctx, imgdir, name, sc->path,
	    sizeof sc->path)) == -1)
		return ctx->code;
	return GCK_OK;
}

/*
 * Closes the socket, the listening one too: a connection criu made that
 * is not accepted yet holds, in its queue, the pipes criu would wait on.
 */
void
gck_sock_close(struct gck_sock *sc)
{
	if (sc->lfd != -1)
		close(sc->lfd);
	if (sc->cfd != -1)
		close(sc->cfd);
	sc->lfd = sc->cfd = -1;
}

void
gck_sock_free(struct gck_sock *sc)
{
	gck_sock_close(sc);
	free(sc->pfd);
	free(sc->idx);
	sc->pfd = NULL;
	sc->idx = NULL;
	sc->pcap = 0;
}

/*
 * Makes room for need slots in the poll set, kept from one round to the
 * next.
 */
int
gck_sock_room(struct gck_sock *sc, size_t need)
{
	struct pollfd	*np;
	size_t		*ni;

	if (need <= sc->pcap)
		return GCK_OK;
	need += 16;
	if ((np = reallocarray(sc->pfd, need, sizeof *np)) == NULL)
		return gck_set_error(sc->ctx, GCK_ENOMEM, "out of memory");
	sc->pfd = np;
	if ((ni = reallocarray(sc->idx, need, sizeof *ni)) == NULL)
		return gck_set_error(sc->ctx, GCK_ENOMEM, "out of memory");
	sc->idx = ni;
	sc->pcap = need;
	return GCK_OK;
}

/*
 * Puts the socket (criu's connection, or the listening one until then)
 * in slot np of the poll set unless criu is done with it; *slotp is the
 * slot, or -1.  Returns the next free slot.
 */
size_t
gck_sock_watch(struct gck_sock *sc, size_t np, int *slotp)
{
	*slotp = -1;
	if (sc->done)
		return np;
	*slotp = (int)np;
	return gck_sock_add(sc, np, sc->cfd != -1 ? sc->cfd : sc->lfd, POLLIN,
	    0);
}

/* Puts fd, standing for i, in slot np; returns the next free slot. */
size_t
gck_sock_add(struct gck_sock *sc, size_t np, int fd, short events, size_t i)
{
	sc->pfd[np].fd = fd;
	sc->pfd[np].events = events;
	sc->pfd[np].revents = 0;
	sc->idx[np] = i;
	return np + 1;
}

/* Polls the first np slots; *np is poll's count.  Returns GCK_OK or a code. */
int
gck_sock_poll(struct gck_sock *sc, size_t np, int timeout, int *nready)
{
	if ((*nready = poll(sc->pfd, np, timeout)) == -1 && errno != EINTR)
		return gck_set_syserr(sc->ctx, errno, "poll: %s",
		    strerror(errno));
	return GCK_OK;
}

/*
 * Takes criu's connection on the listening socket, which is then closed:
 * criu connects once.  Returns GCK_OK (cfd still -1 if it has not
 * connected yet) or a code.
 */
static int
accept_criu(struct gck_sock *sc)
{
	if ((sc->cfd = accept4(sc->lfd, NULL, NULL, SOCK_CLOEXEC)) == -1) {
		if (errno == EAGAIN || errno == EINTR)
			return GCK_OK;
		return gck_set_syserr(sc->ctx, errno, "cannot accept criu's "
		    "connection: %s", strerror(errno));
	}
	close(sc->lfd);
	sc->lfd = -1;
	return GCK_OK;
}

/*
 * Takes what the socket has for us: criu's connection, or its next
 * request (the file's name into name, and, when fdp is not NULL, the
 * pipe that follows it).  Returns 1 for a request, 0 for none (the
 * connection taken or not there yet, or criu closed the socket, which
 * sets done), or a code.
 */
int
gck_sock_take(struct gck_sock *sc, char *name, size_t namelen, int *fdp)
{
	int	r;

	if (sc->cfd == -1)
		return accept_criu(sc);
	if ((r = recv_request(sc->ctx, sc->cfd, name, namelen, fdp)) == 1) {
		sc->done = 1;
		return 0;
	}
	return r == GCK_OK ? 1 : r;
}

/* Receives the pipe criu sends for file name, made non-blocking. */
int
gck_sock_recv_pipe(struct gck_ctx *ctx, int s, const char *name, int *fdp)
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
	int			 flags;

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
	if ((flags = fcntl(*fdp, F_GETFL)) != -1)
		fcntl(*fdp, F_SETFL, flags | O_NONBLOCK);
	return GCK_OK;
}

/*
 * Reads one request from criu: the file name and, when fdp is not NULL,
 * the pipe that follows it.  Returns 0, 1 when criu closed the socket,
 * or a code.
 */
static int
recv_request(struct gck_ctx *ctx, int s, char *name, size_t namelen, int *fdp)
{
	ImgStreamerRequestEntry	*req;
	unsigned char		 msg[GCK_SREQ_MAX];
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
	return gck_sock_recv_pipe(ctx, s, name, fdp);
broken:
	return gck_set_error(ctx, GCK_ECRIU, "criu's image streamer "
	    "connection broke: %s", n == 0 ? "closed" : strerror(errno));
}

/*
 * Makes room in f, a file kept in memory, for what comes next of it;
 * *keptp counts what all kept files hold.  Returns GCK_OK, 1 when they
 * would hold more than GCK_KEEP_MAX (no error set: the caller says
 * whose), or a code.
 */
int
gck_sfile_room(struct gck_ctx *ctx, struct gck_sfile *f, uint64_t *keptp)
{
	char	*nd;
	size_t	 nc;

	if (f->cap - f->len >= GCK_SCHUNK / 4)
		return GCK_OK;
	nc = f->cap ? f->cap * 2 : GCK_SCHUNK / 4;
	if (*keptp + (nc - f->cap) > GCK_KEEP_MAX)
		return 1;
	if ((nd = realloc(f->data, nc)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	*keptp += nc - f->cap;
	f->data = nd;
	f->cap = nc;
	return GCK_OK;
}

/* Frees what f holds: its pipe, data, digests. */
void
gck_sfile_clear(struct gck_sfile *f)
{
	if (f->fd != -1)
		close(f->fd);
	f->fd = -1;
	free(f->data);
	free(f->digests);
	if (f->xs != NULL)
		XXH3_freeState(f->xs);
	f->data = NULL;
	f->digests = NULL;
	f->xs = NULL;
}

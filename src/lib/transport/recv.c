/*
 * recv.c: gck_recv(), the receiving end of gpusend.
 *
 * gpusend runs gpurecv over ssh; its standard input and output carry the
 * framed exchange of frame.c.  The image arrives in numbered data frames,
 * over one connection or, with --parallel, round-robin over several (the
 * extra ones are relayed by `gpurecv --join' through a socket in the run
 * directory).  It is either stored, verified as it arrives, under a
 * temporary name renamed only once whole, or restored:
 *
 *   recv: HELLO          send: START, DATA..., END
 *   recv: READY pid      (restored, every process stopped)
 *   send: GO             recv: RUNNING pid      send: BYE
 *
 * The tree runs only after GO; should the sender go away before, it is
 * killed.  From READY on a record in the run directory says where the
 * hand-over stands, for a sender that lost its connection to ask
 * (`gpurecv --outcome ID').
 */
#include "config.h"

#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "private.h"
#include "core/util.h"
#include "criu/criu.h"
#include "ops/ops.h"
#include "image/digest.h"
#include "image/image.h"
#include "image/manifest.h"
#include "image/parent.h"
#include "image/patch.h"
#include "image/sign.h"
#include "transport/cache.h"
#include "transport/frame.h"
#include "transport/recv.h"

#define JOIN_WAIT_MS	30000	/* for the extra connections to come */
#define PAGES_MAX	(1u << 24)	/* page digests offered: 64 GiB */
#define JOIN_REFUSED_MS	1000	/* a join socket nobody listens on: gone */
#define RECORD_MAX_AGE	(7 * 24 * 3600)

struct recv {
	struct gck_ctx			*ctx;
	const struct gck_recv_opts	*o;
	pthread_mutex_t			 out_mu;	/* frames to outfd */
	int				 in[GCK_STREAMS_MAX];
	unsigned			 nin;
	int				 listen;	/* for --join */
	char				 sockpath[PATH_MAX];
	char				 recpath[PATH_MAX + 64];
	int				 recfd;

	/* The feeder: frames in, image bytes out to a pipe. */
	struct gck_ctx			*fctx;
	pthread_t			 feeder;
	int				 started;
	int				 feeding;
	int				 pipe_w;
	int				 stop[2];	/* tells it to stop */
	int				 storefd;	/* store: the partial */
	uint64_t			 offset;	/* store: bytes already held */
	uint64_t			 bytes;		/* image bytes received */
	int				 ended;		/* END came, sizes agree */
	int				 whole;		/* restore it once in */
	int				 feed_err;	/* a code, fctx says why */

	/* Restoring: the images kept from earlier hand-overs. */
	struct gck_cache		*cache;
	int				 cache_bad;	/* one was damaged */
	int				 no_cache;	/* --to-cache had none */

	/* After END: what the sender says about the restored tree. */
	pthread_mutex_t			 mu;
	pthread_cond_t			 cv;
	int				 word;		/* GO, BYE, ABORT, or -1 */
};

static int	send_frame(struct recv *, const unsigned char *, size_t);
static int	send_json(struct recv *, int, const char *, ...);

/*
 * The run directory: where records and join sockets live, private to
 * the user: $GCK_RUNDIR, else /run/gpuckpt for root and
 * $TMPDIR/gpuckpt-UID for others.
 */
int
gck_rundir(struct gck_ctx *ctx, char *buf, size_t size)
{
	struct stat	 st;
	const char	*tmp;

	if ((tmp = getenv("GCK_RUNDIR")) != NULL && *tmp != '\0')
		snprintf(buf, size, "%s", tmp);
	else if (geteuid() == 0)
		snprintf(buf, size, "/run/gpuckpt");
	else {
		if ((tmp = getenv("TMPDIR")) == NULL || *tmp == '\0')
			tmp = "/tmp";
		snprintf(buf, size, "%s/gpuckpt-%u", tmp, (unsigned)geteuid());
	}
	if (mkdir(buf, 0700) == -1 && errno != EEXIST)
		return gck_set_syserr(ctx, errno, "cannot make '%s': %s", buf,
		    strerror(errno));
	if (lstat(buf, &st) == -1)
		return gck_set_syserr(ctx, errno, "cannot stat '%s': %s", buf,
		    strerror(errno));
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 077) != 0)
		return gck_set_error(ctx, GCK_EUNSAFE, "'%s' is not a private "
		    "directory of this user", buf);
	return GCK_OK;
}

/* Checks that id is what gpusend makes: 32 lowercase hex digits. */
static int
id_ok(struct gck_ctx *ctx, const char *id)
{
	size_t	i;

	for (i = 0; id != NULL && id[i] != '\0'; i++)
		if (!((id[i] >= '0' && id[i] <= '9') ||
		    (id[i] >= 'a' && id[i] <= 'f')))
			break;
	if (id == NULL || i != 32 || id[i] != '\0')
		return gck_set_error(ctx, GCK_EINVAL, "invalid hand-over id "
		    "'%s'", id != NULL ? id : "");
	return GCK_OK;
}

static int
send_frame(struct recv *rv, const unsigned char *buf, size_t len)
{
	struct gck_ctx	tmp;
	int		r;

	memset(&tmp, 0, sizeof tmp);
	pthread_mutex_lock(&rv->out_mu);
	r = gck_write_all(&tmp, rv->o->outfd, buf, len, "to gpusend");
	pthread_mutex_unlock(&rv->out_mu);
	return r;
}

/* Sends a control frame; a sender gone is not this side's failure. */
static int
send_json(struct recv *rv, int type, const char *fmt, ...)
{
	unsigned char	*buf;
	size_t		 len;
	va_list		 ap;
	int		 r;

	va_start(ap, fmt);
	buf = gck_frame_vjson(type, 0, &len, fmt, ap);
	va_end(ap);
	if (buf == NULL)
		return GCK_ENOMEM;
	r = send_frame(rv, buf, len);
	free(buf);
	return r;
}

/*
 * Writes the record of the hand-over: "ready", "go PID", "running PID"...
 * Once decided, whoever asks need not wait for this gpurecv any more.
 */
static void
record(struct recv *rv, int decided, const char *fmt, ...)
{
	char	buf[128];
	int	n;
	va_list	ap;

	if (rv->recfd == -1)
		return;
	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof buf)
		return;
	if (ftruncate(rv->recfd, 0) == 0 &&
	    pwrite(rv->recfd, buf, (size_t)n, 0) == n)
		fdatasync(rv->recfd);
	if (decided)
		(void)flock(rv->recfd, LOCK_UN);
}

/* Starts the record, locked for as long as this gpurecv decides. */
static int
record_open(struct recv *rv)
{
	struct gck_ctx	*ctx = rv->ctx;
	char		 dir[PATH_MAX];
	int		 r;

	if ((r = gck_rundir(ctx, dir, sizeof dir)) != GCK_OK)
		return r;
	snprintf(rv->recpath, sizeof rv->recpath, "%s/%s.rec", dir,
	    rv->o->id);
	if ((rv->recfd = open(rv->recpath, O_RDWR | O_CREAT | O_EXCL |
	    O_CLOEXEC, 0600)) == -1) {
		rv->recpath[0] = '\0';
		return gck_set_syserr(ctx, errno, "cannot create '%s': %s",
		    rv->recpath, strerror(errno));
	}
	if (flock(rv->recfd, LOCK_EX) == -1)
		return gck_set_syserr(ctx, errno, "cannot lock '%s': %s",
		    rv->recpath, strerror(errno));
	record(rv, 0, "ready\n");
	return GCK_OK;
}

/*
 * Whether path is the socket of a gpurecv that was killed while it
 * waited for its extra connections: one that has been there a while,
 * and that nobody listens on any longer.
 */
static int
stale_socket(const char *path, const struct stat *st)
{
	struct sockaddr_un	 sa;
	int			 fd, stale;

	if (!S_ISSOCK(st->st_mode) || st->st_mtime + 60 > time(NULL) ||
	    strlen(path) >= sizeof sa.sun_path)
		return 0;
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, path, strlen(path));
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0)) == -1)
		return 0;
	stale = connect(fd, (struct sockaddr *)&sa, sizeof sa) == -1 &&
	    errno == ECONNREFUSED;
	close(fd);
	return stale;
}

/*
 * Removes records nobody asked for in a week, and the sockets that
 * gpurecvs killed on their way left behind.
 */
static void
records_prune(void)
{
	struct gck_ctx	 ctx;
	char		 dir[PATH_MAX], path[PATH_MAX + 300];
	struct stat	 st;
	struct dirent	*de;
	DIR		*d;
	size_t		 n;

	memset(&ctx, 0, sizeof ctx);
	if (gck_rundir(&ctx, dir, sizeof dir) != GCK_OK ||
	    (d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		n = strlen(de->d_name);
		snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
		if (n >= 5 && strcmp(de->d_name + n - 5, ".sock") == 0) {
			if (lstat(path, &st) == 0 && stale_socket(path, &st))
				unlink(path);
			continue;
		}
		if (n < 4 || strcmp(de->d_name + n - 4, ".rec") != 0)
			continue;
		if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) &&
		    st.st_mtime + RECORD_MAX_AGE < time(NULL))
			unlink(path);
	}
	closedir(d);
}

/* Copies the verified prefix held from an earlier send to the pipe. */
static int
feed_prefix(struct recv *rv)
{
	char		*buf;
	uint64_t	 off = 0;
	ssize_t		 n;
	int		 r = GCK_OK;

	if (rv->offset == 0 || rv->pipe_w == -1)
		return GCK_OK;
	if ((buf = malloc(GCK_CHUNK)) == NULL)
		return gck_set_error(rv->fctx, GCK_ENOMEM, "out of memory");
	while (off < rv->offset && r == GCK_OK) {
		n = pread(rv->storefd, buf, rv->offset - off < GCK_CHUNK ?
		    (size_t)(rv->offset - off) : GCK_CHUNK, (off_t)off);
		if (n <= 0) {
			r = gck_set_syserr(rv->fctx, n == 0 ? EIO : errno,
			    "cannot read the partial image: %s",
			    strerror(n == 0 ? EIO : errno));
			break;
		}
		r = gck_write_all(rv->fctx, rv->pipe_w, buf, (size_t)n,
		    "the image");
		off += (uint64_t)n;
	}
	free(buf);
	return r;
}

/* Hands len image bytes on: to the partial file, then to the pipe. */
static int
deliver(struct recv *rv, const char *buf, size_t len)
{
	const char	*p = buf;
	uint64_t	 at = rv->offset + rv->bytes;
	size_t		 left = len;
	ssize_t		 n;

	while (rv->storefd != -1 && left > 0) {
		if ((n = pwrite(rv->storefd, p, left, (off_t)at)) == -1) {
			if (errno == EINTR)
				continue;
			return gck_set_syserr(rv->fctx, errno, "cannot write "
			    "the image: %s", strerror(errno));
		}
		p += n;
		left -= (size_t)n;
		at += (uint64_t)n;
	}
	rv->bytes += len;
	if (rv->cache != NULL)
		gck_cache_write(rv->cache, buf, len);
	return rv->pipe_w == -1 ? GCK_OK : gck_write_all(rv->fctx, rv->pipe_w,
	    buf, len, "the image");
}

/* Reads the image's frames, round-robin over the inputs, until END. */
static int
feed_data(struct recv *rv)
{
	struct gck_ctx		*ctx = rv->fctx;
	struct gck_frame	 f;
	unsigned char		 hdr[GCK_FRAME_HDR];
	char			*buf;
	json_t			*o = NULL;
	json_int_t		 total;
	uint64_t		 seq;
	size_t			 got;
	int			 r, fd;

	if ((buf = malloc(GCK_CHUNK)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	if ((r = feed_prefix(rv)) != GCK_OK)
		goto out;
	for (seq = 0; ; seq++) {
		fd = rv->in[seq % rv->nin];
		r = gck_fd_read_wait(ctx, fd, hdr, sizeof hdr, -1,
		    rv->stop[0], &got);
		if (r == GCK_OK)
			r = gck_frame_unpack(ctx, hdr, &f, "gpusend");
		if (r == GCK_OK && f.len > 0)
			r = gck_fd_read_wait(ctx, fd, buf, f.len, -1,
			    rv->stop[0], NULL);
		if (r == GCK_ETRUNC || r == GCK_ETIMEDOUT) {
			r = gck_set_error(ctx, GCK_ETRUNC, "the sender went "
			    "away after %llu bytes of the image",
			    (unsigned long long)(rv->offset + rv->bytes));
			goto out;
		}
		if (r == GCK_EINTR && !gck_interrupted(ctx)) {
			r = gck_set_error(ctx, GCK_EINTR, "stopped");
			goto out;
		}
		if (r != GCK_OK)
			goto out;
		if (f.type == GCK_F_ABORT) {
			const char	*why = NULL;

			if ((o = json_loadb(buf, f.len, 0, NULL)) != NULL)
				why = json_string_value(json_object_get(o,
				    "error"));
			r = gck_set_error(ctx, GCK_EINTR, "the sender gave up "
			    "after %llu bytes of the image%s%s",
			    (unsigned long long)(rv->offset + rv->bytes),
			    why != NULL ? ": " : "", why != NULL ? why : "");
			goto out;
		}
		if ((f.type != GCK_F_DATA && f.type != GCK_F_END) ||
		    f.seq != seq || (f.type == GCK_F_DATA && f.len == 0)) {
			r = gck_set_error(ctx, GCK_EFORMAT, "gpusend sent frame "
			    "'%c' %llu where data frame %llu was due", f.type,
			    (unsigned long long)f.seq, (unsigned long long)seq);
			goto out;
		}
		if (f.type == GCK_F_DATA) {
			if ((r = deliver(rv, buf, f.len)) != GCK_OK)
				goto out;
			continue;
		}
		if ((o = gck_frame_parse(ctx, buf, f.len, "gpusend")) == NULL) {
			r = ctx->code;
			goto out;
		}
		total = json_integer_value(json_object_get(o, "bytes"));
		if (total < 0 || (uint64_t)total != rv->offset + rv->bytes) {
			r = gck_set_error(ctx, GCK_EFORMAT, "gpusend sent %lld "
			    "bytes of the image, %llu came", (long long)total,
			    (unsigned long long)(rv->offset + rv->bytes));
			goto out;
		}
		rv->ended = 1;
		r = GCK_OK;
		break;
	}
out:
	json_decref(o);
	free(buf);
	return r;
}

/*
 * After END: keeps the sender told that this side works on, and takes
 * its word on the restored tree (GO, BYE or ABORT; -1 for its going).
 */
static void
feed_control(struct recv *rv)
{
	struct gck_ctx		*ctx = rv->fctx;
	struct gck_frame	 f;
	unsigned char		 hdr[GCK_FRAME_HDR], skip[GCK_CTL_MAX];
	int			 r, word;

	for (;;) {
		r = gck_fd_read_wait(ctx, rv->in[0], hdr, sizeof hdr,
		    GCK_KEEPALIVE_MS, rv->stop[0], NULL);
		if (r == GCK_ETIMEDOUT) {
			unsigned char	ka[GCK_FRAME_HDR];

			gck_frame_pack(ka, GCK_F_KEEPALIVE, 0, 0);
			(void)send_frame(rv, ka, sizeof ka);
			continue;
		}
		if (r == GCK_EINTR && gck_interrupted(ctx))
			continue;
		if (r == GCK_EINTR)
			return;
		/* A data frame here is no word: it is not read, into skip. */
		word = -1;
		if (r == GCK_OK && gck_frame_unpack(ctx, hdr, &f, "gpusend") ==
		    GCK_OK && f.len <= sizeof skip && (f.len == 0 ||
		    gck_fd_read_wait(ctx, rv->in[0], skip, f.len, -1,
		    rv->stop[0], NULL) == GCK_OK) &&
		    (f.type == GCK_F_GO || f.type == GCK_F_BYE ||
		    f.type == GCK_F_ABORT))
			word = f.type;
		pthread_mutex_lock(&rv->mu);
		rv->word = word;
		pthread_cond_broadcast(&rv->cv);
		pthread_mutex_unlock(&rv->mu);
		if (word != GCK_F_GO)
			return;
	}
}

static void *
feeder_main(void *arg)
{
	struct recv	*rv = arg;
	int		 r;

	r = feed_data(rv);
	/* Known before the reader of the pipe can see its end. */
	pthread_mutex_lock(&rv->mu);
	rv->feed_err = r;
	rv->feeding = 0;
	pthread_cond_broadcast(&rv->cv);
	pthread_mutex_unlock(&rv->mu);
	if (rv->pipe_w != -1)
		close(rv->pipe_w);
	rv->pipe_w = -1;
	if (r == GCK_OK && rv->o->mode == GCK_RECV_RESTORE)
		feed_control(rv);
	return NULL;
}

/*
 * Starts the feeder, writing into a pipe whose read end is *rfdp; with
 * rfdp NULL, into no pipe (the cache alone keeps what comes).
 */
static int
feeder_start(struct recv *rv, int *rfdp)
{
	struct gck_ctx	*ctx = rv->ctx;
	int		 p[2] = { -1, -1 };

	if ((rfdp != NULL && pipe2(p, O_CLOEXEC) == -1) ||
	    pipe2(rv->stop, O_CLOEXEC) == -1)
		return gck_set_syserr(ctx, errno, "cannot make a pipe: %s",
		    strerror(errno));
	if (rfdp != NULL) {
		(void)fcntl(p[1], F_SETPIPE_SZ, (int)GCK_CHUNK);
		*rfdp = p[0];
	}
	rv->pipe_w = p[1];
	rv->feeding = 1;
	if ((errno = pthread_create(&rv->feeder, NULL, feeder_main, rv)) !=
	    0) {
		rv->feeding = 0;
		return gck_set_syserr(ctx, errno, "cannot start a thread: %s",
		    strerror(errno));
	}
	rv->started = 1;
	return GCK_OK;
}

/* Stops the feeder wherever it is, and waits for it. */
static void
feeder_stop(struct recv *rv)
{
	if (rv->stop[1] == -1)
		return;
	if (rv->started) {
		(void)!write(rv->stop[1], "x", 1);
		pthread_join(rv->feeder, NULL);
		rv->started = 0;
	}
	close(rv->stop[0]);
	close(rv->stop[1]);
	rv->stop[0] = rv->stop[1] = -1;
}

/*
 * Waits for the data to be all in (or not) and returns the feeder's
 * code; or, without wait, GCK_OK if it still feeds.
 */
static int
feeder_done(struct recv *rv, int wait)
{
	int	r;

	pthread_mutex_lock(&rv->mu);
	while (wait && rv->feeding)
		pthread_cond_wait(&rv->cv, &rv->mu);
	r = rv->feed_err;
	pthread_mutex_unlock(&rv->mu);
	return r;
}

/*
 * The restored tree is there, stopped: says so, and lets it run only on
 * the sender's GO.
 */
static int
ready_hook(struct gck_ctx *ctx, void *arg, pid_t root)
{
	struct recv	*rv = arg;
	struct timespec	 until;
	int		 r, word;

	if ((r = feeder_done(rv, 1)) != GCK_OK || !rv->ended) {
		if (r == GCK_OK)
			return gck_set_error(ctx, GCK_ETRUNC, "the image "
			    "ended before gpusend said it had all been sent");
		gck_set_error(ctx, r, "%s", rv->fctx->msg);
		return r;
	}
	if ((r = record_open(rv)) != GCK_OK)
		return r;
	gck_log(ctx, 1, "process tree %d restored, stopped: waiting for "
	    "the hand-over", (int)root);
	if (send_json(rv, GCK_F_READY, "{s:i}", "pid", (int)root) != GCK_OK) {
		record(rv, 1, "aborted\n");
		return gck_set_error(ctx, GCK_EINTR, "gpusend went away "
		    "before the hand-over");
	}
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += rv->o->timeout_ms / 1000;
	until.tv_nsec += (long)(rv->o->timeout_ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&rv->mu);
	while (rv->word == 0 && pthread_cond_timedwait(&rv->cv, &rv->mu,
	    &until) != ETIMEDOUT)
		;
	word = rv->word;
	pthread_mutex_unlock(&rv->mu);
	if (word != GCK_F_GO) {
		record(rv, 1, "aborted\n");
		return gck_set_error(ctx, word == 0 ? GCK_ETIMEDOUT : GCK_EINTR,
		    "gpusend %s before the hand-over", word == 0 ?
		    "said nothing" : word == GCK_F_ABORT ? "gave up" :
		    "went away");
	}
	record(rv, 0, "go %d\n", (int)root);
	return GCK_OK;
}

/* Takes the extra connections of --parallel, in their order. */
static int
accept_joins(struct recv *rv)
{
	struct gck_ctx		*ctx = rv->ctx;
	struct gck_frame	 f;
	struct ucred		 cred;
	socklen_t		 clen;
	unsigned char		 hdr[GCK_FRAME_HDR];
	char			 buf[GCK_CTL_MAX];
	struct pollfd		 pfd;
	json_t			*o;
	json_int_t		 idx;
	unsigned		 got;
	int			 fd, r;

	for (got = 1; got < rv->nin; got++) {
		pfd.fd = rv->listen;
		pfd.events = POLLIN;
		if ((r = poll(&pfd, 1, JOIN_WAIT_MS)) <= 0)
			return gck_set_error(ctx, GCK_ETIMEDOUT, "only %u of "
			    "%u connections came", got, rv->nin);
		if ((fd = accept4(rv->listen, NULL, NULL, SOCK_CLOEXEC)) == -1)
			return gck_set_syserr(ctx, errno, "accept: %s",
			    strerror(errno));
		clen = sizeof cred;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) ==
		    -1 || cred.uid != geteuid()) {
			close(fd);
			got--;
			continue;
		}
		if ((r = gck_fd_read_wait(ctx, fd, hdr, sizeof hdr,
		    JOIN_WAIT_MS, -1, NULL)) == GCK_OK &&
		    (r = gck_frame_unpack(ctx, hdr, &f, "gpusend")) == GCK_OK &&
		    (f.type != GCK_F_JOIN || (r = gck_fd_read_wait(ctx, fd,
		    buf, f.len, JOIN_WAIT_MS, -1, NULL)) != GCK_OK ||
		    (o = gck_frame_parse(ctx, buf, f.len, "gpusend")) == NULL))
			r = GCK_EFORMAT;
		if (r != GCK_OK) {
			close(fd);
			return gck_set_error(ctx, GCK_EFORMAT, "an extra "
			    "connection did not say which it is");
		}
		idx = json_integer_value(json_object_get(o, "index"));
		json_decref(o);
		if (idx < 1 || idx >= (json_int_t)rv->nin ||
		    rv->in[idx] != -1) {
			close(fd);
			return gck_set_error(ctx, GCK_EFORMAT, "an extra "
			    "connection says it is stream %lld of %u",
			    (long long)idx, rv->nin);
		}
		rv->in[idx] = fd;
	}
	close(rv->listen);
	rv->listen = -1;
	unlink(rv->sockpath);
	rv->sockpath[0] = '\0';
	return GCK_OK;
}

/* Makes the socket the extra connections of --parallel come to. */
static int
listen_joins(struct recv *rv)
{
	struct gck_ctx		*ctx = rv->ctx;
	struct sockaddr_un	 sa;
	char			 dir[PATH_MAX];
	int			 r;

	if (rv->nin < 2)
		return GCK_OK;
	if ((r = gck_rundir(ctx, dir, sizeof dir)) != GCK_OK)
		return r;
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	if ((size_t)snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%s.sock",
	    dir, rv->o->id) >= sizeof sa.sun_path)
		return gck_set_error(ctx, GCK_EINVAL, "run directory '%s' "
		    "too long for a socket", dir);
	if ((rv->listen = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) ==
	    -1 || bind(rv->listen, (struct sockaddr *)&sa, sizeof sa) == -1 ||
	    listen(rv->listen, GCK_STREAMS_MAX) == -1)
		return gck_set_syserr(ctx, errno, "cannot listen on '%s': %s",
		    sa.sun_path, strerror(errno));
	snprintf(rv->sockpath, sizeof rv->sockpath, "%s", sa.sun_path);
	return GCK_OK;
}

/*
 * Whether the chunk at k of t's entries in the order of their digests
 * is the one before again (the same chunk, in another image).
 */
static int
offer_dup(const struct gck_ptab *t, size_t k)
{
	const struct gck_pbase	*a, *b;

	if (k == 0)
		return 0;
	a = &t->ent[t->byd[k - 1]];
	b = &t->ent[t->byd[k]];
	return a->size == b->size && gck_digest_equal(&a->d, &b->d);
}

/*
 * The chunks of pool whose pages are offered (gpusend --live, -p), each
 * once: how many, *np, and their pages, *pagesp, at most PAGES_MAX of
 * them, the first *endp of the table's entries in digest order.
 */
static const struct gck_ptab *
offer_pages(struct recv *rv, struct gck_parents *pool, size_t *np,
    uint64_t *pagesp, size_t *endp)
{
	const struct gck_ptab	*t;
	size_t			 k, n = 0;
	uint64_t		 pages = 0, size;

	*np = *endp = 0;
	*pagesp = 0;
	if (!rv->o->pages || gck_parents_pool_offer(pool) != GCK_OK ||
	    (t = gck_parents_ptab(pool)) == NULL || t->nent == 0 ||
	    t->byd == NULL)
		return NULL;
	for (k = 0; k < t->nent; k++) {
		if (offer_dup(t, k))
			continue;
		size = t->ent[t->byd[k]].size / GCK_PAGE;
		if (pages + size > PAGES_MAX)
			break;
		pages += size;
		n++;
	}
	*np = n;
	*pagesp = pages;
	*endp = k;
	return n > 0 ? t : NULL;
}

static int
send_pages(struct recv *rv, const struct gck_ptab *t, size_t n)
{
	const struct gck_pbase	*e;
	unsigned char		*buf;
	size_t			 i, at = 0, rec;
	uint64_t		 seq = 0;
	uint32_t		 np;
	int			 r = GCK_OK;

	if ((buf = malloc(GCK_FRAME_HDR + GCK_FRAME_MAX)) == NULL)
		return GCK_ENOMEM;
	for (i = 0; i < n && r == GCK_OK; i++) {
		if (offer_dup(t, i))
			continue;
		e = &t->ent[t->byd[i]];
		np = (uint32_t)(e->size / GCK_PAGE);
		rec = GCK_DIGEST_MAX + 4 + (size_t)np * GCK_PDIG;
		if (at + rec > GCK_FRAME_MAX) {
			gck_frame_pack(buf, GCK_F_PAGES, (uint32_t)at, seq++);
			r = send_frame(rv, buf, GCK_FRAME_HDR + at);
			at = 0;
		}
		memcpy(buf + GCK_FRAME_HDR + at, e->d.b, GCK_DIGEST_MAX);
		buf[GCK_FRAME_HDR + at + GCK_DIGEST_MAX] = np & 0xff;
		buf[GCK_FRAME_HDR + at + GCK_DIGEST_MAX + 1] = (np >> 8) & 0xff;
		buf[GCK_FRAME_HDR + at + GCK_DIGEST_MAX + 2] = (np >> 16) &
		    0xff;
		buf[GCK_FRAME_HDR + at + GCK_DIGEST_MAX + 3] = np >> 24;
		memcpy(buf + GCK_FRAME_HDR + at + GCK_DIGEST_MAX + 4,
		    t->dig + e->first * GCK_PDIG, (size_t)np * GCK_PDIG);
		at += rec;
	}
	if (r == GCK_OK && at > 0) {
		gck_frame_pack(buf, GCK_F_PAGES, (uint32_t)at, seq);
		r = send_frame(rv, buf, GCK_FRAME_HDR + at);
	}
	free(buf);
	return r;
}

/*
 * Says hello, and with it what the cache holds: the ids of its images
 * and how many chunks they store, whose digests follow in HAVE frames,
 * and when asked, the pages of as many of them as it says, in PAGES
 * frames after those.  Takes hello.  Returns GCK_OK, or GCK_EINTR when
 * gpusend went away.
 */
static int
offer_cache(struct recv *rv, json_t *hello)
{
	struct gck_parents	*pool;
	const struct gck_ptab	*pt = NULL;
	struct gck_digest	*d = NULL;
	unsigned char		*buf = NULL;
	json_t			*ids, *c;
	size_t			 n = 0, i, j, k, per, len, npc = 0, nend = 0;
	uint64_t		 seq = 0, npages = 0;
	int			 r;

	pool = rv->cache != NULL ? gck_cache_pool(rv->cache) : NULL;
	if (pool != NULL && gck_parents_count(pool) > 0 &&
	    gck_parents_pool_digests(pool, &d, &n) == GCK_OK && n > 0 &&
	    (ids = json_array()) != NULL) {
		for (i = 0; i < gck_parents_count(pool); i++)
			json_array_append_new(ids,
			    json_string(gck_parents_id(pool, i)));
		c = json_pack("{s:o,s:I}", "images", ids, "chunks",
		    (json_int_t)n);
		if (c != NULL && (pt = offer_pages(rv, pool, &npc, &npages,
		    &nend)) != NULL)
			json_object_set_new(c, "pages", json_pack("{s:I,s:I}",
			    "chunks", (json_int_t)npc, "pages",
			    (json_int_t)npages));
		json_object_set_new(hello, "cache", c);
	}
	buf = gck_frame_obj(GCK_F_HELLO, 0, &len, hello);
	json_decref(hello);
	if (buf == NULL || send_frame(rv, buf, len) != GCK_OK) {
		free(buf);
		free(d);
		return gck_set_error(rv->ctx, GCK_EINTR, "gpusend went away");
	}
	free(buf);
	buf = NULL;
	per = GCK_FRAME_MAX / GCK_DIGEST_MAX;
	if (n > 0 && (buf = malloc(GCK_FRAME_HDR + per * GCK_DIGEST_MAX)) ==
	    NULL) {
		free(d);
		return gck_set_error(rv->ctx, GCK_ENOMEM, "out of memory");
	}
	for (i = 0, r = GCK_OK; i < n && r == GCK_OK; i += k, seq++) {
		k = n - i < per ? n - i : per;
		gck_frame_pack(buf, GCK_F_HAVE, (uint32_t)(k * GCK_DIGEST_MAX),
		    seq);
		for (j = 0; j < k; j++)
			memcpy(buf + GCK_FRAME_HDR + j * GCK_DIGEST_MAX,
			    d[i + j].b, GCK_DIGEST_MAX);
		r = send_frame(rv, buf, GCK_FRAME_HDR + k * GCK_DIGEST_MAX);
	}
	free(buf);
	free(d);
	if (r == GCK_OK && pt != NULL && (r = send_pages(rv, pt, nend)) ==
	    GCK_ENOMEM)
		return gck_set_error(rv->ctx, GCK_ENOMEM, "out of memory");
	if (r != GCK_OK)
		return gck_set_error(rv->ctx, GCK_EINTR, "gpusend went away");
	if (n > 0)
		gck_log(rv->ctx, 1, "the cache offers %zu chunk%s of %zu "
		    "image%s", n, n == 1 ? "" : "s", gck_parents_count(pool),
		    gck_parents_count(pool) == 1 ? "" : "s");
	if (pt != NULL)
		gck_log(rv->ctx, 1, "and the %" PRIu64 " pages of %zu of "
		    "them", npages, npc);
	return GCK_OK;
}

/*
 * Says hello (with what a resumed send may skip, and what the cache
 * holds), and reads where the sender starts from.
 */
static int
handshake(struct recv *rv, uint64_t partial, const char *digest)
{
	struct gck_ctx		*ctx = rv->ctx;
	struct gck_frame	 f;
	unsigned char		 hdr[GCK_FRAME_HDR];
	char			 buf[GCK_CTL_MAX], host[256];
	json_t			*o, *hello;
	json_int_t		 off;
	int			 r;

	if (gethostname(host, sizeof host) == -1)
		snprintf(host, sizeof host, "?");
	host[sizeof host - 1] = '\0';
	if ((hello = json_pack("{s:i,s:s,s:s}", "proto", GCK_PROTO,
	    "version", gck_version(), "host", host)) == NULL ||
	    (digest != NULL && json_object_set_new(hello, "partial",
	    json_pack("{s:I,s:s}", "size", (json_int_t)partial, "xxh3",
	    digest)) != 0)) {
		json_decref(hello);
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	}
	if ((r = offer_cache(rv, hello)) != GCK_OK)
		return r;
	if ((r = gck_fd_read_wait(ctx, rv->in[0], hdr, sizeof hdr,
	    (int)rv->o->timeout_ms, -1, NULL)) != GCK_OK ||
	    (r = gck_frame_unpack(ctx, hdr, &f, "gpusend")) != GCK_OK ||
	    f.type != GCK_F_START || (r = gck_fd_read_wait(ctx, rv->in[0],
	    buf, f.len, (int)rv->o->timeout_ms, -1, NULL)) != GCK_OK) {
		if (r == GCK_EFORMAT)
			return r;
		return gck_set_error(ctx, GCK_EFORMAT, "gpusend did not "
		    "start the image");
	}
	if ((o = gck_frame_parse(ctx, buf, f.len, "gpusend")) == NULL)
		return ctx->code;
	off = json_integer_value(json_object_get(o, "offset"));
	rv->whole = json_is_true(json_object_get(o, "whole"));
	json_decref(o);
	if (off < 0 || (uint64_t)off > partial)
		return gck_set_error(ctx, GCK_EFORMAT, "gpusend asked to "
		    "resume at byte %lld of %llu", (long long)off,
		    (unsigned long long)partial);
	rv->offset = (uint64_t)off;
	return accept_joins(rv);
}

/*
 * Whether the feeder failed only because the reader of its pipe (the
 * restore, the verifier) had stopped: then the reader's failure is the
 * cause.
 */
static int
pipe_closed(struct recv *rv, int fr)
{
	return fr == GCK_ESYS && gck_errno(rv->fctx) == EPIPE;
}

/*
 * The cache directory: o's, else $GCK_CACHE, else /var/cache/gpuckpt
 * for root and $XDG_CACHE_HOME/gpuckpt (~/.cache/gpuckpt) for others;
 * NULL for none ("" or "none").
 */
static const char *
cache_dir(const struct gck_recv_opts *o, char *buf, size_t size)
{
	const char	*e;

	if ((e = o->cache) == NULL)
		e = getenv("GCK_CACHE");
	if (e != NULL && *e != '\0')
		return strcmp(e, "none") == 0 ? NULL : e;
	if (o->cache != NULL)
		return NULL;
	if (geteuid() == 0)
		return "/var/cache/gpuckpt";
	if ((e = getenv("XDG_CACHE_HOME")) != NULL && *e == '/')
		snprintf(buf, size, "%s/gpuckpt", e);
	else if ((e = getenv("HOME")) != NULL && *e == '/')
		snprintf(buf, size, "%s/.cache/gpuckpt", e);
	else
		return NULL;
	return buf;
}

/*
 * Opens the cache, if there is to be one: a cache that cannot be used
 * costs the hand-over nothing but the chunks it would have saved.
 */
static void
cache_open(struct recv *rv)
{
	const char	*dir;
	char		 buf[PATH_MAX];

	if ((dir = cache_dir(rv->o, buf, sizeof buf)) != NULL &&
	    gck_cache_open(rv->ctx, dir, rv->o->cache_size, &rv->cache) !=
	    GCK_OK)
		gck_log(rv->ctx, 1, "no cache: %s", rv->ctx->msg);
}

/*
 * The stop image of a live migration holds little but references to the
 * chunks of the cache: all of it is taken in first, kept by the cache,
 * and restored from there, a file, so that the processes' memory is
 * written in place from the cache on every CPU (fill.c) rather than
 * pushed through criu's one pipe.  *rfdp: the image, from its start.
 */
static int
recv_whole(struct recv *rv, int *rfdp)
{
	struct gck_ctx	*ctx = rv->ctx;
	struct timespec	 until;
	int		 r, feeding;

	gck_log(ctx, 1, "taking the whole image in before restoring it");
	if ((r = feeder_start(rv, NULL)) != GCK_OK)
		return r;
	/* A signal ends the wait (the feeder is stopped on the way out). */
	pthread_mutex_lock(&rv->mu);
	while ((feeding = rv->feeding) && !gck_interrupted(ctx)) {
		clock_gettime(CLOCK_REALTIME, &until);
		if ((until.tv_nsec += 100 * 1000 * 1000) >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		(void)pthread_cond_timedwait(&rv->cv, &rv->mu, &until);
	}
	r = rv->feed_err;
	pthread_mutex_unlock(&rv->mu);
	if (feeding)
		return gck_check_interrupt(ctx);
	if (r != GCK_OK)
		return gck_set_error(ctx, r, "%s", rv->fctx->msg);
	if (!rv->ended)
		return gck_set_error(ctx, GCK_ETRUNC, "the image ended before "
		    "gpusend said it had all been sent");
	if ((*rfdp = gck_cache_reopen(rv->cache)) == -1)
		return ctx->code;
	return GCK_OK;
}

/* Restores the image as it arrives; the hand-over is in ready_hook. */
static int
recv_restore(struct recv *rv, pid_t *rootp)
{
	struct gck_ctx			*ctx = rv->ctx;
	struct gck_restore_opts		 ro;
	int				 r, rfd = -1, fr, word;
	struct timespec			 until;

	cache_open(rv);
	if ((r = handshake(rv, 0, NULL)) != GCK_OK ||
	    (rv->cache != NULL && (r = gck_cache_spool(rv->cache)) !=
	    GCK_OK))
		goto out;
	/*
	 * So is an image whose signature must be checked before anything
	 * is restored (gpurestore --allowed-signers): at its end.
	 */
	if ((rv->whole || gck_sig_policy(rv->o->allowed_signers) != NULL) &&
	    rv->cache != NULL && gck_cache_kept(rv->cache)) {
		if ((r = recv_whole(rv, &rfd)) != GCK_OK)
			goto out;
	} else if ((r = feeder_start(rv, &rfd)) != GCK_OK)
		goto out;
	memset(&ro, 0, sizeof ro);
	ro.infd = rfd;
	ro.tmpdir = rv->o->tmpdir;
	ro.gpu_map = rv->o->gpu_map;
	ro.tcp_close = rv->o->tcp_close;
	ro.root = rv->o->root;
	ro.mount_map = rv->o->mount_map;
	ro.nmount_map = rv->o->nmount_map;
	ro.allowed_signers = rv->o->allowed_signers;
	/* What a restore that failed here left dying is waited for. */
	ro.pid_wait_ms = 2000;
	if (rv->cache != NULL)
		ro.pool = gck_cache_pool(rv->cache);
	r = gck_restore_ex(ctx, &ro, ready_hook, rv, rootp);
	close(rfd);
	rfd = -1;
	if (r != GCK_OK && rv->cache != NULL &&
	    gck_cache_drop_bad(rv->cache) != NULL)
		rv->cache_bad = 1;
	if (r != GCK_OK) {
		/*
		 * The sender's going is the cause, not what it did to us;
		 * but a feeder that failed to write to the pipe failed
		 * because the restore had stopped reading it.
		 */
		fr = feeder_done(rv, 0);
		if (fr != GCK_OK && !pipe_closed(rv, fr))
			gck_set_error(ctx, fr, "%s", rv->fctx->msg);
		record(rv, 1, "failed\n");
		goto out;
	}
	record(rv, 1, "running %d\n", (int)*rootp);
	gck_log(ctx, 1, "process tree %d runs", (int)*rootp);
	/*
	 * The tree runs: the image joins the cache, if it came whole,
	 * before the sender hears it, so that its next hand-over finds the
	 * cache settled.
	 */
	if (rv->cache != NULL && feeder_done(rv, 1) == GCK_OK && rv->ended)
		gck_cache_commit(rv->cache);
	(void)send_json(rv, GCK_F_RUNNING, "{s:i}", "pid", (int)*rootp);
	/* Forget the record once the sender has the word. */
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += rv->o->timeout_ms / 1000 + 1;
	pthread_mutex_lock(&rv->mu);
	while (rv->word == GCK_F_GO && pthread_cond_timedwait(&rv->cv,
	    &rv->mu, &until) != ETIMEDOUT)
		;
	word = rv->word;
	pthread_mutex_unlock(&rv->mu);
	if (word == GCK_F_BYE) {
		unlink(rv->recpath);
		rv->recpath[0] = '\0';
	}
	r = GCK_OK;
out:
	if (rfd != -1)
		close(rfd);
	return r;
}

/* Resolves where a stored image goes: *finalp and its partial *partp. */
static int
store_paths(struct gck_ctx *ctx, const struct gck_recv_opts *o,
    char **finalp, char **partp)
{
	const char	*path = o->path != NULL && *o->path != '\0' ?
			    o->path : ".", *slash, *name;
	struct stat	 st;
	size_t		 n = strlen(path);
	int		 isdir;

	isdir = path[n - 1] == '/' || (stat(path, &st) == 0 &&
	    S_ISDIR(st.st_mode));
	if (isdir) {
		name = o->name;
		if (name == NULL || *name == '\0' || strchr(name, '/') !=
		    NULL || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
			return gck_set_error(ctx, GCK_EINVAL, "'%s' is a "
			    "directory: give the image a file name", path);
		if (asprintf(finalp, "%s%s%s", path, path[n - 1] == '/' ?
		    "" : "/", name) == -1)
			return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	} else if ((*finalp = strdup(path)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	slash = strrchr(*finalp, '/');
	if (asprintf(partp, "%.*s.%s.gpurecv-part", slash != NULL ?
	    (int)(slash - *finalp + 1) : 0, *finalp, slash != NULL ?
	    slash + 1 : *finalp) == -1) {
		*partp = NULL;
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	}
	if (stat(*finalp, &st) == 0 && S_ISDIR(st.st_mode))
		return gck_set_error(ctx, GCK_EINVAL, "'%s' is a directory",
		    *finalp);
	return GCK_OK;
}

/* Makes the stored image durable under its name. */
static int
store_commit(struct gck_ctx *ctx, int fd, const char *part,
    const char *final)
{
	char	*dir, *slash;
	int	 dfd;

	if (fsync(fd) == -1)
		return gck_set_syserr(ctx, errno, "cannot write '%s': %s", part,
		    strerror(errno));
	if (rename(part, final) == -1)
		return gck_set_syserr(ctx, errno, "cannot rename to '%s': %s",
		    final, strerror(errno));
	if ((dir = strdup(final)) != NULL) {
		if ((slash = strrchr(dir, '/')) != NULL)
			slash[slash == dir] = '\0';
		else
			snprintf(dir, 2, ".");
		if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) !=
		    -1) {
			fsync(dfd);
			close(dfd);
		}
		free(dir);
	}
	return GCK_OK;
}

/*
 * Starts the feeder and verifies the image as it comes: a bad image is
 * refused at its first bad part.  Returns the reader's result, and in
 * *frp the feeder's.
 */
static int
verify_fed(struct recv *rv, int *frp)
{
	const struct gck_manifest	*m;
	struct gck_reader		*rd = NULL;
	int				 r, rfd;

	*frp = GCK_OK;
	if ((r = feeder_start(rv, &rfd)) != GCK_OK)
		return r;
	if ((r = gck_reader_new(rv->ctx, rfd, &rd)) == GCK_OK &&
	    (r = gck_reader_head(rd, &m)) == GCK_OK) {
		/*
		 * A round of chunks may hold patches of the chunks of the
		 * cache's images (the rounds before), which its manifest
		 * names: read from there, and checked.
		 */
		if (gck_manifest_cached(m) && rv->cache != NULL &&
		    (r = gck_parents_pool_check(gck_cache_pool(rv->cache),
		    m)) == GCK_OK)
			gck_reader_set_parents(rd, gck_cache_pool(rv->cache));
		if (r == GCK_OK)
			r = gck_reader_extract(rd, -1);
	}
	close(rfd);
	*frp = feeder_done(rv, r == GCK_OK);
	gck_reader_free(rd);
	return r;
}

/*
 * Stores the image under a temporary name, verifying it as it arrives
 * (the prefix kept from an interrupted send included), and renames it
 * once whole.  An image found bad is removed; one cut short is kept for
 * a resumed send.
 */
static int
recv_store(struct recv *rv, char **storedp)
{
	struct gck_ctx	*ctx = rv->ctx;
	struct stat	 st;
	char		*final = NULL, *part = NULL, hex[33];
	char		 msg[GCK_ERRMAX];
	uint64_t	 have = 0;
	int		 r, fr, keep = 1;

	if ((r = store_paths(ctx, rv->o, &final, &part)) != GCK_OK)
		goto out;
	/* A partial made now is ours to remove; one found is kept. */
	if ((rv->storefd = open(part, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC |
	    O_NOFOLLOW, 0666)) != -1)
		keep = 0;
	else if (errno == EEXIST)
		rv->storefd = open(part, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (rv->storefd == -1) {
		r = gck_set_syserr(ctx, errno, "cannot create '%s': %s", part,
		    strerror(errno));
		goto out;
	}
	if (flock(rv->storefd, LOCK_EX | LOCK_NB) == -1) {
		close(rv->storefd);
		rv->storefd = -1;
		keep = 1;
		r = gck_set_error(ctx, GCK_EBUSY, "another gpurecv is "
		    "receiving '%s'", final);
		goto out;
	}
	if (fstat(rv->storefd, &st) == -1 || !S_ISREG(st.st_mode)) {
		r = gck_set_error(ctx, GCK_EUNSAFE, "'%s' is not a regular "
		    "file", part);
		goto out;
	}
	if (rv->o->resume && st.st_size > 0) {
		have = (uint64_t)st.st_size;
		if ((r = gck_prefix_digest(ctx, rv->storefd, have, hex)) !=
		    GCK_OK)
			goto out;
	}
	if ((r = handshake(rv, have, have > 0 ? hex : NULL)) != GCK_OK)
		goto out;
	keep = 0;
	if (ftruncate(rv->storefd, (off_t)rv->offset) == -1) {
		r = gck_set_syserr(ctx, errno, "cannot truncate '%s': %s",
		    part, strerror(errno));
		goto out;
	}
	if (rv->offset > 0)
		gck_log(ctx, 1, "resuming '%s' after %llu bytes", final,
		    (unsigned long long)rv->offset);
	r = verify_fed(rv, &fr);
	if (fr != GCK_OK && !pipe_closed(rv, fr)) {
		/* Cut short: what came is kept, for --resume. */
		snprintf(msg, sizeof msg, "%s", rv->fctx->msg);
		keep = fr == GCK_ETRUNC || fr == GCK_EINTR;
		r = gck_set_error(ctx, fr, "%s%s", msg, keep ? "; what came is "
		    "kept for gpusend --resume" : "");
		if (keep)
			fsync(rv->storefd);
		goto out;
	}
	if (r == GCK_OK && fr != GCK_OK) {
		r = fr;
		gck_set_error(ctx, fr, "%s", rv->fctx->msg);
	}
	if (r != GCK_OK)
		goto out;
	if (!rv->ended) {
		r = gck_set_error(ctx, GCK_EFORMAT, "data after the image");
		goto out;
	}
	if ((r = store_commit(ctx, rv->storefd, part, final)) != GCK_OK)
		goto out;
	keep = 1;
	gck_log(ctx, 1, "stored '%s', %llu bytes", final,
	    (unsigned long long)(rv->offset + rv->bytes));
	*storedp = final;
	final = NULL;
	(void)send_json(rv, GCK_F_STORED, "{s:s,s:I}", "path", *storedp,
	    "bytes", (json_int_t)(rv->offset + rv->bytes));
	r = GCK_OK;
out:
	feeder_stop(rv);
	if (r != GCK_OK && !keep && part != NULL)
		unlink(part);
	free(final);
	free(part);
	return r;
}

/*
 * --to-cache: the image, verified as it arrives, joins the cache and
 * nothing else happens: a round of a live migration, whose chunks the
 * hand-over that ends it refers to.  Nothing is kept of an image that
 * fails.
 */
static int
recv_cache(struct recv *rv)
{
	struct gck_ctx	*ctx = rv->ctx;
	int		 r, fr;

	cache_open(rv);
	if (rv->cache == NULL) {
		rv->no_cache = 1;
		return gck_set_error(ctx, GCK_EINVAL, "no cache to keep the "
		    "chunks in (--no-cache, GCK_CACHE=none, or it cannot be "
		    "used)");
	}
	if ((r = handshake(rv, 0, NULL)) != GCK_OK ||
	    (r = gck_cache_spool(rv->cache)) != GCK_OK)
		goto out;
	r = verify_fed(rv, &fr);
	if (fr != GCK_OK && (r == GCK_OK || !pipe_closed(rv, fr)))
		r = gck_set_error(ctx, fr, "%s", rv->fctx->msg);
	if (r != GCK_OK)
		goto out;
	if (!rv->ended) {
		r = gck_set_error(ctx, GCK_EFORMAT, "data after the image");
		goto out;
	}
	gck_cache_commit(rv->cache);
	(void)send_json(rv, GCK_F_STORED, "{s:b,s:I}", "cache", 1, "bytes",
	    (json_int_t)rv->bytes);
	r = GCK_OK;
out:
	feeder_stop(rv);
	return r;
}

/*
 * --join: relays one extra connection of --parallel to its gpurecv.
 * Waits up to JOIN_WAIT_MS for that gpurecv's socket, and less when
 * there is no one left to wait for: when the sender has gone (the end
 * of its session that reads our standard output is closed), or when
 * that gpurecv has (its socket is there, and nobody listens on it).
 */
static int
recv_join(struct recv *rv)
{
	struct gck_ctx		*ctx = rv->ctx;
	struct sockaddr_un	 sa;
	struct pollfd		 pfd;
	char			 dir[PATH_MAX], *buf = NULL;
	ssize_t			 n;
	int64_t			 now, end, refused = -1;
	int			 fd = -1, r, e;

	if ((r = gck_rundir(ctx, dir, sizeof dir)) != GCK_OK)
		return r;
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	if ((size_t)snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%s.sock",
	    dir, rv->o->id) >= sizeof sa.sun_path)
		return gck_set_error(ctx, GCK_EINVAL, "run directory '%s' "
		    "too long for a socket", dir);
	end = gck_now_ms() + JOIN_WAIT_MS;
	for (;;) {
		if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) ==
		    -1)
			return gck_set_syserr(ctx, errno, "socket: %s",
			    strerror(errno));
		if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0)
			break;
		e = errno;
		close(fd);
		fd = -1;
		now = gck_now_ms();
		/* It listens as soon as it binds: refused a while, it died. */
		if (e != ECONNREFUSED)
			refused = -1;
		else if (refused == -1)
			refused = now;
		else if (now - refused >= JOIN_REFUSED_MS)
			return gck_set_error(ctx, GCK_EREMOTE, "the gpurecv of "
			    "hand-over %s is gone", rv->o->id);
		if (now >= end)
			return gck_set_error(ctx, GCK_ETIMEDOUT, "no gpurecv "
			    "waits for hand-over %s", rv->o->id);
		pfd.fd = rv->o->outfd;
		pfd.events = 0;
		if (poll(&pfd, 1, 0) == 1 &&
		    (pfd.revents & (POLLERR | POLLHUP)) != 0)
			return gck_set_error(ctx, GCK_EINTR, "gpusend went "
			    "away");
		gck_msleep(50);
		if ((r = gck_check_interrupt(ctx)) != GCK_OK)
			return r;
	}
	if ((buf = malloc(GCK_CHUNK)) == NULL) {
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	for (;;) {
		if ((n = read(rv->o->infd, buf, GCK_CHUNK)) == -1) {
			if (errno == EINTR && gck_check_interrupt(ctx) ==
			    GCK_OK)
				continue;
			r = gck_set_syserr(ctx, errno, "cannot read: %s",
			    strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		if ((r = gck_write_all(ctx, fd, buf, (size_t)n,
		    "to gpurecv")) != GCK_OK)
			goto out;
	}
	r = GCK_OK;
out:
	free(buf);
	if (fd != -1)
		close(fd);
	return r;
}

/*
 * --outcome: what became of a hand-over whose sender lost its
 * connection: "running PID", "failed" or "unknown", on outfd.
 */
static int
recv_outcome(struct recv *rv)
{
	struct gck_ctx	*ctx = rv->ctx;
	char		 dir[PATH_MAX], path[PATH_MAX + 64], buf[128];
	const char	*say = "unknown\n";
	ssize_t		 n;
	int		 fd, r, waited, locked = 0, pid;

	if ((r = gck_rundir(ctx, dir, sizeof dir)) != GCK_OK)
		return r;
	snprintf(path, sizeof path, "%s/%s.rec", dir, rv->o->id);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) != -1) {
		/* Its gpurecv holds it while it decides. */
		for (waited = 0; waited < (int)rv->o->timeout_ms;
		    waited += 50) {
			if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
				locked = 1;
				break;
			}
			gck_msleep(50);
		}
		n = locked ? pread(fd, buf, sizeof buf - 1, 0) : -1;
		buf[n > 0 ? n : 0] = '\0';
		if (sscanf(buf, "running %d", &pid) == 1 && pid > 0) {
			snprintf(buf, sizeof buf, "running %d\n", pid);
			say = buf;
		} else if (strncmp(buf, "failed", 6) == 0 ||
		    strncmp(buf, "aborted", 7) == 0 ||
		    strncmp(buf, "ready", 5) == 0) {
			/* Never let run: killed, or left stopped. */
			say = "failed\n";
		}
		close(fd);
	}
	return gck_write_all(ctx, rv->o->outfd, say, strlen(say), "outcome");
}

int
gck_recv(struct gck_ctx *ctx, const struct gck_recv_opts *o,
    struct gck_recv_result *res)
{
	struct recv	 rv;
	unsigned	 i;
	int		 r;
	char		 msg[GCK_ERRMAX];

	memset(res, 0, sizeof *res);
	res->pid = -1;
	memset(&rv, 0, sizeof rv);
	rv.ctx = ctx;
	rv.o = o;
	rv.listen = rv.recfd = rv.storefd = rv.pipe_w = -1;
	rv.stop[0] = rv.stop[1] = -1;
	rv.nin = o->streams > 0 ? o->streams : 1;
	for (i = 0; i < GCK_STREAMS_MAX; i++)
		rv.in[i] = -1;
	rv.in[0] = o->infd;
	pthread_mutex_init(&rv.out_mu, NULL);
	pthread_mutex_init(&rv.mu, NULL);
	pthread_cond_init(&rv.cv, NULL);
	if ((rv.fctx = gck_ctx_new()) == NULL) {
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	if ((r = id_ok(ctx, o->id)) != GCK_OK)
		goto out;
	if (rv.nin > GCK_STREAMS_MAX) {
		r = gck_set_error(ctx, GCK_EINVAL, "too many streams: %u",
		    rv.nin);
		goto out;
	}
	switch (o->mode) {
	case GCK_RECV_RESTORE:
		if ((r = gck_criu_can_restore(ctx, "have gpusend log in "
		    "there as root")) != GCK_OK)
			break;
		records_prune();
		if ((r = gck_restore_not_init(ctx)) == GCK_OK &&
		    (r = listen_joins(&rv)) == GCK_OK)
			r = recv_restore(&rv, &res->pid);
		break;
	case GCK_RECV_STORE:
		if ((r = listen_joins(&rv)) == GCK_OK)
			r = recv_store(&rv, &res->stored);
		break;
	case GCK_RECV_CACHE:
		if ((r = listen_joins(&rv)) == GCK_OK)
			r = recv_cache(&rv);
		break;
	case GCK_RECV_JOIN:
		r = recv_join(&rv);
		break;
	case GCK_RECV_OUTCOME:
		r = recv_outcome(&rv);
		break;
	default:
		r = gck_set_error(ctx, GCK_EINVAL, "invalid mode");
		break;
	}
	res->bytes = rv.offset + rv.bytes;
	res->offset = rv.offset;
	if (r != GCK_OK && (o->mode == GCK_RECV_RESTORE ||
	    o->mode == GCK_RECV_STORE || o->mode == GCK_RECV_CACHE)) {
		snprintf(msg, sizeof msg, "%s", ctx->msg);
		/* A damaged cached chunk, dropped: worth another try. */
		(void)send_json(&rv, GCK_F_ERROR, "{s:s,s:b,s:b}", "error", msg,
		    "retry", rv.cache_bad, "no_cache", rv.no_cache);
	}
out:
	feeder_stop(&rv);
	if (rv.listen != -1)
		close(rv.listen);
	if (rv.sockpath[0] != '\0')
		unlink(rv.sockpath);
	for (i = 1; i < GCK_STREAMS_MAX; i++)
		if (rv.in[i] != -1)
			close(rv.in[i]);
	if (rv.recfd != -1)
		close(rv.recfd);
	if (rv.storefd != -1)
		close(rv.storefd);
	if (rv.pipe_w != -1)
		close(rv.pipe_w);
	gck_ctx_free(rv.fctx);
	gck_cache_free(rv.cache);
	pthread_mutex_destroy(&rv.out_mu);
	pthread_mutex_destroy(&rv.mu);
	pthread_cond_destroy(&rv.cv);
	return r;
}

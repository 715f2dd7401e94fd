/*
 * send.c: gck_send(), the sending end of a hand-over over ssh.
 *
 * The remote gpurecv is reached first (host key, authentication, its
 * hello), so that a host that cannot take the image costs the tree
 * nothing.  The image, read from a file or made by gck_checkpoint_ex()
 * into a pipe, is cut into numbered data frames that one thread per
 * connection sends, round-robin, while the next are read.  For a live
 * tree, the hand-over is the commit hook of the checkpoint: the tree is
 * killed only once the remote has restored it, heard GO and said that it
 * runs; before GO every failure resumes it.  Should the connection be
 * lost after GO, a second connection asks the remote what became of it;
 * when nobody can tell, the tree is left stopped, never run twice.
 */
#include "config.h"

#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "private.h"
#include "core/guard.h"
#include "core/util.h"
#include "criu/criu.h"
#include "image/digest.h"
#include "image/image.h"
#include "image/manifest.h"
#include "image/parent.h"
#include "image/patch.h"
#include "ops/ops.h"
#include "transport/frame.h"
#include "transport/ssh.h"

#define QDEPTH		4	/* chunks queued per connection */
#define HAVE_MAX	(1 << 22)	/* digests a cache may offer: 4 TiB */
#define PAGES_MAX	(1u << 26)	/* its page digests: 256 GiB */
#define ROUND_SMALL_S	0.1		/* pre-copy ends below this */
#define STOP_WHOLE_S	1.0		/* a stop restored once in, below */
#define STOP_SHARE	0.25		/* or below this share of memory */

struct item {
	int	 type;		/* GCK_F_DATA, GCK_F_END, or 0 to stop */
	char	*buf;
	size_t	 len;
	uint64_t seq;
	uint64_t total;		/* END: image bytes in all */
};

struct queue {
	struct item	 items[QDEPTH];
	unsigned	 head, count;
};

struct send;

struct sender {
	struct send	*s;
	unsigned	 i;
};

struct send {
	struct gck_ctx			*ctx;
	const struct gck_send_opts	*o;
	struct gck_send_result		*res;
	char				 id[33];
	char				 rname[300];	/* "remote HOST" */
	int				 refused;	/* it said why it failed */
	unsigned			 n;		/* connections */
	struct gck_ssh			*c[GCK_STREAMS_MAX];
	struct gck_ctx			*cctx[GCK_STREAMS_MAX];

	/* The pump: one reader, a sender per connection. */
	int				 srcfd;
	int				 own_src;	/* close it to stop */
	int				 wfd;		/* the checkpoint's end */
	uint64_t			 offset;	/* resumed from */
	pthread_mutex_t			 mu;
	pthread_cond_t			 cv;
	struct queue			 q[GCK_STREAMS_MAX];
	pthread_t			 reader, senders[GCK_STREAMS_MAX];
	unsigned			 nthreads;
	int				 reader_up;
	int				 failed;	/* a code; fail_msg why */
	int				 fail_remote;	/* the remote said it */
	int				 fail_errno;	/* with GCK_ESYS */
	enum gck_origin			 fail_origin;
	char				 fail_msg[GCK_ERRMAX];
	uint64_t			 sent;		/* image bytes */
	struct timespec			 t0;
	struct sender			 sd[GCK_STREAMS_MAX];

	/* gck_send() on its way. */
	json_t				*hello;
	struct gck_parents		*have;		/* the remote's cache */
	int				 retry;		/* it dropped a chunk */
	struct timespec			 tstop;		/* the checkpoint began */
	json_t				*stored;
	int				 p[2];		/* a live tree's pipe */
	int				 touched;	/* the checkpoint ran */
	int				 local_no;	/* refused before it */
	int				 to_cache;	/* a pre-copy round */
	int				 no_cache;	/* it has no cache */
	struct gck_precopy_stats	 pst;		/* the round's */
	struct gck_memo			*memo;		/* --live's, or NULL */
	struct gck_ptab			*pages;		/* and the pages its
							   rounds sent */
	enum gck_origin			 hook_origin;	/* its hook's failure */
};

static void	fail(struct send *, int, int, const struct gck_ctx *);
static void	stop(struct send *);
static int	fail_error(struct send *, struct gck_ctx *, int);
static int	remote_error(struct gck_ctx *, int, const char *, ...)
		    __attribute__((__format__(__printf__, 3, 4)));
static int	send_init(struct send *, struct gck_ctx *,
		    const struct gck_send_opts *, struct gck_send_result *);
static int	send_check(struct send *);
static int	send_image(struct send *);
static int	send_live(struct send *);
static int	pump_pipe(struct send *);
static int	feed_failed(struct send *);
static int	pump_end(struct send *);
static int	live_failed(struct send *, int);
static void	send_end(struct send *, int);
static int	send_all(struct gck_ctx *, const struct gck_send_opts *,
		    struct gck_send_result *, int64_t *);
static void	send_stats(const struct gck_send_opts *,
		    struct gck_send_result *, int64_t, int64_t);

/*
 * Stops the send with code, the error on why telling why (its message,
 * errno and origin); remote when the remote said it.
 */
static void
fail(struct send *s, int code, int remote, const struct gck_ctx *why)
{
	pthread_mutex_lock(&s->mu);
	/* The remote's own word wins over what its going did to us. */
	if (s->failed == GCK_OK || (remote && !s->fail_remote)) {
		s->failed = code;
		s->fail_remote = remote;
		s->fail_errno = why->oerrno;
		s->fail_origin = why->origin;
		snprintf(s->fail_msg, sizeof s->fail_msg, "%s", why->msg);
	}
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

/* Stops the pump, for no fault of its own. */
static void
stop(struct send *s)
{
	struct gck_ctx	tmp;

	memset(&tmp, 0, sizeof tmp);
	gck_set_error(&tmp, GCK_EINTR, "stopped");
	fail(s, GCK_EINTR, 0, &tmp);
}

/* Sets on ctx, with code, why the send stopped.  Returns code. */
static int
fail_error(struct send *s, struct gck_ctx *ctx, int code)
{
	if (code == GCK_ESYS)
		gck_set_syserr(ctx, s->fail_errno, "%s", s->fail_msg);
	else
		gck_set_error(ctx, code, "%s", s->fail_msg);
	return gck_error_from(ctx, s->fail_origin);
}

/* Records what the remote said, or what it did wrong.  Returns code. */
static int
remote_error(struct gck_ctx *ctx, int code, const char *fmt, ...)
{
	char	msg[GCK_ERRMAX];
	va_list	ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	gck_set_error(ctx, code, "%s", msg);
	return gck_error_from(ctx, GCK_FROM_REMOTE);
}

/* Quotes s for the remote shell. */
static int
shquote(char **dst, const char *s)
{
	size_t	 n = 2, i;
	char	*p;

	for (i = 0; s[i] != '\0'; i++)
		n += s[i] == '\'' ? 4 : 1;
	if ((*dst = p = malloc(n + 1)) == NULL)
		return -1;
	*p++ = '\'';
	for (i = 0; s[i] != '\0'; i++) {
		if (s[i] == '\'') {
			memcpy(p, "'\\''", 4);
			p += 4;
		} else
			*p++ = s[i];
	}
	*p++ = '\'';
	*p = '\0';
	return 0;
}

/* Appends " ARG" (quoted if asked) to *cmd. */
static int
cmd_add(char **cmd, const char *arg, int quote)
{
	char	*q = NULL, *n;
	int	 r;

	if (quote && shquote(&q, arg) == -1)
		return -1;
	r = asprintf(&n, "%s %s", *cmd, quote ? q : arg);
	free(q);
	if (r == -1)
		return -1;
	free(*cmd);
	*cmd = n;
	return 0;
}

static void
ssh_opts(const struct gck_send_opts *o, struct gck_ssh_opts *so)
{
	memset(so, 0, sizeof *so);
	so->host = o->host;
	so->user = o->user;
	so->port = o->port;
	so->identity = o->identity;
	so->known_hosts = o->known_hosts;
	so->agent = o->agent;
	so->accept_new = o->accept_new;
	so->timeout_ms = o->timeout_ms;
}

/*
 * Explains a remote that went quiet: its exit status and the last line
 * it wrote on its standard error.
 */
static int
remote_gone(struct send *s, struct gck_ctx *ctx, struct gck_ssh *c,
    const char *when)
{
	const char	*err = gck_ssh_stderr(c);
	const char	*sp = *when != '\0' ? " " : "";
	int		 st = gck_ssh_exit_status(c, 1000);

	if (st == 127 || st == 126)
		return remote_error(ctx, GCK_EREMOTE, "%s: cannot run '%s'%s%s "
		    "(exit %d): install gpuckpt there, or give gpurecv's path "
		    "with --remote-path", s->rname, s->o->remote_path,
		    *err != '\0' ? ": " : "", err, st);
	if (st >= 0)
		return remote_error(ctx, GCK_EREMOTE, "%s: gpurecv exited "
		    "with status %d%s%s%s%s", s->rname, st, sp, when,
		    *err != '\0' ? ": " : "", err);
	if (*err != '\0')
		gck_set_error(ctx, GCK_ESSH, "ssh %s: connection lost%s%s "
		    "(remote said: %s)", gck_ssh_name(c), sp, when, err);
	else
		gck_set_error(ctx, GCK_ESSH, "ssh %s: connection lost%s%s",
		    gck_ssh_name(c), sp, when);
	return gck_error_from(ctx, GCK_FROM_SSH);
}

/*
 * Reads the next frame from the remote but keepalives: its type in
 * *typep, its JSON (control frames only) in *op.  Returns GCK_OK or a
 * code with the error set (an X frame becomes GCK_EREMOTE with the
 * remote's message).
 */
static int
read_ctl(struct send *s, struct gck_ctx *ctx, struct gck_ssh *c,
    int *typep, json_t **op, const char *when)
{
	struct gck_frame	 f;
	unsigned char		 hdr[GCK_FRAME_HDR];
	char			*buf = NULL;
	json_t			*o;
	const char		*e;
	int			 r;

	*op = NULL;
	for (;;) {
		r = gck_ssh_read_full(ctx, c, hdr, sizeof hdr);
		if (r == GCK_ETRUNC)
			return remote_gone(s, ctx, c, when);
		if (r != GCK_OK)
			return r;
		if (gck_frame_unpack(ctx, hdr, &f, s->rname) != GCK_OK)
			return gck_error_from(ctx, GCK_FROM_REMOTE);
		if (f.type == GCK_F_DATA || f.len > GCK_CTL_MAX)
			return remote_error(ctx, GCK_EFORMAT, "%s sent a "
			    "data frame", s->rname);
		if (f.len > 0) {
			if ((buf = malloc(f.len)) == NULL)
				return gck_set_error(ctx, GCK_ENOMEM,
				    "out of memory");
			if ((r = gck_ssh_read_full(ctx, c, buf, f.len)) !=
			    GCK_OK) {
				free(buf);
				return r == GCK_ETRUNC ? remote_gone(s, ctx, c,
				    when) : r;
			}
		}
		if (f.type == GCK_F_KEEPALIVE) {
			free(buf);
			buf = NULL;
			continue;
		}
		break;
	}
	o = gck_frame_parse(ctx, buf != NULL ? buf : "{}", f.len > 0 ? f.len :
	    2, s->rname);
	free(buf);
	if (o == NULL)
		return gck_error_from(ctx, GCK_FROM_REMOTE);
	if (f.type == GCK_F_ERROR) {
		s->refused = 1;
		s->retry = json_is_true(json_object_get(o, "retry"));
		s->no_cache = json_is_true(json_object_get(o, "no_cache"));
		e = json_string_value(json_object_get(o, "error"));
		r = remote_error(ctx, GCK_EREMOTE, "%s: %s", s->rname,
		    e != NULL ? e : "failed");
		json_decref(o);
		return r;
	}
	*typep = f.type;
	*op = o;
	return GCK_OK;
}

/* Expects a control frame of type; returns its JSON in *op. */
static int
expect(struct send *s, struct gck_ctx *ctx, struct gck_ssh *c, int type,
    json_t **op, const char *when)
{
	int	r, t;

	if ((r = read_ctl(s, ctx, c, &t, op, when)) != GCK_OK)
		return r;
	if (t != type) {
		json_decref(*op);
		*op = NULL;
		return remote_error(ctx, GCK_EFORMAT, "%s sent '%c' where "
		    "'%c' was due", s->rname, t, type);
	}
	return GCK_OK;
}

static int
send_ctl(struct gck_ctx *ctx, struct gck_ssh *c, int type, uint64_t seq,
    const char *fmt, ...)
{
	unsigned char	*buf;
	size_t		 len;
	va_list		 ap;
	int		 r;

	va_start(ap, fmt);
	buf = gck_frame_vjson(type, seq, &len, fmt, ap);
	va_end(ap);
	if (buf == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	r = gck_ssh_write(ctx, c, buf, len);
	free(buf);
	return r;
}

/* The remote command: gpurecv and its arguments. */
static char *
remote_cmd(struct send *s, int join)
{
	const struct gck_send_opts	*o = s->o;
	char				*cmd, num[32];
	size_t				 i;
	int				 bad = 0;

	if ((cmd = strdup(o->remote_path)) == NULL)
		return NULL;
	if (join) {
		bad |= cmd_add(&cmd, "--join", 0) | cmd_add(&cmd, s->id, 0);
		goto out;
	}
	bad |= cmd_add(&cmd, "--id", 0) | cmd_add(&cmd, s->id, 0);
	snprintf(num, sizeof num, "%u", s->n);
	bad |= cmd_add(&cmd, "--streams", 0) | cmd_add(&cmd, num, 0);
	snprintf(num, sizeof num, "%u", (o->timeout_ms + 999) / 1000);
	bad |= cmd_add(&cmd, "--timeout", 0) | cmd_add(&cmd, num, 0);
	if (o->verbose)
		bad |= cmd_add(&cmd, "-v", 0);
	if (o->path == NULL) {
		bad |= cmd_add(&cmd, s->to_cache ? "--to-cache" : "--restore",
		    0);
		if (o->gpu_map != NULL && !s->to_cache)
			bad |= cmd_add(&cmd, "--gpu-map", 0) |
			    cmd_add(&cmd, o->gpu_map, 1);
		if (o->tcp_close && !s->to_cache)
			bad |= cmd_add(&cmd, "--tcp-close", 0);
		if (o->root != NULL && !s->to_cache)
			bad |= cmd_add(&cmd, "--root", 0) |
			    cmd_add(&cmd, o->root, 1);
		for (i = 0; !s->to_cache && i < o->nmount_map; i++)
			bad |= cmd_add(&cmd, "--mount-map", 0) |
			    cmd_add(&cmd, o->mount_map[i], 1);
		if (o->cache != NULL && *o->cache == '\0')
			bad |= cmd_add(&cmd, "--no-cache", 0);
		else if (o->cache != NULL)
			bad |= cmd_add(&cmd, "--cache", 0) |
			    cmd_add(&cmd, o->cache, 1);
		if (o->cache_size > 0) {
			snprintf(num, sizeof num, "%llu",
			    (unsigned long long)o->cache_size);
			bad |= cmd_add(&cmd, "--cache-size", 0) |
			    cmd_add(&cmd, num, 0);
		}
		/* the pages of its chunks, once: then those sent */
		if (s->pages != NULL && s->pages->nent == 0 &&
		    (o->cache == NULL || *o->cache != '\0'))
			bad |= cmd_add(&cmd, "--pages", 0);
	} else {
		if (o->resume)
			bad |= cmd_add(&cmd, "--resume", 0);
		if (o->name != NULL)
			bad |= cmd_add(&cmd, "--name", 0) |
			    cmd_add(&cmd, o->name, 1);
		bad |= cmd_add(&cmd, "--", 0) | cmd_add(&cmd, o->path, 1);
	}
out:
	if (bad) {
		free(cmd);
		return NULL;
	}
	return cmd;
}

/*
 * Connects, starts gpurecv and reads its hello; then the extra
 * connections of --parallel.  *hellop is the hello's JSON.
 */
static int
connect_all(struct send *s, json_t **hellop)
{
	struct gck_ctx		*ctx = s->ctx;
	struct gck_ssh_opts	 so;
	char			*cmd = NULL;
	json_int_t		 proto;
	unsigned		 i;
	int			 r;

	ssh_opts(s->o, &so);
	for (i = 0; i < s->n; i++) {
		if ((cmd = remote_cmd(s, i > 0)) == NULL) {
			r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
			goto out;
		}
		gck_log(ctx, 2, "connection %u: %s", i, cmd);
		if ((r = gck_ssh_connect(ctx, &so, &s->c[i])) != GCK_OK ||
		    (r = gck_ssh_exec(ctx, s->c[i], cmd)) != GCK_OK)
			goto out;
		free(cmd);
		cmd = NULL;
		if (i == 0) {
			snprintf(s->rname, sizeof s->rname, "remote %s",
			    s->o->host);
			if ((r = expect(s, ctx, s->c[0], GCK_F_HELLO, hellop,
			    "before it answered")) != GCK_OK)
				goto out;
			proto = json_integer_value(json_object_get(*hellop,
			    "proto"));
			if (proto != GCK_PROTO) {
				r = remote_error(ctx, GCK_EREMOTE, "%s: its "
				    "gpurecv (%s) speaks protocol %lld, this "
				    "gpusend %d", s->rname, json_is_string(
				    json_object_get(*hellop, "version")) ?
				    json_string_value(json_object_get(*hellop,
				    "version")) : "?", (long long)proto,
				    GCK_PROTO);
				goto out;
			}
		} else if ((r = send_ctl(ctx, s->c[i], GCK_F_JOIN, 0, "{s:i}",
		    "index", (int)i)) != GCK_OK)
			goto out;
	}
	r = GCK_OK;
out:
	free(cmd);
	return r;
}

static int
digest_cmp(const void *a, const void *b)
{
	return memcmp(((const struct gck_digest *)a)->b,
	    ((const struct gck_digest *)b)->b, GCK_DIGEST_MAX);
}

/*
 * Reads the pages of the chunks of the remote's cache, as its hello
 * announced them (po: how many chunks, how many pages), in PAGES frames
 * into buf (GCK_FRAME_MAX bytes), into s->pages: each chunk one of the
 * n of d (sorted), so that a chunk that changed in a few of its pages is
 * sent as a patch of what the remote holds.  Returns GCK_OK or a code.
 */
static int
read_pages(struct send *s, json_t *po, const struct gck_digest *d, size_t n,
    unsigned char *buf)
{
	struct gck_ctx		*ctx = s->ctx;
	struct gck_frame	 f;
	struct gck_digest	 dg;
	unsigned char		 hdr[GCK_FRAME_HDR];
	json_int_t		 nc = json_integer_value(json_object_get(po,
				    "chunks"));
	json_int_t		 np = json_integer_value(json_object_get(po,
				    "pages"));
	uint64_t		 pages = 0;
	size_t			 chunks = 0, at, rec;
	uint32_t		 k;
	int			 r;

	if (po == NULL || s->pages == NULL)
		return GCK_OK;
	if (nc <= 0 || (size_t)nc > n || np <= 0 || np > PAGES_MAX)
		return remote_error(ctx, GCK_EFORMAT, "%s offered pages its "
		    "cache cannot have", s->rname);
	while (chunks < (size_t)nc) {
		if ((r = gck_ssh_read_full(ctx, s->c[0], hdr, sizeof hdr)) !=
		    GCK_OK || (r = gck_frame_unpack(ctx, hdr, &f, s->rname)) !=
		    GCK_OK || (r = gck_ssh_read_full(ctx, s->c[0], buf,
		    f.len)) != GCK_OK) {
			if (r == GCK_ETRUNC)
				r = remote_gone(s, ctx, s->c[0], "before it "
				    "said what its cache holds");
			return r;
		}
		if (f.type == GCK_F_KEEPALIVE)
			continue;
		if (f.type != GCK_F_PAGES)
			return remote_error(ctx, GCK_EFORMAT, "%s sent '%c' "
			    "where the pages of its cache were due",
			    s->rname, f.type);
		for (at = 0; at < f.len; at += rec, chunks++) {
			if (f.len - at < GCK_DIGEST_MAX + 4)
				goto bad;
			k = (uint32_t)buf[at + GCK_DIGEST_MAX] |
			    (uint32_t)buf[at + GCK_DIGEST_MAX + 1] << 8 |
			    (uint32_t)buf[at + GCK_DIGEST_MAX + 2] << 16 |
			    (uint32_t)buf[at + GCK_DIGEST_MAX + 3] << 24;
			rec = GCK_DIGEST_MAX + 4 + (size_t)k * GCK_PDIG;
			memset(&dg, 0, sizeof dg);
			dg.kind = GCK_DK_SHA256;
			memcpy(dg.b, buf + at, GCK_DIGEST_MAX);
			if (k == 0 || k > GCK_PATCH_RUNS ||
			    rec > f.len - at || chunks >= (size_t)nc ||
			    pages + k > (uint64_t)np ||
			    bsearch(&dg, d, n, sizeof *d, digest_cmp) == NULL)
				goto bad;
			if (gck_ptab_add(s->pages, &dg, (uint64_t)k * GCK_PAGE,
			    buf + at + GCK_DIGEST_MAX + 4) != GCK_OK)
				return gck_set_error(ctx, GCK_ENOMEM,
				    "out of memory");
			pages += k;
		}
	}
	if (pages != (uint64_t)np)
		goto bad;
	gck_log(ctx, 1, "%s offers the pages of %zu of its cached chunks "
	    "(%" PRIu64 " pages)", s->rname, chunks, pages);
	return GCK_OK;
bad:
	return remote_error(ctx, GCK_EFORMAT, "%s sent the pages of its "
	    "cache wrong", s->rname);
}

/*
 * Reads what the remote's cache holds, as its hello announced: the
 * digests of its chunks, in HAVE frames.  For a live tree they become
 * s->have, which its image refers to rather than sends.  Returns GCK_OK
 * or a code.
 */
static int
read_have(struct send *s)
{
	struct gck_ctx		*ctx = s->ctx;
	struct gck_digest	*d;
	struct gck_frame	 f;
	unsigned char		 hdr[GCK_FRAME_HDR], *buf;
	json_t			*cache = json_object_get(s->hello, "cache");
	json_t			*ids = json_object_get(cache, "images");
	json_int_t		 n = json_integer_value(json_object_get(cache,
				    "chunks"));
	size_t			 got = 0, i, k;
	int			 r;

	if (cache == NULL)
		return GCK_OK;
	if (!json_is_array(ids) || json_array_size(ids) == 0 ||
	    json_array_size(ids) > 1000 || n <= 0 || n > HAVE_MAX)
		return remote_error(ctx, GCK_EFORMAT, "%s offered a cache it "
		    "cannot have", s->rname);
	if ((d = calloc((size_t)n, sizeof *d)) == NULL ||
	    (buf = malloc(GCK_FRAME_MAX)) == NULL) {
		free(d);
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	}
	while (got < (size_t)n) {
		if ((r = gck_ssh_read_full(ctx, s->c[0], hdr, sizeof hdr)) !=
		    GCK_OK || (r = gck_frame_unpack(ctx, hdr, &f, s->rname)) !=
		    GCK_OK || (r = gck_ssh_read_full(ctx, s->c[0], buf,
		    f.len)) != GCK_OK)
			break;
		if (f.type == GCK_F_KEEPALIVE)
			continue;
		k = f.len / GCK_DIGEST_MAX;
		if (f.type != GCK_F_HAVE || f.len % GCK_DIGEST_MAX != 0 ||
		    k == 0 || k > (size_t)n - got) {
			r = remote_error(ctx, GCK_EFORMAT, "%s sent '%c' "
			    "where the digests of its cache were due",
			    s->rname, f.type);
			break;
		}
		for (i = 0; i < k; i++, got++) {
			d[got].kind = GCK_DK_SHA256;
			memcpy(d[got].b, buf + i * GCK_DIGEST_MAX,
			    GCK_DIGEST_MAX);
			if (got > 0 && memcmp(d[got - 1].b, d[got].b,
			    GCK_DIGEST_MAX) >= 0) {
				r = remote_error(ctx, GCK_EFORMAT, "%s sent "
				    "the digests of its cache out of order",
				    s->rname);
				goto out;
			}
		}
	}
	if (got < (size_t)n) {
		if (r == GCK_ETRUNC)
			r = remote_gone(s, ctx, s->c[0], "before it said what "
			    "its cache holds");
		goto out;
	}
	if (s->o->path != NULL) {
		free(buf);
		free(d);
		return GCK_OK;
	}
	if ((r = read_pages(s, json_object_get(cache, "pages"), d, got,
	    buf)) != GCK_OK)
		goto out;
	free(buf);
	buf = NULL;
	gck_log(ctx, 1, "%s holds %zu chunk%s in its cache", s->rname, got,
	    got == 1 ? "" : "s");
	return gck_parents_remote(ctx, ids, d, got, &s->have);
out:
	free(buf);
	free(d);
	return r;
}

/*
 * Where a resumed send starts: the remote's partial image, when it is
 * the same bytes as the start of ours.
 */
static uint64_t
resume_offset(struct send *s, json_t *hello)
{
	struct gck_ctx	*ctx = s->ctx;
	struct stat	 st;
	json_t		*p = json_object_get(hello, "partial");
	json_int_t	 size = json_integer_value(json_object_get(p, "size"));
	const char	*want = json_string_value(json_object_get(p, "xxh3"));
	char		 hex[33];

	if (!s->o->resume || p == NULL || size <= 0 || want == NULL)
		return 0;
	if (fstat(s->srcfd, &st) == -1 || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size < (uint64_t)size ||
	    gck_prefix_digest(ctx, s->srcfd, (uint64_t)size, hex) != GCK_OK ||
	    strcmp(hex, want) != 0) {
		gck_log(ctx, 1, "the remote's partial image (%lld bytes) is "
		    "not the start of this one: sending all of it",
		    (long long)size);
		return 0;
	}
	if (lseek(s->srcfd, (off_t)size, SEEK_SET) == -1)
		return 0;
	gck_log(ctx, 1, "resuming: the remote holds the first %lld bytes",
	    (long long)size);
	return (uint64_t)size;
}

/* Queues it for connection i; 0 if the send has failed meanwhile. */
static int
push(struct send *s, unsigned i, const struct item *it)
{
	struct queue	*q = &s->q[i];
	int		 ok;

	pthread_mutex_lock(&s->mu);
	while (q->count == QDEPTH && s->failed == GCK_OK)
		pthread_cond_wait(&s->cv, &s->mu);
	if ((ok = s->failed == GCK_OK)) {
		q->items[(q->head + q->count) % QDEPTH] = *it;
		q->count++;
		pthread_cond_broadcast(&s->cv);
	}
	pthread_mutex_unlock(&s->mu);
	return ok;
}

static int
pop(struct send *s, unsigned i, struct item *it)
{
	struct queue	*q = &s->q[i];
	int		 ok;

	pthread_mutex_lock(&s->mu);
	while (q->count == 0 && s->failed == GCK_OK)
		pthread_cond_wait(&s->cv, &s->mu);
	if ((ok = s->failed == GCK_OK)) {
		*it = q->items[q->head];
		q->head = (q->head + 1) % QDEPTH;
		q->count--;
		pthread_cond_broadcast(&s->cv);
	}
	pthread_mutex_unlock(&s->mu);
	return ok;
}

/* Cuts the image into chunks, dealt out round-robin. */
static void *
reader_main(void *arg)
{
	struct send	*s = arg;
	struct gck_ctx	 rctx, *ctx = &rctx;
	struct item	 it;
	uint64_t	 seq, total = s->offset;
	unsigned	 i;
	ssize_t		 n;

	memset(&rctx, 0, sizeof rctx);
	gck_set_interrupt(&rctx, s->ctx->intr);
	for (seq = 0; ; seq++) {
		memset(&it, 0, sizeof it);
		if ((it.buf = malloc(GCK_CHUNK)) == NULL) {
			gck_set_error(ctx, GCK_ENOMEM, "out of memory");
			fail(s, GCK_ENOMEM, 0, ctx);
			break;
		}
		n = gck_read_full(ctx, s->srcfd, it.buf, GCK_CHUNK,
		    "the image");
		if (n == -1) {
			gck_error_prefix(ctx, "local: ");
			fail(s, ctx->code, 0, ctx);
			free(it.buf);
			break;
		}
		/* (a live tree's checkpoint counts what it writes) */
		if (s->o->pid <= 0)
			gck_meter_add(s->ctx, (uint64_t)n);
		it.seq = seq;
		it.type = n > 0 ? GCK_F_DATA : GCK_F_END;
		it.len = (size_t)n;
		total += (uint64_t)n;
		it.total = total;
		if (n == 0) {
			free(it.buf);
			it.buf = NULL;
		}
		if (!push(s, (unsigned)(seq % s->n), &it)) {
			free(it.buf);
			break;
		}
		if (n == 0) {
			/* The others stop. */
			memset(&it, 0, sizeof it);
			for (i = 1; i < s->n; i++)
				push(s, (unsigned)((seq + i) % s->n), &it);
			break;
		}
	}
	/* A checkpoint still writing learns of the failure at once. */
	if (s->own_src) {
		close(s->srcfd);
		s->srcfd = -1;
	}
	return NULL;
}

/* On connection 0: has the remote said something meanwhile? */
static int
heard(struct send *s, struct gck_ctx *ctx)
{
	json_t	*o;
	int	 r, t;

	if (!gck_ssh_pending(s->c[0]))
		return GCK_OK;
	/* read_ctl() passes keepalives over; anything else is wrong. */
	if ((r = read_ctl(s, ctx, s->c[0], &t, &o, "while the image was "
	    "sent")) != GCK_OK)
		return r;
	json_decref(o);
	return remote_error(ctx, GCK_EFORMAT, "%s sent '%c' while the image "
	    "was sent", s->rname, t);
}

/*
 * --bwlimit: waits until total bytes sent since the pump started are
 * within the limit.
 */
static void
pace(struct send *s, uint64_t total)
{
	struct timespec	 now, due;
	double		 at;

	at = (double)total / (double)s->o->bwlimit;
	due.tv_sec = s->t0.tv_sec + (time_t)at;
	due.tv_nsec = s->t0.tv_nsec + (long)((at - (double)(time_t)at) * 1e9);
	if (due.tv_nsec >= 1000000000) {
		due.tv_sec++;
		due.tv_nsec -= 1000000000;
	}
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (now.tv_sec < due.tv_sec || (now.tv_sec == due.tv_sec &&
	    now.tv_nsec < due.tv_nsec))
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &due,
		    NULL) == EINTR)
			;
}

static void *
sender_main(void *arg)
{
	struct sender	*sd = arg;
	struct send	*s = sd->s;
	struct gck_ctx	*ctx = s->cctx[sd->i];
	struct gck_ssh	*c = s->c[sd->i];
	unsigned char	 hdr[GCK_FRAME_HDR];
	struct item	 it;
	char		 when[64];
	uint64_t	 total;
	int		 r = GCK_OK;

	while (pop(s, sd->i, &it)) {
		if (it.type == 0)
			break;
		if (it.type == GCK_F_END) {
			r = send_ctl(ctx, c, GCK_F_END, it.seq, "{s:I}",
			    "bytes", (json_int_t)it.total);
			break;
		}
		gck_frame_pack(hdr, GCK_F_DATA, (uint32_t)it.len, it.seq);
		if ((r = gck_ssh_write(ctx, c, hdr, sizeof hdr)) == GCK_OK)
			r = gck_ssh_write(ctx, c, it.buf, it.len);
		free(it.buf);
		if (r == GCK_OK) {
			pthread_mutex_lock(&s->mu);
			s->sent += it.len;
			total = s->sent;
			pthread_mutex_unlock(&s->mu);
			if (s->o->bwlimit > 0)
				pace(s, total);
			if (sd->i == 0)
				r = heard(s, ctx);
		}
		if (r != GCK_OK)
			break;
	}
	if (r != GCK_OK) {
		if (r == GCK_ETRUNC || r == GCK_ESSH) {
			snprintf(when, sizeof when, "after %llu bytes of the "
			    "image", (unsigned long long)(s->offset + s->sent));
			if (r == GCK_ETRUNC)
				remote_gone(s, ctx, c, when);
		}
		fail(s, r, r == GCK_EREMOTE, ctx);
	}
	return NULL;
}

/* Starts the reader and a sender per connection. */
static int
pump_start(struct send *s)
{
	struct gck_ctx	*ctx = s->ctx;
	struct sender	*sd = s->sd;
	unsigned	 i;

	clock_gettime(CLOCK_MONOTONIC, &s->t0);
	for (i = 0; i < s->n; i++) {
		sd[i].s = s;
		sd[i].i = i;
		if ((errno = pthread_create(&s->senders[i], NULL, sender_main,
		    &sd[i])) != 0)
			break;
		s->nthreads++;
	}
	if (i == s->n && (errno = pthread_create(&s->reader, NULL,
	    reader_main, s)) == 0) {
		s->reader_up = 1;
		return GCK_OK;
	}
	gck_set_syserr(ctx, errno, "cannot start a thread: %s",
	    strerror(errno));
	fail(s, GCK_ESYS, 0, ctx);
	return GCK_ESYS;
}

/*
 * Waits for the pump to finish.  Returns GCK_OK, or the code it failed
 * with, why in s (the remote's word if it can be had).
 */
static int
pump_wait(struct send *s)
{
	struct gck_ctx	*ctx = s->ctx;
	struct timespec	 t1;
	json_t		*o = NULL;
	unsigned	 i;
	double		 secs;
	int		 t;

	if (s->reader_up)
		pthread_join(s->reader, NULL);
	s->reader_up = 0;
	for (i = 0; i < s->nthreads; i++)
		pthread_join(s->senders[i], NULL);
	s->nthreads = 0;
	for (i = 0; i < s->n; i++)
		while (s->q[i].count > 0) {
			free(s->q[i].items[s->q[i].head].buf);
			s->q[i].head = (s->q[i].head + 1) % QDEPTH;
			s->q[i].count--;
		}
	if (s->failed == GCK_OK) {
		clock_gettime(CLOCK_MONOTONIC, &t1);
		secs = (double)(t1.tv_sec - s->t0.tv_sec) +
		    (double)(t1.tv_nsec - s->t0.tv_nsec) / 1e9;
		gck_log(ctx, 1, "sent %llu bytes in %.2f s (%.1f MB/s) over "
		    "%u connection%s", (unsigned long long)s->sent, secs,
		    secs > 0 ? (double)s->sent / secs / 1e6 : 0.0, s->n,
		    s->n > 1 ? "s" : "");
		s->res->bytes = s->offset + s->sent;
		return GCK_OK;
	}
	/* Why the remote stopped taking it, if it says so at once. */
	if (!s->fail_remote && s->c[0] != NULL &&
	    (s->failed == GCK_ESSH || s->failed == GCK_ETRUNC)) {
		struct gck_ctx	tmp;

		memset(&tmp, 0, sizeof tmp);
		if (read_ctl(s, &tmp, s->c[0], &t, &o, "") == GCK_EREMOTE)
			fail(s, GCK_EREMOTE, 1, &tmp);
		json_decref(o);
	}
	return s->failed;
}

/* As pump_wait(), with why it failed set on the send's context. */
static int
pump_finish(struct send *s)
{
	if (pump_wait(s) == GCK_OK)
		return GCK_OK;
	return fail_error(s, s->ctx, s->failed);
}

/*
 * Asks the remote, over a new connection, what became of a hand-over
 * whose answer was lost.  Returns 1 (it runs, *pidp), 0 (it does not) or
 * -1 (nobody can tell; why in ctx).
 */
static int
ask_outcome(struct send *s, pid_t *pidp)
{
	struct gck_ctx		*ctx = s->ctx;
	struct gck_ssh_opts	 so;
	struct gck_ssh		*c = NULL;
	char			*cmd = NULL, buf[128], num[32];
	size_t			 got = 0;
	ssize_t			 n;
	int			 pid, ret = -1;

	ssh_opts(s->o, &so);
	snprintf(num, sizeof num, "%u", (s->o->timeout_ms + 999) / 1000);
	if ((cmd = strdup(s->o->remote_path)) == NULL ||
	    cmd_add(&cmd, "--timeout", 0) == -1 ||
	    cmd_add(&cmd, num, 0) == -1 ||
	    cmd_add(&cmd, "--outcome", 0) == -1 ||
	    cmd_add(&cmd, s->id, 0) == -1) {
		gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	gck_log(ctx, 1, "asking %s what became of the hand-over", s->o->host);
	if (gck_ssh_connect(ctx, &so, &c) != GCK_OK ||
	    gck_ssh_exec(ctx, c, cmd) != GCK_OK)
		goto out;
	while (got < sizeof buf - 1 && (n = gck_ssh_read(ctx, c, buf + got,
	    sizeof buf - 1 - got)) > 0)
		got += (size_t)n;
	buf[got] = '\0';
	if (sscanf(buf, "running %d", &pid) == 1 && pid > 0) {
		*pidp = pid;
		ret = 1;
	} else if (strncmp(buf, "failed", 6) == 0)
		ret = 0;
	else
		remote_error(ctx, GCK_EDOUBT, "%s cannot tell", s->rname);
out:
	free(cmd);
	gck_ssh_close(c);
	return ret;
}

/* How long a live tree was stopped: from its checkpoint to RUNNING. */
static void
stopped_for(struct send *s)
{
	struct timespec	t;

	if (s->o->pid <= 0)
		return;
	clock_gettime(CLOCK_MONOTONIC, &t);
	s->res->stopped_ms = (uint64_t)(t.tv_sec - s->tstop.tv_sec) * 1000 +
	    (uint64_t)((t.tv_nsec - s->tstop.tv_nsec) / 1000000);
}

/* handover() from the go-ahead on. */
static int
handover_go(struct send *s)
{
	struct gck_ctx	*ctx = s->ctx;
	struct gck_ssh	*c = s->c[0];
	json_t		*o = NULL;
	char		 msg[GCK_ERRMAX], why[GCK_ERRMAX];
	enum gck_origin	 from;
	pid_t		 pid;
	int		 r, k;

	if ((r = send_ctl(ctx, c, GCK_F_GO, 0, "{}")) == GCK_OK &&
	    (r = expect(s, ctx, c, GCK_F_RUNNING, &o, "after the restore "
	    "was done")) == GCK_OK) {
		s->res->pid = (pid_t)json_integer_value(json_object_get(o,
		    "pid"));
		json_decref(o);
		stopped_for(s);
		(void)send_ctl(ctx, c, GCK_F_BYE, 0, "{}");
		return GCK_OK;
	}
	/*
	 * Only its own word says it failed and killed what it had; its
	 * going quiet says nothing of what it did with GO.
	 */
	if (r == GCK_EREMOTE && s->refused)
		return r;
	snprintf(msg, sizeof msg, "%s", ctx->msg);
	from = ctx->origin;
	switch ((k = ask_outcome(s, &pid))) {
	case 1:
		s->res->pid = pid;
		gck_log(ctx, 1, "%s runs process tree %d", s->rname, (int)pid);
		return GCK_OK;
	case 0:
		gck_set_error(ctx, GCK_EREMOTE, "%s; %s did not let the "
		    "restored tree run", msg, s->rname);
		return gck_error_from(ctx, from);
	default:
		s->res->in_doubt = 1;
		snprintf(why, sizeof why, "%s", ctx->msg);
		gck_set_error(ctx, GCK_EDOUBT, "hand-over in doubt: %s; asked "
		    "again: %s; %s may be running it (ask it with 'gpurecv "
		    "--outcome %s')", msg, why, s->rname, s->id);
		return gck_error_from(ctx, GCK_FROM_HANDOVER);
	}
}

/*
 * The hand-over, once all the image has gone: the remote restores it
 * and holds it stopped (READY), this side says GO, the remote lets it
 * run (RUNNING).  guard (or NULL) is told to leave the source stopped
 * from GO on.  Returns GCK_OK, GCK_EDOUBT (the source must stay
 * stopped; why in ctx) or a code (the remote does not run it).
 */
static int
handover(struct send *s, struct gck_guard *guard)
{
	struct gck_ctx		*ctx = s->ctx;
	struct gck_ssh		*c = s->c[0];
	json_t			*o = NULL;
	volatile sig_atomic_t	*intr;
	pid_t			 pid;
	int			 r;

	if ((r = expect(s, ctx, c, GCK_F_READY, &o, "before the restore "
	    "was done")) != GCK_OK)
		return r;
	pid = (pid_t)json_integer_value(json_object_get(o, "pid"));
	json_decref(o);
	gck_log(ctx, 1, "%s restored process tree %d, stopped: letting it "
	    "run", s->rname, (int)pid);
	/* From here on, should gpusend die, neither side runs it twice. */
	if (guard != NULL)
		gck_guard_intent(guard, 'S');
	/*
	 * A signal now comes too late: the word goes, and its answer is
	 * waited for (or asked for) as if nothing had come, rather than
	 * leaving in doubt a hand-over that is going well.
	 */
	intr = ctx->intr;
	gck_set_interrupt(ctx, NULL);
	r = handover_go(s);
	gck_set_interrupt(ctx, intr);
	return r;
}

/* The checkpoint's commit hook: the image is all written. */
static int
commit_hook(struct gck_ctx *ctx, void *arg, struct gck_guard *guard,
    enum gck_after *after)
{
	struct send	*s = arg;
	int		 r;

	close(s->wfd);
	s->wfd = -1;
	if ((r = pump_finish(s)) == GCK_OK &&
	    (r = handover(s, guard)) == GCK_EDOUBT) {
		*after = GCK_AFTER_STOP;
		return GCK_OK;
	}
	/* Whatever the checkpoint makes of its message, this stays. */
	if (r != GCK_OK)
		s->hook_origin = ctx->origin;
	return r;
}

/* A random id for the hand-over. */
static int
make_id(struct gck_ctx *ctx, char id[33])
{
	if (gck_new_id(id) == -1)
		return gck_set_syserr(ctx, errno, "getrandom: %s",
		    strerror(errno));
	return GCK_OK;
}

/* Sets up s for a send; the connections come later. */
static int
send_init(struct send *s, struct gck_ctx *ctx, const struct gck_send_opts *o,
    struct gck_send_result *res)
{
	unsigned	i;

	memset(res, 0, sizeof *res);
	res->pid = -1;
	res->tty_pid = -1;
	memset(s, 0, sizeof *s);
	s->ctx = ctx;
	s->o = o;
	s->res = res;
	s->srcfd = o->pid > 0 ? -1 : o->infd;
	s->wfd = -1;
	s->p[0] = s->p[1] = -1;
	s->n = o->parallel > 0 ? o->parallel : 1;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	if (s->n > GCK_STREAMS_MAX) {
		s->n = 0;
		return gck_set_error(ctx, GCK_EINVAL, "at most %d connections",
		    GCK_STREAMS_MAX);
	}
	for (i = 0; i < s->n; i++) {
		if ((s->cctx[i] = gck_ctx_new()) == NULL)
			return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		gck_set_interrupt(s->cctx[i], ctx->intr);
	}
	return GCK_OK;
}

/* What the checkpoint would refuse is refused before connecting. */
static int
send_check(struct send *s)
{
	struct gck_ctx	*ctx = s->ctx;
	pid_t		 pid = s->o->pid;
	int		 r;

	if (pid <= 0)
		return GCK_OK;
	if (kill(pid, 0) == -1 && errno == ESRCH)
		return gck_set_error(ctx, GCK_ENOPROC, "local: no process %d",
		    (int)pid);
	if ((r = gck_criu_can_dump(ctx, pid)) != GCK_OK) {
		s->local_no = 1;
		return gck_error_prefix(ctx, "local: ");
	}
	return GCK_OK;
}

/* Whether the image file on fd ends with a signature. */
static int
signed_file(struct gck_ctx *ctx, int fd)
{
	char	*t = NULL, *sig = NULL;
	size_t	 tlen, siglen;
	int	 r;

	r = gck_image_tail(ctx, fd, "the image", &t, &tlen, &sig, &siglen) ==
	    GCK_OK && sig != NULL;
	free(t);
	free(sig);
	return r;
}

/*
 * An image file to be restored by a remote whose cache offered chunks:
 * read, checked and written again as it is sent, each chunk the cache
 * has as a reference to it, as for a live tree.  Only an image of
 * format 2 that stands alone and is not signed, read from a file, goes
 * so; *throughp is 0 when this one does not, the file as it was.
 */
static int
send_through(struct send *s, int *throughp)
{
	struct gck_ctx			*ctx = s->ctx;
	const struct gck_manifest	*m;
	struct gck_reader		*rd = NULL;
	struct gck_writer		*w = NULL;
	struct stat			 st;
	int				 r, in = s->o->infd;

	*throughp = 0;
	if (fstat(in, &st) == -1 || !S_ISREG(st.st_mode) ||
	    lseek(in, 0, SEEK_CUR) != 0)
		return GCK_OK;
	if ((r = gck_reader_new(ctx, in, &rd)) != GCK_OK ||
	    (r = gck_reader_head(rd, &m)) != GCK_OK)
		goto out;
	/* A signed image goes as it is, its signature with it. */
	if (gck_manifest_format(m) < 2 || gck_manifest_chain(m) != NULL ||
	    gck_manifest_chunks_only(m) || signed_file(ctx, in)) {
		gck_reader_free(rd);
		return lseek(in, 0, SEEK_SET) == 0 ? GCK_OK :
		    gck_set_syserr(ctx, errno, "local: cannot read the image "
		    "again: %s", strerror(errno));
	}
	*throughp = 1;
	if ((r = pump_pipe(s)) != GCK_OK)
		goto out;
	if ((r = gck_writer_new2(ctx, s->wfd, gck_manifest_level(m), 0,
	    gck_manifest_format(m), 0, &w)) == GCK_OK) {
		gck_writer_set_parents(w, s->have);
		r = gck_reader_copy(rd, w);
		s->res->cached = gck_writer_refbytes(w);
	}
	close(s->wfd);
	s->wfd = -1;
	if (r != GCK_OK)
		r = feed_failed(s);
	else
		r = pump_finish(s);
out:
	gck_writer_free(w);
	gck_reader_free(rd);
	return r;
}

/* An image already made: sent, then stored there or handed over. */
static int
send_image(struct send *s)
{
	struct gck_ctx	*ctx = s->ctx;
	const char	*path;
	int		 r, through = 0;

	if (s->o->path == NULL && s->have != NULL && (r = send_through(s,
	    &through)) != GCK_OK)
		return r;
	if (!through && ((r = pump_start(s)) != GCK_OK ||
	    (r = pump_finish(s)) != GCK_OK))
		return r;
	if (s->o->path == NULL)
		return handover(s, NULL);
	if ((r = expect(s, ctx, s->c[0], GCK_F_STORED, &s->stored,
	    "before the image was stored")) != GCK_OK)
		return r;
	path = json_string_value(json_object_get(s->stored, "path"));
	if (path != NULL && (s->res->stored = strdup(path)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	return GCK_OK;
}

/*
 * Words the error of a checkpoint that failed with r: what the other
 * side or the hand-over said stands; a checkpoint that failed because
 * the pump had stopped failed for the pump's reason, the fate of the
 * tree being what the checkpoint reported; else the failure was here.
 */
static int
live_failed(struct send *s, int r)
{
	struct gck_ctx	*ctx = s->ctx;
	enum gck_origin	 from;
	enum gck_fate	 fate = ctx->fate;
	char		 tail[GCK_ERRMAX];
	int		 pf;

	from = ctx->origin != GCK_FROM_HERE ? ctx->origin : s->hook_origin;
	snprintf(tail, sizeof tail, "%s", gck_error_fate_text(ctx));
	pf = pump_end(s);
	if (from != GCK_FROM_HERE)
		return gck_error_from(ctx, from);
	if (pf == GCK_OK)
		return gck_error_prefix(ctx, "local: ");
	fail_error(s, ctx, pf);
	if (fate != GCK_FATE_UNSAID)
		return gck_error_fate(ctx, fate, "%s", tail + 2);
	if (*tail != '\0') {
		gck_set_error(ctx, pf, "%s%s", s->fail_msg, tail);
		return gck_error_from(ctx, s->fail_origin);
	}
	return pf;
}

/*
 * Starts the pump on a pipe, whose other end, s->wfd, is for what makes
 * the image as it is sent.
 */
static int
pump_pipe(struct send *s)
{
	if (pipe2(s->p, O_CLOEXEC) == -1)
		return gck_set_syserr(s->ctx, errno, "local: cannot make a "
		    "pipe: %s", strerror(errno));
	(void)fcntl(s->p[1], F_SETPIPE_SZ, (int)GCK_CHUNK);
	s->srcfd = s->p[0];
	s->own_src = 1;
	s->wfd = s->p[1];
	return pump_start(s);
}

/*
 * Stops the pump, whatever its state, and waits for it.  Returns how it
 * had failed before (GCK_OK: it had not).
 */
static int
pump_end(struct send *s)
{
	int	pf;

	pthread_mutex_lock(&s->mu);
	pf = s->failed;
	pthread_mutex_unlock(&s->mu);
	if (pf == GCK_OK)
		stop(s);
	(void)pump_wait(s);
	return pf;
}

/*
 * What made the image into the pump's pipe failed: by its own fault,
 * or the pump's, which it only saw.  Returns the code, why on the
 * send's context.
 */
static int
feed_failed(struct send *s)
{
	if (pump_end(s) == GCK_OK)
		return gck_error_prefix(s->ctx, "local: ");
	return fail_error(s, s->ctx, s->failed);
}

/* A live tree: the image is made into a pipe as it is sent. */
static int
send_live(struct send *s)
{
	const struct gck_send_opts	*o = s->o;
	struct gck_ctx			*ctx = s->ctx;
	struct gck_ckpt_opts		 co;
	struct gck_ckpt_result		 cres;
	int				 r;

	if ((r = pump_pipe(s)) != GCK_OK)
		return r;
	memset(&co, 0, sizeof co);
	co.pid = o->pid;
	co.level = o->level;
	co.after = GCK_AFTER_KILL;
	co.outfd = s->wfd;
	co.tmpdir = o->tmpdir;
	co.lock_ms = o->lock_ms;
	co.criu_opts = o->criu_opts;
	co.ghost_limit = o->ghost_limit;
	co.have = s->have;
	co.memo = s->memo;
	/* What the rounds sent that the remote kept: page by page. */
	if (s->have != NULL && s->pages != NULL &&
	    (r = gck_parents_use_pages(s->have, s->pages)) != GCK_OK)
		return r;
	co.sign = o->sign;
	memset(&cres, 0, sizeof cres);
	s->touched = 1;
	clock_gettime(CLOCK_MONOTONIC, &s->tstop);
	r = gck_checkpoint_ex(ctx, &co, commit_hook, s, &cres);
	s->res->cached = cres.ref_bytes;
	s->res->stats = cres.stats;
	s->res->tty_pid = cres.tty_pid;
	s->res->tty_fd = cres.tty_fd;
	memcpy(s->res->tty, cres.tty, sizeof s->res->tty);
	gck_ckpt_result_free(&cres);
	if (s->wfd != -1) {
		close(s->wfd);
		s->wfd = -1;
	}
	if (r != GCK_OK)
		return live_failed(s, r);
	if (s->res->in_doubt)
		return gck_error_fate(ctx, GCK_FATE_STOPPED, "process tree %d "
		    "left stopped", (int)o->pid);
	return GCK_OK;
}

/* What is left once the send is over, r its outcome. */
static void
send_end(struct send *s, int r)
{
	struct gck_ctx	tmp;
	unsigned	i;

	if (s->reader_up || s->nthreads > 0) {
		stop(s);
		if (s->own_src && s->srcfd != -1)
			close(s->srcfd);
		pump_finish(s);
	}
	if (r != GCK_OK && s->c[0] != NULL && !s->refused) {
		/* Whatever of it the remote holds, it need not wait for more. */
		memset(&tmp, 0, sizeof tmp);
		(void)send_ctl(&tmp, s->c[0], GCK_F_ABORT, 0, "{s:s}", "error",
		    s->ctx->msg);
	}
	if (s->wfd != -1)
		close(s->wfd);
	if (s->own_src && s->srcfd != -1)
		close(s->srcfd);
	json_decref(s->hello);
	json_decref(s->stored);
	gck_parents_free(s->have);
	for (i = 0; i < s->n; i++) {
		gck_ssh_close(s->c[i]);
		gck_ctx_free(s->cctx[i]);
	}
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
}

/*
 * A transfer's id, its connections and the remote's hello, with what its
 * cache holds.
 */
static int
send_connect(struct send *s)
{
	int	r;

	if ((r = make_id(s->ctx, s->id)) != GCK_OK ||
	    (r = connect_all(s, &s->hello)) != GCK_OK)
		return r;
	return read_have(s);
}

/* One try of gck_send(); *retryp when another may do better. */
static int
send_once(struct gck_ctx *ctx, const struct gck_send_opts *o,
    struct gck_memo *memo, struct gck_ptab *pages, int whole,
    struct gck_send_result *res, int *retryp)
{
	struct send	s;
	int		r;

	*retryp = 0;
	r = send_init(&s, ctx, o, res);
	s.memo = memo;
	s.pages = pages;
	if (r != GCK_OK ||
	    (r = send_check(&s)) != GCK_OK)
		goto out;
	if ((r = send_connect(&s)) != GCK_OK)
		goto out;
	if (o->pid <= 0)
		s.offset = resume_offset(&s, s.hello);
	res->skipped = s.offset;
	/*
	 * The image that stops a tree after pre-copy rounds is mostly
	 * references to what the remote holds: it is restored there once
	 * all of it is in, from a file (recv.c, recv_whole()), unless the
	 * rounds left much to send, which is then restored as it comes.
	 */
	if ((r = send_ctl(ctx, s.c[0], GCK_F_START, 0, "{s:I,s:b}", "offset",
	    (json_int_t)s.offset, "whole", o->pid > 0 && whole)) != GCK_OK)
		goto out;
	r = o->pid <= 0 ? send_image(&s) : send_live(&s);
out:
	if (r != GCK_OK && o->pid > 0 && !s.touched && !s.local_no &&
	    r != GCK_ENOPROC) {
		/* Nothing was done to it. */
		gck_error_fate(ctx, GCK_FATE_RUNNING, "process tree %d left "
		    "running", (int)o->pid);
	}
	*retryp = s.retry;
	send_end(&s, r);
	return r;
}

/*
 * A pre-copy round's image: the chunks of the running tree's memory that
 * the remote lacks, into its cache.
 */
static int
send_round(struct send *s)
{
	struct gck_ctx	*ctx = s->ctx;
	json_t		*o = NULL;
	int		 r;

	if ((r = pump_pipe(s)) != GCK_OK)
		return r;
	r = gck_precopy(ctx, s->o->pid, s->o->level, s->wfd, s->have,
	    s->memo, s->pages, &s->pst);
	close(s->wfd);
	s->wfd = -1;
	if (r != GCK_OK)
		return feed_failed(s);
	if ((r = pump_finish(s)) != GCK_OK ||
	    (r = expect(s, ctx, s->c[0], GCK_F_STORED, &o, "before it kept "
	    "the round's chunks")) != GCK_OK)
		return r;
	json_decref(o);
	return GCK_OK;
}

/*
 * One pre-copy round, over connections of its own: *pst and *wirep say
 * what it read and sent, *nocachep that the remote has no cache.
 */
static int
round_once(struct gck_ctx *ctx, const struct gck_send_opts *o,
    struct gck_memo *memo, struct gck_ptab *pages,
    struct gck_precopy_stats *pst, uint64_t *wirep, int *nocachep)
{
	struct gck_send_result	 res;
	struct send		 s;
	int			 r;

	r = send_init(&s, ctx, o, &res);
	s.memo = memo;
	s.pages = pages;
	if (r != GCK_OK)
		goto out;
	s.to_cache = 1;
	if ((r = send_connect(&s)) != GCK_OK ||
	    (r = send_ctl(ctx, s.c[0], GCK_F_START, 0, "{s:I}", "offset",
	    (json_int_t)0)) != GCK_OK)
		goto out;
	r = send_round(&s);
out:
	*pst = s.pst;
	*wirep = s.sent;
	*nocachep = s.no_cache;
	send_end(&s, r);
	free(res.stored);
	return r;
}

/*
 * --live: rounds that send the running tree's memory into the remote's
 * cache, each only what changed since (what the remote lacks), until
 * one of the rules of gpusend(1) ends them; the hand-over that follows
 * then sends only what changed since the last.  A round that fails
 * leaves the tree as it was, running.
 */
static int
precopy(struct gck_ctx *ctx, const struct gck_send_opts *o,
    struct gck_memo *memo, struct gck_ptab *pages,
    struct gck_send_result *res, double *lastp, double *sharep)
{
	struct gck_precopy_stats pst;
	struct timespec		 t0, t1;
	uint64_t		 wire, prev = 0;
	unsigned		 k, max;
	double			 secs, rate = 0, est;
	int			 r, nocache;

	max = o->max_rounds > 0 ? o->max_rounds : GCK_ROUNDS_MAX;
	res->why = "--max-rounds";
	for (k = 1; k <= max; k++) {
		clock_gettime(CLOCK_MONOTONIC, &t0);
		r = round_once(ctx, o, memo, pages, &pst, &wire, &nocache);
		if (r != GCK_OK && nocache && k == 1) {
			gck_log(ctx, 1, "%s: no pre-copy, all of the memory "
			    "goes with the tree stopped", gck_error_string(ctx));
			res->why = "the remote keeps no cache";
			return GCK_OK;
		}
		if (r != GCK_OK) {
			if (r != GCK_ENOPROC)
				gck_error_fate(ctx, GCK_FATE_RUNNING, "process "
				    "tree %d left running", (int)o->pid);
			return r;
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		secs = (double)(t1.tv_sec - t0.tv_sec) +
		    (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
		res->rounds = k;
		res->round_bytes += wire;
		res->round_memory += pst.stored;
		res->last_changed = pst.stored;
		/* The link's speed: the best a round showed, scan and all. */
		if (secs > 0 && (double)wire / secs > rate)
			rate = (double)wire / secs;
		est = rate > 0 ? (double)wire / rate : 0;
		*lastp = est;
		*sharep = pst.memory > 0 ? (double)pst.stored /
		    (double)pst.memory : 0;
		gck_log(ctx, 1, "round %u: %llu bytes of memory read, %llu of "
		    "them sent (%llu bytes on the wire) in %.2f s; that much "
		    "takes about %.0f ms to send", k,
		    (unsigned long long)pst.memory,
		    (unsigned long long)pst.stored, (unsigned long long)wire,
		    secs, est * 1000);
		if (est <= ROUND_SMALL_S) {
			res->why = "what changed takes little time to send";
			break;
		}
		if (k > 1 && pst.stored * 2 > prev) {
			res->why = pst.stored >= prev ? "memory changes faster "
			    "than it is sent" : "rounds no longer shrink";
			break;
		}
		prev = pst.stored;
	}
	gck_log(ctx, 1, "pre-copy ended after %u round%s: %s", res->rounds,
	    res->rounds == 1 ? "" : "s", res->why);
	return GCK_OK;
}

/*
 * A live tree, or an image file, the remote could not restore because a
 * chunk of its cache was damaged is sent once more (the tree once it
 * runs here again): the remote dropped that image, so the chunk travels
 * this time.
 */
/*
 * The statistics of a send done, in res->stats: a live tree's are its
 * checkpoint's, but its freeze, which is how long it was stopped in
 * all; the bytes are the image's, and of them those sent.  The
 * pre-copy rounds (from t0 to tround) come first of the stages.
 */
static void
send_stats(const struct gck_send_opts *o, struct gck_send_result *res,
    int64_t t0, int64_t tround)
{
	struct gck_stats	*st = &res->stats;
	int64_t			 mark = tround, now = gck_clock_us();

	if (o->pid <= 0) {
		memset(st, 0, sizeof *st);
		gck_stats_stage(st, "send", &mark);
	} else {
		st->freeze_ms = res->stopped_ms;
		if (o->live && st->nstages < GCK_STAGES_MAX) {
			memmove(&st->stages[1], &st->stages[0],
			    st->nstages * sizeof st->stages[0]);
			st->stages[0].name = "rounds";
			st->stages[0].ms = gck_stats_ms(t0, tround);
			st->nstages++;
		}
	}
	st->image_bytes = res->bytes;
	st->sent_bytes = res->bytes - res->skipped;
	st->total_ms = gck_stats_ms(t0, now);
}

int
gck_send(struct gck_ctx *ctx, const struct gck_send_opts *o,
    struct gck_send_result *res)
{
	struct stat	sb;
	uint64_t	total = 0;
	int64_t		t0 = gck_clock_us(), tround = t0;
	int		r;

	if (o->pid <= 0 && fstat(o->infd, &sb) == 0 && S_ISREG(sb.st_mode))
		total = (uint64_t)sb.st_size;
	gck_meter_hold(ctx, "sending", total);
	r = send_all(ctx, o, res, &tround);
	gck_meter_release(ctx);
	if (r == GCK_OK)
		send_stats(o, res, t0, tround);
	return r;
}

/*
 * gck_send(): the pre-copy rounds of --live, ended at *troundp, then
 * the send, once more should the first fail in a way that allows it.
 */
static int
send_all(struct gck_ctx *ctx, const struct gck_send_opts *o,
    struct gck_send_result *res, int64_t *troundp)
{
	struct gck_send_result	pre;
	struct gck_memo		*memo = NULL;
	struct gck_ptab		 pages;
	double			 last = 0, share = 0;
	int			r, retry, whole;

	gck_ptab_init(&pages);
	memset(&pre, 0, sizeof pre);
	if (o->live && o->pid > 0) {
		if (kill(o->pid, 0) == -1 && errno == ESRCH)
			return gck_set_error(ctx, GCK_ENOPROC, "local: no "
			    "process %d", (int)o->pid);
		if ((memo = gck_memo_new()) == NULL)
			return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		if ((r = precopy(ctx, o, memo, &pages, &pre, &last,
		    &share)) != GCK_OK) {
			gck_memo_free(memo);
			gck_ptab_clear(&pages);
			*res = pre;
			res->pid = -1;
			res->tty_pid = -1;
			return r;
		}
	}
	*troundp = gck_clock_us();
	/*
	 * What the last round took to send, the stop takes again: when
	 * that is long, and what it sends is much of the memory, rather
	 * than patches of what the remote holds, it is restored as it
	 * comes, as without rounds.
	 */
	whole = memo != NULL && (last <= STOP_WHOLE_S || share < STOP_SHARE);
	if (memo != NULL && !whole)
		gck_log(ctx, 1, "the last round took %.1f s to send, %.0f%% of "
		    "the memory: the stop is restored there as it comes", last,
		    share * 100);
	r = send_once(ctx, o, memo, o->pid > 0 ? &pages : NULL, whole, res,
	    &retry);
	/* A tree runs here again; a file is read again from its start. */
	if (r != GCK_OK && retry && (o->pid > 0 ?
	    ctx->fate == GCK_FATE_RUNNING : lseek(o->infd, 0, SEEK_SET) == 0)) {
		gck_log(ctx, 1, "%s; trying once more", gck_error_string(ctx));
		free(res->stored);
		r = send_once(ctx, o, memo, o->pid > 0 ? &pages : NULL, whole,
		    res, &retry);
		res->retried = 1;
	}
	gck_memo_free(memo);
	gck_ptab_clear(&pages);
	res->rounds = pre.rounds;
	res->round_bytes = pre.round_bytes;
	res->round_memory = pre.round_memory;
	res->last_changed = pre.last_changed;
	res->why = pre.why;
	return r;
}

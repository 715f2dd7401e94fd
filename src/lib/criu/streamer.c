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
 * Serve (serve.c): CRIU asks for files in its own order.  Those already read are
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
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

#include "private.h"
#include "core/util.h"
#include "criu/criu.h"
#include "criu/streamer.h"
#include "criu/streamer_private.h"
#include "image/names.h"

#define SOCK_CAPTURE	"streamer-capture.sock"
#define SOCK_HOOK	"hook.sock"
#define HOOK_ENV	"GCK_CRIU_HOOK"
#define HOOK_ASK	"post-dump"

struct gck_capture {
	struct gck_ctx		*ctx;
	struct gck_sock		 sock;		/* criu's */
	int			 hlfd, hfd;	/* the post-dump hook */
	int			 hooked;	/* it has asked */
	char			 hpath[PATH_MAX];
	struct gck_sfile	*files;
	size_t			 nfiles, cap;
	size_t			 part_size;
	uint64_t		 kept;
	pid_t			 last_pagemap;	/* 0: none just opened */
	char			*buf;
	int			 devnull;
};

static int	pagemap_pid(const char *, pid_t *);
static int	capture_add(struct gck_capture *, const char *, int);
static int	capture_part_done(struct gck_capture *, struct gck_sfile *);
static int	capture_got(struct gck_capture *, struct gck_sfile *, ssize_t);
static int	capture_pages(struct gck_capture *, struct gck_sfile *);
static int	capture_read(struct gck_capture *, struct gck_sfile *);
static int	capture_hook(struct gck_capture *);
static size_t	capture_watch(struct gck_capture *, int *, int *, size_t *);
static int	capture_ready(struct gck_capture *, size_t, int, int);
static void	capture_abandon(struct gck_capture *);

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
	if ((c = calloc(1, sizeof *c)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	c->ctx = ctx;
	c->sock.lfd = c->sock.cfd = c->hfd = c->hlfd = c->devnull = -1;
	c->part_size = part_size;
	if ((c->buf = malloc(GCK_SCHUNK)) == NULL) {
		gck_capture_free(c);
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	}
	if ((c->devnull = open("/dev/null", O_WRONLY | O_CLOEXEC)) == -1) {
		gck_capture_free(c);
		return gck_set_syserr(ctx, errno, "cannot open /dev/null: %s",
		    strerror(errno));
	}
	if (gck_sock_open(&c->sock, ctx, imgdir, SOCK_CAPTURE,
	    "stats-dump") != GCK_OK || (c->hlfd = gck_sock_listen(ctx,
	    workdir, SOCK_HOOK, c->hpath, sizeof c->hpath)) == -1) {
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
	gck_sock_free(&c->sock);
	if (c->hlfd != -1)
		close(c->hlfd);
	if (c->hfd != -1)
		close(c->hfd);
	if (c->devnull != -1)
		close(c->devnull);
	for (i = 0; i < c->nfiles; i++)
		gck_sfile_clear(&c->files[i]);
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

/*
 * Adds file name, of data (len bytes, malloc'ed: the capture owns it
 * from now on, even on failure), to what criu wrote: a CRIU image file
 * of the dump's own, kept in memory.  Returns GCK_OK or a code.
 */
int
gck_capture_add_file(struct gck_capture *c, const char *name, char *data,
    size_t len)
{
	struct gck_sfile	*f;

	if (strlen(name) >= GCK_SNAME || gck_capture_find(c, name) != NULL ||
	    !gck_criu_name_ok(name)) {
		free(data);
		return gck_set_error(c->ctx, GCK_EINVAL, "cannot add '%.200s' "
		    "to the dump", name);
	}
	if (gck_grow(c->ctx, &c->files, &c->cap, c->nfiles,
	    sizeof *c->files) != GCK_OK) {
		free(data);
		return c->ctx->code;
	}
	f = &c->files[c->nfiles++];
	memset(f, 0, sizeof *f);
	memcpy(f->name, name, strlen(name) + 1);
	f->fd = -1;
	f->data = data;
	f->len = f->cap = f->size = len;
	c->kept += len;
	return GCK_OK;
}

/* The part size the samples of the pages files were taken by. */
size_t
gck_capture_part_size(const struct gck_capture *c)
{
	return c->part_size;
}

/*
 * Says that the image holds size bytes of pages file name, its samples
 * checked against the task already (the digests, of what criu wrote, no
 * longer describe it).  Returns GCK_OK, or GCK_EINVAL for no such pages
 * file.
 */
int
gck_capture_set_pages(struct gck_capture *c, const char *name, uint64_t size)
{
	size_t	i;

	for (i = 0; i < c->nfiles; i++)
		if (strcmp(c->files[i].name, name) == 0 && c->files[i].pages) {
			c->files[i].size = size;
			c->files[i].checked = 1;
			return GCK_OK;
		}
	return gck_set_error(c->ctx, GCK_EINVAL, "criu wrote no pages file "
	    "'%s'", name);
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
		/*
		 * criu splices the pages into this pipe: in the default 64
		 * KiB it waits on us every 16 pages, and dumped 512 MiB in
		 * about 1.5 times the time it takes with 1 MiB (more
		 * measured no better).
		 */
		fcntl(fd, F_SETPIPE_SZ, GCK_SPIPE);
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
 * What a read of f that returned n means: 0 for data, 1 for none now
 * (f is closed if it has ended), or a code.
 */
static int
capture_got(struct gck_capture *c, struct gck_sfile *f, ssize_t n)
{
	if (n == -1) {
		if (errno == EINTR || errno == EAGAIN)
			return 1;
		return gck_set_syserr(c->ctx, errno, "cannot read '%s' from "
		    "criu: %s", f->name, strerror(errno));
	}
	if (n == 0) {
		close(f->fd);
		f->fd = -1;
		return 1;
	}
	return 0;
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
	int	r, sample = at % GCK_SAMPLE_STRIDE < GCK_SAMPLE_LEN;

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
	if ((r = capture_got(c, f, n)) < 0)
		return r;
	if (r == 1)
		return f->fd == -1 && f->partfill > 0 ?
		    capture_part_done(c, f) : GCK_OK;
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
	ssize_t	n;
	int	r;

	if (f->pages)
		return capture_pages(c, f);
	if ((r = gck_sfile_room(c->ctx, f, &c->kept)) == 1)
		return gck_set_error(c->ctx, GCK_ENOMEM, "criu's image data "
		    "besides memory pages exceeds %u MiB ('%s')",
		    GCK_KEEP_MAX >> 20, f->name);
	if (r != GCK_OK)
		return r;
	n = read(f->fd, f->data + f->len, f->cap - f->len);
	if ((r = capture_got(c, f, n)) != 0)
		return r == 1 ? GCK_OK : r;
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
 * Fills the poll set: the hook's socket while it has not asked (*hookp
 * its slot, or -1), criu's (*sockp), and the pipes of the files criu is
 * still writing, *openp of them.  Returns how many slots.
 */
static size_t
capture_watch(struct gck_capture *c, int *hookp, int *sockp, size_t *openp)
{
	size_t	i, np = 0;

	*hookp = -1;
	*openp = 0;
	if (!c->hooked) {
		*hookp = (int)np;
		np = gck_sock_add(&c->sock, np, c->hfd != -1 ? c->hfd :
		    c->hlfd, POLLIN, 0);
	}
	np = gck_sock_watch(&c->sock, np, sockp);
	for (i = 0; i < c->nfiles; i++)
		if (c->files[i].fd != -1) {
			np = gck_sock_add(&c->sock, np, c->files[i].fd, POLLIN,
			    i);
			(*openp)++;
		}
	return np;
}

/*
 * Takes what poll found ready: the hook, the pipes up to criu's socket,
 * or, if that is ready, what it brings.
 */
static int
capture_ready(struct gck_capture *c, size_t np, int hookslot, int sockslot)
{
	struct pollfd	*pfd = c->sock.pfd;
	char		 name[GCK_SREQ_MAX];
	size_t		 i;
	int		 r, fd;

	if (hookslot != -1 && pfd[hookslot].revents != 0 &&
	    (r = capture_hook(c)) != GCK_OK)
		return r;
	for (i = 0; i < np; i++) {
		if ((int)i == hookslot || pfd[i].revents == 0)
			continue;
		if ((int)i == sockslot)
			break;
		if ((r = capture_read(c, &c->files[c->sock.idx[i]])) != GCK_OK)
			return r;
	}
	if (i == np)
		return GCK_OK;
	if ((r = gck_sock_take(&c->sock, name, sizeof name, &fd)) != 1)
		return r;
	return capture_add(c, name, fd);
}

/*
 * Closes everything criu waits on, so that it fails and resumes the
 * tree: its sockets, listening ones too (a connection not accepted yet
 * holds, in its queue, the read ends of the pipes criu writes into, and
 * criu would wait on them for ever; and its hook would wait for an
 * answer), and the pipes.
 */
static void
capture_abandon(struct gck_capture *c)
{
	size_t	i;

	gck_sock_close(&c->sock);
	if (c->hlfd != -1)
		close(c->hlfd);
	if (c->hfd != -1)
		close(c->hfd);
	c->hlfd = c->hfd = -1;
	c->hooked = 0;
	for (i = 0; i < c->nfiles; i++)
		if (c->files[i].fd != -1) {
			close(c->files[i].fd);
			c->files[i].fd = -1;
		}
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
	size_t	np, open;
	int	r, n, failed, hookslot, sockslot;

	for (;;) {
		if ((r = gck_check_interrupt(c->ctx)) != GCK_OK ||
		    (r = gck_sock_room(&c->sock, c->nfiles + 2)) != GCK_OK)
			goto out;
		np = capture_watch(c, &hookslot, &sockslot, &open);
		if (c->hooked && open == 0)
			break;
		if ((r = gck_sock_poll(&c->sock, np, 100, &n)) != GCK_OK)
			goto out;
		if (n > 0) {
			if ((r = capture_ready(c, np, hookslot,
			    sockslot)) != GCK_OK)
				goto out;
		} else if (gck_criu_ended(criu, &failed)) {
			/* criu died: its status tells why */
			r = failed ? GCK_OK : gck_set_error(c->ctx, GCK_ECRIU,
			    "criu ended the dump without its post-dump hook");
			goto out;
		}
	}
	r = GCK_OK;
out:
	if (r != GCK_OK || !c->hooked)
		capture_abandon(c);
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

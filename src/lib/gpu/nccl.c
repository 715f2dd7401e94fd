/*
 * nccl.c: gpuckpt's side of the quiesce of an NCCL job (src/nccl/
 * ncclproto.h says what is said, src/nccl/gpuckpt-nccl.c why).
 *
 * The cut: every rank held where it is; the largest count of NCCL
 * operations any has begun is where all of them park; once all are
 * parked, outside NCCL, the collectives each communicator's ranks have
 * begun must be as many on every rank, else the ranks do not line up
 * and the job runs on; then the shim tears the communicators down.  A
 * rank that has not parked when the time is up is let go with all the
 * others: nothing is stopped, and the job runs on.
 */
#include "config.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "private.h"
#include "core/cut.h"
#include "core/proc.h"
#include "core/util.h"
#include "gpu/nccl.h"
#include "../../nccl/ncclproto.h"

struct ncomm {
	unsigned long long	 id;
	int			 nranks, rank;
	unsigned long long	 colls;
};

struct rank {
	pid_t		 pid;
	char		 node[128];	/* of the cut, for another host's */
	int		 remote;	/* another host's: its counts only */
	char		 name[108];	/* abstract: no leading NUL here */
	int		 fd;
	unsigned long long ops;
	struct ncomm	*comm;
	int		 ncomm;
	int		 parked, prepared;
	char		 buf[GCK_NCCL_LINE];
	size_t		 len;
};

struct gck_nccl {
	struct rank	*r;
	size_t		 n;		/* ranks, the other hosts' after */
	size_t		 nl;		/* those of this host */
	size_t		 cap;
	int		 quiesced;
};

/* The listening sockets' inodes of pid's descriptors, sorted. */
static int
sock_inodes(pid_t pid, unsigned long **inop, size_t *np)
{
	char		 path[64], link[64];
	struct dirent	*de;
	unsigned long	*ino = NULL, *p;
	size_t		 n = 0, sz = 0;
	ssize_t		 len;
	DIR		*d;

	snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
	if ((d = opendir(path)) == NULL)
		return -1;
	while ((de = readdir(d)) != NULL) {
		char	fdp[PATH_MAX];

		if (de->d_name[0] == '.')
			continue;
		snprintf(fdp, sizeof fdp, "%s/%s", path, de->d_name);
		if ((len = readlink(fdp, link, sizeof link - 1)) <= 0)
			continue;
		link[len] = '\0';
		if (strncmp(link, "socket:[", 8) != 0)
			continue;
		if (n == sz) {
			sz = sz ? sz * 2 : 16;
			if ((p = realloc(ino, sz * sizeof *ino)) == NULL) {
				free(ino);
				closedir(d);
				return -1;
			}
			ino = p;
		}
		ino[n++] = strtoul(link + 8, NULL, 10);
	}
	closedir(d);
	*inop = ino;
	*np = n;
	return 0;
}

/*
 * The name of pid's listening socket of ours, from its network
 * namespace's /proc/PID/net/unix: 1 found, 0 none.
 */
static int
rank_name(pid_t pid, char *name, size_t len)
{
	char		 path[64], line[512], *at;
	unsigned long	*ino, inode;
	unsigned int	 flags;
	size_t		 n, i;
	FILE		*f;
	int		 found = 0;

	if (sock_inodes(pid, &ino, &n) == -1 || n == 0)
		return 0;
	snprintf(path, sizeof path, "/proc/%d/net/unix", (int)pid);
	if ((f = fopen(path, "re")) == NULL) {
		free(ino);
		return 0;
	}
	while (!found && fgets(line, sizeof line, f) != NULL) {
		/* Num RefCount Protocol Flags Type St Inode Path */
		if (sscanf(line, "%*s %*s %*s %x %*s %*s %lu", &flags,
		    &inode) != 2 || (flags & 0x10000) == 0)
			continue;
		if ((at = strstr(line, " @" GCK_NCCL_PREFIX)) == NULL)
			continue;
		for (i = 0; i < n; i++)
			if (ino[i] == inode)
				break;
		if (i == n)
			continue;
		at += 2;
		at[strcspn(at, "\n")] = '\0';
		if (strlen(at) < len) {
			snprintf(name, len, "%s", at);
			found = 1;
		}
	}
	fclose(f);
	free(ino);
	return found;
}

int
gck_nccl_find(struct gck_ctx *ctx, const pid_t *pids, size_t n,
    struct gck_nccl **qp)
{
	struct gck_nccl	*q;
	char		 name[108];
	size_t		 i;

	*qp = NULL;
	if ((q = calloc(1, sizeof *q)) == NULL ||
	    (n > 0 && (q->r = calloc(n, sizeof *q->r)) == NULL)) {
		free(q);
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	}
	for (i = 0; i < n; i++) {
		if (!rank_name(pids[i], name, sizeof name))
			continue;
		q->r[q->n].pid = pids[i];
		q->r[q->n].fd = -1;
		memcpy(q->r[q->n].name, name, sizeof name);
		q->n++;
	}
	q->nl = q->cap = q->n;
	*qp = q;
	return GCK_OK;
}

/* The same, among a tree's processes (their PIDs as we see them). */
int
gck_nccl_find_procs(struct gck_ctx *ctx, const struct gck_proc *procs,
    size_t n, struct gck_nccl **qp)
{
	pid_t	*pids;
	size_t	 i;
	int	 r;

	*qp = NULL;
	/* (none: a set of none all the same, for a host of a cut) */
	if ((pids = calloc(n > 0 ? n : 1, sizeof *pids)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	for (i = 0; i < n; i++)
		pids[i] = procs[i].host_pid != 0 ? procs[i].host_pid :
		    procs[i].pid;
	r = gck_nccl_find(ctx, pids, n, qp);
	free(pids);
	return r;
}

size_t
gck_nccl_count(const struct gck_nccl *q)
{
	return q != NULL ? q->nl : 0;
}

int
gck_nccl_quiesced(const struct gck_nccl *q)
{
	return q != NULL && q->quiesced;
}

/* A socket in pid's network namespace, which may not be ours. */
static int
ns_socket(pid_t pid)
{
	char		path[64];
	struct stat	a, b;
	int		fd, theirs, mine, e;

	snprintf(path, sizeof path, "/proc/%d/ns/net", (int)pid);
	if (stat(path, &a) == -1 || stat("/proc/thread-self/ns/net", &b) ==
	    -1 || (a.st_ino == b.st_ino && a.st_dev == b.st_dev))
		return socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if ((theirs = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	if ((mine = open("/proc/thread-self/ns/net", O_RDONLY |
	    O_CLOEXEC)) == -1) {
		close(theirs);
		return -1;
	}
	fd = -1;
	if (setns(theirs, CLONE_NEWNET) == 0) {
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		e = errno;
		(void)setns(mine, CLONE_NEWNET);
		errno = e;
	}
	close(theirs);
	close(mine);
	return fd;
}

static int
rank_connect(struct gck_ctx *ctx, struct rank *r)
{
	struct sockaddr_un	sun;
	socklen_t		len;
	size_t			n = strlen(r->name);

	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	if (n + 1 > sizeof sun.sun_path)
		return gck_set_error(ctx, GCK_EINVAL, "NCCL rank %d: bad "
		    "socket name", (int)r->pid);
	memcpy(sun.sun_path + 1, r->name, n);
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
	r->len = 0;
	if ((r->fd = ns_socket(r->pid)) == -1 ||
	    connect(r->fd, (struct sockaddr *)&sun, len) == -1) {
		int	e = errno;

		if (r->fd != -1)
			close(r->fd);
		r->fd = -1;
		return gck_set_syserr(ctx, e, "cannot reach NCCL rank %d: %s",
		    (int)r->pid, strerror(e));
	}
	return GCK_OK;
}

static int
rank_send(struct gck_ctx *ctx, struct rank *r, const char *fmt, ...)
    __attribute__((__format__(__printf__, 3, 4)));

static int
rank_send(struct gck_ctx *ctx, struct rank *r, const char *fmt, ...)
{
	char	line[GCK_NCCL_LINE];
	va_list	ap;
	int	n;
	ssize_t	w;
	size_t	off = 0;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof line - 1, fmt, ap);
	va_end(ap);
	line[n++] = '\n';
	while (off < (size_t)n) {
		w = send(r->fd, line + off, (size_t)n - off, MSG_NOSIGNAL);
		if (w == -1 && errno == EINTR)
			continue;
		if (w <= 0)
			return gck_set_syserr(ctx, w == -1 ? errno : EPIPE,
			    "NCCL rank %d went away", (int)r->pid);
		off += (size_t)w;
	}
	return GCK_OK;
}

/*
 * A line from r by deadline (gck_clock_us()), NUL-terminated in line:
 * GCK_OK, GCK_ETIMEDOUT (no message set) or a code.
 */
static int
rank_line(struct gck_ctx *ctx, struct rank *r, int64_t deadline,
    char *line, size_t len)
{
	struct pollfd	 p;
	char		*nl;
	ssize_t		 n;
	int64_t		 left;

	for (;;) {
		if ((nl = memchr(r->buf, '\n', r->len)) != NULL) {
			*nl = '\0';
			snprintf(line, len, "%s", r->buf);
			r->len -= (size_t)(nl + 1 - r->buf);
			memmove(r->buf, nl + 1, r->len);
			return GCK_OK;
		}
		if (r->len == sizeof r->buf)
			return gck_set_error(ctx, GCK_EFORMAT, "NCCL rank %d "
			    "sent a line too long", (int)r->pid);
		if ((left = deadline - gck_clock_us()) <= 0)
			return GCK_ETIMEDOUT;
		p.fd = r->fd;
		p.events = POLLIN;
		if (poll(&p, 1, (int)(left / 1000) + 1) == -1 &&
		    errno != EINTR)
			return gck_set_syserr(ctx, errno, "poll: %s",
			    strerror(errno));
		if (p.revents == 0)
			continue;
		n = recv(r->fd, r->buf + r->len, sizeof r->buf - r->len, 0);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			return gck_set_error(ctx, GCK_ECUDA, "NCCL rank %d went "
			    "away", (int)r->pid);
		r->len += (size_t)n;
	}
}

static void
rank_close(struct rank *r)
{
	if (r->fd != -1)
		close(r->fd);
	r->fd = -1;
}

/* "WORD OPS NCOMM", the comm lines and "end", read into r. */
static int
rank_counts(struct gck_ctx *ctx, struct rank *r, const char *line,
    const char *word, int64_t deadline)
{
	char		 l[GCK_NCCL_LINE];
	size_t		 wl = strlen(word);
	int		 ncomm, i, rv;
	struct ncomm	*c;

	if (strncmp(line, word, wl) != 0 || line[wl] != ' ' ||
	    sscanf(line + wl, "%llu %d", &r->ops, &ncomm) != 2)
		return gck_set_error(ctx, GCK_ECUDA, "NCCL rank %d: %s",
		    (int)r->pid, line);
	if (ncomm < 0 || ncomm > GCK_NCCL_MAXCOMM)
		return gck_set_error(ctx, GCK_ECUDA, "NCCL rank %d has more "
		    "communicators than gpuckpt follows (%d)", (int)r->pid,
		    GCK_NCCL_MAXCOMM);
	free(r->comm);
	r->comm = NULL;
	r->ncomm = 0;
	if (ncomm > 0 && (r->comm = calloc((size_t)ncomm, sizeof *c)) ==
	    NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	for (i = 0; i <= ncomm; i++) {
		if ((rv = rank_line(ctx, r, deadline, l, sizeof l)) != GCK_OK)
			return rv;
		if (i == ncomm)
			break;
		c = &r->comm[i];
		if (sscanf(l, "comm %llx %d %d %llu", &c->id, &c->nranks,
		    &c->rank, &c->colls) != 4)
			return gck_set_error(ctx, GCK_EFORMAT, "NCCL rank %d: "
			    "bad line '%s'", (int)r->pid, l);
		r->ncomm++;
	}
	if (strcmp(l, "end") != 0)
		return gck_set_error(ctx, GCK_EFORMAT, "NCCL rank %d: bad line "
		    "'%s'", (int)r->pid, l);
	return GCK_OK;
}

/*
 * Each communicator's ranks all here (a job whose ranks are on other
 * hosts too is not cut here), and, once parked, at one collective.
 */
static int
cut_check(struct gck_ctx *ctx, const struct gck_nccl *q, int parked)
{
	const struct rank	*r, *o;
	const struct ncomm	*c, *d;
	size_t			 i, k, seen;
	int			 j, m;

	for (i = 0; i < q->n; i++) {
		r = &q->r[i];
		for (j = 0; j < r->ncomm; j++) {
			c = &r->comm[j];
			seen = 0;
			for (k = 0; k < q->n; k++) {
				o = &q->r[k];
				for (m = 0; m < o->ncomm; m++) {
					d = &o->comm[m];
					if (d->id != c->id)
						continue;
					seen++;
					if (parked && d->colls != c->colls)
						return gck_set_error(ctx,
						    GCK_ECUDA, "NCCL ranks %d "
						    "and %d have begun %llu "
						    "and %llu collectives of a "
						    "communicator they share: "
						    "their operations do not "
						    "line up", (int)r->pid,
						    (int)o->pid, c->colls,
						    d->colls);
				}
			}
			if (c->nranks > 0 && seen < (size_t)c->nranks)
				return gck_set_error(ctx, GCK_ECUDA, "NCCL rank "
				    "%d is in a communicator of %d ranks, %zu "
				    "of them here: the others are outside the "
				    "tree", (int)r->pid, c->nranks, seen);
		}
	}
	return GCK_OK;
}

/* Lets every rank go: those torn down are rebuilt. */
static void
let_go(struct gck_nccl *q, unsigned int timeout_ms)
{
	struct gck_ctx	 tmp;
	size_t		 i;
	int		 any = 0;

	for (i = 0; i < q->nl; i++) {
		rank_close(&q->r[i]);
		any |= q->r[i].prepared;
	}
	if (any) {
		memset(&tmp, 0, sizeof tmp);
		(void)gck_nccl_resume(&tmp, q, timeout_ms);
	}
}

/* The first rank that did not answer, for the message. */
static const struct rank *
laggard(const struct gck_nccl *q, int prepare)
{
	size_t	i;

	for (i = 0; i < q->nl; i++)
		if (prepare ? !q->r[i].prepared : !q->r[i].parked)
			return &q->r[i];
	for (i = 0; i < q->nl; i++)
		if (q->r[i].fd != -1)
			return &q->r[i];
	return &q->r[0];
}

/* Every rank's answer to what each was sent, by deadline. */
static int
gather(struct gck_ctx *ctx, struct gck_nccl *q, int prepare,
    int64_t deadline, unsigned long long target)
{
	char		 line[GCK_NCCL_LINE];
	struct rank	*r;
	size_t		 i;
	int		 rv;

	for (i = 0; i < q->nl; i++) {
		r = &q->r[i];
		if ((rv = rank_line(ctx, r, deadline, line, sizeof line)) !=
		    GCK_OK)
			return rv;
		if (!prepare) {
			if (strncmp(line, "beyond ", 7) == 0)
				return gck_set_error(ctx, GCK_ECUDA, "NCCL rank "
				    "%d went past operation %llu", (int)r->pid,
				    target);
			if ((rv = rank_counts(ctx, r, line, "parked",
			    deadline)) != GCK_OK)
				return rv;
			r->parked = 1;
			continue;
		}
		if (strcmp(line, "prepared") == 0) {
			r->prepared = 1;
			continue;
		}
		if (strcmp(line, "noshim") == 0)
			return gck_set_error(ctx, GCK_ECUDA, "NCCL rank %d has "
			    "no ncclCheckpointPrepare(): preload NCCL's "
			    "checkpoint shim after libgpuckpt-nccl.so",
			    (int)r->pid);
		return gck_set_error(ctx, GCK_ECUDA, "NCCL rank %d could not "
		    "tear its communicators down: %s", (int)r->pid,
		    strncmp(line, "failed ", 7) == 0 ? line + 7 : line);
	}
	return GCK_OK;
}

/* The other hosts' ranks dropped, this host's left. */
static void
drop_remote(struct gck_nccl *q)
{
	size_t	i;

	for (i = q->nl; i < q->n; i++)
		free(q->r[i].comm);
	q->n = q->nl;
}

/*
 * A cut across hosts: this host's counts posted as phase, and the other
 * hosts' taken in as ranks of theirs ("NODE rank PID OPS NCOMM", then
 * its "NODE comm ..." lines), for the target and the checks to see the
 * whole job.
 */
static int
exchange(struct gck_ctx *ctx, struct gck_nccl *q, struct gck_cut *cut,
    const char *phase, int64_t deadline)
{
	char		*text = NULL, *others, *line, *save, node[128];
	size_t		 len = 0, sz = 0, need, i;
	struct rank	*r = NULL;
	struct ncomm	*c;
	int		 j, rv, off, left = 0;

	for (i = 0; i < q->nl; i++) {
		r = &q->r[i];
		need = 64 + (size_t)r->ncomm * 96;
		while (len + need > sz)
			if (gck_grow(ctx, &text, &sz, sz, 1) != GCK_OK) {
				free(text);
				return ctx->code;
			}
		len += (size_t)snprintf(text + len, sz - len, "rank %d %llu "
		    "%d\n", (int)r->pid, r->ops, r->ncomm);
		for (j = 0; j < r->ncomm; j++)
			len += (size_t)snprintf(text + len, sz - len, "comm "
			    "%016llx %d %d %llu\n", r->comm[j].id,
			    r->comm[j].nranks, r->comm[j].rank,
			    r->comm[j].colls);
	}
	rv = gck_cut_post(ctx, cut, phase, text != NULL ? text : "");
	free(text);
	if (rv != GCK_OK ||
	    (rv = gck_cut_gather(ctx, cut, phase, deadline, &others)) !=
	    GCK_OK)
		return rv;
	drop_remote(q);
	r = NULL;
	for (line = strtok_r(others, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		int	pid, ncomm;

		if (sscanf(line, "%127s %n", node, &off) != 1)
			goto bad;
		if (strncmp(line + off, "rank ", 5) == 0) {
			if (q->n == q->cap && gck_grow(ctx, &q->r, &q->cap,
			    q->n, sizeof *q->r) != GCK_OK) {
				free(others);
				return ctx->code;
			}
			r = &q->r[q->n];
			memset(r, 0, sizeof *r);
			r->fd = -1;
			r->remote = 1;
			snprintf(r->node, sizeof r->node, "%s", node);
			if (sscanf(line + off, "rank %d %llu %d", &pid,
			    &r->ops, &ncomm) != 3 || ncomm < 0 ||
			    ncomm > GCK_NCCL_MAXCOMM)
				goto bad;
			r->pid = (pid_t)pid;
			if (ncomm > 0 && (r->comm = calloc((size_t)ncomm,
			    sizeof *r->comm)) == NULL) {
				free(others);
				return gck_set_error(ctx, GCK_ENOMEM, "out of "
				    "memory");
			}
			q->n++;
			left = ncomm;
			continue;
		}
		if (r == NULL || strcmp(r->node, node) != 0 || left-- <= 0)
			goto bad;
		c = &r->comm[r->ncomm];
		if (sscanf(line + off, "comm %llx %d %d %llu", &c->id,
		    &c->nranks, &c->rank, &c->colls) != 4)
			goto bad;
		r->ncomm++;
	}
	free(others);
	return GCK_OK;
bad:
	free(others);
	return gck_set_error(ctx, GCK_EFORMAT, "the cut: a bad line from %s "
	    "in its '%s'", node, phase);
}

static int
quiesce(struct gck_ctx *ctx, struct gck_nccl *q, unsigned int timeout_ms,
    unsigned int lease_s, struct gck_cut *cut)
{
	char			 line[GCK_NCCL_LINE];
	unsigned long long	 target = 0;
	const struct rank	*lag;
	struct rank		*r;
	static const char *const phase[] = { "hold", "park", "tear down",
	    "close" };
	int64_t			 deadline;
	size_t			 i;
	int			 rv, at = 0;

	deadline = gck_clock_us() + (int64_t)timeout_ms * 1000;
	for (i = 0; i < q->nl; i++) {
		r = &q->r[i];
		if ((rv = rank_connect(ctx, r)) != GCK_OK ||
		    (rv = rank_send(ctx, r, "hold")) != GCK_OK)
			return rv;
		if ((rv = rank_line(ctx, r, deadline, line, sizeof line)) !=
		    GCK_OK)
			goto late;
		if (strcmp(line, "busy prepared") == 0)
			return gck_set_error(ctx, GCK_ECUDA, "NCCL rank %d is "
			    "quiesced already, by another gpuckpt or since a "
			    "restore that did not resume it", (int)r->pid);
		if ((rv = rank_counts(ctx, r, line, "held", deadline)) !=
		    GCK_OK)
			goto late;
		if (r->ops > target)
			target = r->ops;
	}
	if (cut != NULL) {
		if ((rv = exchange(ctx, q, cut, "held", deadline)) != GCK_OK)
			return rv;
		for (i = q->nl; i < q->n; i++)
			if (q->r[i].ops > target)
				target = q->r[i].ops;
	}
	if ((rv = cut_check(ctx, q, 0)) != GCK_OK)
		return rv;
	at = 1;
	for (i = 0; i < q->nl; i++)
		if ((rv = rank_send(ctx, &q->r[i], "park %llu", target)) !=
		    GCK_OK)
			return rv;
	if ((rv = gather(ctx, q, 0, deadline, target)) != GCK_OK)
		goto late;
	if (cut != NULL && (rv = exchange(ctx, q, cut, "parked", deadline)) !=
	    GCK_OK)
		return rv;
	if ((rv = cut_check(ctx, q, 1)) != GCK_OK)
		return rv;
	at = 2;
	for (i = 0; i < q->nl; i++)
		if ((rv = rank_send(ctx, &q->r[i], "prepare %u", lease_s)) !=
		    GCK_OK)
			return rv;
	if ((rv = gather(ctx, q, 1, deadline, target)) != GCK_OK)
		goto late;
	if (cut != NULL && (rv = exchange(ctx, q, cut, "prepared",
	    deadline)) != GCK_OK)
		return rv;
	/*
	 * Each rank closes its end first: no connection of ours is left
	 * in a process criu is about to dump.
	 */
	for (i = 0; i < q->nl; i++) {
		r = &q->r[i];
		struct gck_ctx	tmp;

		memset(&tmp, 0, sizeof tmp);
		if ((rv = rank_send(ctx, r, "bye")) != GCK_OK)
			return rv;
		/* (its end of the connection: an error, for rank_line()) */
		while ((rv = rank_line(&tmp, r, deadline, line, sizeof line)) ==
		    GCK_OK)
			;
		if (rv == GCK_ETIMEDOUT)
			goto late;
		rank_close(r);
	}
	return GCK_OK;
late:
	if (rv != GCK_ETIMEDOUT)
		return rv;
	if (at != 1) {
		lag = laggard(q, 1);
		return gck_set_error(ctx, GCK_ETIMEDOUT, "NCCL rank %d did not "
		    "%s within %u s", (int)lag->pid, phase[at],
		    (timeout_ms + 999) / 1000);
	}
	lag = laggard(q, 0);
	return gck_set_error(ctx, GCK_ETIMEDOUT, "NCCL ranks did not quiesce "
	    "within %u s: rank %d stayed at operation %llu of %llu (waiting "
	    "outside NCCL, or for a rank outside the tree?)",
	    (timeout_ms + 999) / 1000, (int)lag->pid, lag->ops, target);
}

int
gck_nccl_quiesce(struct gck_ctx *ctx, struct gck_nccl *q,
    unsigned int timeout_ms, unsigned int lease_s, struct gck_cut *cut)
{
	int	rv;

	if (q == NULL || (q->nl == 0 && cut == NULL))
		return GCK_OK;
	if (cut != NULL)
		gck_log(ctx, 1, "quiescing %zu NCCL rank%s here, as %s of the "
		    "cut", q->nl, q->nl == 1 ? "" : "s", gck_cut_name(cut));
	else
		gck_log(ctx, 1, "quiescing %zu NCCL rank%s", q->nl, q->nl == 1 ?
		    "" : "s");
	rv = quiesce(ctx, q, timeout_ms, lease_s, cut);
	drop_remote(q);
	if (rv != GCK_OK) {
		/* The other hosts let theirs go too. */
		gck_cut_fail(cut, ctx->msg);
		let_go(q, timeout_ms);
		return rv;
	}
	q->quiesced = 1;
	return GCK_OK;
}

int
gck_nccl_resume(struct gck_ctx *ctx, struct gck_nccl *q,
    unsigned int timeout_ms)
{
	char		 line[GCK_NCCL_LINE];
	struct gck_ctx	 tmp;
	struct rank	*r;
	int64_t		 deadline;
	size_t		 i;
	int		 rv, first = GCK_OK;

	if (q == NULL || q->nl == 0)
		return GCK_OK;
	deadline = gck_clock_us() + (int64_t)timeout_ms * 1000;
	memset(&tmp, 0, sizeof tmp);
	/* All asked first: the rebuild is collective. */
	for (i = 0; i < q->nl; i++) {
		r = &q->r[i];
		rank_close(r);
		if ((rv = rank_connect(&tmp, r)) != GCK_OK ||
		    (rv = rank_send(&tmp, r, "resume")) != GCK_OK) {
			rank_close(r);
			if (first == GCK_OK)
				first = gck_set_error(ctx, rv, "%s", tmp.msg);
		}
	}
	for (i = 0; i < q->nl; i++) {
		r = &q->r[i];
		if (r->fd == -1)
			continue;
		rv = rank_line(&tmp, r, deadline, line, sizeof line);
		if (rv == GCK_OK && strcmp(line, "resumed") != 0)
			rv = gck_set_error(&tmp, GCK_ECUDA, "NCCL rank %d could "
			    "not rebuild its communicators: %s", (int)r->pid,
			    strncmp(line, "failed ", 7) == 0 ? line + 7 : line);
		else if (rv == GCK_ETIMEDOUT)
			rv = gck_set_error(&tmp, GCK_ETIMEDOUT, "NCCL rank %d "
			    "did not rebuild its communicators within %u s",
			    (int)r->pid, (timeout_ms + 999) / 1000);
		if (rv == GCK_OK) {
			r->prepared = r->parked = 0;
			(void)rank_send(&tmp, r, "bye");
		} else if (first == GCK_OK)
			first = gck_set_error(ctx, rv, "%s", tmp.msg);
		rank_close(r);
	}
	q->quiesced = 0;
	return first;
}

int
gck_nccl_settle(struct gck_nccl *q, char *why, size_t len)
{
	struct gck_ctx	tmp;
	int		r;

	if (!gck_nccl_quiesced(q))
		return GCK_OK;
	memset(&tmp, 0, sizeof tmp);
	if ((r = gck_nccl_resume(&tmp, q, GCK_NCCL_RESUME_MS)) != GCK_OK &&
	    why != NULL)
		snprintf(why, len, "%s", tmp.msg);
	return r;
}

void
gck_nccl_free(struct gck_nccl *q)
{
	size_t	i;

	if (q == NULL)
		return;
	for (i = 0; i < q->n; i++) {
		rank_close(&q->r[i]);
		free(q->r[i].comm);
	}
	free(q->r);
	free(q);
}

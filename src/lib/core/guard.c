/*
 * guard.c: a small process that outlives a killed gpuckpt.
 *
 * Signals gpuckpt can catch roll the checkpoint back; SIGKILL (the OOM
 * killer, a batch system's last word) it cannot.  (A restore has one
 * too, which only removes its work directory: its criu, left without
 * the image, fails and kills what it restored.)  The guard, forked
 * before the tree is touched, waits on a pipe: a final byte says all is
 * settled; end of file without it says gpuckpt died, and the guard then
 * finishes the job: it waits for criu to let go of the tree and resumes
 * it (and brings its CUDA processes back onto their GPUs), or, once the
 * image was complete, carries out what was asked; and it removes the
 * work directory and a partial output file.  It acts on the tree only
 * if its root is still the process it was (the same start time), and
 * never resumes a process that was stopped before gpuckpt came.
 *
 * A restore's guard learns the root of the tree criu restores (its
 * keeper), and criu inherits its pipe: end of file then comes once both
 * the restoring tool and criu are gone.  The guard kills what criu left
 * of the tree (stopped, or half restored), unless it was told that the
 * tree may run, in which case it lets it continue; then it removes the
 * work directory, into which criu no longer writes, and the copy of the
 * stream the restore made, unless it ended the tree's source.
 */
#include "config.h"

#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "private.h"
#include "core/guard.h"
#include "core/proc.h"
#include "core/util.h"

#define GUARD_CRIU_WAIT_MS	(30 * 60 * 1000)
#define GUARD_RMTREE_MS		10000

struct gck_guard {
	pid_t	pid;
	int	fd;
};

static _Noreturn void	guard_main(struct gck_ctx *, const struct gck_ptree *,
			    int, const char *, const char *,
			    gck_guard_gpu_fn, const struct gck_proc *, size_t);
static int		traced(pid_t);
static void		guard_send(struct gck_guard *, char, pid_t);

/* Reads exactly len bytes.  Returns 0, or -1 at end of file. */
static int
readn(int fd, void *buf, size_t len)
{
	char	*p = buf;
	ssize_t	 n;

	while (len > 0) {
		n = read(fd, p, len);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Returns 1 if pid is being traced (by criu), else 0. */
static int
traced(pid_t pid)
{
	char		 path[64], buf[4096];
	const char	*s;

	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	if (gck_read_small_file(path, buf, sizeof buf) == -1 ||
	    (s = strstr(buf, "\nTracerPid:")) == NULL)
		return 0;
	return strtol(s + 11, NULL, 10) != 0;
}

/*
 * Settles the tree of root as intent says, if root is still the process
 * it was: 'K' kill it, 'S' leave it, else let it run, but for the
 * processes in stopped (n of them), stopped before we came.
 */
static void
guard_settle(struct gck_ctx *ctx, pid_t root, uint64_t start, char intent,
    const pid_t *stopped, size_t nstopped)
{
	struct gck_ptree	*t = NULL;
	size_t			 i, j;

	if (root <= 0 || (start != 0 && gck_pid_start(root) != start) ||
	    gck_ptree_scan(ctx, root, &t) != GCK_OK)
		return;
	for (i = 0; i < t->n; i++) {
		switch (intent) {
		case 'K':
			kill(t->procs[i].pid, SIGKILL);
			break;
		case 'S':
			break;
		default:	/* roll back, or resume as asked */
			for (j = 0; j < nstopped &&
			    stopped[j] != t->procs[i].pid; j++)
				;
			if (j == nstopped && (t->procs[i].state == 'T' ||
			    t->procs[i].state == 't'))
				kill(t->procs[i].pid, SIGCONT);
			break;
		}
	}
	gck_ptree_free(t);
}

static _Noreturn void
guard_main(struct gck_ctx *ctx, const struct gck_ptree *t, int fd,
    const char *work, const char *partial, gck_guard_gpu_fn gpu,
    const struct gck_proc *cand, size_t ncand)
{
	pid_t			*stopped = NULL, root = 0, keeper = 0, criu = 0;
	uint64_t		 start = 0, kstart = 0, cstart = 0;
	size_t			 nstopped = 0, i;
	char			 c, intent = 0, spool[PATH_MAX];
	ssize_t			 n;
	int			 waited;

	/*
	 * A checkpoint's tree, as it was found before it was touched:
	 * what was stopped then stays stopped whatever becomes of us.
	 */
	if (t != NULL && t->n > 0) {
		root = t->procs[0].pid;
		start = t->procs[0].start;
		if ((stopped = calloc(t->n, sizeof *stopped)) != NULL)
			for (i = 0; i < t->n; i++)
				if (t->procs[i].state == 'T' ||
				    t->procs[i].state == 't')
					stopped[nstopped++] = t->procs[i].pid;
	}
	for (;;) {
		n = read(fd, &c, 1);
		if (n == -1 && errno == EINTR)
			continue;
		if (n != 1)
			break;
		if (c == 'D')
			_exit(0);
		if (c == 'P') {
			/* The tree a restore makes, under its keeper. */
			if (readn(fd, &keeper, sizeof keeper) != 0)
				break;
			kstart = gck_pid_start(keeper);
			continue;
		}
		if (c == 'C') {
			/* The criu that dumps the tree. */
			if (readn(fd, &criu, sizeof criu) != 0)
				break;
			cstart = gck_pid_start(criu);
			continue;
		}
		intent = c;
	}
	/*
	 * gpuckpt is gone without settling the tree: criu first, if it
	 * still runs (it fails once the image socket is gone, and lets the
	 * tree go), and whatever still traces the tree.
	 */
	for (waited = 0; criu > 0 && cstart != 0 && !gck_pid_gone(criu) &&
	    gck_pid_start(criu) == cstart && waited < GUARD_CRIU_WAIT_MS;
	    waited += 50)
		gck_msleep(50);
	for (waited = 0; root > 0 && traced(root) &&
	    waited < GUARD_CRIU_WAIT_MS; waited += 50)
		gck_msleep(50);
	/*
	 * The output file was being renamed into place: once it has its
	 * name (the partial is gone), the image is complete and what was
	 * asked is carried out; until then, the tree is rolled back.
	 */
	if (intent >= 'a' && intent <= 'z')
		intent = partial != NULL && access(partial, F_OK) == 0 ? 0 :
		    (char)(intent - 'a' + 'A');
	/*
	 * A partial file goes, but for a restore's copy of the stream once
	 * the source is ended ('E'): the job is in it.
	 */
	if (partial != NULL && intent != 'E')
		unlink(partial);
	/*
	 * criu, done with the tree, may still be writing its last file
	 * (stats-dump) into the work directory: until it is gone, again.
	 */
	gck_rmtree(work);
	for (waited = 0; work != NULL && access(work, F_OK) == 0 &&
	    waited < GUARD_RMTREE_MS; waited += 50) {
		gck_msleep(50);
		gck_rmtree(work);
	}
	/* A restore's tree: killed, unless it may run. */
	if (keeper > 0)
		guard_settle(ctx, keeper, kstart, intent == 'R' ? 'R' : 'K',
		    NULL, 0);
	if (root > 0) {
		guard_settle(ctx, root, start, intent, stopped, nstopped);
		if (intent != 'K' && intent != 'S')
			if (gpu != NULL)
				gpu(ctx, cand, ncand, work);
	}
	/* The device memory spooled beside it, once no GPU needs it. */
	if (work != NULL && gpu != NULL) {
		snprintf(spool, sizeof spool, "%s" GCK_SPOOL_SUFFIX, work);
		gck_rmtree(spool);
	}
	_exit(0);
}

/*
 * Starts the guard of tree t (NULL: of no tree; a restore tells its
 * guard of its trees later), as it is before anything is done to it,
 * with the work directory and the partial output file (or NULL) to
 * remove, and the processes whose GPU state gpu (or none, if NULL) is
 * to bring back.  Returns GCK_OK with *gp set, or a code.
 */
int
gck_guard_start(struct gck_ctx *ctx, const struct gck_ptree *t,
    const char *work, const char *partial, gck_guard_gpu_fn gpu,
    const struct gck_proc *cand, size_t ncand, struct gck_guard **gp)
{
	struct gck_guard	*g;
	int			 p[2], fd;
	pid_t			 pid;

	*gp = NULL;
	if ((g = calloc(1, sizeof *g)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	if (pipe2(p, O_CLOEXEC) == -1) {
		free(g);
		return gck_set_syserr(ctx, errno, "cannot make a pipe: %s",
		    strerror(errno));
	}
	if ((pid = fork()) == -1) {
		int	oerrno = errno;

		close(p[0]);
		close(p[1]);
		free(g);
		return gck_set_syserr(ctx, oerrno, "cannot fork: %s",
		    strerror(oerrno));
	}
	if (pid == 0) {
		/* Out of the terminal's reach; holding nothing of ours. */
		setpgid(0, 0);
		signal(SIGINT, SIG_IGN);
		signal(SIGTERM, SIG_IGN);
		signal(SIGHUP, SIG_IGN);
		signal(SIGPIPE, SIG_IGN);
		if (p[0] > 0)
			close_range(0, (unsigned)p[0] - 1, 0);
		close_range((unsigned)p[0] + 1, ~0u, 0);
		if ((fd = open("/dev/null", O_RDWR)) != -1) {
			dup2(fd, 0);
			dup2(fd, 1);
			dup2(fd, 2);
			if (fd > 2)
				close(fd);
		}
		gck_set_interrupt(ctx, NULL);
		guard_main(ctx, t, p[0], work, partial, gpu, cand, ncand);
	}
	close(p[0]);
	g->pid = pid;
	g->fd = p[1];
	*gp = g;
	return GCK_OK;
}

/*
 * Tells the guard what it is to do should gpuckpt die from now on:
 * 'K' kill the tree, 'R' resume it, 'S' leave it stopped; 'k', 'r' or
 * 's' the same if the output file has its name by then, else roll
 * back.  (For a restore: 'E' once it has ended the source, its copy of
 * the stream to be kept; 'R' once its trees may run.)
 */
void
gck_guard_intent(struct gck_guard *g, char intent)
{
	ssize_t	n;

	if (g == NULL)
		return;
	do
		n = write(g->fd, &intent, 1);
	while (n == -1 && errno == EINTR);
}

/*
 * Tells a restore's guard of the tree it makes, by its root (criu's
 * keeper): should the tool die from now on, what is left of the tree is
 * killed, unless gck_guard_intent(g, 'R') said it may run.
 */
void
gck_guard_tree(struct gck_guard *g, pid_t root)
{
	guard_send(g, 'P', root);
}

/*
 * Tells a checkpoint's guard of the criu that dumps its tree: should
 * the tool die while criu runs, the guard waits for criu to end before
 * it settles the tree, as criu may not hold the tree yet (it is traced
 * only once criu has seized it) and would then dump it meanwhile.
 */
void
gck_guard_criu(struct gck_guard *g, pid_t criu)
{
	guard_send(g, 'C', criu);
}

/* Writes message c with pid to g. */
static void
guard_send(struct gck_guard *g, char c, pid_t pid)
{
	char	buf[1 + sizeof pid];
	size_t	off = 0;
	ssize_t	n;

	if (g == NULL)
		return;
	buf[0] = c;
	memcpy(buf + 1, &pid, sizeof pid);
	while (off < sizeof buf) {
		n = write(g->fd, buf + off, sizeof buf - off);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		off += (size_t)n;
	}
}

/* The guard's process ID (-1 if none). */
pid_t
gck_guard_pid(const struct gck_guard *g)
{
	return g != NULL ? g->pid : -1;
}

/*
 * The guard's end of the pipe, for criu to inherit (-1 if none): the
 * guard then waits for criu too.
 */
int
gck_guard_fd(const struct gck_guard *g)
{
	return g != NULL ? g->fd : -1;
}

/* Tells the guard all is settled, and reaps it.  NULL is fine. */
void
gck_guard_free(struct gck_guard *g)
{
	int	status;

	if (g == NULL)
		return;
	gck_guard_intent(g, 'D');
	close(g->fd);
	while (waitpid(g->pid, &status, 0) == -1 && errno == EINTR)
		;
	free(g);
}

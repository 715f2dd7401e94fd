/*
 * keeper.c: the process under which criu restores a tree.
 *
 * criu restore -d hands the tree it restored to its own parent's
 * reaper when it exits.  A tree that was a shell's job (its root leads
 * its process group but not its session: `cmd &`, `nohup cmd &`) is
 * restored into criu's session, in a process group of its own; had
 * criu run straight under gpurestore, in another session, that process
 * group would be orphaned the moment criu exits while its processes
 * are still stopped, and the kernel would send it SIGHUP and SIGCONT:
 * the job dies, or runs before its image has been checked.
 *
 * So criu runs under a keeper: a process that leads a session of its
 * own, is a child subreaper, runs criu in its own process group and
 * adopts the tree when criu exits.  The tree's process group keeps a
 * parent in its session, in another group, and is not orphaned until
 * the keeper goes: after the tree has been let run, or killed.
 *
 * In a PID namespace of its own (gpurestore --pidns) the keeper is the
 * namespace's init, named gpuckpt-init: it mounts the namespace's /proc
 * in a mount namespace of its own, sets the namespace's last PID above
 * the image's so that criu itself takes none of them, has criu restore
 * the tree there with its PIDs, and reaps in it.  It reports the root's
 * wait status when the root ends, and exits, the namespace with it,
 * once nothing else lives in it.
 *
 * The keeper is a program of its own, gpuckpt-keeper in
 * $(libexecdir)/gpuckpt (gck_libexec_path()), run with fexecve(2) so
 * that it holds none of the restoring tool's memory; its main() is
 * gck_keeper_run().  It reports criu's wait status on one pipe and
 * waits on another for the word to go.
 */
#include "config.h"

#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "private.h"
#include "core/keeper.h"
#include "core/proc.h"
#include "core/util.h"

#define KEEPER_PROG	"gpuckpt-keeper"
#define KEEPER_STATUS	3	/* the keeper's descriptors */
#define KEEPER_RELEASE	4
#define KEEPER_KEEP	5	/* criu's: the guard's pipe */
#define KEEPER_FIRSTFREE 6	/* criu's to inherit (-f N), from here */
#define KEEPER_XFDS	256
#define KEEPER_HIGH	(KEEPER_FIRSTFREE + KEEPER_XFDS + 8)

struct gck_keeper {
	pid_t	pid;
	int	ns;		/* the init of a PID namespace */
	int	statusfd;	/* its report; -1 once read */
	int	releasefd;	/* closed, or a byte: go */
	int	reported;
	int	released;
	int	rootdone;	/* the namespace's root reported */
	int	rootstatus;
	struct gck_keeper_report rep;
};

static void		keeper_release_wait(void);
static int		keeper_setup_ns(pid_t);
static int		keeper_move_fds(struct gck_ctx *, int [4], int *,
			    const int *, size_t, int *, int *);
static _Noreturn void	keeper_init_loop(pid_t);

/* Writes all of buf; the reader may be gone. */
static void
put(int fd, const void *buf, size_t len)
{
	const char	*p = buf;
	ssize_t		 n;

	while (len > 0) {
		n = write(fd, p, len);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		p += n;
		len -= (size_t)n;
	}
}

/*
 * Until gpurestore says go.  Should it die instead, its guard settles
 * the tree (kills it, or lets it run); the keeper goes once nothing of
 * the tree is stopped under it.
 */
static void
keeper_release_wait(void)
{
	char	c;
	ssize_t	n;

	do
		n = read(KEEPER_RELEASE, &c, 1);
	while (n == -1 && errno == EINTR);
	if (n == 1)
		return;
	for (;;) {
		while (waitpid(-1, NULL, WNOHANG | __WALL) > 0)
			;
		if (!gck_children_stopped(getpid()))
			return;
		gck_msleep(50);
	}
}

/*
 * As the init of a new PID namespace: a mount namespace whose mounts do
 * not propagate back, this namespace's /proc, and its last PID set to
 * maxpid, so that criu and its helpers take PIDs above the image's.
 * Returns 0 or an errno.
 */
static int
keeper_setup_ns(pid_t maxpid)
{
	char	buf[32];
	int	fd, len, e = 0;

	(void)prctl(PR_SET_NAME, "gpuckpt-init");
	if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) == -1 ||
	    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	    NULL) == -1)
		return errno;
	len = snprintf(buf, sizeof buf, "%d", (int)maxpid);
	if ((fd = open("/proc/sys/kernel/ns_last_pid", O_WRONLY |
	    O_CLOEXEC)) == -1)
		return errno;
	if (write(fd, buf, (size_t)len) != len)
		e = errno != 0 ? errno : EIO;
	close(fd);
	return e;
}

/*
 * As init, once criu is done: reaps everything that ends in the
 * namespace; reports the root's wait status when it ends, and exits
 * once nothing is left (the namespace ends with us).
 */
static _Noreturn void
keeper_init_loop(pid_t root)
{
	struct gck_keeper_report	rep;
	pid_t				pid;
	int				status;

	memset(&rep, 0, sizeof rep);
	for (;;) {
		pid = waitpid(-1, &status, __WALL);
		if (pid == -1) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pid == root) {
			rep.status = status;
			put(KEEPER_STATUS, &rep, sizeof rep);
			close(KEEPER_STATUS);
		}
	}
	_exit(0);
}

/*
 * gpuckpt-keeper: runs criu (argv) as gck_keeper_start() asks, its
 * report on descriptor 3, the word to go on 4, the guard's pipe on 5;
 * with "-f N" first, N more descriptors from 6 on for criu to inherit
 * (closed once criu is done); with "-n MAXPID:ROOT" next, as the init
 * of the PID namespace it was started in.  Returns GCK_OK once let go, or GCK_ESYS when it could not
 * run criu (and said so on descriptor 3); as init it does not return.
 */
int
gck_keeper_run(char *const argv[])
{
	struct gck_keeper_report	 rep;
	sigset_t			 set;
	pid_t				 criu = -1;
	char				**envp = NULL;
	int				 i, fd, ns = 0, maxpid = 0, root = 0;
	int				 nx = 0;

	memset(&rep, 0, sizeof rep);
	if (argv[0] != NULL && strcmp(argv[0], "-f") == 0) {
		if (argv[1] == NULL || sscanf(argv[1], "%d", &nx) != 1 ||
		    nx < 0 || nx > KEEPER_XFDS)
			rep.err = EINVAL;
		argv += 2;
	}
	if (argv[0] != NULL && strcmp(argv[0], "-n") == 0) {
		if (argv[1] == NULL || sscanf(argv[1], "%d:%d", &maxpid,
		    &root) != 2 || getpid() != 1)
			rep.err = EINVAL;
		ns = 1;
		argv += 2;
	}
	if (argv[0] == NULL)
		rep.err = EINVAL;
	(void)prctl(PR_SET_NAME, "gpuckpt-keeper");
	/* Only what criu is to inherit from us, from 6 on, stays. */
	(void)close_range(KEEPER_FIRSTFREE + (unsigned int)nx, ~0u, 0);
	for (i = 1; i < NSIG; i++)
		if (i != SIGCHLD)
			signal(i, i == SIGPIPE ? SIG_IGN : SIG_DFL);
	signal(SIGHUP, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	sigemptyset(&set);
	sigprocmask(SIG_SETMASK, &set, NULL);
	if (rep.err == 0 && setsid() == -1)
		rep.err = errno;
	if (rep.err == 0 && ns)
		rep.err = keeper_setup_ns((pid_t)maxpid);
	else if (rep.err == 0 && prctl(PR_SET_CHILD_SUBREAPER, 1) == -1)
		rep.err = errno;
	if (rep.err == 0 && (envp = gck_criu_envp(NULL)) == NULL)
		rep.err = ENOMEM;
	if (rep.err == 0 && (criu = fork()) == -1)
		rep.err = errno;
	if (criu != 0)
		gck_criu_envp_free(envp, NULL);
	if (rep.err != 0) {
		put(KEEPER_STATUS, &rep, sizeof rep);
		errno = rep.err;
		return GCK_ESYS;
	}
	if (criu == 0) {
		close(KEEPER_STATUS);
		close(KEEPER_RELEASE);
		for (i = 1; i < NSIG; i++)
			signal(i, SIG_DFL);
		execve(argv[0], argv, envp);
		dprintf(2, "Error (gpuckpt): cannot run %s: %s\n", argv[0],
		    strerror(errno));
		_exit(127);
	}
	/* The guard waits for criu, not for us. */
	close(KEEPER_KEEP);
	while (waitpid(criu, &rep.status, 0) == -1 && errno == EINTR)
		;
	(void)close_range(KEEPER_FIRSTFREE, ~0u, 0);
	put(KEEPER_STATUS, &rep, sizeof rep);
	if (!ns)
		close(KEEPER_STATUS);
	/* criu's log pipe: let its reader see the end. */
	if ((fd = open("/dev/null", O_RDWR)) != -1) {
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
	if (ns) {
		close(KEEPER_RELEASE);
		keeper_init_loop((pid_t)root);
	}
	keeper_release_wait();
	while (waitpid(-1, NULL, WNOHANG | __WALL) > 0)
		;
	return GCK_OK;
}

/*
 * Moves the keeper's descriptors out of the way of the numbers it is
 * given them at: fds[] (its status and release pipes, criu's keepfd
 * and log) in place, the nxfds descriptors xfds (criu's -f N) to hx[],
 * and the program *exep and /dev/null *nulp in place.  hx[] holds -1
 * on the way in, and from the first of xfds that was not moved on the
 * way out.  Returns GCK_OK, or a code with none of fds[] left open.
 */
static int
keeper_move_fds(struct gck_ctx *ctx, int fds[4], int *hx, const int *xfds,
    size_t nxfds, int *exep, int *nulp)
{
	size_t	i;
	int	r;

	for (i = 0; i < 4; i++)
		fds[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, KEEPER_HIGH);
	for (i = 0; i < nxfds; i++)
		if ((hx[i] = fcntl(xfds[i], F_DUPFD_CLOEXEC, KEEPER_HIGH)) ==
		    -1)
			break;
	if ((r = fcntl(*exep, F_DUPFD_CLOEXEC, KEEPER_HIGH)) != -1) {
		close(*exep);
		*exep = r;
	}
	if (r != -1 &&
	    (r = fcntl(*nulp, F_DUPFD_CLOEXEC, KEEPER_HIGH)) != -1) {
		close(*nulp);
		*nulp = r;
	}
	if (fds[0] == -1 || fds[1] == -1 || fds[2] == -1 || fds[3] == -1 ||
	    r == -1 || (nxfds > 0 && hx[nxfds - 1] == -1)) {
		r = gck_set_syserr(ctx, errno, "cannot start criu: %s",
		    strerror(errno));
		for (i = 0; i < 4; i++)
			if (fds[i] != -1)
				close(fds[i]);
		return r;
	}
	return GCK_OK;
}

/*
 * Starts a keeper that runs criu (argv) with its output on logfd and
 * keepfd inherited, and the nxfds descriptors xfds as 6, 7... ; with ns, as the init of a new PID namespace (and
 * mount namespace).  Returns GCK_OK with *kp, or a code.
 */
int
gck_keeper_start(struct gck_ctx *ctx, char *const argv[], int logfd,
    int keepfd, const int *xfds, size_t nxfds,
    const struct gck_keeper_ns *ns, struct gck_keeper **kp)
{
	extern char		**environ;
	struct gck_keeper	 *k = NULL;
	char			**kargv = NULL, prog[PATH_MAX], nsarg[32];
	char			  xarg[16];
	int			 *hx = NULL;
	size_t			  i, j;
	int			  exe = -1, nul = -1, sp[2] = { -1, -1 };
	int			  rp[2] = { -1, -1 }, fds[4], r, oerrno;
	pid_t			  pid;

	*kp = NULL;
	if (gck_libexec_path(ctx, KEEPER_PROG, "criu restores under", prog,
	    sizeof prog) != GCK_OK)
		return ctx->code;
	for (i = 0; argv[i] != NULL; i++)
		;
	if (nxfds > KEEPER_XFDS)
		return gck_set_error(ctx, GCK_EINVAL, "cannot start criu: "
		    "more than %d descriptors to give it", KEEPER_XFDS);
	if ((k = calloc(1, sizeof *k)) == NULL ||
	    (kargv = calloc(i + 6, sizeof *kargv)) == NULL ||
	    (hx = calloc(nxfds + 1, sizeof *hx)) == NULL) {
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i < nxfds; i++)
		hx[i] = -1;
	j = 0;
	kargv[j++] = KEEPER_PROG;
	if (nxfds > 0) {
		snprintf(xarg, sizeof xarg, "%zu", nxfds);
		kargv[j++] = "-f";
		kargv[j++] = xarg;
	}
	if (ns != NULL) {
		snprintf(nsarg, sizeof nsarg, "%d:%d", (int)ns->maxpid,
		    (int)ns->root);
		kargv[j++] = "-n";
		kargv[j++] = nsarg;
		k->ns = 1;
	}
	for (i = 0; argv[i] != NULL; i++)
		kargv[j++] = argv[i];
	k->statusfd = k->releasefd = -1;
	if ((exe = open(prog, O_RDONLY | O_CLOEXEC)) == -1 ||
	    (nul = open("/dev/null", O_RDONLY | O_CLOEXEC)) == -1 ||
	    pipe2(sp, O_CLOEXEC) == -1 || pipe2(rp, O_CLOEXEC) == -1) {
		r = gck_set_syserr(ctx, errno, "cannot start criu: %s",
		    strerror(errno));
		goto out;
	}
	/* Out of the way of the numbers the keeper is given them at. */
	fds[0] = sp[1];
	fds[1] = rp[0];
	fds[2] = keepfd != -1 ? keepfd : nul;
	fds[3] = logfd;
	if ((r = keeper_move_fds(ctx, fds, hx, xfds, nxfds, &exe,
	    &nul)) != GCK_OK)
		goto out;
	if (ns != NULL)
		pid = (pid_t)syscall(SYS_clone, CLONE_NEWPID | CLONE_NEWNS |
		    SIGCHLD, NULL, NULL, NULL, NULL);
	else
		pid = fork();
	if (pid == 0) {
		/* Async-signal-safe calls only, up to the exec. */
		dup2(nul, 0);
		dup2(fds[3], 1);
		dup2(fds[3], 2);
		dup2(fds[0], KEEPER_STATUS);
		dup2(fds[1], KEEPER_RELEASE);
		dup2(fds[2], KEEPER_KEEP);
		for (i = 0; i < nxfds; i++)
			dup2(hx[i], KEEPER_FIRSTFREE + (int)i);
		fexecve(exe, kargv, environ);
		_exit(127);
	}
	oerrno = errno;
	for (i = 0; i < 4; i++)
		close(fds[i]);
	if (pid == -1) {
		r = gck_set_syserr(ctx, oerrno, ns != NULL ? "cannot make a "
		    "PID namespace to restore in: %s" : "cannot start criu: %s",
		    strerror(oerrno));
		goto out;
	}
	close(sp[1]);
	close(rp[0]);
	sp[1] = rp[0] = -1;
	k->pid = pid;
	k->statusfd = sp[0];
	k->releasefd = rp[1];
	sp[0] = rp[1] = -1;
	*kp = k;
	k = NULL;
	r = GCK_OK;
out:
	for (i = 0; i < 2; i++) {
		if (sp[i] != -1)
			close(sp[i]);
		if (rp[i] != -1)
			close(rp[i]);
	}
	if (exe != -1)
		close(exe);
	if (nul != -1)
		close(nul);
	for (i = 0; hx != NULL && i < nxfds; i++)
		if (hx[i] != -1)
			close(hx[i]);
	free(hx);
	free(kargv);
	free(k);
	return r;
}

/* The keeper's PID (as we see it), -1 for none. */
pid_t
gck_keeper_pid(const struct gck_keeper *k)
{
	return k != NULL ? k->pid : -1;
}

/*
 * Takes the keeper's report on criu, waiting for it when wait.  Returns
 * 1 with *rep once it is in (rep->err: the keeper could not run criu;
 * a keeper that died without a word reports err EPIPE), 0 when it is
 * not in yet.
 */
int
gck_keeper_report(struct gck_keeper *k, int wait,
    struct gck_keeper_report *rep)
{
	struct pollfd	pfd;
	size_t		got = 0;
	ssize_t		n;
	char		*p = (char *)&k->rep;

	if (k->reported) {
		*rep = k->rep;
		return 1;
	}
	pfd.fd = k->statusfd;
	pfd.events = POLLIN;
	if (!wait && poll(&pfd, 1, 0) <= 0)
		return 0;
	while (got < sizeof k->rep) {
		n = read(k->statusfd, p + got, sizeof k->rep - got);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	if (got < sizeof k->rep) {
		memset(&k->rep, 0, sizeof k->rep);
		k->rep.err = EPIPE;
	}
	/* An init goes on to report on the root. */
	if (!k->ns || got < sizeof k->rep) {
		close(k->statusfd);
		k->statusfd = -1;
	}
	k->reported = 1;
	*rep = k->rep;
	return 1;
}

/* Lets the keeper go: it exits, leaving the tree to our reaper. */
void
gck_keeper_release(struct gck_keeper *k)
{
	char	c = 'R';

	if (k == NULL || k->releasefd == -1)
		return;
	put(k->releasefd, &c, 1);
	close(k->releasefd);
	k->releasefd = -1;
	k->released = 1;
}

/*
 * The root's wait status, from a namespace's init: waits for it up to
 * ms (-1: without limit).  Returns 1 with *statusp once the root has
 * ended, 0 while it runs, -1 when the init can no longer say (it died).
 */
int
gck_keeper_root_status(struct gck_keeper *k, int ms, int *statusp)
{
	struct gck_keeper_report	 rep;
	struct pollfd			 pfd;
	size_t				 got = 0;
	ssize_t				 n;
	char				*p = (char *)&rep;

	if (k->rootdone) {
		*statusp = k->rootstatus;
		return 1;
	}
	if (!k->ns || k->statusfd == -1)
		return -1;
	pfd.fd = k->statusfd;
	pfd.events = POLLIN;
	if ((n = poll(&pfd, 1, ms)) == 0 || (n == -1 && errno == EINTR))
		return 0;
	while (got < sizeof rep) {
		n = read(k->statusfd, p + got, sizeof rep - got);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(k->statusfd);
	k->statusfd = -1;
	if (got < sizeof rep)
		return -1;
	k->rootdone = 1;
	k->rootstatus = rep.status;
	*statusp = rep.status;
	return 1;
}

/* Releases the keeper, reaps it and forgets it.  NULL is fine. */
void
gck_keeper_free(struct gck_keeper *k)
{
	struct gck_keeper_report	rep;

	if (k == NULL)
		return;
	if (!k->reported && k->statusfd != -1)
		(void)gck_keeper_report(k, 0, &rep);
	if (k->statusfd != -1)
		close(k->statusfd);
	/* A namespace's init, let go, lives on as long as the tree. */
	if (k->ns && k->released) {
		free(k);
		return;
	}
	gck_keeper_release(k);
	while (waitpid(k->pid, NULL, 0) == -1 && errno == EINTR)
		;
	free(k);
}

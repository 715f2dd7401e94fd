/*
 * proc.c: a process tree as /proc shows it.
 */
#include "config.h"

#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "private.h"
#include "core/proc.h"
#include "core/util.h"

#define PTREE_MAX	65536

static int	proc_read(struct gck_proc *);
static void	proc_environ(struct gck_proc *);
static int	proc_children(pid_t, pid_t **, size_t *, size_t *);
static void	proc_release(struct gck_proc *);

static void
proc_release(struct gck_proc *p)
{
	int	i;

	free(p->cwd);
	free(p->env);
	for (i = 0; i < p->argc; i++)
		free(p->argv[i]);
	free(p->argv);
}

static uint64_t
status_kb(const char *status, const char *key)
{
	const char	*s;

	if ((s = strstr(status, key)) == NULL)
		return 0;
	return strtoull(s + strlen(key), NULL, 10) * 1024;
}

/* Fills p from /proc/p->pid.  Returns 0, or -1 if the process is gone. */
static int
proc_read(struct gck_proc *p)
{
	char		 path[64], buf[8192], *s, **argv;
	const char	*u;
	int		 n, i, argc;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)p->pid);
	if (gck_read_small_file(path, buf, sizeof buf) == -1)
		return -1;
	if ((s = strrchr(buf, ')')) == NULL)
		return -1;
	{
		char	*o = strchr(buf, '(');
		size_t	 l;

		if (o == NULL || o > s)
			return -1;
		l = (size_t)(s - o - 1);
		if (l >= sizeof p->comm)
			l = sizeof p->comm - 1;
		memcpy(p->comm, o + 1, l);
		p->comm[l] = '\0';
	}
	{
		long			f[20];
		unsigned long long	start;
		char			st;

		if (sscanf(s + 2, "%c %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld "
		    "%ld %ld %ld %ld %ld %ld %ld %ld %llu", &st, &f[0], &f[1],
		    &f[2], &f[3], &f[4], &f[5], &f[6], &f[7], &f[8], &f[9],
		    &f[10], &f[11], &f[12], &f[13], &f[14], &f[15], &f[16],
		    &f[17], &start) != 20)
			return -1;
		p->start = start;
		p->state = st;
		p->ppid = (pid_t)f[0];
		p->pgid = (pid_t)f[1];
		p->sid = (pid_t)f[2];
		p->tty_nr = (int)f[3];
		p->threads = (int)f[16];
	}

	snprintf(path, sizeof path, "/proc/%d/status", (int)p->pid);
	if (gck_read_small_file(path, buf, sizeof buf) == -1)
		return -1;
	if ((u = strstr(buf, "\nUid:")) != NULL)
		p->uid = (uid_t)strtoul(u + 5, NULL, 10);
	if ((u = strstr(buf, "\nGid:")) != NULL)
		p->gid = (gid_t)strtoul(u + 5, NULL, 10);
	p->vm_size = status_kb(buf, "\nVmSize:");
	p->vm_rss = status_kb(buf, "\nVmRSS:");
	p->rss_anon = status_kb(buf, "\nRssAnon:");
	p->rss_file = status_kb(buf, "\nRssFile:");
	p->rss_shmem = status_kb(buf, "\nRssShmem:");

	snprintf(path, sizeof path, "/proc/%d/cwd", (int)p->pid);
	if ((n = (int)readlink(path, buf, sizeof buf - 1)) >= 0) {
		buf[n] = '\0';
		p->cwd = strdup(buf);
	}

	snprintf(path, sizeof path, "/proc/%d/cmdline", (int)p->pid);
	if ((n = gck_read_small_file(path, buf, sizeof buf)) < 0)
		n = 0;
	for (argc = 0, i = 0; i < n; i++)
		if (buf[i] == '\0')
			argc++;
	if (n > 0 && buf[n - 1] != '\0')
		argc++;
	if ((argv = calloc((size_t)argc + 1, sizeof *argv)) == NULL)
		return -1;
	for (i = 0, s = buf; i < argc; i++) {
		argv[i] = strdup(s);
		s += strlen(s) + 1;
	}
	p->argv = argv;
	p->argc = argc;
	proc_environ(p);
	return 0;
}

/*
 * The environment p started with, as /proc shows it, the first
 * GCK_ENV_MAX bytes of it; none where it cannot be read.
 */
static void
proc_environ(struct gck_proc *p)
{
	char	path[64];
	int	n;

	snprintf(path, sizeof path, "/proc/%d/environ", (int)p->pid);
	if ((p->env = malloc(GCK_ENV_MAX + 1)) == NULL)
		return;
	if ((n = gck_read_small_file(path, p->env, GCK_ENV_MAX + 1)) < 0) {
		free(p->env);
		p->env = NULL;
		return;
	}
	p->envlen = (size_t)n;
	p->envcut = n == GCK_ENV_MAX;
}

static int
proc_children(pid_t pid, pid_t **list, size_t *n, size_t *cap)
{
	char		 path[64], buf[16384], *s, *e;
	struct dirent	*de;
	DIR		*d;
	long		 v;

	snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
	if ((d = opendir(path)) == NULL)
		return 0;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "/proc/%d/task/%.16s/children",
		    (int)pid, de->d_name);
		if (gck_read_small_file(path, buf, sizeof buf) == -1)
			continue;
		for (s = buf; *s != '\0'; s = e) {
			v = strtol(s, &e, 10);
			if (e == s)
				break;
			if (*n == *cap) {
				pid_t	*nl;
				size_t	 nc = *cap ? *cap * 2 : 64;

				if (nc > PTREE_MAX ||
				    (nl = reallocarray(*list, nc,
				    sizeof *nl)) == NULL) {
					closedir(d);
					return -1;
				}
				*list = nl;
				*cap = nc;
			}
			(*list)[(*n)++] = (pid_t)v;
		}
	}
	closedir(d);
	return 0;
}

/*
 * Collects the tree rooted at root, root first, breadth first.  Returns
 * GCK_OK or a code (GCK_ENOPROC when root does not exist).
 */
int
gck_ptree_scan(struct gck_ctx *ctx, pid_t root, struct gck_ptree **tp)
{
	struct gck_ptree	*t = NULL;
	pid_t			*pids = NULL;
	size_t			 n = 0, cap = 0, i;
	int			 r;

	*tp = NULL;
	if (root <= 0 || (kill(root, 0) == -1 && errno == ESRCH)) {
		r = gck_set_error(ctx, GCK_ENOPROC,
		    "cannot checkpoint pid %d: no such process", (int)root);
		goto out;
	}
	if ((pids = calloc(64, sizeof *pids)) == NULL) {
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	cap = 64;
	pids[n++] = root;
	for (i = 0; i < n; i++) {
		if (proc_children(pids[i], &pids, &n, &cap) == -1) {
			r = gck_set_error(ctx, GCK_ENOMEM,
			    "process tree of pid %d is too large", (int)root);
			goto out;
		}
	}
	if ((t = calloc(1, sizeof *t)) == NULL ||
	    (t->procs = calloc(n, sizeof *t->procs)) == NULL) {
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i < n; i++) {
		struct gck_proc	*p = &t->procs[t->n];

		p->pid = pids[i];
		if (proc_read(p) == -1) {
			proc_release(p);
			memset(p, 0, sizeof *p);
			if (i == 0) {
				r = gck_set_error(ctx, GCK_ENOPROC,
				    "cannot checkpoint pid %d: "
				    "no such process", (int)root);
				goto out;
			}
			continue;	/* exited meanwhile */
		}
		if (p->state == 'Z' && i == 0) {
			r = gck_set_error(ctx, GCK_ENOPROC,
			    "cannot checkpoint pid %d: no such process "
			    "(it is a zombie)", (int)root);
			t->n++;
			goto out;
		}
		t->n++;
	}
	*tp = t;
	t = NULL;
	r = GCK_OK;
out:
	free(pids);
	gck_ptree_free(t);
	return r;
}

void
gck_ptree_free(struct gck_ptree *t)
{
	size_t	i;

	if (t == NULL)
		return;
	for (i = 0; i < t->n; i++)
		proc_release(&t->procs[i]);
	free(t->procs);
	free(t);
}

void
gck_pids_signal(const pid_t *pids, size_t n, int sig)
{
	size_t	i;

	for (i = 0; i < n; i++)
		if (pids[i] > 0)
			kill(pids[i], sig);
}

/* Whether a descriptor's link names a terminal: 1, 2 for a pty master. */
static int
tty_link(const char *target)
{
	if (strcmp(target, "/dev/ptmx") == 0 ||
	    strcmp(target, "/dev/pts/ptmx") == 0)
		return 2;
	return strncmp(target, "/dev/pts/", 9) == 0 ||
	    strncmp(target, "/dev/tty", 8) == 0 ||
	    strcmp(target, "/dev/console") == 0;
}

/*
 * Whether descriptor fd of pid is open on a terminal: 1 with its path
 * in buf, else 0.
 */
int
gck_pid_fd_tty(pid_t pid, int fd, char *buf, size_t len)
{
	char	path[64], target[256];
	ssize_t	n;

	snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)pid, fd);
	if ((n = readlink(path, target, sizeof target - 1)) <= 0)
		return 0;
	target[n] = '\0';
	if (tty_link(target) != 1)
		return 0;
	snprintf(buf, len, "%s", target);
	return 1;
}

/*
 * Finds a descriptor of pid open on the master side of a terminal.
 * Returns its number, or -1 if there is none.
 */
int
gck_pid_ptmx_fd(pid_t pid)
{
	struct dirent	*de;
	char		 path[64], target[256];
	DIR		*d;
	ssize_t		 n;
	int		 fd = -1;

	snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
	if ((d = opendir(path)) == NULL)
		return -1;
	while (fd == -1 && (de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "/proc/%d/fd/%.16s", (int)pid,
		    de->d_name);
		if ((n = readlink(path, target, sizeof target - 1)) <= 0)
			continue;
		target[n] = '\0';
		if (tty_link(target) == 2)
			fd = atoi(de->d_name);
	}
	closedir(d);
	return fd;
}

/* Returns the state letter of pid from /proc, or 0 if there is none. */
char
gck_pid_state(pid_t pid)
{
	char	path[64], buf[1024], *s;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if (gck_read_small_file(path, buf, sizeof buf) == -1)
		return 0;
	if ((s = strrchr(buf, ')')) == NULL || s[1] == '\0')
		return 0;
	return s[2];
}

/*
 * Whether pid is on its way out: a zombie, exiting, or sent a SIGKILL
 * that it has yet to act on.
 */
int
gck_pid_dying(pid_t pid)
{
	char			 path[64], buf[4096], *s;
	unsigned long long	 pend;
	unsigned int		 flags;
	const char		*field[] = { "\nSigPnd:", "\nShdPnd:" };
	size_t			 i;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if (gck_read_small_file(path, buf, sizeof buf) == -1)
		return 1;
	/* ") state ppid pgrp session tty_nr tpgid flags" */
	if ((s = strrchr(buf, ')')) == NULL || s[1] == '\0')
		return 0;
	if (s[2] == 'Z' || s[2] == 'X' || (sscanf(s + 2, "%*c %*d %*d %*d "
	    "%*d %*d %u", &flags) == 1 && (flags & 0x4 /* PF_EXITING */)))
		return 1;
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	if (gck_read_small_file(path, buf, sizeof buf) == -1)
		return 1;
	for (i = 0; i < sizeof field / sizeof field[0]; i++)
		if ((s = strstr(buf, field[i])) != NULL &&
		    sscanf(s + strlen(field[i]), "%llx", &pend) == 1 &&
		    (pend & 1ULL << (SIGKILL - 1)))
			return 1;
	return 0;
}

/*
 * Whether pid has exited: it is gone, or a zombie its parent has not
 * reaped yet.
 */
int
gck_pid_gone(pid_t pid)
{
	char	st;

	if ((st = gck_pid_state(pid)) != 0)
		return st == 'Z' || st == 'X';
	return kill(pid, 0) == -1 && errno == ESRCH;
}

/*
 * The start time of pid, in clock ticks after boot (field 22 of
 * /proc/PID/stat), or 0 when there is no such process.
 */
uint64_t
gck_pid_start(pid_t pid)
{
	char			 path[64], buf[1024], *s;
	unsigned long long	 start;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if (gck_read_small_file(path, buf, sizeof buf) == -1 ||
	    (s = strrchr(buf, ')')) == NULL || sscanf(s + 1, " %*c %*d %*d "
	    "%*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d "
	    "%*d %llu", &start) != 1)
		return 0;
	return start;
}

/* Returns the parent of pid from /proc, or -1 if there is none. */
pid_t
gck_pid_ppid(pid_t pid)
{
	char	path[64], buf[1024], *s;
	int	ppid;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if (gck_read_small_file(path, buf, sizeof buf) == -1 ||
	    (s = strrchr(buf, ')')) == NULL ||
	    sscanf(s + 1, " %*c %d", &ppid) != 1)
		return -1;
	return (pid_t)ppid;
}

/*
 * Copies the value of the line key (such as "Tgid") of
 * /proc/PID/status into buf; pid 0 is this process.  Returns 0, or -1
 * when there is no such process or line.
 */
int
gck_pid_status(pid_t pid, const char *key, char *buf, size_t len)
{
	char	path[64], status[8192], *s, *e;
	size_t	klen = strlen(key);

	if (pid == 0)
		snprintf(path, sizeof path, "/proc/self/status");
	else
		snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	if (gck_read_small_file(path, status, sizeof status) == -1)
		return -1;
	for (s = status; s != NULL && *s != '\0'; s = e) {
		if ((e = strchr(s, '\n')) != NULL)
			*e++ = '\0';
		if (strncmp(s, key, klen) != 0 || s[klen] != ':')
			continue;
		s += klen + 1;
		s += strspn(s, " \t");
		snprintf(buf, len, "%s", s);
		return 0;
	}
	return -1;
}

/* Copies the comm of pid into buf.  Returns 0 or -1. */
int
gck_pid_comm(pid_t pid, char *buf, size_t len)
{
	char	path[64];
	size_t	l;

	snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
	if (gck_read_small_file(path, buf, len) == -1)
		return -1;
	l = strlen(buf);
	if (l > 0 && buf[l - 1] == '\n')
		buf[l - 1] = '\0';
	return 0;
}

/*
 * Whether a process under pid (its descendants, not pid itself) is
 * stopped by a signal.
 */
int
gck_children_stopped(pid_t pid)
{
	pid_t	*pids = NULL;
	size_t	 n = 0, cap = 0, i;
	char	 st;
	int	 stopped = 0;

	if (proc_children(pid, &pids, &n, &cap) == -1) {
		free(pids);
		return 1;
	}
	for (i = 0; i < n && !stopped; i++) {
		st = gck_pid_state(pids[i]);
		stopped = st == 'T' || st == 't';
		if (!stopped && proc_children(pids[i], &pids, &n, &cap) == -1)
			stopped = 1;
	}
	free(pids);
	return stopped;
}

/*
 * Signals each process of list that is still the one it names: the
 * same PID with the same start time.  A PID that another process has
 * taken since is left alone.
 */
void
gck_psts_signal(const struct gck_pst *list, size_t n, int sig)
{
	size_t	i;

	for (i = 0; i < n; i++)
		if (list[i].pid > 0 && (list[i].start == 0 ||
		    gck_pid_start(list[i].pid) == list[i].start))
			kill(list[i].pid, sig);
}

/*
 * Waits up to ms for every process of list to be gone: no such PID, a
 * zombie, or another process with the PID.  Returns 0, or -1 on timeout.
 */
int
gck_psts_wait_gone(const struct gck_pst *list, size_t n, int ms)
{
	size_t	i;
	char	st;
	int	waited = 0, alive;

	for (;;) {
		alive = 0;
		for (i = 0; i < n && !alive; i++) {
			st = gck_pid_state(list[i].pid);
			alive = st != 0 && st != 'Z' && st != 'X' &&
			    (list[i].start == 0 ||
			    gck_pid_start(list[i].pid) == list[i].start);
		}
		if (!alive)
			return 0;
		if (waited >= ms)
			return -1;
		gck_msleep(10);
		waited += 10;
	}
}

/* The inode of the pipe that link ("pipe:[N]") names, or 0. */
static unsigned long
pipe_ino(const char *link)
{
	unsigned long	ino;

	if (sscanf(link, "pipe:[%lu]", &ino) != 1)
		return 0;
	return ino;
}

/* Whether descriptor fd of pid is open for reading only. */
static int
fd_reads(pid_t pid, const char *fd)
{
	char		 path[96], buf[512], *s;
	unsigned long	 flags;

	snprintf(path, sizeof path, "/proc/%d/fdinfo/%.16s", (int)pid, fd);
	if (gck_read_small_file(path, buf, sizeof buf) == -1 ||
	    (s = strstr(buf, "flags:")) == NULL ||
	    sscanf(s + 6, "%lo", &flags) != 1)
		return 0;
	return (flags & O_ACCMODE) == O_RDONLY;
}

/*
 * Finds, among the processes of no tree in skip (and not this one), one
 * holding an end of a pipe in inos (with readers, its read end): its
 * PID, its descriptor, the inode found.  Returns 1 when there is one,
 * else 0.
 */
static int
pipe_holder(const unsigned long *inos, size_t nino, const pid_t *skip,
    size_t nskip, int readers, pid_t *pidp, int *fdp, unsigned long *inop)
{
	struct dirent	*de, *fe;
	DIR		*d, *fd;
	char		 path[96], link[64];
	unsigned long	 ino;
	ssize_t		 n;
	size_t		 i;
	pid_t		 pid;
	int		 found = 0;

	if ((d = opendir("/proc")) == NULL)
		return 0;
	while (!found && (de = readdir(d)) != NULL) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		pid = (pid_t)atoi(de->d_name);
		if (pid == getpid())
			continue;
		for (i = 0; i < nskip && skip[i] != pid; i++)
			;
		if (i < nskip)
			continue;
		snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
		if ((fd = opendir(path)) == NULL)
			continue;
		while (!found && (fe = readdir(fd)) != NULL) {
			if (fe->d_name[0] == '.')
				continue;
			snprintf(path, sizeof path, "/proc/%d/fd/%.16s",
			    (int)pid, fe->d_name);
			if ((n = readlink(path, link, sizeof link - 1)) <= 0)
				continue;
			link[n] = '\0';
			if ((ino = pipe_ino(link)) == 0 ||
			    (readers && !fd_reads(pid, fe->d_name)))
				continue;
			for (i = 0; i < nino; i++)
				if (inos[i] == ino) {
					*pidp = pid;
					*fdp = atoi(fe->d_name);
					*inop = ino;
					found = 1;
					break;
				}
		}
		closedir(fd);
	}
	closedir(d);
	return found;
}

/*
 * Finds a pipe on the standard input, output or error of a process of
 * tree t whose other end a process outside the tree (and outside this
 * one) holds: a pipeline's.  (A pipe inherited on another descriptor is
 * left to criu, which restores it with nobody at the other end.)
 * Returns 1 with the tree's process and descriptor and the process at
 * the other end, else 0.
 */
int
gck_ptree_outside_pipe(const struct gck_ptree *t, pid_t *inp, int *infd,
    pid_t *outp)
{
	struct dirent	*fe;
	DIR		*fd;
	char		 path[96], link[64];
	unsigned long	*inos = NULL, ino, found_ino;
	pid_t		*skip = NULL, *owner = NULL, peer;
	int		*ofd = NULL, peerfd, r = 0;
	size_t		 nino = 0, cap = 0, i, j;
	ssize_t		 n;

	if ((skip = calloc(t->n, sizeof *skip)) == NULL)
		return 0;
	for (i = 0; i < t->n; i++) {
		skip[i] = t->procs[i].pid;
		snprintf(path, sizeof path, "/proc/%d/fd", (int)skip[i]);
		if ((fd = opendir(path)) == NULL)
			continue;
		while ((fe = readdir(fd)) != NULL) {
			if (fe->d_name[0] < '0' || fe->d_name[0] > '2' ||
			    fe->d_name[1] != '\0')
				continue;
			snprintf(path, sizeof path, "/proc/%d/fd/%.16s",
			    (int)skip[i], fe->d_name);
			if ((n = readlink(path, link, sizeof link - 1)) <= 0)
				continue;
			link[n] = '\0';
			if ((ino = pipe_ino(link)) == 0)
				continue;
			for (j = 0; j < nino && inos[j] != ino; j++)
				;
			if (j < nino)
				continue;
			if (nino == cap) {
				size_t	 nc = cap ? cap * 2 : 16;
				void	*a, *b, *c;

				a = reallocarray(inos, nc, sizeof *inos);
				if (a != NULL)
					inos = a;
				b = reallocarray(owner, nc, sizeof *owner);
				if (b != NULL)
					owner = b;
				c = reallocarray(ofd, nc, sizeof *ofd);
				if (c != NULL)
					ofd = c;
				if (a == NULL || b == NULL || c == NULL)
					break;
				cap = nc;
			}
			inos[nino] = ino;
			owner[nino] = skip[i];
			ofd[nino++] = atoi(fe->d_name);
		}
		closedir(fd);
	}
	if (nino > 0 && pipe_holder(inos, nino, skip, t->n, 0, &peer, &peerfd,
	    &found_ino)) {
		for (j = 0; j < nino && inos[j] != found_ino; j++)
			;
		*inp = owner[j];
		*infd = ofd[j];
		*outp = peer;
		r = 1;
	}
	free(inos);
	free(owner);
	free(ofd);
	free(skip);
	return r;
}

/*
 * Finds a process reading the pipe fd, other than this one.  Returns its
 * PID, or -1 when fd is no pipe or nobody reads it.
 */
pid_t
gck_pipe_peer(int fd)
{
	char		path[64], link[64];
	unsigned long	ino;
	ssize_t		n;
	pid_t		peer, self = getpid();
	int		pfd;

	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	if ((n = readlink(path, link, sizeof link - 1)) <= 0)
		return -1;
	link[n] = '\0';
	if ((ino = pipe_ino(link)) == 0 ||
	    !pipe_holder(&ino, 1, &self, 1, 1, &peer, &pfd, &ino))
		return -1;
	return peer;
}

/*
 * A tree in another PID namespace.  /proc/PID/status lists, on its
 * NSpid, NSpgid and NSsid lines, what a process is in each namespace
 * from that of our /proc down to its own; field level is the one of the
 * tree's namespace.  A session or a group whose leader is outside that
 * namespace is 0 there, as is the parent of its init.
 */

#define NS_LEVELS	33	/* the kernel nests 32 deep */

/*
 * The fields of line key of /proc/pid/status (pid may be a thread's)
 * into v.  Returns how many, or -1 when there is no such process or
 * line.
 */
static int
ns_fields(pid_t pid, const char *key, pid_t v[NS_LEVELS])
{
	char	buf[512], *s, *e;
	int	n;

	if (gck_pid_status(pid, key, buf, sizeof buf) == -1)
		return -1;
	for (n = 0, s = buf; n < NS_LEVELS; n++, s = e) {
		v[n] = (pid_t)strtol(s, &e, 10);
		if (e == s)
			break;
	}
	return n;
}

/* The PID of pid in its own, innermost PID namespace; -1 if none. */
pid_t
gck_pid_inner(pid_t pid)
{
	pid_t	v[NS_LEVELS];
	int	n;

	if ((n = ns_fields(pid, "NSpid", v)) <= 0)
		return -1;
	return v[n - 1];
}

/*
 * Field level of line key of /proc/pid/status.  Returns it, 0 when pid
 * is outside the namespace of that level, or -1 when there is no such
 * process or line.
 */
static pid_t
ns_field(pid_t pid, const char *key, size_t level)
{
	pid_t	v[NS_LEVELS];
	int	n;

	if ((n = ns_fields(pid, key, v)) == -1)
		return -1;
	return level < (size_t)n ? v[level] : 0;
}

/* The "pid:[N]" of pid's PID namespace into buf.  Returns 0 or -1. */
static int
ns_id(pid_t pid, char *buf, size_t len)
{
	char	path[64];
	ssize_t	n;

	if (pid == 0)
		snprintf(path, sizeof path, "/proc/self/ns/pid");
	else
		snprintf(path, sizeof path, "/proc/%d/ns/pid", (int)pid);
	if ((n = readlink(path, buf, len - 1)) <= 0)
		return -1;
	buf[n] = '\0';
	return 0;
}

/*
 * Finds out whether root lives in a PID namespace other than ours, and
 * then which, and its init (walking up from root to the process that is
 * pid 1 there, which may be root itself).  Returns GCK_OK with *nsp
 * (NULL for our own namespace), or a code.
 */
int
gck_nsview_of(struct gck_ctx *ctx, pid_t root, struct gck_nsview **nsp)
{
	struct gck_nsview	*ns = NULL;
	char			 mine[64];
	pid_t			 p, v, f[NS_LEVELS];
	int			 nf, r;

	*nsp = NULL;
	if ((ns = calloc(1, sizeof *ns)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	if (ns_id(0, mine, sizeof mine) == -1 ||
	    ns_id(root, ns->id, sizeof ns->id) == -1 ||
	    (nf = ns_fields(root, "NSpid", f)) <= 0) {
		r = errno == ENOENT || errno == ESRCH ? gck_set_error(ctx,
		    GCK_ENOPROC, "cannot checkpoint pid %d: no such process",
		    (int)root) : gck_set_syserr(ctx, errno, "cannot read the "
		    "PID namespace of pid %d: %s", (int)root, strerror(errno));
		goto out;
	}
	if (strcmp(mine, ns->id) == 0) {
		r = GCK_OK;
		goto out;
	}
	ns->root = root;
	ns->level = (size_t)nf - 1;
	for (p = root; (v = ns_field(p, "NSpid", ns->level)) != 1;
	    p = gck_pid_ppid(p))
		if (v <= 0 || p <= 1) {
			r = gck_set_error(ctx, GCK_ENOPROC, "cannot checkpoint "
			    "pid %d: cannot find the init of its PID namespace",
			    (int)root);
			goto out;
		}
	ns->init = p;
	*nsp = ns;
	ns = NULL;
	r = GCK_OK;
out:
	gck_nsview_free(ns);
	return r;
}

void
gck_nsview_free(struct gck_nsview *ns)
{
	if (ns == NULL)
		return;
	free(ns->map);
	free(ns);
}

/*
 * The PID in namespace ns of the process (or thread) that is pid here:
 * pid itself for our own namespace (ns NULL), 0 for a process outside
 * ns, -1 for no such process.
 */
pid_t
gck_nsview_local(const struct gck_nsview *ns, pid_t pid)
{
	if (ns == NULL || pid <= 0)
		return pid;
	return ns_field(pid, "NSpid", ns->level);
}

/*
 * The session of process p (as we see it) in namespace ns: p->sid for
 * our own namespace (ns NULL), 0 when its leader is outside ns.
 */
pid_t
gck_nsview_sid(const struct gck_nsview *ns, const struct gck_proc *p)
{
	pid_t	v;

	if (ns == NULL)
		return p->sid;
	v = ns_field(p->pid, "NSsid", ns->level);
	return v > 0 ? v : 0;
}

/*
 * The PID here of the process of the tree last learnt
 * (gck_nsview_learn()) that is pid in namespace ns: pid itself for our
 * own namespace (ns NULL), -1 when the tree has no such process.
 */
pid_t
gck_nsview_host(const struct gck_nsview *ns, pid_t pid)
{
	size_t	i;

	if (ns == NULL)
		return pid;
	for (i = 0; i < ns->n; i++)
		if (ns->map[i].ns == pid)
			return ns->map[i].host;
	return -1;
}

/*
 * Learns the PIDs in ns of the processes of tree t (as we see it), for
 * gck_nsview_host().  Returns GCK_OK or a code.
 */
int
gck_nsview_learn(struct gck_ctx *ctx, struct gck_nsview *ns,
    const struct gck_ptree *t)
{
	struct gck_pidmap	*map;
	size_t			 i;

	if (ns == NULL)
		return GCK_OK;
	if ((map = calloc(t->n + 1, sizeof *map)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	free(ns->map);
	ns->map = map;
	ns->n = 0;
	for (i = 0; i < t->n; i++) {
		map[ns->n].host = t->procs[i].pid;
		if ((map[ns->n].ns = gck_nsview_local(ns,
		    t->procs[i].pid)) > 0)
			ns->n++;
	}
	return GCK_OK;
}

/*
 * Rewrites tree t (as we see it) as namespace ns sees it: the PID,
 * parent, process group and session of each process.
 */
void
gck_nsview_tree(const struct gck_nsview *ns, struct gck_ptree *t)
{
	struct gck_proc	*p;
	size_t		 i;
	pid_t		 v;

	if (ns == NULL)
		return;
	for (i = 0; i < t->n; i++) {
		p = &t->procs[i];
		v = ns_field(p->pid, "NSpgid", ns->level);
		p->pgid = v > 0 ? v : 0;
		p->sid = gck_nsview_sid(ns, p);
		v = gck_nsview_local(ns, p->ppid);
		p->ppid = v > 0 ? v : 0;
		v = gck_nsview_local(ns, p->pid);
		p->host_pid = p->pid;
		p->pid = v > 0 ? v : 0;
	}
}

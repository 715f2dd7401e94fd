/*
 * criu.c: running criu(8).
 *
 * The command line is used rather than libcriu: criu swrk has no setter
 * for --leave-stopped, which the safety protocol rests on.  criu logs to
 * a pipe (-o -), read by a thread that keeps what tells why it failed:
 * nothing of it lands on disk.
 */
#include "config.h"

#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "private.h"

#define CRIU_ARGS	24

static const char	*criu_path(void);
struct clog;
static int		 criu_run(struct gck_ctx *, char *const [],
			    struct clog *, struct gck_keeper **,
			    struct gck_guard *, const char *,
			    int (*)(void *, struct gck_criu_run *), void *,
			    int *);
static void		 criu_log_error(const struct clog *, char *, size_t);
static int		 criu_add_opts(char *[], int, unsigned int);
static void		 log_argv(struct gck_ctx *, char *const []);

/* The options of criu a tree may need (GCK_CRIU_*), as criu names them. */
static const struct {
	unsigned int	 bit;
	const char	*name;
	const char	*arg;
} criu_opts[] = {
	{ GCK_CRIU_TCP_ESTABLISHED,	"tcp-established", "--tcp-established" },
	{ GCK_CRIU_EXT_UNIX_SK,		"ext-unix-sk",	"--ext-unix-sk" },
	{ GCK_CRIU_FILE_LOCKS,		"file-locks",	"--file-locks" },
};
#define NCRIU_OPTS	(sizeof criu_opts / sizeof criu_opts[0])

/*
 * What criu says when a tree needs one of those options, or has what it
 * cannot dump even so, and what we say instead: the option to use, by
 * the name gpuckpt and gpusend take it.
 */
static const struct {
	const char	*says;
	const char	*hint;
} criu_hints[] = {
	{ "Some file locks are hold by dumping tasks",
	  "a process of the tree holds a file lock, which criu checkpoints "
	  "only with --file-locks" },
	{ "External socket is used",
	  "a unix socket of the tree is connected to a socket outside it, "
	  "which criu checkpoints only with --ext-unix-sk" },
	{ "Can't dump half of stream unix connection",
	  "a unix stream socket of the tree is connected to a socket outside "
	  "it, which criu cannot checkpoint (--ext-unix-sk takes datagram "
	  "sockets only)" },
	{ "Connected TCP socket, consider using",
	  "a process of the tree has an established TCP connection, which "
	  "criu checkpoints only with --tcp-established" },
	{ "Can't get 1:16 opt: Operation not supported",
	  "this kernel refuses criu the options of an inet socket of the "
	  "tree (getsockopt SO_PASSCRED: Operation not supported), so criu "
	  "cannot checkpoint it" },
	{ "Connected TCP socket in image",
	  "the image has an established TCP connection, which criu restores "
	  "only with --tcp-established" },
	{ "External socket found in image",
	  "the image has a unix socket connected outside its tree, which "
	  "criu restores only with --ext-unix-sk" },
};

const char *
gck_criu_opt_name(unsigned int bit)
{
	size_t	i;

	for (i = 0; i < NCRIU_OPTS; i++)
		if (criu_opts[i].bit == bit)
			return criu_opts[i].name;
	return NULL;
}

/* The GCK_CRIU_* bit of the option criu names name, or 0. */
unsigned int
gck_criu_opt_bit(const char *name)
{
	size_t	i;

	for (i = 0; i < NCRIU_OPTS; i++)
		if (strcmp(criu_opts[i].name, name) == 0)
			return criu_opts[i].bit;
	return 0;
}

/* Logs the command line argv, as it is run. */
static void
log_argv(struct gck_ctx *ctx, char *const argv[])
{
	char	buf[1024];
	size_t	len = 0;
	int	i, n;

	buf[0] = '\0';
	for (i = 0; argv[i] != NULL && len < sizeof buf; i++) {
		n = snprintf(buf + len, sizeof buf - len, "%s%s",
		    i > 0 ? " " : "", argv[i]);
		if (n < 0)
			break;
		len += (size_t)n;
	}
	gck_log(ctx, 2, "running %s", buf);
}

/* Appends the options of opts to argv at argc; returns the new argc. */
static int
criu_add_opts(char *argv[], int argc, unsigned int opts)
{
	size_t	i;

	for (i = 0; i < NCRIU_OPTS; i++)
		if (opts & criu_opts[i].bit)
			argv[argc++] = (char *)criu_opts[i].arg;
	return argc;
}

static const char *
criu_path(void)
{
	static char	 found[PATH_MAX];
	const char	*env, *dirs[] = { "/usr/local/sbin", "/usr/sbin",
			    "/sbin", "/usr/local/bin", "/usr/bin", "/bin" };
	char		*path, *p, *save = NULL;
	size_t		 i;

	if ((env = getenv("GCK_CRIU")) != NULL && *env != '\0')
		return env;
	if ((env = getenv("PATH")) != NULL && (path = strdup(env)) != NULL) {
		for (p = strtok_r(path, ":", &save); p != NULL;
		    p = strtok_r(NULL, ":", &save)) {
			snprintf(found, sizeof found, "%s/criu", p);
			if (access(found, X_OK) == 0) {
				free(path);
				return found;
			}
		}
		free(path);
	}
	for (i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
		snprintf(found, sizeof found, "%s/criu", dirs[i]);
		if (access(found, X_OK) == 0)
			return found;
	}
	return GCK_CRIU_PATH;
}

/* What criu says: the first of it, and the lines that tell a failure. */
struct clog {
	int		 fd;		/* read end of its output */
	pthread_t	 th;
	volatile int	 stop;		/* criu is gone: drain and end */
	char		 head[2048];
	size_t		 headlen;
	char		 line[1024];
	size_t		 linelen;
	char		 last[1024];	/* the last line */
	char		 best[1024];	/* the first error */
	const char	*hint;		/* what criu_hints says of it */
	int		 failed;	/* its closing summary seen */
};

/*
 * A line of criu's log.  The first "Error" line before the closing
 * summary says what went wrong (what follows it is cleanup).
 */
static void
clog_line(struct clog *c, char *line)
{
	char	*s;
	size_t	 l = strlen(line), i;

	while (l > 0 && (line[l - 1] == '\n' || line[l - 1] == '.'))
		line[--l] = '\0';
	if (l == 0)
		return;
	snprintf(c->last, sizeof c->last, "%s", line);
	if (c->failed || (s = strstr(line, "Error (")) == NULL)
		return;
	if (strstr(s, "FAILED") != NULL) {
		c->failed = 1;
		return;
	}
	for (i = 0; c->hint == NULL && i < sizeof criu_hints /
	    sizeof criu_hints[0]; i++)
		if (strstr(s, criu_hints[i].says) != NULL)
			c->hint = criu_hints[i].hint;
	if (c->best[0] != '\0' || strstr(s, "rlimit: Can't setup") != NULL)
		return;
	if ((s = strstr(s, "): ")) != NULL)
		s += 3;
	else
		s = line;
	snprintf(c->best, sizeof c->best, "%s", s);
}

static void *
clog_main(void *arg)
{
	struct clog	*c = arg;
	struct pollfd	 pfd;
	char		 buf[8192];
	ssize_t		 n, i;

	pfd.fd = c->fd;
	pfd.events = POLLIN;
	for (;;) {
		if (poll(&pfd, 1, 100) == 0) {
			if (c->stop)
				break;
			continue;
		}
		if ((n = read(c->fd, buf, sizeof buf)) == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		for (i = 0; i < n; i++) {
			if (c->headlen < sizeof c->head - 1)
				c->head[c->headlen++] = buf[i];
			if (c->linelen < sizeof c->line - 1)
				c->line[c->linelen++] = buf[i];
			if (buf[i] == '\n') {
				c->line[c->linelen] = '\0';
				clog_line(c, c->line);
				c->linelen = 0;
			}
		}
	}
	c->line[c->linelen] = '\0';
	clog_line(c, c->line);
	c->head[c->headlen] = '\0';
	return NULL;
}

/*
 * Whether criu (run) has ended, and if so whether it failed (it is not
 * reaped).  Never blocks.
 */
int
gck_criu_ended(struct gck_criu_run *run, int *failedp)
{
	struct gck_keeper_report	rep;
	siginfo_t			si;

	*failedp = 1;
	if (run->keeper != NULL) {
		if (!gck_keeper_report(run->keeper, 0, &rep))
			return 0;
		*failedp = rep.err != 0 || !WIFEXITED(rep.status) ||
		    WEXITSTATUS(rep.status) != 0;
		return 1;
	}
	memset(&si, 0, sizeof si);
	if (waitid(P_PID, (id_t)run->pid, &si, WEXITED | WNOHANG | WNOWAIT) ==
	    -1)
		return errno != EINTR;
	*failedp = si.si_code != CLD_EXITED || si.si_status != 0;
	return si.si_pid == run->pid;
}

/* Starts criu with argv, our child in a process group of its own. */
static pid_t
criu_fork(char *const argv[], int logfd, const char *hook)
{
	sigset_t	set;
	pid_t		pid;
	int		fd, i;

	if ((pid = fork()) != 0)
		return pid;
	setpgid(0, 0);
	if (hook != NULL)
		setenv("GCK_CRIU_HOOK", hook, 1);
	for (i = 1; i < NSIG; i++)
		signal(i, SIG_DFL);
	sigemptyset(&set);
	sigprocmask(SIG_SETMASK, &set, NULL);
	if ((fd = open("/dev/null", O_RDONLY)) != -1) {
		dup2(fd, 0);
		close(fd);
	}
	dup2(logfd, 1);
	dup2(logfd, 2);
	execv(argv[0], argv);
	dprintf(2, "Error (gpuckpt): cannot run %s: %s\n", argv[0],
	    strerror(errno));
	_exit(127);
}

/*
 * Runs criu with argv, its output and log (-o -) read into log: our
 * child in a process group of its own (so that a terminal's ^C does not
 * reach it: criu is never interrupted half way, whatever happens to
 * us), or, with kp, under a keeper (keeper.c) returned in *kp, of
 * which guard (or NULL) is told, and whose criu inherits the guard's
 * pipe.  While it runs, during(arg, run) serves its image streamer;
 * should that fail, it has closed criu's files, so that criu fails too.
 * Returns GCK_OK with *statusp set, the code of during(), or a code when
 * criu could not be started.
 */
static int
criu_run(struct gck_ctx *ctx, char *const argv[], struct clog *log,
    struct gck_keeper **kp, struct gck_guard *guard, const char *hook,
    int (*during)(void *, struct gck_criu_run *), void *arg, int *statusp)
{
	struct gck_keeper_report	 rep;
	struct gck_criu_run		 run;
	pid_t				 pid = -1;
	int				 status = -1, oerrno, r = GCK_OK;
	int				 p[2];

	memset(log, 0, sizeof *log);
	memset(&run, 0, sizeof run);
	run.pid = -1;
	if (pipe2(p, O_CLOEXEC) == -1)
		return gck_set_syserr(ctx, errno, "cannot start criu: %s",
		    strerror(errno));
	log->fd = p[0];
	if (kp != NULL) {
		r = gck_keeper_start(ctx, argv, p[1], gck_guard_fd(guard),
		    kp);
		run.keeper = *kp;
		/* Should we die now, what the keeper holds is the guard's. */
		if (r == GCK_OK)
			gck_guard_tree(guard, gck_keeper_pid(*kp));
	} else if ((pid = criu_fork(argv, p[1], hook)) == -1) {
		oerrno = errno;
		r = gck_set_syserr(ctx, oerrno, "cannot start criu: %s",
		    strerror(oerrno));
	}
	close(p[1]);
	if (r != GCK_OK) {
		close(p[0]);
		return r;
	}
	run.pid = pid;
	if (pthread_create(&log->th, NULL, clog_main, log) != 0) {
		/* No log then, but criu must not block on a full pipe. */
		close(p[0]);
		log->fd = -1;
	}
	if (during != NULL)
		r = during(arg, &run);
	if (run.keeper != NULL) {
		(void)gck_keeper_report(run.keeper, 1, &rep);
		if (rep.err != 0 && r == GCK_OK)
			r = gck_set_syserr(ctx, rep.err, "cannot start criu: "
			    "%s", strerror(rep.err));
		status = rep.err != 0 ? -1 : rep.status;
	} else
		while (waitpid(pid, &status, 0) == -1) {
			if (errno != EINTR) {
				oerrno = errno;
				r = gck_set_syserr(ctx, oerrno,
				    "cannot wait for criu: %s",
				    strerror(oerrno));
				break;
			}
		}
	/* What criu left in the pipe; a restored process may hold it. */
	if (log->fd != -1) {
		log->stop = 1;
		pthread_join(log->th, NULL);
		close(log->fd);
	}
	*statusp = status;
	return r;
}

/*
 * Says in buf why criu failed, from its log: in our words where we know
 * what it means, else in its own.
 */
static void
criu_log_error(const struct clog *log, char *buf, size_t len)
{
	snprintf(buf, len, "%s", log->hint != NULL ? log->hint :
	    log->best[0] != '\0' ? log->best :
	    log->last[0] != '\0' ? log->last : "no message");
}

/* Writes criu's version ("4.1.1") into buf.  Returns GCK_OK or a code. */
int
gck_criu_version(struct gck_ctx *ctx, char *buf, size_t len)
{
	struct clog	 log;
	char		*argv[3], *s;
	int		 status, r;

	argv[0] = (char *)criu_path();
	argv[1] = "--version";
	argv[2] = NULL;
	if ((r = criu_run(ctx, argv, &log, NULL, NULL, NULL, NULL, NULL,
	    &status)) != GCK_OK)
		return r;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
	    (s = strstr(log.head, "Version: ")) == NULL)
		return gck_set_error(ctx, GCK_ECRIU, "cannot run '%s': is "
		    "CRIU (4.1 or newer) installed?", argv[0]);
	s += strlen("Version: ");
	s[strcspn(s, "\n")] = '\0';
	snprintf(buf, len, "%s", s);
	return GCK_OK;
}

/*
 * Dumps the tree of pid through the image streamer socket in imgdir
 * (cap), with the GCK_CRIU_* options opts, leaving it stopped (or with
 * leave_running, running, which also has criu let go of the TCP
 * connections it dumped); post() runs in between, while criu holds the
 * tree.  On failure criu itself resumes the tree.  Returns GCK_OK, the
 * code of post(), or GCK_ECRIU with criu's own reason.
 */
struct capture_args {
	struct gck_capture	*cap;
	int			(*post)(void *);
	void			*arg;
};

/*
 * Takes the images; when criu's post-dump hook asks, runs post() while
 * criu still holds the tree, and answers the hook with its outcome.
 */
static int
capture_during(void *arg, struct gck_criu_run *criu)
{
	struct capture_args	*a = arg;
	int			 r;

	if ((r = gck_capture_run(a->cap, criu)) != GCK_OK ||
	    !gck_capture_hooked(a->cap))
		return r;
	r = a->post(a->arg);
	gck_capture_answer(a->cap, r == GCK_OK);
	return r;
}

struct serve_args {
	struct gck_serve	*s;
	struct gck_reader	*rd;
};

static int
serve_during(void *arg, struct gck_criu_run *criu)
{
	struct serve_args	*a = arg;

	return gck_serve_run(a->s, a->rd, criu);
}

int
gck_criu_dump(struct gck_ctx *ctx, pid_t pid, const char *imgdir,
    int shell_job, unsigned int opts, int leave_running,
    struct gck_capture *cap, int (*post)(void *), void *arg)
{
	struct capture_args	 ca = { cap, post, arg };
	struct clog		 log;
	const char		*leave = leave_running ? "--leave-running" :
				    "--leave-stopped";
	char	 pidbuf[16], why[1024];
	char	 self[PATH_MAX];
	char	*argv[CRIU_ARGS];
	ssize_t	 n;
	int	 argc = 0, status, r;

	if ((n = readlink("/proc/self/exe", self, sizeof self - 1)) == -1 ||
	    (self[n] = '\0', strstr(self, " (deleted)") != NULL))
		return gck_set_error(ctx, GCK_ESYS, "cannot find this "
		    "program's executable, which criu runs after the dump");

	snprintf(pidbuf, sizeof pidbuf, "%d", (int)pid);
	argv[argc++] = (char *)criu_path();
	argv[argc++] = "dump";
	argv[argc++] = "-t";
	argv[argc++] = pidbuf;
	argv[argc++] = "-D";
	argv[argc++] = (char *)imgdir;
	argv[argc++] = "-o";
	argv[argc++] = "-";
	argv[argc++] = "-v4";
	argv[argc++] = (char *)leave;
	argv[argc++] = "--stream";
	argv[argc++] = "--action-script";
	argv[argc++] = self;
	if (shell_job)
		argv[argc++] = "--shell-job";
	argc = criu_add_opts(argv, argc, opts);
	argv[argc] = NULL;
	log_argv(ctx, argv);
	status = -1;
	r = criu_run(ctx, argv, &log, NULL, NULL, gck_capture_hook_path(cap),
	    capture_during, &ca, &status);
	if (r != GCK_OK)
		return r;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		criu_log_error(&log, why, sizeof why);
		if (log.hint != NULL)
			gck_log(ctx, 1, "criu: %s", log.best);
		return gck_set_error(ctx, GCK_ECRIU,
		    "criu dump of pid %d failed: %s", (int)pid, why);
	}
	return GCK_OK;
}

/*
 * Restores the images in imgdir (from srv and rd, or from the files
 * there), detached, under a keeper (keeper.c) in a session of its own,
 * tasks left stopped; *kp is the keeper, whatever happened.  guard (or
 * NULL) learns of the keeper, and criu inherits its pipe.  *donep says
 * whether criu succeeded, even when the image then fails.  Returns
 * GCK_OK or a code.
 */
int
gck_criu_restore(struct gck_ctx *ctx, const char *imgdir, int shell_job,
    unsigned int opts, struct gck_serve *srv, struct gck_reader *rd,
    struct gck_guard *guard, struct gck_keeper **kp, int *donep)
{
	struct serve_args	 sa = { srv, rd };
	struct clog		 log;
	char	 why[1024];
	char	*argv[CRIU_ARGS];
	int	 argc = 0, status, r;

	*donep = 0;
	*kp = NULL;
	argv[argc++] = (char *)criu_path();
	argv[argc++] = "restore";
	argv[argc++] = "-d";
	argv[argc++] = "-D";
	argv[argc++] = (char *)imgdir;
	argv[argc++] = "-o";
	argv[argc++] = "-";
	argv[argc++] = "-v4";
	argv[argc++] = "--leave-stopped";
	if (srv != NULL)
		argv[argc++] = "--stream";
	if (shell_job)
		argv[argc++] = "--shell-job";
	argc = criu_add_opts(argv, argc, opts);
	argv[argc] = NULL;
	log_argv(ctx, argv);
	status = -1;
	r = criu_run(ctx, argv, &log, kp, guard, NULL, srv != NULL ?
	    serve_during : NULL, &sa, &status);
	if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0)
		*donep = 1;	/* restored, even if the image failed */
	if (r != GCK_OK)
		return r;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		criu_log_error(&log, why, sizeof why);
		if (strstr(why, "tty") != NULL)
			return gck_set_error(ctx, GCK_ECRIU, "criu restore "
			    "failed: %s (the tree had a controlling terminal, "
			    "which a detached restore cannot give it: start "
			    "jobs to be moved without one, e.g. with setsid "
			    "and their output in files)", why);
		if (log.hint != NULL)
			gck_log(ctx, 1, "criu: %s", log.best);
		return gck_set_error(ctx, GCK_ECRIU, "criu restore failed: %s",
		    why);
	}
	return GCK_OK;
}

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

#include <linux/capability.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "private.h"
#include "core/guard.h"
#include "core/keeper.h"
#include "core/proc.h"
#include "core/util.h"
#include "criu/criu.h"
#include "image/names.h"

static const char	*criu_path(void);
struct clog;
static int		 criu_run(struct gck_ctx *, char *const [],
			    struct clog *, struct gck_keeper **,
			    const struct gck_keeper_ns *,
			    struct gck_guard *,
			    const struct gck_criu_extra *, const char *,
			    const int *,
			    int (*)(void *, struct gck_criu_run *), void *,
			    int *);
static void		 criu_enter(const int *);
static int		 ns_open(struct gck_ctx *, pid_t, int *);
static void		 criu_log_error(const struct clog *, int, char *,
			    size_t);
static const char	*criu_path_in(const char *, const char *,
			    const char *, char *, size_t);
static void		 criu_said(const char *, char *, size_t);
static void		 say(char *, size_t, const char *, ...)
			    __attribute__((__format__(__printf__, 3, 4)));
static int		 criu_add_opts(char *[], int, unsigned int);
static void		 log_argv(struct gck_ctx *, char *const []);
static int		 criu_privileged(struct gck_ctx *, const char *, int,
			    const char *);
static int		 tree_other_user(struct gck_ctx *, pid_t);
static int		 criu_nftables(struct gck_ctx *);
static void		 criu_ghost_said(const char *, char *, size_t);
static int		 version_cmp(const char *, const char *);

/*
 * What criu says when a tree needs one of those options, or has what it
 * cannot dump even so, or when criu lacks what it needs, and what we
 * say instead: the option to use, by the name gpuckpt and gpusend take
 * it, or what to do.  Most are in criu's error lines; those of "any"
 * in whatever line it writes.
 */
static const struct {
	const char	*says;
	const char	*hint;
	int		 any;
} criu_hints[] = {
	{ "CRIU needs to have the CAP_SYS_ADMIN",
	  "criu ran without CAP_SYS_ADMIN, which it needs (it must run as "
	  "root, with root's capabilities, not in a container or under a "
	  "setpriv or capsh that drops them)", 1 },
	{ "Running as non-root requires",
	  "criu ran as a user other than root (it must run as root)", 1 },
	{ "Can't get rlimit 0: Operation not permitted",
	  "criu may not read the resource limits of a process of the tree "
	  "that belongs to another user without CAP_SYS_RESOURCE, which it "
	  "lacks (it must run with CAP_SYS_RESOURCE, not in a container or "
	  "under a setpriv or capsh that drops it)", 0 },
	{ "doesn't live in IPC ns",
	  "a process of the tree has System V shared memory attached, which "
	  "criu checkpoints only when the tree has an IPC namespace of its "
	  "own (start the job with 'unshare --ipc')", 0 },
	{ "Some file locks are hold by dumping tasks",
	  "a process of the tree holds a file lock, which criu checkpoints "
	  "only with --file-locks", 0 },
	{ "External socket is used",
	  "a unix socket of the tree is connected to a socket outside it, "
	  "which criu checkpoints only with --ext-unix-sk", 0 },
	{ "Can't dump half of stream unix connection",
	  "a unix stream socket of the tree is connected to a socket outside "
	  "it, which criu cannot checkpoint (--ext-unix-sk takes datagram "
	  "sockets only)", 0 },
	{ "Connected TCP socket, consider using",
	  "a process of the tree has an established TCP connection, which "
	  "criu checkpoints only with --tcp-established", 0 },
	{ "Can't get 1:16 opt: Operation not supported",
	  "this kernel refuses criu the options of an inet socket of the "
	  "tree (getsockopt SO_PASSCRED: Operation not supported), as Linux "
	  "6.16 and newer do: CRIU 4.1 and older cannot checkpoint a TCP or "
	  "UDP socket there; install CRIU 4.2 or newer", 0 },
	{ "iptables: not found",
	  "criu locks the tree's TCP connections with iptables, which this "
	  "host lacks, and this criu was built without nftables: install "
	  "iptables, or a CRIU built with libnftables", 1 },
	{ "In-flight connection (l)",
	  "a listening TCP socket of the tree has connections that its "
	  "process has not accepted yet, which criu cannot checkpoint: "
	  "try again once they are accepted", 0 },
	{ "Connected TCP socket in image",
	  "the image has an established TCP connection, which criu restores "
	  "only with --tcp-established", 0 },
	{ "External socket found in image",
	  "the image has a unix socket connected outside its tree, which "
	  "criu restores only with --ext-unix-sk", 0 },
	{ "Can't bind inet socket back",
	  "the image has a TCP connection whose address this host lacks "
	  "(restore with --tcp-close to close its connections instead)", 1 },
};

/*
 * The capabilities criu cannot work without, as root: those of a dump,
 * and those a restore needs besides (CAP_SYS_TIME where the kernel has
 * time namespaces, in which criu restores the clocks).
 */
static const struct {
	int		 cap;
	const char	*name;
	int		 restore;	/* needed to restore only */
} criu_caps[] = {
	{ CAP_SYS_ADMIN,	"CAP_SYS_ADMIN",	0 },
	{ CAP_SYS_PTRACE,	"CAP_SYS_PTRACE",	0 },
	{ CAP_NET_ADMIN,	"CAP_NET_ADMIN",	1 },
	{ CAP_SYS_CHROOT,	"CAP_SYS_CHROOT",	1 },
	{ CAP_SYS_TIME,		"CAP_SYS_TIME",		1 },
};
#define NCRIU_CAPS	(sizeof criu_caps / sizeof criu_caps[0])

/*
 * Checks that this process is what criu must be, root with the
 * capabilities of criu_caps (those of a restore too with restore),
 * before anything is done; what says what would have been done
 * ("cannot restore"), todo what to do about a user other than root
 * (NULL: "run it as root").  Returns GCK_OK or GCK_EINVAL.
 */
static int
criu_privileged(struct gck_ctx *ctx, const char *what, int restore,
    const char *todo)
{
	char		 buf[256], missing[256];
	uint64_t	 eff;
	size_t		 i, len = 0;
	uid_t		 euid = geteuid();

	if (gck_pid_status(0, "CapEff", buf, sizeof buf) == -1)
		return GCK_OK;		/* criu will say */
	eff = strtoull(buf, NULL, 16);
	missing[0] = '\0';
	for (i = 0; i < NCRIU_CAPS; i++) {
		if (eff & (UINT64_C(1) << criu_caps[i].cap) ||
		    (criu_caps[i].restore && !restore) ||
		    (criu_caps[i].cap == CAP_SYS_TIME &&
		    access("/proc/self/ns/time", F_OK) == -1))
			continue;
		if (euid != 0 && criu_caps[i].cap != CAP_SYS_ADMIN)
			continue;	/* root is what it lacks */
		len += (size_t)snprintf(missing + len, len < sizeof missing ?
		    sizeof missing - len : 0, "%s%s", len > 0 ? ", " : "",
		    criu_caps[i].name);
	}
	if (euid != 0)
		return gck_set_error(ctx, GCK_EINVAL, "%s: criu needs root "
		    "(this %s runs as uid %u%s%s): %s", what,
		    program_invocation_short_name, (unsigned)euid,
		    missing[0] != '\0' ? " without " : "", missing,
		    todo != NULL ? todo : "run it as root");
	if (missing[0] != '\0')
		return gck_set_error(ctx, GCK_EINVAL, "%s: criu needs root's "
		    "%s, which this %s lacks: run it with all of root's "
		    "capabilities, not in a container or under a setpriv or "
		    "capsh that drops them", what, missing,
		    program_invocation_short_name);
	return GCK_OK;
}

/*
 * criu reads the resource limits of each process it dumps, which the
 * kernel lets it do for another user's process only with
 * CAP_SYS_RESOURCE.  Refuses a tree with such a process when this one
 * lacks it.  Returns GCK_OK or a code.
 */
static int
tree_other_user(struct gck_ctx *ctx, pid_t pid)
{
	struct gck_ptree	*t = NULL;
	const struct gck_proc	*p;
	char			 buf[256];
	unsigned int		 u[3], g[3];
	size_t			 i, k;
	int			 r = GCK_OK;

	if (gck_pid_status(0, "CapEff", buf, sizeof buf) == -1 ||
	    strtoull(buf, NULL, 16) & (UINT64_C(1) << CAP_SYS_RESOURCE))
		return GCK_OK;
	if ((r = gck_ptree_scan(ctx, pid, &t)) != GCK_OK)
		return r;
	for (i = 0; i < t->n; i++) {
		p = &t->procs[i];
		if (gck_pid_status(p->pid, "Uid", buf, sizeof buf) == -1 ||
		    sscanf(buf, "%u %u %u", &u[0], &u[1], &u[2]) != 3 ||
		    gck_pid_status(p->pid, "Gid", buf, sizeof buf) == -1 ||
		    sscanf(buf, "%u %u %u", &g[0], &g[1], &g[2]) != 3)
			continue;	/* gone meanwhile */
		for (k = 0; k < 3; k++)
			if (u[k] != (unsigned)getuid() ||
			    g[k] != (unsigned)getgid())
				break;
		if (k == 3)
			continue;
		r = gck_set_error(ctx, GCK_EINVAL, "cannot checkpoint pid %d: "
		    "process %d ('%s') runs as %s %u: criu needs "
		    "CAP_SYS_RESOURCE to read another user's resource limits, "
		    "and this %s lacks it: run it with CAP_SYS_RESOURCE, not "
		    "in a container or under a setpriv or capsh that drops it",
		    (int)pid, (int)p->pid, p->comm,
		    u[k] != (unsigned)getuid() ? "uid" : "gid",
		    u[k] != (unsigned)getuid() ? u[k] : g[k],
		    program_invocation_short_name);
		break;
	}
	gck_ptree_free(t);
	return r;
}

/*
 * Checks, before anything is done to it, what would make criu refuse
 * to dump pid, or fail to in words a user cannot act on: pid a thread,
 * not a process; this process not root, or without the capabilities
 * criu needs; a process of the tree that belongs to another user, and
 * no CAP_SYS_RESOURCE; no gpuckpt-hook for criu to run after the dump.
 * Returns GCK_OK or a code (GCK_ENOPROC when there is no pid).
 */
int
gck_criu_can_dump(struct gck_ctx *ctx, pid_t pid)
{
	char	what[64], buf[64], comm[64], hook[PATH_MAX];
	long	tgid;
	int	r;

	snprintf(what, sizeof what, "cannot checkpoint pid %d", (int)pid);
	if (pid > 0 && gck_pid_status(pid, "Tgid", buf, sizeof buf) == 0 &&
	    (tgid = strtol(buf, NULL, 10)) > 0 && tgid != (long)pid) {
		if (gck_pid_comm((pid_t)tgid, comm, sizeof comm) == -1)
			snprintf(comm, sizeof comm, "?");
		return gck_set_error(ctx, GCK_EINVAL, "%s: it is a thread of "
		    "process %ld ('%s'); give the process ID: -p %ld", what,
		    tgid, comm, tgid);
	}
	if ((r = criu_privileged(ctx, what, 0, NULL)) != GCK_OK ||
	    (r = tree_other_user(ctx, pid)) != GCK_OK)
		return r;
	return gck_libexec_path(ctx, "gpuckpt-hook", "criu runs after the dump",
	    hook, sizeof hook);
}

/*
 * Checks, before anything is done, that criu can restore here: this
 * process root, with the capabilities criu needs.  todo says what to do
 * when it is not root, NULL for "run it as root".  Returns GCK_OK or a
 * code.
 */
int
gck_criu_can_restore(struct gck_ctx *ctx, const char *todo)
{
	return criu_privileged(ctx, "cannot restore", 1, todo);
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

	for (i = 0; i < 32; i++)
		if (opts & (1u << i) && gck_criu_opt_arg(1u << i) != NULL)
			argv[argc++] = (char *)gck_criu_opt_arg(1u << i);
	return argc;
}

/*
 * Fills cmd->argv with the command line of criu dump or criu restore, as
 * cmd asks, NULL-terminated; cmd->argv points into cmd and into what
 * cmd points to.  Returns how many arguments.
 */
int
gck_criu_argv(struct gck_criu_cmd *cmd)
{
	char	**argv = cmd->argv;
	size_t	  i;
	int	  argc = 0;

	argv[argc++] = (char *)criu_path();
	if (cmd->restore) {
		argv[argc++] = "restore";
		argv[argc++] = "-d";
		/* The tree stays in the cgroups of whoever restores it. */
		argv[argc++] = "--manage-cgroups=ignore";
	} else {
		snprintf(cmd->pidbuf, sizeof cmd->pidbuf, "%d",
		    (int)cmd->pid);
		argv[argc++] = "dump";
		argv[argc++] = "-t";
		argv[argc++] = cmd->pidbuf;
	}
	argv[argc++] = "-D";
	argv[argc++] = (char *)cmd->imgdir;
	argv[argc++] = "-o";
	argv[argc++] = "-";
	argv[argc++] = "-v4";
	argv[argc++] = cmd->leave_running ? "--leave-running" :
	    "--leave-stopped";
	if (cmd->stream)
		argv[argc++] = "--stream";
	if (cmd->action != NULL) {
		argv[argc++] = "--action-script";
		argv[argc++] = (char *)cmd->action;
	}
	if (cmd->shell_job)
		argv[argc++] = "--shell-job";
	if (cmd->restore && cmd->tcp_close &&
	    (cmd->opts & GCK_CRIU_TCP_ESTABLISHED)) {
		argc = criu_add_opts(argv, argc,
		    cmd->opts & ~(GCK_CRIU_TCP_ESTABLISHED | GCK_CRIU_TCP_CLOSE));
		argv[argc++] = "--tcp-close";
	} else
		argc = criu_add_opts(argv, argc, cmd->opts);
	if (!cmd->restore && cmd->nft) {
		argv[argc++] = "--network-lock";
		argv[argc++] = "nftables";
	}
	if (!cmd->restore && cmd->link_remap)
		argv[argc++] = "--link-remap";
	if (!cmd->restore && cmd->ghost_limit > 0) {
		snprintf(cmd->ghostbuf, sizeof cmd->ghostbuf, "%" PRIu64,
		    cmd->ghost_limit);
		argv[argc++] = "--ghost-limit";
		argv[argc++] = cmd->ghostbuf;
	}
	for (i = 0; i < cmd->nextra && i < GCK_CRIU_EXTRA; i++)
		argv[argc++] = cmd->extra[i];
	argv[argc] = NULL;
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
 * Copies from criu's error line s the path that follows prefix, up to
 * the last occurrence of end (NULL: to the end of s), into buf as an
 * absolute path: criu names files relative to the root, without the
 * leading "/".  Returns what follows end, or NULL when s does not read
 * so.
 */
static const char *
criu_path_in(const char *s, const char *prefix, const char *end, char *buf,
    size_t len)
{
	const char	*p, *e, *x;
	size_t		 n;

	if (strncmp(s, prefix, strlen(prefix)) != 0)
		return NULL;
	p = s + strlen(prefix);
	if (end == NULL)
		e = p + strlen(p);
	else {
		for (e = NULL, x = p; (x = strstr(x, end)) != NULL; x++)
			e = x;
		if (e == NULL)
			return NULL;
	}
	if (e == p)
		return NULL;
	n = (size_t)(e - p);
	snprintf(buf, len, "%s%.*s", *p == '/' ? "" : "/", (int)n, p);
	return end != NULL ? e + strlen(end) : e;
}

/* snprintf(), for a message that may be cut short. */
static void
say(char *buf, size_t len, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	(void)vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

/*
 * Puts into buf, in words a user can act on, criu's error s when it is
 * about a file the image's processes had open that is not on this host
 * as it was: missing, or of another size, mode or build; else "".
 */
static void
criu_said(const char *s, char *buf, size_t len)
{
	static const char	*had = "that the image's processes had open";
	char			 path[1024], a[32], b[32];
	const char		*rest;
	unsigned long		 m, want;

	buf[0] = '\0';
	if ((rest = criu_path_in(s, "Can't open file ", " on restore: ",
	    path, sizeof path)) != NULL ||
	    (rest = criu_path_in(s, "Can't open file ", ": ", path,
	    sizeof path)) != NULL) {
		if (strcmp(rest, strerror(ENOENT)) == 0)
			say(buf, len, "file '%s' %s is missing on this "
			    "host (it must exist, with the size it had, to "
			    "restore)", path, had);
		else
			say(buf, len, "cannot open file '%s' %s: %s",
			    path, had, rest);
	} else if ((rest = criu_path_in(s, "File ", " has bad size ", path,
	    sizeof path)) != NULL &&
	    sscanf(rest, "%31s (expect %31[0-9])", a, b) == 2)
		say(buf, len, "file '%s' %s is %s bytes on this host, not "
		    "%s (it must exist, with the size it had, to restore)",
		    path, had, a, b);
	else if ((rest = criu_path_in(s, "File ", " has bad mode ", path,
	    sizeof path)) != NULL &&
	    sscanf(rest, "%lo (expect %lo)", &m, &want) == 2)
		say(buf, len, "file '%s' %s has mode %04lo on this host, "
		    "not %04lo (it must have the mode it had, to restore)",
		    path, had, m & 07777, want & 07777);
	else if ((rest = criu_path_in(s, "File ", " has bad build-ID", path,
	    sizeof path)) != NULL)
		say(buf, len, "file '%s' %s is another build on this host "
		    "(its build-ID differs; it must be the same file, to "
		    "restore)", path, had);
}

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
	if (c->failed)
		return;
	if ((s = strstr(line, "Error (")) != NULL &&
	    strstr(s, "FAILED") != NULL) {
		c->failed = 1;
		return;
	}
	for (i = 0; c->hint == NULL && i < sizeof criu_hints /
	    sizeof criu_hints[0]; i++)
		if ((s != NULL || criu_hints[i].any) &&
		    strstr(line, criu_hints[i].says) != NULL)
			c->hint = criu_hints[i].hint;
	if (s == NULL || c->best[0] != '\0' ||
	    strstr(s, "rlimit: Can't setup") != NULL)
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

/*
 * In the child that runs criu, for a tree in another PID namespace:
 * enters the tree's PID namespace (nsfd[0]), which its children are
 * born in, and its mount namespace (nsfd[1]), where /proc is that
 * namespace's, and goes on in a child, criu, born there; waits for it
 * and exits as it did.  The working directory stays what it was.
 * Returns in criu only.
 */
static void
criu_enter(const int *nsfd)
{
	pid_t	pid;
	int	cwd, status;

	cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (setns(nsfd[0], CLONE_NEWPID) == -1 ||
	    setns(nsfd[1], CLONE_NEWNS) == -1 ||
	    (cwd != -1 && fchdir(cwd) == -1)) {
		dprintf(2, "Error (gpuckpt): cannot enter the namespaces of "
		    "the tree: %s\n", strerror(errno));
		_exit(127);
	}
	if ((pid = fork()) == -1) {
		dprintf(2, "Error (gpuckpt): cannot start criu in the PID "
		    "namespace of the tree: %s\n", strerror(errno));
		_exit(127);
	}
	if (pid == 0)
		return;
	/*
	 * Holding nothing of ours while it waits: a pipe whose read end
	 * stayed open here would never tell its writer that its reader
	 * is gone.
	 */
	(void)close_range(0, ~0u, 0);
	while (waitpid(pid, &status, 0) == -1)
		if (errno != EINTR)
			_exit(127);
	_exit(WIFEXITED(status) ? WEXITSTATUS(status) :
	    128 + WTERMSIG(status));
}

/*
 * Starts criu with argv, our child in a process group of its own; with
 * nsfd, in the namespaces of the tree, under a child of ours
 * (criu_enter()).
 */
static pid_t
criu_fork(char *const argv[], int logfd, const char *hook, const int *nsfd)
{
	sigset_t	set;
	pid_t		pid;
	char		**envp;
	int		fd, i;

	if ((envp = gck_criu_envp(hook)) == NULL) {
		errno = ENOMEM;
		return -1;
	}
	if ((pid = fork()) != 0) {
		gck_criu_envp_free(envp, hook);
		return pid;
	}
	setpgid(0, 0);
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
	if (nsfd != NULL)
		criu_enter(nsfd);
	execve(argv[0], argv, envp);
	dprintf(2, "Error (gpuckpt): cannot run %s: %s\n", argv[0],
	    strerror(errno));
	_exit(127);
}

/*
 * Runs criu with argv, its output and log (-o -) read into log: our
 * child in a process group of its own (so that a terminal's ^C does not
 * reach it: criu is never interrupted half way, whatever happens to
 * us), or, with kp, under a keeper (keeper.c) returned in *kp, of
 * which guard (or NULL) is told (without, guard is told of criu), and
 * whose criu inherits the guard's
 * pipe and the descriptors of x (or NULL); with nsfd, in the
 * namespaces nsfd[] name (criu_enter()).
 * While it runs, during(arg, run) serves its image streamer;
 * should that fail, it has closed criu's files, so that criu fails too.
 * Returns GCK_OK with *statusp set, the code of during(), or a code when
 * criu could not be started.
 */
static int
criu_run(struct gck_ctx *ctx, char *const argv[], struct clog *log,
    struct gck_keeper **kp, const struct gck_keeper_ns *ns,
    struct gck_guard *guard, const struct gck_criu_extra *x,
    const char *hook, const int *nsfd,
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
		    x != NULL ? x->fds : NULL, x != NULL ? x->nfds : 0, ns, kp);
		run.keeper = *kp;
		/* Should we die now, what the keeper holds is the guard's. */
		if (r == GCK_OK)
			gck_guard_tree(guard, gck_keeper_pid(*kp));
	} else if ((pid = criu_fork(argv, p[1], hook, nsfd)) == -1) {
		oerrno = errno;
		r = gck_set_syserr(ctx, oerrno, "cannot start criu: %s",
		    strerror(oerrno));
	} else if (guard != NULL)
		/* Should we die now, the guard waits for criu to be done. */
		gck_guard_criu(guard, pid);
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
 * what it means (for a restore, what criu_said() knows too), else in
 * its own.
 */
static void
criu_log_error(const struct clog *log, int restore, char *buf, size_t len)
{
	buf[0] = '\0';
	if (log->hint == NULL && restore)
		criu_said(log->best, buf, len);
	if (buf[0] == '\0')
		snprintf(buf, len, "%s", log->hint != NULL ? log->hint :
		    log->best[0] != '\0' ? log->best :
		    log->last[0] != '\0' ? log->last : "no message");
}

/* Writes criu's version ("4.2.1") into buf.  Returns GCK_OK or a code. */
int
gck_criu_version(struct gck_ctx *ctx, char *buf, size_t len)
{
	struct clog	 log;
	char		*argv[3], *s;
	int		 status, r;

	argv[0] = (char *)criu_path();
	argv[1] = "--version";
	argv[2] = NULL;
	if ((r = criu_run(ctx, argv, &log, NULL, NULL, NULL, NULL, NULL, NULL,
	    NULL, NULL, &status)) != GCK_OK)
		return r;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
	    (s = strstr(log.head, "Version: ")) == NULL)
		return gck_set_error(ctx, GCK_ECRIU, "cannot run '%s': is "
		    "CRIU (4.2 or newer) installed?", argv[0]);
	s += strlen("Version: ");
	s[strcspn(s, "\n")] = '\0';
	snprintf(buf, len, "%s", s);
	return GCK_OK;
}

/*
 * Compares criu versions a and b ("4.2.1") by their major and minor
 * numbers: less than, equal to or greater than 0 as a is older, the
 * same or newer.  A version that does not read so is older than any.
 */
static int
version_cmp(const char *a, const char *b)
{
	unsigned int	x[2] = { 0, 0 }, y[2] = { 0, 0 };
	int		na, nb;

	na = a != NULL ? sscanf(a, "%u.%u", &x[0], &x[1]) : 0;
	nb = b != NULL ? sscanf(b, "%u.%u", &y[0], &y[1]) : 0;
	if (na < 1 || nb < 1)
		return (na >= 1) - (nb >= 1);
	if (x[0] != y[0])
		return x[0] < y[0] ? -1 : 1;
	return x[1] < y[1] ? -1 : x[1] > y[1];
}

/*
 * Checks that the criu here reads what criu dumped, of version dumped
 * (NULL: not recorded): criu reads the images of its own version and
 * older ones, and CRIU 4.2 writes its pagemaps in a way older criu
 * reads as empty.  Puts the version here in have.  Returns GCK_OK, or
 * GCK_EVERSION saying which criu is needed, or a code.
 */
int
gck_criu_can_read(struct gck_ctx *ctx, const char *dumped, char *have,
    size_t len)
{
	unsigned int	v[2] = { 0, 0 };
	int		r;

	if ((r = gck_criu_version(ctx, have, len)) != GCK_OK)
		return r;
	if (dumped == NULL || version_cmp(have, dumped) >= 0)
		return GCK_OK;
	(void)sscanf(dumped, "%u.%u", &v[0], &v[1]);
	return gck_set_error(ctx, GCK_EVERSION, "the image was dumped by "
	    "criu %.32s, which this host's criu %.32s cannot restore (criu "
	    "reads the images of its own version and older): install CRIU "
	    "%u.%u or newer", dumped, have, v[0], v[1]);
}

/*
 * Opens the PID and mount namespaces of process pid into nsfd[0] and
 * nsfd[1].  Returns GCK_OK or a code, with nothing left open.
 */
static int
ns_open(struct gck_ctx *ctx, pid_t pid, int *nsfd)
{
	const char	*which[2] = { "pid", "mnt" };
	char		 path[64];
	int		 i, oerrno;

	nsfd[0] = nsfd[1] = -1;
	for (i = 0; i < 2; i++) {
		snprintf(path, sizeof path, "/proc/%d/ns/%s", (int)pid,
		    which[i]);
		if ((nsfd[i] = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
			oerrno = errno;
			if (i == 1)
				close(nsfd[0]);
			nsfd[0] = -1;
			return gck_set_syserr(ctx, oerrno, "cannot open '%s': "
			    "%s", path, strerror(oerrno));
		}
	}
	return GCK_OK;
}

/*
 * Whether this criu can lock a tree's TCP connections with nftables,
 * which needs no iptables binary (criu check --feature
 * network_lock_nftables); asked once.
 */
static int
criu_nftables(struct gck_ctx *ctx)
{
	static int	 known = -1;
	struct clog	 log;
	char		*argv[5];
	int		 status;

	if (known != -1)
		return known;
	argv[0] = (char *)criu_path();
	argv[1] = "check";
	argv[2] = "--feature";
	argv[3] = "network_lock_nftables";
	argv[4] = NULL;
	if (criu_run(ctx, argv, &log, NULL, NULL, NULL, NULL, NULL, NULL,
	    NULL, NULL, &status) != GCK_OK)
		return 0;	/* criu's dump will say what is amiss */
	known = WIFEXITED(status) && WEXITSTATUS(status) == 0;
	gck_log(ctx, 2, "criu %s lock TCP connections with nftables",
	    known ? "can" : "cannot");
	return known;
}

/*
 * Puts into buf, in our words, criu's refusal s of a deleted file too
 * large for its ghost limit; else "".
 */
static void
criu_ghost_said(const char *s, char *buf, size_t len)
{
	char		 path[1024];
	const char	*rest;
	unsigned long long size;

	buf[0] = '\0';
	if ((rest = criu_path_in(s, "Can't dump ghost file ", " of ", path,
	    sizeof path)) == NULL || sscanf(rest, "%llu size", &size) != 1)
		return;
	say(buf, len, "a process of the tree holds open '%s', which is "
	    "deleted, and its %llu bytes are more than the ghost limit lets "
	    "into the image (1 MiB unless --ghost-limit says more): give "
	    "--ghost-limit %llu or more", path, size, size);
}

/*
 * Dumps the tree of pid with criu --stream, its images in imgdir, as d
 * says: with the GCK_CRIU_* options d->opts, leaving it stopped (or
 * with d->leave_running, running, which also has criu let go of the TCP
 * connections it dumped).  The TCP connections it dumps are locked with
 * nftables where criu can, else with criu's default (iptables).  criu
 * may link a file the tree holds open whose name is gone back into its
 * directory (--link-remap): the caller makes the file one a restore
 * finds anywhere, and removes the link (linkremap.c).
 * A tree in another PID namespace, ns (NULL: ours), is dumped by a criu
 * that runs there, in the tree's mount namespace, as if that namespace
 * were the host's: what the image records of it is as the namespace
 * sees it.  st->during() runs while criu does, taking the images from its
 * socket; st->hook, if not NULL, is what criu's post-dump action script
 * is told to call back.  On failure criu itself resumes the tree.
 * Returns GCK_OK, the code of st->during(), or GCK_ECRIU with criu's
 * reason.
 */
int
gck_criu_dump(struct gck_ctx *ctx, pid_t pid, const struct gck_nsview *ns,
    const char *imgdir, const struct gck_criu_dumpopts *d,
    const struct gck_criu_stream *st)
{
	struct gck_criu_cmd	 cmd;
	struct clog		 log;
	char			 why[1024], hook[PATH_MAX];
	int			 status, r, nsfd[2] = { -1, -1 };

	if ((r = gck_libexec_path(ctx, "gpuckpt-hook", "criu runs after the "
	    "dump", hook, sizeof hook)) != GCK_OK)
		return r;

	cmd = (struct gck_criu_cmd){ .imgdir = imgdir,
	    .pid = gck_nsview_local(ns, pid), .shell_job = d->shell_job,
	    .opts = d->opts, .leave_running = d->leave_running, .stream = 1,
	    .action = hook, .link_remap = 1, .ghost_limit = d->ghost_limit,
	    .extra = d->extra, .nextra = d->nextra };
	if (cmd.pid <= 0)
		return gck_set_error(ctx, GCK_ENOPROC, "cannot checkpoint pid "
		    "%d: no such process", (int)pid);
	if (d->opts & GCK_CRIU_TCP_ESTABLISHED)
		cmd.nft = criu_nftables(ctx);
	if (ns != NULL && (r = ns_open(ctx, pid, nsfd)) != GCK_OK)
		return r;
	gck_criu_argv(&cmd);
	log_argv(ctx, cmd.argv);
	status = -1;
	r = criu_run(ctx, cmd.argv, &log, NULL, NULL, d->guard, NULL, st->hook,
	    ns != NULL ? nsfd : NULL, st->during, st->arg, &status);
	if (nsfd[0] != -1) {
		close(nsfd[0]);
		close(nsfd[1]);
	}
	if (r != GCK_OK)
		return r;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		criu_ghost_said(log.best, why, sizeof why);
		if (why[0] == '\0')
			criu_log_error(&log, 0, why, sizeof why);
		if (log.best[0] != '\0' && strcmp(why, log.best) != 0)
			gck_log(ctx, 1, "criu: %s", log.best);
		return gck_set_error(ctx, GCK_ECRIU,
		    "criu dump of pid %d failed: %s", (int)pid, why);
	}
	return GCK_OK;
}

/*
 * Checks what a criu run in the mount namespace of a tree in another
 * PID namespace, ns, needs there: that namespace's /proc on /proc, and
 * criu, gpuckpt-hook and the work directory work the same files as
 * here (a child of ours enters it, looks and says).  Returns GCK_OK or
 * GCK_EINVAL, saying what is amiss.
 */
int
gck_criu_ns_check(struct gck_ctx *ctx, const struct gck_nsview *ns,
    const char *work)
{
	struct stat	 here[3], there;
	const char	*what[3] = { "criu", "gpuckpt-hook",
			    "the work directory" };
	char		 hook[PATH_MAX], path[64], id[64];
	const char	*paths[3];
	pid_t		 pid;
	ssize_t		 n;
	int		 i, r, status, nsfd[2], cwd;

	if ((r = gck_libexec_path(ctx, "gpuckpt-hook", "criu runs after the "
	    "dump", hook, sizeof hook)) != GCK_OK)
		return r;
	paths[0] = criu_path();
	paths[1] = hook;
	paths[2] = work;
	for (i = 0; i < 3; i++)
		if (stat(paths[i], &here[i]) == -1)
			return gck_set_syserr(ctx, errno, "cannot find "
			    "'%s': %s", paths[i], strerror(errno));
	if ((r = ns_open(ctx, ns->root, nsfd)) != GCK_OK)
		return r;
	if ((pid = fork()) == 0) {
		cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (setns(nsfd[1], CLONE_NEWNS) == -1 ||
		    (cwd != -1 && fchdir(cwd) == -1))
			_exit(1);
		snprintf(path, sizeof path, "/proc/1/ns/pid");
		if ((n = readlink(path, id, sizeof id - 1)) <= 0 ||
		    (id[n] = '\0', strcmp(id, ns->id) != 0))
			_exit(2);
		for (i = 0; i < 3; i++)
			if (stat(paths[i], &there) == -1 ||
			    there.st_dev != here[i].st_dev ||
			    there.st_ino != here[i].st_ino)
				_exit(3 + i);
		_exit(0);
	}
	close(nsfd[0]);
	close(nsfd[1]);
	if (pid == -1)
		return gck_set_syserr(ctx, errno, "cannot fork: %s",
		    strerror(errno));
	while (waitpid(pid, &status, 0) == -1)
		if (errno != EINTR)
			return gck_set_syserr(ctx, errno, "cannot wait: %s",
			    strerror(errno));
	if (!WIFEXITED(status) || WEXITSTATUS(status) == 1)
		return gck_set_error(ctx, GCK_EINVAL, "cannot checkpoint pid "
		    "%d: cannot enter the mount namespace of its PID "
		    "namespace, where criu must run", (int)ns->root);
	if (WEXITSTATUS(status) == 2)
		return gck_set_error(ctx, GCK_EINVAL, "cannot checkpoint pid "
		    "%d: its PID namespace has no /proc of its own in the "
		    "tree's mount namespace, where criu must run (start such "
		    "a tree with 'unshare --pid --fork --mount-proc')",
		    (int)ns->root);
	if ((i = WEXITSTATUS(status) - 3) >= 0 && i < 3)
		return gck_set_error(ctx, GCK_EINVAL, "cannot checkpoint pid "
		    "%d: %s ('%s') is not the same in the tree's mount "
		    "namespace, where criu must run to dump a tree in a PID "
		    "namespace of its own%s", (int)ns->root, what[i], paths[i],
		    i == 2 ? " (set TMPDIR to a directory it shares)" : "");
	return GCK_OK;
}

/*
 * Restores the images in imgdir (streamed by st->during(), or, with st
 * NULL, from the files there), detached, under a keeper (keeper.c) in
 * a session of its own (with ns, in a PID namespace of its own), tasks
 * left stopped, with the GCK_CRIU_* options opts the image was dumped
 * with; with tcp_close, its TCP connections restored closed (criu
 * --tcp-close) rather than as they were; given the options and
 * descriptors of x (or NULL) too; *kp is the keeper, whatever
 * happened.  guard (or NULL) learns of the keeper, and criu inherits
 * its pipe.  *donep says
 * whether criu succeeded, even when the image then fails.  Returns
 * GCK_OK or a code.
 */
int
gck_criu_restore(struct gck_ctx *ctx, const char *imgdir, int shell_job,
    unsigned int opts, int tcp_close, const struct gck_criu_extra *x,
    const struct gck_criu_stream *st,
    const struct gck_keeper_ns *ns, struct gck_guard *guard,
    struct gck_keeper **kp, int *donep)
{
	struct gck_criu_cmd	 cmd;
	struct clog		 log;
	char			 why[1024];
	int			 status, r;

	*donep = 0;
	*kp = NULL;
	cmd = (struct gck_criu_cmd){ .restore = 1, .imgdir = imgdir,
	    .shell_job = shell_job, .opts = opts, .stream = st != NULL,
	    .tcp_close = tcp_close, .extra = x != NULL ? x->args : NULL,
	    .nextra = x != NULL ? x->nargs : 0 };
	gck_criu_argv(&cmd);
	log_argv(ctx, cmd.argv);
	status = -1;
	r = criu_run(ctx, cmd.argv, &log, kp, ns, guard, x, NULL, NULL,
	    st != NULL ? st->during : NULL, st != NULL ? st->arg : NULL,
	    &status);
	if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0)
		*donep = 1;	/* restored, even if the image failed */
	if (r != GCK_OK)
		return r;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		criu_log_error(&log, 1, why, sizeof why);
		if (strstr(why, "tty") != NULL)
			return gck_set_error(ctx, GCK_ECRIU, "criu restore "
			    "failed: %s (the tree had a controlling terminal, "
			    "which a detached restore cannot give it: start "
			    "jobs to be moved without one, e.g. with setsid "
			    "and their output in files)", why);
		if (log.best[0] != '\0' && strcmp(why, log.best) != 0)
			gck_log(ctx, 1, "criu: %s", log.best);
		return gck_set_error(ctx, GCK_ECRIU, "criu restore failed: %s",
		    why);
	}
	return GCK_OK;
}

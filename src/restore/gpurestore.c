/*
 * gpurestore: restore an image stream into running processes.
 */
#include "config.h"

#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <err.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compat.h"
#include "gpuckpt.h"
#include "tool.h"

static const struct option longopts[] = {
	{ "allowed-signers", required_argument,	NULL,	'S' },
	{ "gpu-map",	required_argument,	NULL,	'G' },
	{ "help",	no_argument,		NULL,	'h' },
	{ "mount-map",	required_argument,	NULL,	'M' },
	{ "parent",	required_argument,	NULL,	'A' },
	{ "pid",	required_argument,	NULL,	'p' },
	{ "pidfile",	required_argument,	NULL,	'P' },
	{ "pidns",	no_argument,		NULL,	'N' },
	{ "quiet",	no_argument,		NULL,	'q' },
	{ "resume",	no_argument,		NULL,	'U' },
	{ "root",	required_argument,	NULL,	'R' },
	{ "stats",	optional_argument,	NULL,	'Z' },
	{ "tcp-close",	no_argument,		NULL,	'C' },
	{ "threads",	required_argument,	NULL,	'j' },
	{ "version",	no_argument,		NULL,	'V' },
	{ "verbose",	no_argument,		NULL,	'v' },
	{ "wait",	no_argument,		NULL,	'W' },
	{ NULL,		0,			NULL,	0 }
};

/* What the command line asks for. */
struct args {
	struct gck_restore_opts	 o;
	char			**parents;	/* --parent, in o too */
	char			**map;		/* --mount-map, in o too */
	char			 root[PATH_MAX];	/* --root */
	const char		*pidfile;	/* --pidfile */
	const char		*series;	/* a series, or NULL */
	pid_t			 pid;		/* -p of --resume */
	int			 verbose;
	int			 resume;	/* --resume */
	int			 wait;		/* --wait */
	int			 quiet;		/* -q */
	int			 stats;		/* --stats: its form, or 0 */
};

static _Noreturn void	usage(int);
static int	write_pidfile(const char *, pid_t);
static void	series_skip(void *, const struct gck_snapshot *, const char *);
static int	restore_series(struct gck_ctx *, const char *,
		    const struct gck_restore_opts *, pid_t *);
static _Noreturn void	wait_tree(struct gck_ctx *, struct gck_waiter *,
		    const sigset_t *, pid_t);
static void	parse_args(struct args *, int, char *[]);
static int	resume_tree(const struct args *, int, const char *);
static void	check_image(struct args *, int, char *[]);
static int	restore(struct args *);

static const char synopsis[] =
    "usage: gpurestore [-hqVv] [--allowed-signers file] "
    "[--gpu-map src=dst[,...]]\n"
    "                  [-M at=dir] [--parent path] [--pidfile file] "
    "[--pidns]\n"
    "                  [--root dir] [--stats[=text|json]] [--tcp-close] "
    "[--threads n]\n"
    "                  [--wait] [file | dir | -]\n"
    "       gpurestore --resume [-v] [--gpu-map src=dst[,...]] -p pid\n";

static const char help[] =
    "Restore a process tree, CUDA state included, from a gpuckpt image, "
    "the newest\nsnapshot of a series directory, or standard input.\n"
    "\n"
    "Restore:\n"
    "      --allowed-signers=FILE  restore only an image signed by a key "
    "of FILE\n"
    "      --gpu-map=SRC=DST[,...]  put the GPU state on these GPUs, "
    "rather than\n"
    "                           where it would go by default\n"
    "  -M, --mount-map=AT=DIR   for a job of a mount namespace of its "
    "own: its mount\n"
    "                           at AT is of DIR here; may be repeated\n"
    "      --parent=PATH        where the parents of an incremental image "
    "are\n"
    "                           (beside the image); may be repeated\n"
    "  -P, --pidfile=FILE       write the restored root's PID to FILE\n"
    "      --pidns              restore into a new PID namespace (only "
    "when a PID\n"
"                           of the image is taken)\n"
    "      --root=DIR           for a job of a mount namespace of its "
    "own: its root\n"
    "                           file system is DIR here\n"
    "      --tcp-close          restore the TCP connections closed (their "
    "programs\n"
    "                           see them reset), not as they were\n"
    "      --threads=N          decompress on N threads, 1 to 256 (one a "
    "CPU)\n"
    "      --wait               stay until the root ends and exit as it "
    "did\n"
    "\n"
    "Resume in place:\n"
    "      --resume             resume the CUDA processes of a suspended "
    "tree\n"
    "  -p, --pid=PID            with --resume: the tree's root\n"
    "\n"
    "Output:\n"
    TOOL_HELP_QUIET_STATS
    TOOL_HELP_COMMON
    "\n"
    "Examples:\n"
    "  gpurestore job.gck\n"
    "  gpuckpt -p 1234 | ssh dst gpurestore\n"
    "\n"
    "See gpurestore(1).\n";

static _Noreturn void
usage(int status)
{
	tool_usage(status, synopsis, help);
}

/* Writes pid to path through a temporary name.  Returns 0 or -1. */
static int
write_pidfile(const char *path, pid_t pid)
{
	char	*tmp = NULL;
	FILE	*f = NULL;
	int	 fd, ok = 0;

	if (asprintf(&tmp, "%s.tmp.XXXXXX", path) == -1)
		return -1;
	if ((fd = mkstemp(tmp)) != -1 && (f = fdopen(fd, "w")) != NULL) {
		ok = fprintf(f, "%d\n", (int)pid) > 0;
		ok = fclose(f) == 0 && ok;
		ok = ok && rename(tmp, path) == 0;
	} else if (fd != -1)
		close(fd);
	if (!ok)
		unlink(tmp);
	free(tmp);
	return ok ? 0 : -1;
}

/* Tells of a snapshot of the series passed over, and why. */
static void
series_skip(void *arg, const struct gck_snapshot *sn, const char *why)
{
	warnx("skipping snapshot '%s': %s", sn->path, why);
}

/* Restores the newest sound snapshot of the series in directory dir. */
static int
restore_series(struct gck_ctx *ctx, const char *dir,
    const struct gck_restore_opts *o, pid_t *rootp)
{
	const struct gck_snapshot	*sn;
	struct gck_series		*s = NULL;
	int				 r;

	if ((r = gck_series_open(ctx, dir, 0, &s)) == GCK_OK &&
	    (r = gck_series_restore(ctx, s, o, series_skip, NULL, rootp,
	    &sn)) == GCK_OK)
		warnx("restored snapshot '%s', taken %s", sn->path, sn->time);
	gck_series_free(s);
	return r;
}

/*
 * Stays with the restored tree until its root ends, passing it the
 * signals that would end a job, and exits as it did.
 */
static _Noreturn void
wait_tree(struct gck_ctx *ctx, struct gck_waiter *w, const sigset_t *fwd,
    pid_t root)
{
	int	status;

	if (gck_wait(ctx, w, fwd, &status) != GCK_OK)
		errx(1, "%s", gck_error_string(ctx));
	gck_waiter_free(w);
	gck_ctx_free(ctx);
	if (WIFEXITED(status))
		exit(WEXITSTATUS(status));
	if (WIFSIGNALED(status)) {
		warnx("process %d was killed by signal %d (%s)", (int)root,
		    WTERMSIG(status), strsignal(WTERMSIG(status)));
		exit(128 + WTERMSIG(status));
	}
	exit(1);
}

/* Reads the options into a, leaving the operands in argv[optind...]. */
static void
parse_args(struct args *a, int argc, char *argv[])
{
	struct gck_restore_opts	*o = &a->o;
	int			 ch;

	memset(a, 0, sizeof *a);
	o->pid_wait_ms = 10000;
	while ((ch = getopt_long(argc, argv, "hM:p:P:qVv", longopts,
	    NULL)) != -1) {
		switch (ch) {
		case 'M':
			tool_append(&a->map, &o->nmount_map, optarg);
			o->mount_map = a->map;
			break;
		case 'R':
			/* As given where it is not there: the restore says. */
			if (realpath(optarg, a->root) == NULL)
				snprintf(a->root, sizeof a->root, "%s", optarg);
			o->root = a->root;
			break;
		case 'A':
			tool_append(&a->parents, &o->nparents, optarg);
			o->parents = a->parents;
			break;
		case 'C':
			o->tcp_close = 1;
			break;
		case 'S':
			o->allowed_signers = optarg;
			break;
		case 'G':
			o->gpu_map = optarg;
			break;
		case 'h':
			usage(0);
		case 'j':
			o->threads = (int)tool_number(optarg, 1, 256,
			    "thread count");
			break;
		case 'p':
			a->pid = tool_pid(optarg);
			break;
		case 'U':
			a->resume = 1;
			break;
		case 'P':
			a->pidfile = optarg;
			break;
		case 'N':
			o->pidns = GCK_PIDNS_ALWAYS;
			break;
		case 'q':
			a->quiet = 1;
			break;
		case 'W':
			a->wait = 1;
			break;
		case 'Z':
			if ((a->stats = tool_stats_form(optarg)) == -1)
				usage(2);
			break;
		case 'V':
			tool_version();
		case 'v':
			a->verbose++;
			break;
		default:
			usage(2);
		}
	}
}

/* --resume: resumes tree a->pid in place.  Returns the exit status. */
static int
resume_tree(const struct args *a, int argc, const char *argv0)
{
	const struct gck_restore_opts	*o = &a->o;
	struct gck_ctx			*ctx;
	size_t				 n;
	int				 r;

	if (a->pid == 0)
		tool_usage_error(synopsis, "--resume needs the tree: use -p PID");
	if (argc != 0)
		tool_usage_error(synopsis, "--resume takes no image: drop '%s'",
		    argv0);
	if (a->pidfile != NULL || a->wait ||
	    o->pidns != GCK_PIDNS_AUTO || o->threads != 0 ||
	    o->nparents != 0 || a->stats || o->tcp_close || o->root != NULL ||
	    o->nmount_map != 0) {
		warnx("--resume takes -p pid, no image and no -M, "
		    "--parent, --pidfile, --pidns, --root, --stats, "
		    "--tcp-close, --threads or --wait");
		usage(2);
	}
	tool_signals();
	ctx = tool_ctx(a->verbose);
	if ((r = gck_resume(ctx, a->pid, o->gpu_map, &n)) != GCK_OK)
		warnx("%s", gck_error_string(ctx));
	gck_ctx_free(ctx);
	return r == GCK_OK ? 0 : 1;
}

/*
 * [file | dir | -]: the image to restore, or the series of a directory,
 * taken into a.
 */
static void
check_image(struct args *a, int argc, char *argv[])
{
	struct stat	sb;

	if (argc > 1)
		tool_usage_error(synopsis, "one image at most, got %d", argc);
	if (a->pid != 0) {
		warnx("-p is for --resume: an image says its own processes");
		usage(2);
	}
	if (argc == 1 && stat(argv[0], &sb) == 0 && S_ISDIR(sb.st_mode))
		a->series = argv[0];
	else {
		a->o.infd = tool_open_image(argc == 1 ? argv[0] : NULL, 1);
		a->o.inname = argc == 1 && strcmp(argv[0], "-") != 0 ?
		    argv[0] : "standard input";
	}
}

/*
 * The restore of the image, or of the series' newest snapshot, and with
 * --wait the wait for its tree.  Returns the exit status.
 */
static int
restore(struct args *a)
{
	struct gck_restore_opts	*o = &a->o;
	struct gck_stats	 st;
	struct gck_waiter	*w = NULL;
	struct gck_ctx		*ctx;
	sigset_t		 fwd;
	pid_t			 root;
	int			 r;

	tool_signals();
	ctx = tool_ctx(a->verbose);
	if (a->wait) {
		/*
		 * Signals for the tree wait for it; those that end a
		 * restore under way still do so until it runs.
		 */
		sigemptyset(&fwd);
		sigaddset(&fwd, SIGUSR1);
		sigaddset(&fwd, SIGUSR2);
		sigprocmask(SIG_BLOCK, &fwd, NULL);
		sigaddset(&fwd, SIGTERM);
		sigaddset(&fwd, SIGINT);
		sigaddset(&fwd, SIGHUP);
		o->waiter = &w;
	}
	if (a->stats)
		o->stats = &st;
	tool_progress(ctx, a->quiet);
	if (a->series != NULL)
		r = restore_series(ctx, a->series, o, &root);
	else
		r = gck_restore(ctx, o, &root);
	tool_progress_clear();
	free(a->parents);
	free(a->map);
	if (r != GCK_OK) {
		warnx("%s", gck_error_string(ctx));
		gck_ctx_free(ctx);
		return 1;
	}
	if (!a->quiet && gck_notice_string(ctx) != NULL)
		warnx("%s", gck_notice_string(ctx));
	if (a->stats)
		tool_stats(&st, a->stats, TOOL_ST_MEMORY | TOOL_ST_RESTORE,
		    NULL);
	r = 0;
	if (a->pidfile != NULL && write_pidfile(a->pidfile, root) == -1) {
		warn("process tree %d restored, but cannot write pid file "
		    "'%s'", (int)root, a->pidfile);
		r = 1;
	}
	printf("%d\n", (int)root);
	if (fflush(stdout) == EOF)
		r = 1;
	if (a->wait)
		wait_tree(ctx, w, &fwd, root);
	gck_ctx_free(ctx);
	return r;
}

int
main(int argc, char *argv[])
{
	struct args	a;

	parse_args(&a, argc, argv);
	argc -= optind;
	argv += optind;
	if (a.resume)
		return resume_tree(&a, argc, argc > 0 ? argv[0] : NULL);
	check_image(&a, argc, argv);
	return restore(&a);
}

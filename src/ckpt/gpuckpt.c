/*
 * gpuckpt: checkpoint a running process tree into an image stream.
 */
#include "config.h"

#include <sys/types.h>

#include <err.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "compat.h"
#include "gpuckpt.h"
#include "tool.h"

/* gpuckpt --series: where, how often, how many. */
struct series {
	const char		*dir;
	long			 every_ms;	/* 0: one snapshot */
	unsigned int		 count;		/* 0: until the tree goes */
	struct gck_series_opts	 so;
	int			 set;		/* options of --series given */
	int			 now;		/* --now: ask for a snapshot */
	int			 quiet;		/* -q */
	int			 stats;		/* --stats: its form, or 0 */
};

/* What the command line asks for. */
struct args {
	struct gck_ckpt_opts	 o;
	struct series		 sa;		/* --series and its options */
	int			 verbose;
	int			 suspend;	/* --suspend */
	int			 quiet;		/* -q */
	int			 stats;		/* --stats: its form, or 0 */
	int			 output;	/* -o given */
	int			 image_opts;	/* options that make an image */
	int			 after_set;	/* -k, -R or -s given */
	int			 launch;	/* --launch */
	char			**cmd;		/* its command */
};

/* SIGUSR1 came: a snapshot is asked for now (gpuckpt --series --now). */
static volatile sig_atomic_t	series_now;

/* --every gives up after so many failed snapshots in a row. */
#define SERIES_FAILS_MAX	5

static const struct option longopts[] = {
	{ "compress",		required_argument,	NULL,	'c' },
	{ "count",		required_argument,	NULL,	'n' },
	{ "cut",		required_argument,	NULL,	'X' },
	{ "cut-name",		required_argument,	NULL,	'I' },
	{ "cut-size",		required_argument,	NULL,	'Y' },
	{ "every",		required_argument,	NULL,	'e' },
	{ "ext-unix-sk",	no_argument,		NULL,	'E' },
	{ "file-locks",		no_argument,		NULL,	'F' },
	{ "format",		required_argument,	NULL,	'f' },
	{ "full-every",		required_argument,	NULL,	'M' },
	{ "ghost-limit",	required_argument,	NULL,	'G' },
	{ "gpu-staging",	no_argument,		NULL,	'g' },
	{ "help",		no_argument,		NULL,	'h' },
	{ "keep",		required_argument,	NULL,	'N' },
	{ "kill",		no_argument,		NULL,	'k' },
	{ "launch",		no_argument,		NULL,	'l' },
	{ "lock-timeout",	required_argument,	NULL,	'L' },
	{ "nccl-timeout",	required_argument,	NULL,	'Q' },
	{ "output",		required_argument,	NULL,	'o' },
	{ "parent",		required_argument,	NULL,	'P' },
	{ "pid",		required_argument,	NULL,	'p' },
	{ "quiet",		no_argument,		NULL,	'q' },
	{ "leave-running",	no_argument,		NULL,	'R' },
	{ "now",		no_argument,		NULL,	'W' },
	{ "series",		required_argument,	NULL,	'D' },
	{ "sign",		required_argument,	NULL,	'K' },
	{ "stats",		optional_argument,	NULL,	'Z' },
	{ "stop",		no_argument,		NULL,	's' },
	{ "suspend",		no_argument,		NULL,	'S' },
	{ "tcp-close",		no_argument,		NULL,	'C' },
	{ "tcp-established",	no_argument,		NULL,	'T' },
	{ "threads",		required_argument,	NULL,	'j' },
	{ "version",		no_argument,		NULL,	'V' },
	{ "verbose",		no_argument,		NULL,	'v' },
	{ NULL,			0,			NULL,	0 }
};

static _Noreturn void	usage(int);
static void	pid_list(const struct gck_ckpt_result *, char *, size_t);
static void	handover_note(pid_t, const struct gck_ckpt_result *);
static int	suspend_tree(pid_t, unsigned int, int, int);
static int	series_one(struct gck_ctx *, struct gck_series *,
		    const struct gck_ckpt_opts *, const struct series *, int);
static int	series_wait(const struct timespec *, long);
static int	series_loop(struct gck_ctx *, struct gck_series *,
		    const struct gck_ckpt_opts *, const struct series *);
static int	series_run(const struct gck_ckpt_opts *, const struct series *,
		    int);
static void	series_opt(int, const char *, struct series *);
static void	series_check(const struct gck_ckpt_opts *,
		    const struct series *, int, int);
static int	image_option(struct args *, int, const char *);
static void	parse_args(struct args *, int, char *[]);
static int	checkpoint_tree(const struct args *);
static _Noreturn void	launch(const struct args *);

static const char synopsis[] =
    "usage: gpuckpt [-hkqRsVv] [-c zstd[:LEVEL]|none] [--ext-unix-sk] "
    "[--file-locks]\n"
    "               [--format 1|2|3] [--ghost-limit size] [--gpu-staging]\n"
    "               [--lock-timeout seconds] [--nccl-timeout seconds] "
    "[-o file]\n"
    "               [--parent image] [--sign key] [--stats[=text|json]]\n"
    "               [--tcp-close | --tcp-established] [--threads n]\n"
    "               [--cut dir --cut-size n [--cut-name name]] -p pid\n"
    "       gpuckpt --series dir [--count n] [--every seconds] "
    "[--full-every n]\n"
    "               [--keep n] [options] -p pid\n"
    "       gpuckpt --series dir --now [-qv]\n"
    "       gpuckpt --suspend [-v] [--gpu-staging] [--lock-timeout seconds] "
    "-p pid\n"
    "       gpuckpt --launch [-v] command [argument ...]\n";

static const char help[] =
    "Checkpoint a running process tree, CUDA state included, into an "
    "image stream.\n"
    "\n"
    "The tree:\n"
    "  -p, --pid=PID            the process tree to checkpoint (required)\n"
    "      --lock-timeout=SECS  wait so long for each CUDA process's lock "
    "(10)\n"
    "      --nccl-timeout=SECS  wait so long for the ranks of an NCCL job "
    "to quiesce\n"
    "                           (30)\n"
    "      --cut=DIR            one cut of a job across hosts, its "
    "gpuckpts meeting\n"
    "                           in DIR, a directory they share\n"
    "      --cut-size=N         with --cut: the hosts, one gpuckpt "
    "each\n"
    "      --cut-name=NAME      with --cut: this one's name (the host "
    "name)\n"
    "      --gpu-staging        move device memory through the processes' "
    "host\n"
    "                           memory, even where the driver has custom "
    "storage\n"
    "      --launch CMD [ARG]   run CMD under a job file of its own (NVIDIA "
    "r590 or\n"
    "                           newer), for its processes to be "
    "checkpointed as one\n"
    "\n"
    "The image:\n"
    "  -o, --output=FILE        write the image to FILE, - for standard "
    "output\n"
    "                           (default)\n"
    "  -c, --compress=METHOD    zstd, zstd:1 to zstd:19 or none (zstd:3)\n"
    "      --format=1|2|3       the image format version to write (3)\n"
    "      --parent=IMAGE       write an incremental image against IMAGE\n"
    "      --sign=KEY           sign the image with the OpenSSH key KEY\n"
    "      --threads=N          compress on N threads, 1 to 256 (one a "
    "CPU)\n"
    "\n"
    "The tree afterwards (default: by the output, see gpuckpt(1)):\n"
    "  -k, --kill               kill the tree once the image is complete\n"
    "  -R, --leave-running      take a snapshot: let the tree run on\n"
    "  -s, --stop               leave the tree stopped\n"
    "      --suspend            free the GPUs of the tree in place, no "
    "image\n"
    "\n"
    "Snapshot series:\n"
    "      --series=DIR         snapshot the tree into the series in DIR\n"
    "      --every=SECS         with --series: a snapshot every SECS\n"
    "      --count=N            with --every: stop after N snapshots\n"
    "      --full-every=N       with --series: a full image once a chain "
    "holds N (10)\n"
    "      --keep=N             with --series: keep the newest N "
    "snapshots (5)\n"
    "      --now                with --series alone: have the gpuckpt "
    "--every\n"
    "                           that writes DIR take a snapshot now, and "
    "wait for it\n"
    "\n"
    "criu options:\n"
    "      --ext-unix-sk        dump unix sockets connected outside the "
    "tree\n"
    "      --file-locks         dump the file locks the tree holds\n"
    "      --ghost-limit=SIZE   a deleted file the tree holds open goes "
    "into the\n"
    "                           image up to SIZE, K, M, G or T (1M)\n"
    "      --tcp-close          dump established TCP connections closed: "
    "they end\n"
    "                           with the tree here, restored shut\n"
    "      --tcp-established    dump established TCP connections\n"
    "\n"
    "Output:\n"
    TOOL_HELP_QUIET_STATS
    TOOL_HELP_COMMON
    "\n"
    "Examples:\n"
    "  gpuckpt -p 1234 -o job.gck\n"
    "  gpuckpt -R -p 1234 | ssh dst gpurestore\n"
    "\n"
    "See gpuckpt(1).\n";

static _Noreturn void
usage(int status)
{
	tool_usage(status, synopsis, help);
}

/* Appends the PIDs of res to buf, each after a space. */
static void
pid_list(const struct gck_ckpt_result *res, char *buf, size_t len)
{
	size_t	i, off = 0;
	int	n;

	buf[0] = '\0';
	for (i = 0; i < res->npids && off < len; i++) {
		n = snprintf(buf + off, len - off, " %d", (int)res->pids[i]);
		if (n < 0)
			break;
		off += (size_t)n;
	}
}

/*
 * Says how to end, or resume, a tree left stopped for its restore,
 * unless the restore is on this host and ends it itself.
 */
static void
handover_note(pid_t pid, const struct gck_ckpt_result *res)
{
	char	pids[4096], cuda[128];

	/* A gpurestore here ends it, or says it did not. */
	if (res->reader > 0 && strcmp(res->reader_comm, "gpurestore") == 0)
		return;
	pid_list(res, pids, sizeof pids);
	cuda[0] = '\0';
	if (res->ncuda > 0)
		snprintf(cuda, sizeof cuda, ", then 'gpurestore --resume -p "
		    "%d'", (int)pid);
	warnx("process tree %d left stopped: its image went to %s, and "
	    "only the restoring end knows if it runs there; once it does, "
	    "end it here with 'kill -KILL%s', or resume it with 'kill -CONT%s'"
	    "%s", (int)pid, res->output, pids, pids, cuda);
}

/* --suspend: frees the GPUs of tree pid in place.  Returns the exit status. */
static int
suspend_tree(pid_t pid, unsigned int lock_ms, int staging, int verbose)
{
	struct gck_ctx	*ctx;
	size_t		 n;
	int		 r;

	tool_signals();
	ctx = tool_ctx(verbose);
	if ((r = gck_suspend(ctx, pid, lock_ms, staging, &n)) != GCK_OK)
		warnx("%s", gck_error_string(ctx));
	gck_ctx_free(ctx);
	return r == GCK_OK ? 0 : 1;
}

/*
 * Takes one snapshot into the series; first says what the tree's
 * restore will do with its terminal, as gpuckpt -o does.
 */
static int
series_one(struct gck_ctx *ctx, struct gck_series *s,
    const struct gck_ckpt_opts *o, const struct series *sa, int first)
{
	struct gck_ckpt_result		 res;
	const struct gck_snapshot	*sn;
	int				 r;

	memset(&res, 0, sizeof res);
	tool_progress(ctx, sa->quiet);
	r = gck_series_snapshot(ctx, s, o, &sa->so, &res, &sn);
	tool_progress_clear();
	if (r == GCK_OK && first && !sa->quiet)
		tool_tty_note(res.tty_pid, res.tty, res.tty_fd);
	if (r == GCK_OK && sa->stats)
		tool_stats(&res.stats, sa->stats, TOOL_ST_MEMORY |
		    TOOL_ST_ZERO | TOOL_ST_FREEZE, NULL);
	gck_ckpt_result_free(&res);
	return r;
}

/*
 * Waits until ms after start, a little at a time, or until a snapshot is
 * asked for.  Returns 0, or -1 when a signal came.
 */
static int
series_wait(const struct timespec *start, long ms)
{
	struct timespec	now, nap;
	long long	left;

	for (;;) {
		if (tool_signal != 0)
			return -1;
		if (series_now) {
			series_now = 0;
			return 0;
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		left = (long long)ms - ((long long)(now.tv_sec - start->tv_sec) *
		    1000 + (now.tv_nsec - start->tv_nsec) / 1000000);
		if (left <= 0)
			return 0;
		if (left > 200)
			left = 200;
		nap.tv_sec = 0;
		nap.tv_nsec = (long)left * 1000000;
		nanosleep(&nap, NULL);
	}
}

/*
 * The loop of --every: a snapshot every sa->every_ms from the start of
 * the one before, until sa->count are taken, the tree is gone, a signal
 * comes or SERIES_FAILS_MAX fail in a row.  A failed snapshot leaves the
 * tree running and the series as it was.  Returns the exit status.
 */
static int
series_loop(struct gck_ctx *ctx, struct gck_series *s,
    const struct gck_ckpt_opts *o, const struct series *sa)
{
	struct timespec	start;
	unsigned int	taken = 0, fails = 0;
	int		r;

	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &start);
		r = series_one(ctx, s, o, sa, taken == 0);
		if (r == GCK_OK) {
			taken++;
			fails = 0;
		} else if (gck_pid_gone(o->pid)) {
			if (taken == 0)
				warnx("%s", gck_error_string(ctx));
			else
				warnx("process tree %d is gone: %u snapshot%s "
				    "taken into '%s'", (int)o->pid, taken,
				    taken == 1 ? "" : "s", sa->dir);
			return taken > 0 ? 0 : 1;
		} else {
			warnx("%s", gck_error_string(ctx));
			if (r != GCK_EINTR && ++fails == SERIES_FAILS_MAX) {
				warnx("giving up after %d failed snapshots in "
				    "a row", SERIES_FAILS_MAX);
				return 1;
			}
		}
		if (sa->count > 0 && taken == sa->count)
			return 0;
		if (r == GCK_EINTR || series_wait(&start, sa->every_ms) == -1)
			break;
	}
	warnx("stopped by %s: %u snapshot%s taken into '%s', process tree %d "
	    "left running", strsignal(tool_signal), taken, taken == 1 ? "" :
	    "s", sa->dir, (int)o->pid);
	return taken > 0 ? 0 : 1;
}

static void
series_asked(int sig)
{
	(void)sig;
	series_now = 1;
}

/*
 * --series: one snapshot, or those of --every.  SIGUSR1 asks for one now
 * (it ends the wait between two); the requests it answers are those
 * waiting in the directory (gck_series_request()).  Returns the exit
 * status.
 */
static int
series_run(const struct gck_ckpt_opts *o, const struct series *sa,
    int verbose)
{
	struct gck_series	*s = NULL;
	struct gck_ctx		*ctx;
	struct sigaction	 act;
	int			 status;

	tool_signals();
	memset(&act, 0, sizeof act);
	act.sa_handler = series_asked;
	act.sa_flags = SA_RESTART;
	sigemptyset(&act.sa_mask);
	sigaction(SIGUSR1, &act, NULL);
	ctx = tool_ctx(verbose);
	if (gck_series_open(ctx, sa->dir, 1, &s) != GCK_OK) {
		warnx("%s", gck_error_string(ctx));
		status = 1;
	} else if (sa->every_ms > 0)
		status = series_loop(ctx, s, o, sa);
	else if (series_one(ctx, s, o, sa, 1) != GCK_OK) {
		warnx("%s", gck_error_string(ctx));
		status = 1;
	} else
		status = 0;
	gck_series_free(s);
	gck_ctx_free(ctx);
	return status;
}

/*
 * --series DIR --now: asks the gpuckpt that writes the series for a
 * snapshot now, and prints its path once it is listed.  Returns the exit
 * status.
 */
static int
series_request(const char *dir, int verbose)
{
	struct gck_ctx	*ctx;
	char		*name = NULL;
	int		 r;

	tool_signals();
	ctx = tool_ctx(verbose);
	if ((r = gck_series_request(ctx, dir, 0, &name)) != GCK_OK)
		warnx("%s", gck_error_string(ctx));
	else
		printf("%s/%s\n", dir, name);
	free(name);
	gck_ctx_free(ctx);
	return r == GCK_OK ? 0 : 1;
}

/* Takes option ch of --series, with its argument arg, into sa. */
static void
series_opt(int ch, const char *arg, struct series *sa)
{
	switch (ch) {
	case 'D':
		sa->dir = arg;
		return;
	case 'e':
		if ((sa->every_ms = tool_seconds(arg, "interval",
		    7 * 86400)) == -1)
			usage(2);
		if (sa->every_ms == 0)
			errx(2, "the interval of --every must be more than 0");
		break;
	case 'M':
		sa->so.full_every = (unsigned int)tool_number(arg, 1, 1000,
		    "images in a chain");
		break;
	case 'n':
		sa->count = (unsigned int)tool_number(arg, 1, 1000000,
		    "snapshot count");
		break;
	case 'N':
		sa->so.keep = (unsigned int)tool_number(arg, 1, 999999,
		    "snapshots kept");
		break;
	}
	sa->set++;
}

/*
 * Checks the options of --series against the others: it takes the tree's
 * snapshot, left running, and names and chains its images itself.
 */
static void
series_check(const struct gck_ckpt_opts *o, const struct series *sa,
    int suspend, int output)
{
	if (sa->dir == NULL) {
		if (sa->set)
			errx(2, "--count, --every, --full-every and --keep "
			    "are for --series");
		return;
	}
	if (*sa->dir == '\0')
		errx(2, "--series needs a directory");
	if (suspend || output || o->parent != NULL ||
	    (o->after != GCK_AFTER_DEFAULT && o->after != GCK_AFTER_RUN))
		errx(2, "--series takes no -k, -o, --parent, -s or --suspend: "
		    "it leaves the tree running, and names and chains its "
		    "images itself");
	if (sa->count > 0 && sa->every_ms == 0)
		errx(2, "--count is for --every");
}

/*
 * An option that makes an image, ch with arg: 1 when it is one, taken
 * into a, else 0.
 */
static int
image_option(struct args *a, int ch, const char *arg)
{
	struct gck_ckpt_opts	*o = &a->o;

	switch (ch) {
	case 'c':
		if ((o->level = tool_compress(arg)) == -1)
			usage(2);
		break;
	case 'E':
		o->criu_opts |= GCK_CRIU_EXT_UNIX_SK;
		break;
	case 'F':
		o->criu_opts |= GCK_CRIU_FILE_LOCKS;
		break;
	case 'f':
		o->format = (int)tool_number(arg, 1, GCK_FORMAT_VERSION,
		    "image format");
		break;
	case 'G':
		o->ghost_limit = tool_size(arg, "--ghost-limit");
		break;
	case 'j':
		o->threads = (int)tool_number(arg, 1, 256, "thread count");
		break;
	case 'k':
	case 'R':
	case 's':
		if (a->after_set++) {
			warnx("--kill, --leave-running and --stop exclude each "
			    "other");
			usage(2);
		}
		o->after = ch == 'k' ? GCK_AFTER_KILL : ch == 'R' ?
		    GCK_AFTER_RUN : GCK_AFTER_STOP;
		break;
	case 'o':
		o->output = strcmp(arg, "-") == 0 ? NULL : arg;
		a->output = 1;
		break;
	case 'P':
		o->parent = arg;
		break;
	case 'K':
		o->sign = arg;
		break;
	case 'C':
	case 'T':
		if (o->criu_opts & (GCK_CRIU_TCP_CLOSE |
		    GCK_CRIU_TCP_ESTABLISHED) & ~(ch == 'C' ?
		    GCK_CRIU_TCP_CLOSE : GCK_CRIU_TCP_ESTABLISHED))
			tool_usage_error(synopsis, "--tcp-close and "
			    "--tcp-established exclude each other");
		o->criu_opts |= ch == 'C' ? GCK_CRIU_TCP_CLOSE :
		    GCK_CRIU_TCP_ESTABLISHED;
		break;
	case 'Z':
		if ((a->stats = tool_stats_form(arg)) == -1)
			usage(2);
		break;
	case 'X':
		o->cut_dir = arg;
		break;
	case 'Y':
		o->cut_size = (unsigned int)tool_number(arg, 2, 4096,
		    "cut size");
		break;
	case 'I':
		o->cut_name = arg;
		break;
	default:
		return 0;
	}
	a->image_opts++;
	return 1;
}

/*
 * Reads the command line into a and checks the options against each
 * other and the operands.
 */
static void
parse_args(struct args *a, int argc, char *argv[])
{
	struct gck_ckpt_opts	*o = &a->o;
	long			 ms;
	int			 ch;

	memset(a, 0, sizeof *a);
	a->sa.so.keep = GCK_SERIES_KEEP;
	a->sa.so.full_every = GCK_SERIES_FULL_EVERY;
	o->lock_ms = GCK_LOCK_TIMEOUT_MS;
	o->level = GCK_ZSTD_LEVEL;
	o->after = GCK_AFTER_DEFAULT;
	o->outfd = STDOUT_FILENO;
	/* ("+": the options of a command run by --launch are its own) */
	while ((ch = getopt_long(argc, argv, "+c:hko:p:qRsVv", longopts,
	    NULL)) != -1) {
		if (image_option(a, ch, optarg))
			continue;
		switch (ch) {
		case 'D':
		case 'e':
		case 'M':
		case 'n':
		case 'N':
			series_opt(ch, optarg, &a->sa);
			a->image_opts += ch == 'D';
			break;
		case 'h':
			usage(0);
		case 'g':
			o->gpu_staging = 1;
			break;
		case 'l':
			a->launch = 1;
			break;
		case 'L':
			if ((ms = tool_seconds(optarg, "lock timeout",
			    3600)) == -1)
				usage(2);
			o->lock_ms = (unsigned int)ms;
			break;
		case 'Q':
			if ((ms = tool_seconds(optarg, "NCCL timeout",
			    3600)) == -1 || ms == 0)
				usage(2);
			o->nccl_ms = (unsigned int)ms;
			break;
		case 'p':
			o->pid = tool_pid(optarg);
			break;
		case 'q':
			a->quiet = 1;
			break;
		case 'S':
			a->suspend = 1;
			break;
		case 'W':
			a->sa.now = 1;
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
	if (a->launch) {
		if (argc - optind == 0)
			tool_usage_error(synopsis, "--launch: no command given");
		if (o->pid != 0 || a->sa.dir != NULL || a->sa.set > 0 ||
		    a->image_opts > 0 || a->suspend || a->quiet ||
		    o->lock_ms != GCK_LOCK_TIMEOUT_MS || o->gpu_staging ||
		    o->nccl_ms != 0)
			tool_usage_error(synopsis, "--launch takes no other "
			    "option but -v: it runs a command");
		a->cmd = argv + optind;
		return;
	}
	if (argc - optind != 0)
		tool_usage_error(synopsis, "unexpected operand '%s': gpuckpt "
		    "takes none", argv[optind]);
	if (a->sa.now) {
		if (a->sa.dir == NULL || *a->sa.dir == '\0')
			tool_usage_error(synopsis, "--now is for --series DIR");
		if (o->pid != 0 || a->sa.set > 0 || a->image_opts > 1 ||
		    a->suspend || o->lock_ms != GCK_LOCK_TIMEOUT_MS ||
		    o->gpu_staging || o->nccl_ms != 0)
			tool_usage_error(synopsis, "--series DIR --now takes "
			    "no other option but -q and -v: it asks the "
			    "gpuckpt that writes DIR");
		return;
	}
	if (o->pid == 0)
		tool_usage_error(synopsis, "no process given: use -p PID");
	series_check(o, &a->sa, a->suspend, a->output);
	if ((o->cut_dir != NULL) != (o->cut_size > 0) ||
	    (o->cut_name != NULL && o->cut_dir == NULL))
		tool_usage_error(synopsis, "--cut DIR goes with --cut-size N, "
		    "--cut-name with both");
	if (o->cut_dir != NULL && (a->sa.dir != NULL || o->output == NULL))
		tool_usage_error(synopsis, "--cut writes one image to a file "
		    "(-o), not to a series or a stream");
	if (a->suspend && a->image_opts) {
		warnx("--suspend makes no image: it takes no -c, --format, -k, "
		    "-o, --parent, -R, -s, --sign, --stats or --threads, nor "
		    "criu options");
		usage(2);
	}
}

/*
 * Runs the command in this process under a job file of its own, as
 * cuda-checkpoint --launch-job does: the driver then checkpoints the
 * processes that come of it as one job.  Exits 126 or 127 as env(1)
 * does when the command cannot be run, 1 when no job file can be made.
 */
static _Noreturn void
launch(const struct args *a)
{
	struct gck_ctx	*ctx;
	char		 val[64];
	int		 fd;

	ctx = tool_ctx(a->verbose);
	if (gck_job_new(ctx, &fd, val, sizeof val) != GCK_OK)
		errx(1, "cannot launch '%s': %s", a->cmd[0],
		    gck_error_string(ctx));
	gck_ctx_free(ctx);
	if (setenv(GCK_JOB_ENV, val, 1) == -1)
		err(1, "cannot launch '%s': setenv", a->cmd[0]);
	if (a->verbose)
		warnx("running '%s' under job file %s", a->cmd[0], val);
	execvp(a->cmd[0], a->cmd);
	warn("cannot run '%s'", a->cmd[0]);
	_exit(errno == ENOENT ? 127 : 126);
}

/* The checkpoint of the tree into one image.  Returns the exit status. */
static int
checkpoint_tree(const struct args *a)
{
	struct gck_ckpt_result	 res;
	struct gck_ctx		*ctx;
	int			 r;

	if (a->o.output == NULL && isatty(STDOUT_FILENO))
		errx(1, "refusing to write an image to a terminal "
		    "(use -o FILE or a pipe)");

	tool_signals();
	ctx = tool_ctx(a->verbose);
	tool_progress(ctx, a->quiet);
	r = gck_checkpoint(ctx, &a->o, &res);
	tool_progress_clear();
	if (r != GCK_OK)
		warnx("%s", gck_error_string(ctx));
	else {
		if (!a->quiet)
			tool_tty_note(res.tty_pid, res.tty, res.tty_fd);
		if (!a->quiet && res.after == GCK_AFTER_HANDOVER)
			handover_note(a->o.pid, &res);
		if (a->stats)
			tool_stats(&res.stats, a->stats, TOOL_ST_MEMORY |
			    TOOL_ST_ZERO | TOOL_ST_FREEZE, NULL);
	}
	gck_ckpt_result_free(&res);
	gck_ctx_free(ctx);
	return r == GCK_OK ? 0 : 1;
}

int
main(int argc, char *argv[])
{
	struct args	a;

	parse_args(&a, argc, argv);
	if (a.launch)
		launch(&a);
	if (a.suspend)
		return suspend_tree(a.o.pid, a.o.lock_ms, a.o.gpu_staging,
		    a.verbose);
	if (a.sa.now)
		return series_request(a.sa.dir, a.verbose);
	if (a.sa.dir != NULL) {
		a.sa.quiet = a.quiet;
		a.sa.stats = a.stats;
		return series_run(&a.o, &a.sa, a.verbose);
	}
	return checkpoint_tree(&a);
}

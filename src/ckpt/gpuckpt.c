/*
 * gpuckpt: checkpoint a running process tree into an image stream.
 */
#include "config.h"

#include <sys/types.h>

#include <err.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compat.h"
#include "gpuckpt.h"
#include "tool.h"

static const struct option longopts[] = {
	{ "compress",		required_argument,	NULL,	'c' },
	{ "ext-unix-sk",	no_argument,		NULL,	'E' },
	{ "file-locks",		no_argument,		NULL,	'F' },
	{ "format",		required_argument,	NULL,	'f' },
	{ "help",		no_argument,		NULL,	'h' },
	{ "kill",		no_argument,		NULL,	'k' },
	{ "lock-timeout",	required_argument,	NULL,	'L' },
	{ "output",		required_argument,	NULL,	'o' },
	{ "parent",		required_argument,	NULL,	'P' },
	{ "pid",		required_argument,	NULL,	'p' },
	{ "quiet",		no_argument,		NULL,	'q' },
	{ "leave-running",	no_argument,		NULL,	'R' },
	{ "sign",		required_argument,	NULL,	'K' },
	{ "stats",		optional_argument,	NULL,	'Z' },
	{ "stop",		no_argument,		NULL,	's' },
	{ "suspend",		no_argument,		NULL,	'S' },
	{ "tcp-established",	no_argument,		NULL,	'T' },
	{ "threads",		required_argument,	NULL,	'j' },
	{ "version",		no_argument,		NULL,	'V' },
	{ "verbose",		no_argument,		NULL,	'v' },
	{ NULL,			0,			NULL,	0 }
};

static _Noreturn void
usage(int status)
{
	fprintf(status ? stderr : stdout,
	    "usage: %s [-hkqRsVv] [-c zstd[:LEVEL]|none] [--ext-unix-sk] "
	    "[--file-locks]\n"
	    "               [--format 1|2] [--lock-timeout seconds] "
	    "[-o file]\n"
	    "               [--parent image] [--sign key] "
	    "[--stats[=text|json]]\n"
	    "               [--tcp-established] [--threads n] -p pid\n"
	    "       %s --suspend [-v] [--lock-timeout seconds] -p pid\n",
	    getprogname(), getprogname());
	exit(status);
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
suspend_tree(pid_t pid, unsigned int lock_ms, int verbose)
{
	struct gck_ctx	*ctx;
	size_t		 n;
	int		 r;

	tool_signals();
	ctx = tool_ctx(verbose);
	if ((r = gck_suspend(ctx, pid, lock_ms, &n)) != GCK_OK)
		warnx("%s", gck_error_string(ctx));
	gck_ctx_free(ctx);
	return r == GCK_OK ? 0 : 1;
}

int
main(int argc, char *argv[])
{
	struct gck_ckpt_opts	 o;
	struct gck_ckpt_result	 res;
	struct gck_ctx		*ctx;
	int			 ch, verbose = 0, r, after_set = 0;
	int			 suspend = 0, image_opts = 0;
	int			 quiet = 0, stats = 0;
	long			 ms;

	memset(&o, 0, sizeof o);
	o.lock_ms = GCK_LOCK_TIMEOUT_MS;
	o.level = GCK_ZSTD_LEVEL;
	o.after = GCK_AFTER_DEFAULT;
	o.outfd = STDOUT_FILENO;
	while ((ch = getopt_long(argc, argv, "c:hko:p:qRsVv", longopts,
	    NULL)) != -1) {
		switch (ch) {
		case 'c':
			if ((o.level = tool_compress(optarg)) == -1)
				usage(2);
			image_opts++;
			break;
		case 'E':
			o.criu_opts |= GCK_CRIU_EXT_UNIX_SK;
			image_opts++;
			break;
		case 'F':
			o.criu_opts |= GCK_CRIU_FILE_LOCKS;
			image_opts++;
			break;
		case 'f':
			o.format = (int)tool_number(optarg, 1,
			    GCK_FORMAT_VERSION, "image format");
			image_opts++;
			break;
		case 'h':
			usage(0);
		case 'j':
			o.threads = (int)tool_number(optarg, 1, 256,
			    "thread count");
			image_opts++;
			break;
		case 'k':
		case 'R':
		case 's':
			if (after_set++) {
				warnx("--kill, --leave-running and --stop "
				    "exclude each other");
				usage(2);
			}
			o.after = ch == 'k' ? GCK_AFTER_KILL : ch == 'R' ?
			    GCK_AFTER_RUN : GCK_AFTER_STOP;
			image_opts++;
			break;
		case 'L':
			if ((ms = tool_seconds(optarg, "lock timeout",
			    3600)) == -1)
				usage(2);
			o.lock_ms = (unsigned int)ms;
			break;
		case 'o':
			o.output = strcmp(optarg, "-") == 0 ? NULL : optarg;
			image_opts++;
			break;
		case 'p':
			o.pid = tool_pid(optarg);
			break;
		case 'P':
			o.parent = optarg;
			image_opts++;
			break;
		case 'q':
			quiet = 1;
			break;
		case 'K':
			o.sign = optarg;
			image_opts++;
			break;
		case 'S':
			suspend = 1;
			break;
		case 'T':
			o.criu_opts |= GCK_CRIU_TCP_ESTABLISHED;
			image_opts++;
			break;
		case 'Z':
			if ((stats = tool_stats_form(optarg)) == -1)
				usage(2);
			image_opts++;
			break;
		case 'V':
			tool_version();
		case 'v':
			verbose++;
			break;
		default:
			usage(2);
		}
	}
	argc -= optind;
	argv += optind;
	if (argc != 0 || o.pid == 0)
		usage(2);
	if (suspend && image_opts) {
		warnx("--suspend makes no image: it takes no -c, --format, -k, "
		    "-o, --parent, -R, -s, --sign, --stats or --threads, nor "
		    "criu options");
		usage(2);
	}
	if (suspend)
		return suspend_tree(o.pid, o.lock_ms, verbose);
	if (o.output == NULL && isatty(STDOUT_FILENO))
		errx(1, "refusing to write an image to a terminal "
		    "(use -o FILE or a pipe)");

	tool_signals();
	ctx = tool_ctx(verbose);
	tool_progress(ctx, quiet);
	r = gck_checkpoint(ctx, &o, &res);
	tool_progress_clear();
	if (r != GCK_OK)
		warnx("%s", gck_error_string(ctx));
	else {
		if (!quiet)
			tool_tty_note(res.tty_pid, res.tty, res.tty_fd);
		if (!quiet && res.after == GCK_AFTER_HANDOVER)
			handover_note(o.pid, &res);
		if (stats)
			tool_stats(&res.stats, stats, TOOL_ST_MEMORY |
			    TOOL_ST_ZERO | TOOL_ST_FREEZE, NULL);
	}
	gck_ckpt_result_free(&res);
	gck_ctx_free(ctx);
	return r == GCK_OK ? 0 : 1;
}

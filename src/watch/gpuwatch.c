/*
 * gpuwatch: wait for a GPU health event that calls for action, and say
 * which.
 */
#include "config.h"

#include <err.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat.h"
#include "gpuckpt.h"
#include "tool.h"

#define XIDS_MAX	64
#define GPUS_MAX	64
#define EXIT_TIMEOUT	3

static const struct option longopts[] = {
	{ "events",	required_argument,	NULL,	'e' },
	{ "gpus",	required_argument,	NULL,	'i' },
	{ "help",	no_argument,		NULL,	'h' },
	{ "quiet",	no_argument,		NULL,	'q' },
	{ "timeout",	required_argument,	NULL,	't' },
	{ "verbose",	no_argument,		NULL,	'v' },
	{ "version",	no_argument,		NULL,	'V' },
	{ "xids",	required_argument,	NULL,	'x' },
	{ NULL,		0,			NULL,	0 }
};

static const char synopsis[] =
    "usage: gpuwatch [-hqVv] [-e events] [-i gpus] [-t seconds] [-x xids]\n";

static const char help[] =
    "Wait for a GPU health event that calls for action, print it as one "
    "line and\nexit 0.\n"
    "\n"
    "Options:\n"
    "  -e, --events=LIST        what to watch for, a comma list of xid, "
    "dbe, retire\n"
    "                           and clocks (xid,dbe,retire); a lost GPU "
    "always\n"
    "  -x, --xids=LIST          the Xid errors watched: numbers, or all "
    "(gpuwatch(1)\n"
    "                           lists the default)\n"
    "  -i, --gpus=LIST          the GPUs, by NVML index or UUID\n"
    "                           (CUDA_VISIBLE_DEVICES, else every GPU)\n"
    "  -t, --timeout=SECS       exit 3 if nothing came in SECS\n"
    "  -q, --quiet              print nothing on standard error but "
    "errors\n"
    TOOL_HELP_COMMON
    "\n"
    "Output: KIND UUID DATA fatal|degraded WHAT\n"
    "  xid GPU-5f0e... 79 fatal Xid 79: the GPU has fallen off the bus\n"
    "\n"
    "Examples:\n"
    "  gpuwatch -i 0,1\n"
    "  gpuwatch -e xid,dbe,retire,clocks -x all -t 60\n"
    "\n"
    "See gpuwatch(1).\n";

struct args {
	struct gck_health_opts	 o;
	char			*gpus[GPUS_MAX];
	char			*gpubuf;	/* CUDA_VISIBLE_DEVICES */
	unsigned int		 xids[XIDS_MAX];
	long			 timeout_ms;
	int			 verbose, quiet;
};

static _Noreturn void
usage(int status)
{
	tool_usage(status, synopsis, help);
}

/* Splits a comma list into its words, in place; returns how many. */
static size_t
split(char *s, char **words, size_t max, const char *what)
{
	size_t	n = 0;
	char	*w;

	while ((w = strsep(&s, ",")) != NULL) {
		if (*w == '\0')
			tool_usage_error(synopsis, "an empty name in %s", what);
		if (n == max)
			tool_usage_error(synopsis, "more than %zu in %s", max,
			    what);
		words[n++] = w;
	}
	return n;
}

static void
parse_events(struct args *a, char *list)
{
	char	*w[8];
	size_t	 n, i;

	a->o.events = 0;
	n = split(list, w, sizeof w / sizeof w[0], "--events");
	for (i = 0; i < n; i++) {
		if (strcmp(w[i], "xid") == 0)
			a->o.events |= GCK_HEALTH_XID;
		else if (strcmp(w[i], "dbe") == 0)
			a->o.events |= GCK_HEALTH_DBE;
		else if (strcmp(w[i], "retire") == 0)
			a->o.events |= GCK_HEALTH_RETIRE;
		else if (strcmp(w[i], "clocks") == 0)
			a->o.events |= GCK_HEALTH_CLOCKS;
		else if (strcmp(w[i], "lost") != 0)
			tool_usage_error(synopsis, "unknown event '%s': xid, "
			    "dbe, retire, clocks or lost", w[i]);
	}
	if (a->o.events == 0)
		tool_usage_error(synopsis, "--events names nothing to watch "
		    "but a lost GPU");
}

static void
parse_xids(struct args *a, char *list)
{
	char	*w[XIDS_MAX];
	size_t	 n, i;

	if (strcmp(list, "all") == 0) {
		a->o.all_xids = 1;
		return;
	}
	n = split(list, w, XIDS_MAX, "--xids");
	for (i = 0; i < n; i++)
		a->xids[i] = (unsigned int)tool_number(w[i], 1, 65535,
		    "an Xid");
	a->o.xids = a->xids;
	a->o.nxids = n;
}

static void
parse_args(struct args *a, int argc, char *argv[])
{
	char	*gpus = NULL;
	int	 ch, xids = 0;

	memset(a, 0, sizeof *a);
	a->o.events = GCK_HEALTH_DEFAULT;
	a->timeout_ms = -1;
	while ((ch = getopt_long(argc, argv, "e:hi:qt:Vvx:", longopts,
	    NULL)) != -1) {
		switch (ch) {
		case 'e':
			parse_events(a, optarg);
			break;
		case 'h':
			usage(0);
		case 'i':
			gpus = optarg;
			break;
		case 'q':
			a->quiet = 1;
			break;
		case 't':
			if ((a->timeout_ms = tool_seconds(optarg, "--timeout",
			    86400L * 365)) == -1)
				usage(2);
			break;
		case 'V':
			tool_version();
		case 'v':
			a->verbose++;
			break;
		case 'x':
			parse_xids(a, optarg);
			xids = 1;
			break;
		default:
			usage(2);
		}
	}
	if (optind < argc)
		tool_usage_error(synopsis, "no operand expected: '%s'",
		    argv[optind]);
	if (xids && !(a->o.events & GCK_HEALTH_XID))
		tool_usage_error(synopsis, "--xids goes with the xid event");
	if (gpus == NULL && (gpus = getenv("CUDA_VISIBLE_DEVICES")) != NULL &&
	    (gpus = a->gpubuf = strdup(gpus)) == NULL)
		errx(1, "out of memory");
	if (gpus != NULL && *gpus == '\0')
		errx(1, "no GPU to watch: CUDA_VISIBLE_DEVICES is empty");
	if (gpus != NULL) {
		a->o.ngpus = split(gpus, a->gpus, GPUS_MAX, "the GPUs");
		a->o.gpus = (const char *const *)a->gpus;
	}
}

int
main(int argc, char *argv[])
{
	struct gck_health_event	 ev;
	struct gck_health	*h;
	struct gck_ctx		*ctx;
	struct args		 a;
	size_t			 i;
	int			 r;

	parse_args(&a, argc, argv);
	tool_signals();
	ctx = tool_ctx(a.verbose);
	r = gck_health_open(ctx, &a.o, &h);
	free(a.gpubuf);
	if (r != GCK_OK)
		errx(1, "%s", gck_error_string(ctx));
	if (!a.quiet)
		for (i = 0; i < gck_health_count(h); i++)
			warnx("watching %s", gck_health_uuid(h, i));
	r = gck_health_wait(ctx, h, a.timeout_ms, &ev);
	gck_health_close(h);
	if (r == GCK_ETIMEDOUT) {
		if (!a.quiet)
			warnx("%s", gck_error_string(ctx));
		gck_ctx_free(ctx);
		return EXIT_TIMEOUT;
	}
	if (r == GCK_EINTR) {
		/* stopped, as a watcher is: die of the signal, silently */
		gck_ctx_free(ctx);
		signal((int)tool_signal, SIG_DFL);
		raise((int)tool_signal);
		return 1;
	}
	if (r != GCK_OK)
		errx(1, "%s", gck_error_string(ctx));
	gck_ctx_free(ctx);
	printf("%s %s %llu %s %s\n", ev.kind, ev.uuid, ev.data,
	    ev.fatal ? "fatal" : "degraded", ev.what);
	if (fflush(stdout) == EOF)
		err(1, "standard output");
	return 0;
}

/*
 * gpurecv: the receiving end that gpusend runs on the remote host, over
 * ssh: it stores or restores the image sent, and acknowledges.
 */
#include "config.h"

#include <sys/types.h>

#include <err.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compat.h"
#include "gpuckpt.h"
#include "tool.h"

static const struct option longopts[] = {
	{ "allowed-signers", required_argument,	NULL,	'A' },
	{ "cache",	required_argument,	NULL,	'C' },
	{ "cache-size",	required_argument,	NULL,	'S' },
	{ "gpu-map",	required_argument,	NULL,	'g' },
	{ "help",	no_argument,		NULL,	'h' },
	{ "id",		required_argument,	NULL,	'I' },
	{ "mount-map",	required_argument,	NULL,	'M' },
	{ "join",	required_argument,	NULL,	'j' },
	{ "name",	required_argument,	NULL,	'N' },
	{ "no-cache",	no_argument,		NULL,	'X' },
	{ "outcome",	required_argument,	NULL,	'O' },
	{ "pages",	no_argument,		NULL,	'P' },
	{ "restore",	no_argument,		NULL,	'R' },
	{ "resume",	no_argument,		NULL,	'z' },
	{ "root",	required_argument,	NULL,	'r' },
	{ "streams",	required_argument,	NULL,	'n' },
	{ "tcp-close",	no_argument,		NULL,	'T' },
	{ "timeout",	required_argument,	NULL,	't' },
	{ "to-cache",	no_argument,		NULL,	'K' },
	{ "version",	no_argument,		NULL,	'V' },
	{ "verbose",	no_argument,		NULL,	'v' },
	{ NULL,		0,			NULL,	0 }
};

/* What the command line asks for. */
struct args {
	struct gck_recv_opts	 o;
	char			**map;		/* --mount-map, in o too */
	int			 verbose;
	int			 modes;		/* the modes given */
};

static _Noreturn void	usage(int);
static void	parse_args(struct args *, int, char *[]);

static const char synopsis[] =
    "usage: gpurecv [-hVv] --restore [--allowed-signers file] "
    "[--cache dir | --no-cache]\n"
    "               [--cache-size size] [--gpu-map map] --id id "
    "[--mount-map at=dir]\n"
    "               [--pages] [--root dir] [--streams n] [--tcp-close] "
    "[--timeout seconds]\n"
    "       gpurecv [-hVv] [--name name] [--resume] --id id [--streams n] "
    "[--timeout seconds] path\n"
    "       gpurecv [-hVv] --to-cache [--cache dir] [--cache-size size] "
    "--id id\n"
    "               [--pages] [--streams n] [--timeout seconds]\n"
    "       gpurecv --join id\n"
    "       gpurecv --outcome id\n";

static const char help[] =
    "Receive what gpusend sends over SSH on standard input: restore it, "
    "store it at\npath, or add it to the cache.  gpusend runs it; people "
    "seldom do.\n"
    "\n"
    "Modes (default: store at path):\n"
    "      --restore            restore the image as it arrives\n"
    "      --to-cache           add the image to the cache\n"
    "      --join=ID            carry an extra connection of transfer ID\n"
    "      --outcome=ID         print what became of the hand-over ID\n"
    "\n"
    "Options:\n"
    "      --id=ID              the transfer this run receives (required)\n"
    "      --streams=N          the connections it comes over, 1 to 16 "
    "(1)\n"
    "      --timeout=SECS       give up after SECS without a word from "
    "gpusend (60)\n"
    "      --name=NAME          the file's name when path is a "
    "directory\n"
    "      --resume             offer what an interrupted store left at "
    "path\n"
    "      --allowed-signers=FILE  with --restore: only an image signed "
    "by a key\n"
    "                           of FILE\n"
    "      --cache=DIR          the cache ($GCK_CACHE, else "
    "~/.cache/gpuckpt,\n"
    "                           /var/cache/gpuckpt for root)\n"
    "      --cache-size=SIZE    the size the cache keeps to, K, M, G or T "
    "(a quarter\n"
    "                           of its file system)\n"
    "      --no-cache           with --restore: use no cache\n"
    "      --pages              offer the digests of the pages of the "
    "cache's chunks\n"
    "                           too\n"
    "      --gpu-map=MAP        with --restore: put the GPU state on these "
    "GPUs\n"
    "      --tcp-close          with --restore: restore the TCP "
    "connections closed\n"
    "      --root=DIR           with --restore: as gpurestore's\n"
    "      --mount-map=AT=DIR   with --restore: as gpurestore's; may be "
    "repeated\n"
    TOOL_HELP_COMMON
    "\n"
    "Examples:\n"
    "  ssh dst gpurecv --restore --id 1f2e3d <job.gck\n"
    "  ssh dst gpurecv --outcome 1f2e3d\n"
    "\n"
    "See gpurecv(1).\n";

static _Noreturn void
usage(int status)
{
	tool_usage(status, synopsis, help);
}

/* Reads the options into a, leaving the operands in argv[optind...]. */
static void
parse_args(struct args *a, int argc, char *argv[])
{
	struct gck_recv_opts	*o = &a->o;
	long			 ms;
	int			 ch;

	memset(a, 0, sizeof *a);
	o->mode = GCK_RECV_STORE;
	o->streams = 1;
	o->timeout_ms = GCK_SEND_TIMEOUT_MS;
	o->infd = STDIN_FILENO;
	o->outfd = STDOUT_FILENO;
	while ((ch = getopt_long(argc, argv, "hVv", longopts, NULL)) != -1) {
		switch (ch) {
		case 'A':
			o->allowed_signers = optarg;
			break;
		case 'C':
			if (*optarg == '\0') {
				warnx("empty --cache");
				usage(2);
			}
			o->cache = optarg;
			break;
		case 'g':
			o->gpu_map = optarg;
			break;
		case 'h':
			usage(0);
		case 'I':
			o->id = optarg;
			break;
		case 'M':
			tool_append(&a->map, &o->nmount_map, optarg);
			o->mount_map = a->map;
			break;
		case 'r':
			o->root = optarg;
			break;
		case 'j':
		case 'O':
			o->mode = ch == 'j' ? GCK_RECV_JOIN : GCK_RECV_OUTCOME;
			o->id = optarg;
			a->modes++;
			break;
		case 'N':
			o->name = optarg;
			break;
		case 'n':
			o->streams = (unsigned int)tool_number(optarg, 1,
			    GCK_STREAMS_MAX, "--streams");
			break;
		case 'S':
			o->cache_size = tool_size(optarg, "--cache-size");
			break;
		case 'X':
			o->cache = "";
			break;
		case 'P':
			o->pages = 1;
			break;
		case 'T':
			o->tcp_close = 1;
			break;
		case 'R':
		case 'K':
			o->mode = ch == 'R' ? GCK_RECV_RESTORE : GCK_RECV_CACHE;
			a->modes++;
			break;
		case 't':
			if ((ms = tool_seconds(optarg, "timeout", 86400)) == -1)
				usage(2);
			if (ms == 0)
				tool_usage_error(synopsis, "--timeout must be "
				    "more than 0");
			o->timeout_ms = (unsigned int)ms;
			break;
		case 'V':
			tool_version();
		case 'v':
			a->verbose++;
			break;
		case 'z':
			o->resume = 1;
			break;
		default:
			usage(2);
		}
	}
}

int
main(int argc, char *argv[])
{
	struct args		 a;
	struct gck_recv_opts	*o = &a.o;
	struct gck_recv_result	 res;
	struct gck_ctx		*ctx;
	int			 r;

	parse_args(&a, argc, argv);
	argc -= optind;
	argv += optind;
	if (a.modes > 1)
		tool_usage_error(synopsis, "--restore, --to-cache, --join and "
		    "--outcome exclude each other");
	if (o->id == NULL)
		tool_usage_error(synopsis, "--id is required");
	if (o->mode == GCK_RECV_STORE) {
		if (argc == 0)
			tool_usage_error(synopsis, "no path given: a store "
			    "needs the path to store at");
		if (argc > 1)
			tool_usage_error(synopsis, "unexpected operand '%s': "
			    "a store takes one path", argv[1]);
		o->path = argv[0];
	} else if (argc != 0)
		tool_usage_error(synopsis, "unexpected operand '%s': only a "
		    "store takes a path", argv[0]);
	if (o->mode != GCK_RECV_OUTCOME && isatty(STDIN_FILENO))
		errx(1, "standard input is a terminal: gpurecv is run by "
		    "gpusend(1), over ssh");

	tool_signals();
	ctx = tool_ctx(a.verbose);
	r = gck_recv(ctx, o, &res);
	if (r != GCK_OK)
		warnx("%s", gck_error_string(ctx));
	free(res.stored);
	free(a.map);
	gck_ctx_free(ctx);
	return r == GCK_OK ? 0 : 1;
}

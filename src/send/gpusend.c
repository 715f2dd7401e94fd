/*
 * gpusend: move an image, or migrate a live process tree, to another
 * host over ssh, with an acknowledged hand-over.
 */
#include "config.h"

#include <sys/types.h>

#include <err.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <jansson.h>

#include "compat.h"
#include "gpuckpt.h"
#include "tool.h"

static const struct option longopts[] = {
	{ "accept-new",		no_argument,		NULL,	'A' },
	{ "bwlimit",		required_argument,	NULL,	'B' },
	{ "cache",		required_argument,	NULL,	'C' },
	{ "cache-size",		required_argument,	NULL,	'S' },
	{ "compress",		required_argument,	NULL,	'c' },
	{ "ext-unix-sk",	no_argument,		NULL,	'E' },
	{ "file-locks",		no_argument,		NULL,	'F' },
	{ "ghost-limit",	required_argument,	NULL,	'G' },
	{ "gpu-map",		required_argument,	NULL,	'g' },
	{ "help",		no_argument,		NULL,	'h' },
	{ "identity",		required_argument,	NULL,	'i' },
	{ "live",		no_argument,		NULL,	'l' },
	{ "lock-timeout",	required_argument,	NULL,	'L' },
	{ "max-rounds",		required_argument,	NULL,	'm' },
	{ "mount-map",		required_argument,	NULL,	'M' },
	{ "no-cache",		no_argument,		NULL,	'X' },
	{ "parallel",		required_argument,	NULL,	'n' },
	{ "port",		required_argument,	NULL,	'P' },
	{ "pid",		required_argument,	NULL,	'p' },
	{ "quiet",		no_argument,		NULL,	'q' },
	{ "remote-path",	required_argument,	NULL,	'r' },
	{ "resume",		no_argument,		NULL,	'z' },
	{ "root",		required_argument,	NULL,	'R' },
	{ "sign",		required_argument,	NULL,	'K' },
	{ "stats",		optional_argument,	NULL,	's' },
	{ "tcp-close",		no_argument,		NULL,	'Y' },
	{ "tcp-established",	no_argument,		NULL,	'T' },
	{ "timeout",		required_argument,	NULL,	't' },
	{ "version",		no_argument,		NULL,	'V' },
	{ "verbose",		no_argument,		NULL,	'v' },
	{ NULL,			0,			NULL,	0 }
};

/* What the command line asks for. */
struct args {
	struct gck_send_opts	 o;
	const char		*user;
	int			 verbose;
	int			 image_opts;	/* options for a live tree */
	int			 restore_opts;	/* options for a restore */
	int			 stats;		/* --stats: TOOL_STATS_* */
	int			 quiet;		/* -q */
	int			 port_set, timeout_set;
	int			 rounds_set;	/* --max-rounds */
	char			**map;		/* -M, in o too */
};

static _Noreturn void	usage(int);
static void	parse_option(struct gck_send_opts *, char *, int *, int *);
static void	parse_dest(char *, const char **, const char **,
		    const char **);
static int	image_option(struct args *, int, const char *);
static int	cache_option(struct args *, int, const char *);
static void	parse_args(struct args *, int, char *[]);
static void	check_live(struct args *, int, char *[]);
static void	check_file(struct args *, int, char *[]);
static void	summary(const struct gck_send_opts *,
		    const struct gck_send_result *);
static void	stats(const struct gck_send_opts *,
		    const struct gck_send_result *, int);
static int	report(struct gck_ctx *, const struct args *,
		    struct gck_send_result *, int);

static const char synopsis[] =
    "usage: gpusend [-hqVv] [--accept-new] [-c zstd[:LEVEL]|none] "
    "[--cache dir | --no-cache]\n"
    "               [--cache-size size] [--ext-unix-sk] [--file-locks] "
    "[--ghost-limit size]\n"
    "               [--gpu-map map] [-i identity] [--live [--max-rounds n]] "
    "[--bwlimit rate]\n"
    "               [-M at=dir] [--root dir] [--stats[=text|json]]\n"
    "               [--lock-timeout seconds] [-o option=value] [-P port]\n"
    "               [--parallel n] [--remote-path command] [--sign key]\n"
    "               [--tcp-close] [--tcp-established] [--timeout seconds] "
    "-p pid [user@]host\n"
    "       gpusend [-hqVv] [--accept-new] [--cache dir | --no-cache] "
    "[--cache-size size]\n"
    "               [--bwlimit rate] [--gpu-map map] [-i identity] "
    "[-M at=dir]\n"
    "               [--root dir] [--stats[=text|json]] [--tcp-close]\n"
    "               [-o option=value] [-P port] [--parallel n] "
    "[--remote-path command]\n"
    "               [--resume] [--timeout seconds] "
    "file|- [user@]host[:path]\n";

static const char help[] =
    "Move a process tree (-p) or an image file to another host over "
    "SSH, where\ngpurecv restores it, or stores it at host:path.\n"
    "\n"
    "Connection:\n"
    "      --accept-new         accept a host key not yet known, as ssh "
    "does\n"
    "      --bwlimit=RATE       at most RATE bytes a second, K, M or G "
    "(no limit)\n"
    "  -i, --identity=FILE      authenticate with the private key FILE\n"
    "  -o OPTION=VALUE          an ssh_config option: Port, User, "
    "IdentityFile,\n"
    "                           IdentityAgent, UserKnownHostsFile,\n"
    "                           StrictHostKeyChecking, ConnectTimeout\n"
    "      --parallel=N         send over N connections, 1 to 16 (1)\n"
    "  -P, --port=PORT          the SSH port of host (22)\n"
    "      --remote-path=CMD    run CMD there as gpurecv (gpurecv)\n"
    "      --timeout=SECS       give up after SECS of silence (60)\n"
    "\n"
    "A live tree (-p):\n"
    "  -p, --pid=PID            checkpoint tree PID and restore it on "
    "host\n"
    "  -c, --compress=METHOD    zstd, zstd:1 to zstd:19 or none (zstd:3)\n"
    "      --live               move it in rounds while it runs\n"
    "      --max-rounds=N       with --live: at most N rounds, 1 to 1000 "
    "(8)\n"
    "      --lock-timeout=SECS  wait so long for each CUDA process's lock "
    "(10)\n"
    "      --sign=KEY           sign the image with the OpenSSH key KEY\n"
    "      --ext-unix-sk        criu: dump unix sockets connected "
    "outside the tree\n"
    "      --file-locks         criu: dump the file locks the tree holds\n"
    "      --ghost-limit=SIZE   criu: a deleted file the tree holds open "
    "goes into\n"
    "                           the image up to SIZE, K, M, G or T (1M)\n"
    "      --tcp-established    criu: dump established TCP connections\n"
    "\n"
    "The restore there:\n"
    "      --cache=DIR          the remote's cache of images ($GCK_CACHE "
    "there, else\n"
    "                           ~/.cache/gpuckpt, /var/cache/gpuckpt for "
    "root)\n"
    "      --cache-size=SIZE    the size that cache keeps to, K, M, G or "
    "T (a quarter\n"
    "                           of its file system)\n"
    "      --no-cache           use no cache there\n"
    "      --gpu-map=MAP        put the GPU state on these GPUs there\n"
    "  -M, --mount-map=AT=DIR   a job of a mount namespace of its own: "
    "its mount at\n"
    "                           AT is of DIR there; may be repeated\n"
    "      --root=DIR           a job of a mount namespace of its own: "
    "its root file\n"
    "                           system is DIR there\n"
    "      --tcp-close          restore its TCP connections closed there "
    "(their\n"
    "                           programs see them reset), not as they "
    "were;\n"
    "                           with -p, they end with the source\n"
    "\n"
    "A file:\n"
    "      --resume             continue an earlier store to host:path\n"
    "\n"
    "Output:\n"
    TOOL_HELP_QUIET_STATS
    TOOL_HELP_COMMON
    "\n"
    "Examples:\n"
    "  gpusend -p 1234 user@gpu2\n"
    "  gpusend job.gck gpu2:/srv/images/\n"
    "\n"
    "See gpusend(1).\n";

static _Noreturn void
usage(int status)
{
	tool_usage(status, synopsis, help);
}

/*
 * -o Name=value (or "Name value"), the ssh_config(5) names we honour.
 * The values stay in arg, which is cut in two.
 */
static void
parse_option(struct gck_send_opts *o, char *arg, int *port_set,
    int *timeout_set)
{
	char	*name = arg, *val;
	long	 ms;

	val = name + strcspn(name, "= \t");
	if (*val == '\0') {
		warnx("invalid option '%s': use -o name=value", arg);
		usage(2);
	}
	*val++ = '\0';
	val += strspn(val, "= \t");
	if (strcasecmp(name, "Port") == 0) {
		if (!*port_set)
			o->port = (int)tool_number(val, 1, 65535, "port");
		*port_set = 1;
	} else if (strcasecmp(name, "User") == 0) {
		if (o->user == NULL)
			o->user = val;
	} else if (strcasecmp(name, "IdentityFile") == 0) {
		if (o->identity == NULL)
			o->identity = val;
	} else if (strcasecmp(name, "UserKnownHostsFile") == 0)
		o->known_hosts = val;
	else if (strcasecmp(name, "IdentityAgent") == 0)
		o->agent = val;
	else if (strcasecmp(name, "StrictHostKeyChecking") == 0) {
		if (strcasecmp(val, "yes") == 0)
			o->accept_new = 0;
		else if (strcasecmp(val, "accept-new") == 0)
			o->accept_new = 1;
		else {
			warnx("StrictHostKeyChecking=%s is not supported: use "
			    "yes or accept-new", val);
			usage(2);
		}
	} else if (strcasecmp(name, "ConnectTimeout") == 0) {
		if ((ms = tool_seconds(val, "ConnectTimeout", 86400)) == -1)
			usage(2);
		if (ms == 0)
			tool_usage_error(synopsis, "ConnectTimeout must be more "
			    "than 0");
		o->timeout_ms = (unsigned int)ms;
		*timeout_set = 1;
	} else {
		warnx("unsupported option '%s': gpusend takes Port, User, "
		    "IdentityFile, IdentityAgent, UserKnownHostsFile, "
		    "StrictHostKeyChecking and ConnectTimeout", name);
		usage(2);
	}
}

/*
 * Splits [user@]host[:path] (host may be an [address]); *pathp is NULL
 * without a colon.
 */
static void
parse_dest(char *dest, const char **userp, const char **hostp,
    const char **pathp)
{
	char	*at, *host, *end;

	*pathp = NULL;
	host = dest;
	if ((at = strrchr(dest, '@')) != NULL &&
	    (strchr(dest, ':') == NULL || at < strchr(dest, ':'))) {
		*at = '\0';
		if (*dest == '\0') {
			warnx("invalid destination: empty user name");
			usage(2);
		}
		*userp = dest;
		host = at + 1;
	}
	if (*host == '[') {
		if ((end = strchr(host, ']')) == NULL) {
			warnx("invalid destination '%s': no ']'", host);
			usage(2);
		}
		*end = '\0';
		host++;
		if (end[1] == ':')
			*pathp = end + 2;
		else if (end[1] != '\0') {
			warnx("invalid destination: '%s' after ']'", end + 1);
			usage(2);
		}
	} else if ((end = strchr(host, ':')) != NULL) {
		*end = '\0';
		*pathp = end + 1;
	}
	if (*host == '\0') {
		warnx("invalid destination: no host");
		usage(2);
	}
	*hostp = host;
}

/*
 * An option of the image of a live tree (-p), ch with arg: 1 when it is
 * one, taken into a, else 0.
 */
static int
image_option(struct args *a, int ch, const char *arg)
{
	struct gck_send_opts	*o = &a->o;
	long			 ms;

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
	case 'G':
		o->ghost_limit = tool_size(arg, "--ghost-limit");
		break;
	case 'L':
		if ((ms = tool_seconds(arg, "lock timeout", 3600)) == -1)
			usage(2);
		o->lock_ms = (unsigned int)ms;
		break;
	case 'K':
		o->sign = arg;
		break;
	case 'l':
		o->live = 1;
		break;
	case 'm':
		o->max_rounds = (unsigned int)tool_number(arg, 1, 1000,
		    "--max-rounds");
		a->rounds_set = 1;
		break;
	case 'T':
		o->criu_opts |= GCK_CRIU_TCP_ESTABLISHED;
		break;
	default:
		return 0;
	}
	a->image_opts++;
	return 1;
}

/*
 * An option of the remote's cache, for a restore, ch with arg: 1 when
 * it is one, taken into a, else 0.
 */
static int
cache_option(struct args *a, int ch, const char *arg)
{
	struct gck_send_opts	*o = &a->o;

	switch (ch) {
	case 'C':
		if (*arg == '\0') {
			warnx("empty --cache");
			usage(2);
		}
		o->cache = arg;
		break;
	case 'S':
		o->cache_size = tool_size(arg, "--cache-size");
		break;
	case 'X':
		o->cache = "";
		break;
	default:
		return 0;
	}
	a->restore_opts++;
	return 1;
}

/* Reads the options into a, leaving the operands in argv[optind...]. */
static void
parse_args(struct args *a, int argc, char *argv[])
{
	struct gck_send_opts	*o = &a->o;
	long			 ms;
	int			 ch;

	memset(a, 0, sizeof *a);
	o->lock_ms = GCK_LOCK_TIMEOUT_MS;
	o->level = GCK_ZSTD_LEVEL;
	o->timeout_ms = GCK_SEND_TIMEOUT_MS;
	o->remote_path = "gpurecv";
	o->parallel = 1;
	o->infd = -1;
	while ((ch = getopt_long(argc, argv, "c:hi:M:o:P:p:qVv", longopts,
	    NULL)) != -1) {
		if (image_option(a, ch, optarg) || cache_option(a, ch, optarg))
			continue;
		switch (ch) {
		case 'A':
			o->accept_new = 1;
			break;
		case 'B':
			o->bwlimit = tool_size(optarg, "--bwlimit");
			if (o->bwlimit < 4096) {
				warnx("--bwlimit %s: at least 4096 bytes a "
				    "second", optarg);
				usage(2);
			}
			break;
		case 'q':
			a->quiet = 1;
			break;
		case 's':
			if ((a->stats = tool_stats_form(optarg)) == -1)
				usage(2);
			break;
		case 'g':
			o->gpu_map = optarg;
			break;
		case 'M':
			tool_append(&a->map, &o->nmount_map, optarg);
			o->mount_map = a->map;
			break;
		case 'R':
			o->root = optarg;
			break;
		case 'Y':
			o->tcp_close = 1;
			break;
		case 'h':
			usage(0);
		case 'i':
			o->identity = optarg;
			break;
		case 'n':
			o->parallel = (unsigned int)tool_number(optarg, 1,
			    GCK_STREAMS_MAX, "--parallel");
			break;
		case 'o':
			parse_option(o, optarg, &a->port_set, &a->timeout_set);
			break;
		case 'P':
			o->port = (int)tool_number(optarg, 1, 65535, "port");
			a->port_set = 1;
			break;
		case 'p':
			o->pid = tool_pid(optarg);
			break;
		case 'r':
			if (*optarg == '\0') {
				warnx("empty --remote-path");
				usage(2);
			}
			o->remote_path = optarg;
			break;
		case 't':
			if ((ms = tool_seconds(optarg, "timeout", 86400)) == -1)
				usage(2);
			if (ms == 0)
				tool_usage_error(synopsis, "--timeout must be "
				    "more than 0");
			o->timeout_ms = (unsigned int)ms;
			a->timeout_set = 1;
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

/* -p pid [user@]host: a live tree, restored there. */
static void
check_live(struct args *a, int argc, char *argv[])
{
	struct gck_send_opts	*o = &a->o;

	if (argc == 0)
		tool_usage_error(synopsis, "no destination host given");
	if (argc > 1)
		tool_usage_error(synopsis, "-p takes one operand, the host: "
		    "unexpected '%s'", argv[1]);
	parse_dest(argv[0], &a->user, &o->host, &o->path);
	if (o->path != NULL) {
		warnx("a live process tree is restored there, not stored: "
		    "drop ':%s'", o->path);
		usage(2);
	}
	if (o->resume) {
		warnx("--resume is for images sent from a file");
		usage(2);
	}
	if (a->rounds_set && !o->live) {
		warnx("--max-rounds is for --live");
		usage(2);
	}
	if (o->live && o->cache != NULL && *o->cache == '\0') {
		warnx("--live sends its rounds into the remote's cache: not "
		    "with --no-cache");
		usage(2);
	}
	/*
	 * Connections to be closed there are not frozen here either: criu
	 * dumps them closed, and they end with the source.
	 */
	if (o->tcp_close)
		o->criu_opts = (o->criu_opts & ~GCK_CRIU_TCP_ESTABLISHED) |
		    GCK_CRIU_TCP_CLOSE;
}

/* file|- [user@]host[:path]: an image, restored or stored there. */
static void
check_file(struct args *a, int argc, char *argv[])
{
	struct gck_send_opts	*o = &a->o;
	const char		*file;

	if (argc == 0)
		tool_usage_error(synopsis, "nothing to send given: use -p PID "
		    "host, or FILE host");
	if (argc == 1)
		tool_usage_error(synopsis, "no destination host given after "
		    "'%s'", argv[0]);
	if (argc > 2)
		tool_usage_error(synopsis, "unexpected operand '%s': give one "
		    "file and one host", argv[2]);
	if (a->image_opts) {
		warnx("-c, --live, --max-rounds, --lock-timeout, --sign and "
		    "the criu options are for a live tree (-p)");
		usage(2);
	}
	file = argv[0];
	parse_dest(argv[1], &a->user, &o->host, &o->path);
	if (o->resume && (o->path == NULL || strcmp(file, "-") == 0)) {
		warnx("--resume continues a file stored there: it needs a "
		    "file and host:path");
		usage(2);
	}
	if (o->path != NULL && o->gpu_map != NULL) {
		warnx("--gpu-map is for a restore, not host:path");
		usage(2);
	}
	if (o->path != NULL && o->tcp_close) {
		warnx("--tcp-close is for a restore, not host:path");
		usage(2);
	}
	if (o->path != NULL && (o->root != NULL || o->nmount_map > 0)) {
		warnx("--root and --mount-map are for a restore, not "
		    "host:path");
		usage(2);
	}
	if (o->path != NULL && a->restore_opts) {
		warnx("--cache, --cache-size and --no-cache are for a restore, "
		    "not host:path");
		usage(2);
	}
	if (strcmp(file, "-") != 0) {
		o->name = strrchr(file, '/') != NULL ? strrchr(file, '/') + 1 :
		    file;
		if (*o->name == '\0')
			errx(2, "'%s' names no file", file);
	}
	o->infd = tool_open_image(file, 1);
}

/* -v: what travelled, what the remote had, how long the tree stopped. */
static void
summary(const struct gck_send_opts *o, const struct gck_send_result *res)
{
	fprintf(stderr, "%s: sent %llu bytes of the image", getprogname(),
	    (unsigned long long)(res->bytes - res->skipped));
	if (res->skipped > 0)
		fprintf(stderr, " (%llu held there already)",
		    (unsigned long long)res->skipped);
	if (o->pid > 0)
		fprintf(stderr, "; %llu bytes of memory were in its cache; "
		    "process tree %d stopped for %.2f s%s", (unsigned long
		    long)res->cached, (int)o->pid, (double)res->stopped_ms /
		    1000, res->retried ? "; sent twice" : "");
	else
		fprintf(stderr, "; %llu bytes of memory were in its cache%s",
		    (unsigned long long)res->cached, res->retried ?
		    "; sent twice" : "");
	if (o->live)
		fprintf(stderr, "; before it, %u pre-copy round%s sent %llu "
		    "bytes (%s)", res->rounds, res->rounds == 1 ? "" : "s",
		    (unsigned long long)res->round_bytes, res->why != NULL ?
		    res->why : "none made");
	fputc('\n', stderr);
}

/*
 * --stats: the statistics of the send, then the same as summary() and
 * the remote root, on stderr.
 */
static void
stats(const struct gck_send_opts *o, const struct gck_send_result *res,
    int form)
{
	json_t	*j;

	if (o->path == NULL)
		j = json_pack("{s:i,s:I,s:i}", "pid", (int)res->pid, "cached",
		    (json_int_t)res->cached, "tries", res->retried ? 2 : 1);
	else
		j = json_pack("{s:s?}", "stored", res->stored);
	if (j == NULL || json_object_update_new(j, json_pack("{s:I,s:I,s:I}",
	    "bytes", (json_int_t)res->bytes, "sent", (json_int_t)(res->bytes -
	    res->skipped), "resumed", (json_int_t)res->skipped)) != 0 ||
	    (o->pid > 0 && json_object_update_new(j, json_pack("{s:I}",
	    "stopped_ms", (json_int_t)res->stopped_ms)) !=
	    0) || (o->live && json_object_update_new(j, json_pack("{s:i,"
	    "s:I,s:I,s:I,s:s?}", "rounds", (int)res->rounds, "round_bytes",
	    (json_int_t)res->round_bytes, "round_memory",
	    (json_int_t)res->round_memory, "last_round_memory",
	    (json_int_t)res->last_changed, "rounds_ended", res->why)) != 0))
		warnx("out of memory");
	else
		tool_stats(&res->stats, form, TOOL_ST_SENT | (o->pid > 0 ?
		    TOOL_ST_MEMORY | TOOL_ST_ZERO | TOOL_ST_FREEZE : 0), j);
	json_decref(j);
}

/* Says how gck_send() went, r its result.  Returns the exit status. */
static int
report(struct gck_ctx *ctx, const struct args *a, struct gck_send_result *res,
    int r)
{
	const struct gck_send_opts	*o = &a->o;

	switch (r) {
	case GCK_OK:
		if (!a->quiet)
			tool_tty_note(res->tty_pid, res->tty, res->tty_fd);
		if (a->verbose && o->path == NULL)
			summary(o, res);
		if (a->stats)
			stats(o, res, a->stats);
		if (o->path == NULL)
			printf("%d\n", (int)res->pid);
		else if (a->verbose)
			fprintf(stderr, "%s: stored %s:%s (%llu bytes, %llu "
			    "of them sent)\n", getprogname(), o->host,
			    res->stored != NULL ? res->stored : "?",
			    (unsigned long long)res->bytes,
			    (unsigned long long)(res->bytes - res->skipped));
		/* Done is done: the tree runs there, whatever stdout does. */
		if (fflush(stdout) == EOF)
			warn("the remote root PID %d could not be written",
			    (int)res->pid);
		return 0;
	case GCK_EDOUBT:
		warnx("%s", gck_error_string(ctx));
		return 3;
	default:
		warnx("%s", gck_error_string(ctx));
		return 1;
	}
}

int
main(int argc, char *argv[])
{
	struct args		 a;
	struct gck_send_result	 res;
	struct gck_ctx		*ctx;
	int			 r, status;

	parse_args(&a, argc, argv);
	argc -= optind;
	argv += optind;
	if (a.o.pid > 0)
		check_live(&a, argc, argv);
	else
		check_file(&a, argc, argv);
	if (a.user != NULL)
		a.o.user = a.user;
	a.o.verbose = a.verbose > 0;

	tool_signals();
	ctx = tool_ctx(a.verbose);
	tool_progress(ctx, a.quiet);
	r = gck_send(ctx, &a.o, &res);
	tool_progress_clear();
	status = report(ctx, &a, &res, r);
	free(res.stored);
	free(a.map);
	gck_ctx_free(ctx);
	return status;
}

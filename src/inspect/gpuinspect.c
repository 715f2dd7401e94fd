/*
 * gpuinspect: show, verify, diff and extract images.
 */
#include "config.h"

#include <sys/stat.h>
#include <sys/types.h>

#include <err.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "compat.h"
#include "gpuckpt.h"
#include "tool.h"

enum mode { SHOW, VERIFY, DIFF, EXTRACT, FLATTEN, CHECK };

static const struct option longopts[] = {
	{ "allowed-signers", required_argument,	NULL,	'S' },
	{ "check",	no_argument,		NULL,	'C' },
	{ "diff",	no_argument,		NULL,	'd' },
	{ "env",	no_argument,		NULL,	'E' },
	{ "extract",	required_argument,	NULL,	'x' },
	{ "files",	no_argument,		NULL,	'L' },
	{ "flatten",	required_argument,	NULL,	'F' },
	{ "help",	no_argument,		NULL,	'h' },
	{ "json",	no_argument,		NULL,	'j' },
	{ "parent",	required_argument,	NULL,	'A' },
	{ "sockets",	no_argument,		NULL,	'O' },
	{ "verbose",	no_argument,		NULL,	'v' },
	{ "verify",	no_argument,		NULL,	't' },
	{ "version",	no_argument,		NULL,	'V' },
	{ NULL,		0,			NULL,	0 }
};

/* What the command line asks for. */
struct args {
	enum mode	 mode;
	const char	*dir;		/* of -x or --flatten */
	const char	*allowed;	/* --allowed-signers */
	char		**parents;	/* --parent */
	size_t		 nparents;
	int		 verbose;
	int		 json;		/* -j */
	int		 files, sockets, env;	/* --files, --sockets, --env */
	int		 nmode;		/* how many modes are given */
	int		 isdir;		/* the operand is a directory */
};

static _Noreturn void	usage(int);
static const char	*size_str(json_t *, char *, size_t);
static const char	*safe(const char *);
static const char	*str(json_t *, const char *);
static const char	*dash(json_t *, const char *);
static void		 print_show(const char *, json_t *,
			    const struct args *);
static void		 show_image(const char *, json_t *);
static void		 show_source(json_t *);
static void		 show_mounts(json_t *);
static void		 show_procs(json_t *);
static void		 show_gpus(json_t *);
static void		 show_open(json_t *);
static void		 show_files(json_t *);
static void		 show_sockets(json_t *);
static void		 show_pipes(json_t *);
static void		 show_env(json_t *);
static int		 check(struct gck_ctx *, int, int, int *);
static void		 print_diff(json_t *, int);
static void		 print_mounts_diff(json_t *);
static void		 print_tree(json_t *, json_t *, json_t *, size_t, int);
static char		*cmdline_str(json_t *);
static int		 verify(struct gck_ctx *, int, char **, size_t,
			    const char *);
static void		 print_series(json_t *, int);
static int		 series(struct gck_ctx *, const char *, enum mode, int);
static _Noreturn void	 series_main(struct gck_ctx *, const char *, enum mode,
			    int, int);
static void		 parse_args(struct args *, int, char *[]);
static void		 check_args(struct args *, int, char *[]);
static int		 image_main(struct gck_ctx *, struct args *, int,
			    char *[]);

static const char synopsis[] =
    "usage: gpuinspect [-jVv] [--env] [--files] [--sockets] [file | dir | -]\n"
    "       gpuinspect --check [-j] [file | -]\n"
    "       gpuinspect -t [-v] [--allowed-signers file] [--parent path] "
    "[file | -]\n"
    "       gpuinspect -t [-jv] dir\n"
    "       gpuinspect -d [-jv] file1 file2\n"
    "       gpuinspect -x dir [-v] [file | -]\n"
    "       gpuinspect --flatten out [-v] --parent path [file | -]\n";

static const char help[] =
    "Show, verify, compare, extract or flatten gpuckpt images and "
    "snapshot series\n(default: show a summary of the image or "
    "series).\n"
    "\n"
    "Modes:\n"
    "  -t, --verify             check every entry against its checksum\n"
    "  -d, --diff               compare two images\n"
    "  -x, --extract=DIR        write the image's entries into DIR\n"
    "      --flatten=OUT        write an incremental image as a full "
    "one, OUT\n"
    "      --check              say what a restore here would miss; "
    "exit 1 if it\n"
    "                           would fail\n"
    "\n"
    "Options:\n"
    "  -j, --json               print the report as JSON\n"
    "      --files              with the summary: list the open files, "
    "cwd and root\n"
    "      --sockets            with the summary: list the sockets and "
    "pipes\n"
    "      --env                with the summary: show the environments "
    "(secrets too)\n"
    "      --parent=PATH        with -t or --flatten: where the parent "
    "images are\n"
    "                           (beside the image); may be repeated\n"
    "      --allowed-signers=FILE  with -t: require a signature by a key "
    "of FILE\n"
    TOOL_HELP_COMMON
    "\n"
    "Examples:\n"
    "  gpuinspect -t job.gck\n"
    "  gpuinspect --check job.gck\n"
    "  gpuinspect -d -j old.gck new.gck\n"
    "\n"
    "See gpuinspect(1).\n";

static _Noreturn void
usage(int status)
{
	tool_usage(status, synopsis, help);
}

/* A size in bytes, as "1.5 GiB"; "-" when it is not known. */
static const char *
size_str(json_t *v, char *buf, size_t len)
{
	static const char *unit[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	double	 d;
	size_t	 u = 0;

	if (!json_is_integer(v) || json_integer_value(v) < 0) {
		snprintf(buf, len, "-");
		return buf;
	}
	d = (double)json_integer_value(v);
	while (d >= 1024 && u < sizeof unit / sizeof unit[0] - 1) {
		d /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%.0f B", d);
	else
		snprintf(buf, len, "%.1f %s", d, unit[u]);
	return buf;
}

/*
 * s as it may be shown on a terminal: control characters as '?', cut
 * at 1000 bytes.  Valid until eight more calls.
 */
static const char *
safe(const char *s)
{
	static char	 buf[8][1024];
	static int	 next;
	char		*b = buf[next++ % 8];
	size_t		 i;

	for (i = 0; s[i] != '\0' && i < 1000; i++)
		b[i] = (unsigned char)s[i] < 32 || s[i] == 127 ? '?' : s[i];
	b[i] = '\0';
	return b;
}

/* Member k of o if it is a string, made safe to show, else "?". */
static const char *
str(json_t *o, const char *k)
{
	json_t	*v = json_object_get(o, k);

	return json_is_string(v) ? safe(json_string_value(v)) : "?";
}

static json_int_t
num(json_t *o, const char *k)
{
	json_t	*v = json_object_get(o, k);

	return json_is_integer(v) ? json_integer_value(v) : -1;
}

/* A command line, its arguments separated by spaces; never NULL. */
static char *
cmdline_str(json_t *a)
{
	json_t	*v;
	char	*s = NULL, *t;
	size_t	 i;

	json_array_foreach(a, i, v) {
		if (!json_is_string(v))
			continue;
		if (asprintf(&t, "%s%s%s", s != NULL ? s : "", s != NULL ?
		    " " : "", json_string_value(v)) == -1)
			err(1, "asprintf");
		free(s);
		s = t;
	}
	if (s == NULL && (s = strdup("")) == NULL)
		err(1, "strdup");
	/* one line: control characters shown as '?' */
	for (t = s; *t != '\0'; t++)
		if ((unsigned char)*t < 32 || *t == 127)
			*t = '?';
	return s;
}

/*
 * Prints process i of procs, then its children (kids: the indexes of
 * the children of each PID), depth levels in.
 */
static void
print_tree(json_t *procs, json_t *kids, json_t *done, size_t i, int depth)
{
	json_t		*p, *m, *g, *q, *gt;
	char		 key[32];
	json_int_t	 pid, gm;
	char		 b[5][32], pidcol[32], *cl;
	size_t		 j;
	int		 gknown;

	p = json_array_get(procs, i);
	json_array_set_new(done, i, json_true());
	pid = num(p, "pid");
	m = json_object_get(p, "memory");
	gm = 0;
	gknown = 1;
	json_array_foreach(json_object_get(p, "gpus"), j, g) {
		if (num(g, "memory") < 0)
			gknown = 0;
		else
			gm += num(g, "memory");
	}
	gt = json_integer(gm);
	snprintf(pidcol, sizeof pidcol, "%*s%lld", depth > 8 ? 16 : depth * 2,
	    "", (long long)pid);
	cl = cmdline_str(json_object_get(p, "cmdline"));
	printf("%-10s %7lld %7lld %10s %10s %10s %10s %10s  %s\n",
	    pidcol, (long long)num(p, "ppid"), (long long)num(p, "threads"),
	    size_str(json_object_get(m, "vm_rss"), b[0], sizeof b[0]),
	    size_str(json_object_get(m, "rss_anon"), b[1], sizeof b[1]),
	    size_str(json_object_get(m, "rss_file"), b[2], sizeof b[2]),
	    size_str(json_object_get(m, "rss_shmem"), b[3], sizeof b[3]),
	    json_array_size(json_object_get(p, "gpus")) == 0 ? "-" :
	    gknown ? size_str(gt, b[4], sizeof b[4]) : "?",
	    *cl != '\0' ? cl : str(p, "comm"));
	free(cl);
	json_decref(gt);
	/* (deeper ones are printed afterwards, from the left) */
	snprintf(key, sizeof key, "%lld", (long long)pid);
	json_array_foreach(json_object_get(kids, key), j, q) {
		size_t	k = (size_t)json_integer_value(q);

		if (depth < 256 && !json_is_true(json_array_get(done, k)))
			print_tree(procs, kids, done, k, depth + 1);
	}
}

/*
 * gpuinspect file: what the image is, where from, its processes and GPUs;
 * with -v, --files or --sockets, what they have open; with --env, their
 * environments.
 */
static void
print_show(const char *name, json_t *d, const struct args *a)
{
	show_image(name, d);
	show_source(d);
	show_open(d);
	show_mounts(d);
	show_procs(d);
	show_gpus(d);
	if (a->verbose || a->files)
		show_files(d);
	if (a->verbose || a->sockets) {
		show_sockets(d);
		show_pipes(d);
	}
	if (a->env)
		show_env(d);
}

/* The image itself: its name, date, id, kind, parents and signature. */
static void
show_image(const char *name, json_t *d)
{
	json_t	*img = json_object_get(d, "image");
	char	 b[2][32];

	printf("image       %s\n", name);
	if (!json_is_true(json_object_get(d, "verified")))
		printf("verified    no: only the head, up to the memory, was "
		    "read; check the rest with gpuinspect --verify\n");
	printf("created     %s by %s, format %lld\n", str(d, "created"),
	    str(d, "tool"), (long long)num(img, "format"));
	if (json_is_string(json_object_get(img, "id")))
		printf("id          %s\n", str(img, "id"));
	if (strcmp(str(img, "kind"), "chunks") == 0)
		printf("kind        chunks of memory only, sent ahead of a "
		    "live migration: nothing to restore\n");
	if (json_is_string(json_object_get(img, "parent")))
		printf("parent      %s (a chain of %zu)\n", str(img, "parent"),
		    json_array_size(json_object_get(img, "chain")));
	if (json_is_string(json_object_get(img, "parent")) &&
	    json_is_integer(json_object_get(img, "referenced_bytes")))
		printf("new         %s stored, %s in its parents\n",
		    size_str(json_object_get(img, "stored_bytes"), b[0],
		    sizeof b[0]), size_str(json_object_get(img,
		    "referenced_bytes"), b[1], sizeof b[1]));
	if (json_is_object(json_object_get(img, "signature")))
		printf("signed      by %s key %s (not checked: gpuinspect "
		    "--verify checks it)\n", str(json_object_get(img,
		    "signature"), "key"), str(json_object_get(img,
		    "signature"), "fingerprint"));
}

/*
 * Where the image comes from and how it was made: host, versions,
 * options, sizes and the totals of its processes.
 */
static void
show_source(json_t *d)
{
	json_t		*img = json_object_get(d, "image"), *h, *o, *c, *p;
	json_t		*t = json_object_get(d, "totals");
	json_t		*cr = json_object_get(d, "criu");
	char		 b[4][32];
	size_t		 i;

	h = json_object_get(d, "host");
	o = json_object_get(d, "options");
	c = json_object_get(d, "cuda");
	printf("source      %s: Linux %s %s\n", str(h, "hostname"),
	    str(h, "kernel"), str(h, "arch"));
	printf("versions    criu %s", str(cr, "version"));
	if (json_is_object(c))
		printf(", CUDA driver %s (CUDA %s)", json_is_string(
		    json_object_get(c, "driver")) ? str(c, "driver") :
		    "release unknown", str(c, "cuda_version"));
	else
		printf(", no CUDA");
	printf("\n");
	if (json_is_object(c) && json_is_object(p = json_object_get(c,
	    "job")))
		printf("job         its CUDA processes one job (gpuckpt "
		    "--launch), its file descriptor %lld of process %lld\n",
		    (long long)num(p, "fd"), (long long)num(p, "holder"));
	if (json_is_object(c) && json_is_object(p = json_object_get(c,
	    "nccl")))
		printf("nccl        %lld NCCL ranks, quiesced and their "
		    "communicators torn down (libgpuckpt-nccl.so): rebuilt at "
		    "the restore\n", (long long)num(p, "ranks"));
	if (strcmp(str(o, "compress"), "zstd") == 0)
		printf("options     zstd level %lld", (long long)num(o, "level"));
	else
		printf("options     %s", str(o, "compress"));
	printf(", after the checkpoint: %s, part size %s", str(o, "after"),
	    size_str(json_object_get(img, "part_size"), b[0], sizeof b[0]));
	if (json_is_integer(json_object_get(img, "chunk_size")))
		printf(", chunks %s", size_str(json_object_get(img,
		    "chunk_size"), b[0], sizeof b[0]));
	printf("\n");
	if (json_array_size(json_object_get(cr, "options")) > 0) {
		printf("criu       ");
		json_array_foreach(json_object_get(cr, "options"), i, p)
			printf(" --%s", json_string_value(p));
		printf("\n");
	}
	printf("size        %s on disk, %s of CRIU data (%s memory pages)",
	    size_str(json_object_get(img, "size"), b[0], sizeof b[0]),
	    size_str(json_object_get(img, "data_size"), b[1], sizeof b[1]),
	    size_str(json_object_get(img, "memory_size"), b[2], sizeof b[2]));
	if (json_is_number(json_object_get(img, "ratio")))
		printf(", ratio %.2fx", json_number_value(json_object_get(img,
		    "ratio")));
	printf("\n");
	printf("processes   %lld, threads %lld, root %lld%s\n",
	    (long long)num(t, "processes"), (long long)num(t, "threads"),
	    (long long)num(d, "root_pid"),
	    json_is_true(json_object_get(d, "shell_job")) ? ", shell job" : "");
	printf("memory      %s resident: %s anonymous, %s file, %s shared\n",
	    size_str(json_object_get(t, "vm_rss"), b[0], sizeof b[0]),
	    size_str(json_object_get(t, "rss_anon"), b[1], sizeof b[1]),
	    size_str(json_object_get(t, "rss_file"), b[2], sizeof b[2]),
	    size_str(json_object_get(t, "rss_shmem"), b[3], sizeof b[3]));
}

/*
 * A tree of a mount namespace of its own: its root file system, the
 * mounts it had from its host and its files outside the namespace.
 */
static void
show_mounts(json_t *d)
{
	json_t	*m = json_object_get(d, "mounts"), *e;
	size_t	 i;

	if (!json_is_object(m))
		return;
	printf("root        %s (a mount namespace of its own)\n",
	    str(m, "root"));
	json_array_foreach(json_object_get(m, "binds"), i, e)
		printf("mount       %s from %s (%s)\n", str(e, "at"),
		    str(e, "source"), str(e, "fstype"));
	json_array_foreach(json_object_get(m, "files"), i, e)
		printf("outside     %s on fd %lld of process %lld\n",
		    str(e, "path"), (long long)num(e, "fd"),
		    (long long)num(e, "pid"));
}

/* The table of the processes, as a tree from the root. */
static void
show_procs(json_t *d)
{
	json_t		*procs, *done, *p, *kids, *k;
	size_t		 i;

	printf("\n%-10s %7s %7s %10s %10s %10s %10s %10s  %s\n", "PID", "PPID",
	    "THREADS", "RSS", "ANON", "FILE", "SHARED", "GPU MEM", "COMMAND");
	procs = json_object_get(d, "processes");
	if ((done = json_array()) == NULL || (kids = json_object()) == NULL)
		err(1, "json");
	json_array_foreach(procs, i, p) {
		char	key[32];

		json_array_append_new(done, json_false());
		snprintf(key, sizeof key, "%lld", (long long)num(p, "ppid"));
		if ((k = json_object_get(kids, key)) == NULL) {
			k = json_array();
			json_object_set_new(kids, key, k);
		}
		json_array_append_new(k, json_integer((json_int_t)i));
	}
	/* the root and its descendants, then any other process */
	json_array_foreach(procs, i, p)
		if (num(p, "pid") == num(d, "root_pid"))
			print_tree(procs, kids, done, i, 0);
	json_array_foreach(procs, i, p)
		if (!json_is_true(json_array_get(done, i)))
			print_tree(procs, kids, done, i, 0);
	json_decref(kids);
	json_decref(done);
}

/* The table of the GPUs, each with the processes that use it. */
static void
show_gpus(json_t *d)
{
	json_t		*c = json_object_get(d, "cuda"), *procs, *g, *p, *pg;
	char		 b[32];
	size_t		 i, j, l;

	if (!json_is_object(c))
		return;
	procs = json_object_get(d, "processes");
	printf("\n%-6s %-40s %-28s %4s %10s\n", "GPU", "UUID", "NAME", "CC",
	    "MEMORY");
	json_array_foreach(json_object_get(c, "gpus"), i, g) {
		printf("%-6lld %-40s %-28s %4s %10s\n",
		    (long long)num(g, "index"), str(g, "uuid"), str(g, "name"),
		    str(g, "compute_capability"),
		    size_str(json_object_get(g, "memory"), b, sizeof b));
		json_array_foreach(procs, j, p)
			json_array_foreach(json_object_get(p, "gpus"), l, pg)
				if (strcmp(str(pg, "uuid"), str(g, "uuid")) ==
				    0)
					printf("       pid %lld (%s): %s, "
					    "%s\n", (long long)num(p, "pid"),
					    str(p, "comm"), size_str(
					    json_object_get(pg, "memory"),
					    b, sizeof b), strcmp(str(pg,
					    "storage"), "custom") == 0 ?
					    "custom storage" : "host memory");
	}
}

/* The descriptors member of d, or NULL (said) when it is not known. */
static json_t *
descriptors(json_t *d, const char *title)
{
	json_t	*o = json_object_get(d, "descriptors");

	if (json_is_object(o))
		return o;
	if (title != NULL)
		printf("\n%s\nnot known: %s\n", title, json_is_string(
		    json_object_get(d, "descriptors_error")) ?
		    str(d, "descriptors_error") : "the image does not list "
		    "its processes");
	return NULL;
}

/* One line: how many files, sockets and pipes the processes have open. */
static void
show_open(json_t *d)
{
	json_t	*o, *t, *mn;

	if ((o = descriptors(d, NULL)) == NULL) {
		printf("open        not known: %s\n", json_is_string(
		    json_object_get(d, "descriptors_error")) ?
		    str(d, "descriptors_error") : "the image does not list "
		    "its processes");
		return;
	}
	t = json_object_get(o, "totals");
	mn = json_object_get(json_object_get(o, "mount_namespace"), "own");
	printf("open        %lld file%s, %lld socket%s, %lld pipe%s; %lld "
	    "file%s mapped; mount namespace %s\n", (long long)num(t, "files"),
	    num(t, "files") == 1 ? "" : "s", (long long)num(t, "sockets"),
	    num(t, "sockets") == 1 ? "" : "s", (long long)num(t, "pipes"),
	    num(t, "pipes") == 1 ? "" : "s", (long long)num(t,
	    "mapped_files"), num(t, "mapped_files") == 1 ? "" : "s",
	    json_is_true(mn) ? "of its own" : json_is_false(mn) ?
	    "the host's" : "not known");
}

/* What a restore needs of a file f: "same size", "exists", "in image". */
static const char *
restore_need(json_t *f)
{
	if (json_is_true(json_object_get(f, "ghost")))
		return "in image";
	if (json_is_true(json_object_get(f, "same_size")))
		return "same size";
	if (json_is_true(json_object_get(f, "must_exist")))
		return "exists";
	return "-";
}

/* A number of f, or "-". */
static const char *
num_str(json_t *f, const char *k, char *buf, size_t len)
{
	if (!json_is_integer(json_object_get(f, k)))
		return "-";
	snprintf(buf, len, "%lld", (long long)num(f, k));
	return buf;
}

/* The file of path in the files list, for what a restore needs of it. */
static json_t *
file_of(json_t *o, const char *path)
{
	json_t	*f;
	size_t	 i;

	if (path == NULL)
		return NULL;
	json_array_foreach(json_object_get(o, "files"), i, f)
		if (json_is_string(json_object_get(f, "path")) &&
		    strcmp(json_string_value(json_object_get(f, "path")),
		    path) == 0)
			return f;
	return NULL;
}

/* A row of the files table. */
static void
file_row(const char *pid, const char *fd, const char *mode, json_t *f,
    json_t *pos, json_t *path)
{
	char	b[2][32];

	printf("%-8s %4s %-4s %12s %12s  %-9s  %s\n", pid, fd, mode,
	    num_str(f, "size", b[0], sizeof b[0]), json_is_integer(pos) ?
	    (snprintf(b[1], sizeof b[1], "%lld", (long long)
	    json_integer_value(pos)), b[1]) : "-", f != NULL ?
	    restore_need(f) : "-", json_is_string(path) ?
	    safe(json_string_value(path)) : "?");
}

/* Member k of o, a string, or NULL. */
static const char *
sval(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

/*
 * The files table, as lsof has it: per process its working and root
 * directories (cwd, rtd) and its descriptors on files; then the files
 * that only mappings name (mem).
 */
static void
show_files(json_t *d)
{
	json_t	*o, *p, *f;
	char	 pid[24], fd[24], mode[8];
	size_t	 i, j;

	if ((o = descriptors(d, "FILES")) == NULL)
		return;
	printf("\n%-8s %4s %-4s %12s %12s  %-9s  %s\n", "PID", "FD", "MODE",
	    "SIZE", "OFFSET", "RESTORE", "PATH");
	json_array_foreach(json_object_get(o, "processes"), i, p) {
		snprintf(pid, sizeof pid, "%lld", (long long)num(p, "pid"));
		if (json_is_string(json_object_get(p, "cwd")))
			file_row(pid, "cwd", "-", file_of(o, sval(p, "cwd")),
			    NULL, json_object_get(p, "cwd"));
		if (json_is_string(json_object_get(p, "root")))
			file_row(pid, "rtd", "-", file_of(o, sval(p, "root")),
			    NULL, json_object_get(p, "root"));
		json_array_foreach(json_object_get(p, "fds"), j, f) {
			if (strcmp(str(f, "type"), "file") != 0)
				continue;
			snprintf(fd, sizeof fd, "%lld", (long long)num(f,
			    "fd"));
			snprintf(mode, sizeof mode, "%s%s", str(f, "mode"),
			    json_is_true(json_object_get(f, "append")) ?
			    "a" : "");
			file_row(pid, fd, mode, file_of(o, sval(f, "path")),
			    json_object_get(f, "pos"), json_object_get(f,
			    "path"));
		}
	}
	json_array_foreach(json_object_get(o, "files"), i, f)
		if (json_is_true(json_object_get(f, "mapped")))
			file_row("-", "mem", "-", f, NULL, json_object_get(f,
			    "path"));
}

/* Member k of o if it is a string, made safe to show, else "-". */
static const char *
dash(json_t *o, const char *k)
{
	return json_is_string(json_object_get(o, k)) ? str(o, k) : "-";
}

/*
 * The sockets table: family, type, protocol, state, the other end and
 * the address (an inet socket's own, then its peer's where connected).
 */
static void
show_sockets(json_t *d)
{
	json_t		*o, *p, *f;
	const char	*t, *a;
	size_t		 i, j;

	if ((o = descriptors(d, "SOCKETS")) == NULL)
		return;
	printf("\n%-8s %4s %-6s %-9s %-7s %-11s %-12s %s\n", "PID", "FD",
	    "FAMILY", "TYPE", "PROTO", "STATE", "PEER", "ADDRESS");
	json_array_foreach(json_object_get(o, "processes"), i, p)
		json_array_foreach(json_object_get(p, "fds"), j, f) {
			t = str(f, "type");
			if (strcmp(t, "unix") != 0 && strcmp(t, "inet") != 0 &&
			    strcmp(t, "packet") != 0 &&
			    strcmp(t, "netlink") != 0)
				continue;
			if (json_is_string(json_object_get(f, "address")))
				a = str(f, "address");
			else
				a = strcmp(t, "unix") == 0 ? "(unnamed)" :
				    strcmp(t, "inet") == 0 ? "(unbound)" : "-";
			printf("%-8lld %4lld %-6s %-9s %-7s %-11s %-12s "
			    "%s%s%s\n", (long long)num(p, "pid"),
			    (long long)num(f, "fd"),
			    json_is_string(json_object_get(f, "family")) ?
			    str(f, "family") : t, dash(f, "socket_type"),
			    dash(f, "protocol"), dash(f, "state"),
			    dash(f, "peer"), a, json_is_string(json_object_get(
			    f, "peer_address")) ? " -> " : "", json_is_string(
			    json_object_get(f, "peer_address")) ?
			    str(f, "peer_address") : "");
		}
}

/* The pipes: each with its ends, PID:FD and mode. */
static void
show_pipes(json_t *d)
{
	json_t	*o, *pp, *e;
	size_t	 i, j;

	if ((o = descriptors(d, "PIPES")) == NULL)
		return;
	printf("\n%-12s %s\n", "PIPE", "ENDS");
	json_array_foreach(json_object_get(o, "pipes"), i, pp) {
		printf("%-12lld", (long long)num(pp, "pipe_id"));
		json_array_foreach(json_object_get(pp, "ends"), j, e)
			printf(" %s (%s)", str(e, "end"), str(e, "mode"));
		printf("\n");
	}
}

/* Each process's environment, one variable a line. */
static void
show_env(json_t *d)
{
	json_t	*p, *v;
	size_t	 i, j;

	json_array_foreach(json_object_get(d, "processes"), i, p) {
		printf("\nENVIRONMENT of %lld", (long long)num(p, "pid"));
		if (!json_is_array(json_object_get(p, "environment"))) {
			printf(": not recorded in the image\n");
			continue;
		}
		printf("%s\n", json_is_true(json_object_get(p,
		    "environment_cut")) ? " (cut short)" : "");
		json_array_foreach(json_object_get(p, "environment"), j, v)
			if (json_is_string(v))
				printf("  %s\n", safe(json_string_value(v)));
	}
}

/* A process's GPUs, as "GPU-... 1.0 GiB, GPU-... 2.0 GiB". */
static void
print_gpus(json_t *gpus)
{
	json_t	*g;
	char	 b[32];
	size_t	 i;

	if (json_array_size(gpus) == 0)
		printf("none");
	json_array_foreach(gpus, i, g)
		printf("%s%s %s", i > 0 ? ", " : "", str(g, "uuid"),
		    size_str(json_object_get(g, "memory"), b, sizeof b));
}

static void
print_brief(const char *sign, json_t *p)
{
	char	*cl = cmdline_str(json_object_get(p, "cmdline"));

	printf("%s process %lld (%s): %s\n", sign, (long long)num(p, "pid"),
	    str(p, "comm"), cl);
	free(cl);
}

/* What differs of the mount namespaces of a diff's images, if any. */
static void
print_mounts_diff(json_t *m)
{
	json_t		*r, *x;
	size_t		 i;
	const char	*ra, *rb;

	if (!json_is_object(m))
		return;
	r = json_object_get(m, "root");
	ra = json_is_string(json_object_get(r, "a")) ? str(r, "a") :
	    "(this host's)";
	rb = json_is_string(json_object_get(r, "b")) ? str(r, "b") :
	    "(this host's)";
	if (strcmp(ra, rb) != 0)
		printf("~ root %s -> %s\n", safe(ra), safe(rb));
	json_array_foreach(json_object_get(json_object_get(m, "mounts"),
	    "removed"), i, x)
		printf("- mount %s from %s (%s)\n", str(x, "at"),
		    str(x, "source"), str(x, "fstype"));
	json_array_foreach(json_object_get(json_object_get(m, "mounts"),
	    "added"), i, x)
		printf("+ mount %s from %s (%s)\n", str(x, "at"),
		    str(x, "source"), str(x, "fstype"));
	json_array_foreach(json_object_get(json_object_get(m, "mounts"),
	    "changed"), i, x)
		printf("~ mount %s: from %s -> %s\n", str(x, "at"),
		    str(x, "a"), str(x, "b"));
	json_array_foreach(json_object_get(json_object_get(m, "outside"),
	    "removed"), i, x)
		printf("- outside %s on fd %lld of process %lld\n",
		    str(x, "path"), (long long)num(x, "fd"),
		    (long long)num(x, "pid"));
	json_array_foreach(json_object_get(json_object_get(m, "outside"),
	    "added"), i, x)
		printf("+ outside %s on fd %lld of process %lld\n",
		    str(x, "path"), (long long)num(x, "fd"),
		    (long long)num(x, "pid"));
}

static void
print_diff(json_t *d, int verbose)
{
	json_t	*im = json_object_get(d, "images"), *ps, *p, *x, *m, *f;
	char	 b[3][32], *ca, *cb;
	size_t	 i, n;
	const char *side[] = { "a", "b" };

	if (!json_is_true(json_object_get(d, "differ")) && !verbose)
		return;
	for (i = 0; i < 2; i++) {
		x = json_object_get(im, side[i]);
		printf("%s %s: %s, %s, %lld process%s\n", side[i] == side[0] ?
		    "---" : "+++", str(x, "name"), str(x, "created"),
		    str(x, "hostname"), (long long)num(x, "processes"),
		    num(x, "processes") == 1 ? "" : "es");
	}
	ps = json_object_get(d, "processes");
	json_array_foreach(json_object_get(ps, "removed"), i, p)
		print_brief("-", p);
	json_array_foreach(json_object_get(ps, "added"), i, p)
		print_brief("+", p);
	json_array_foreach(json_object_get(ps, "changed"), i, p) {
		printf("~ process %lld (%s)\n", (long long)num(p, "pid"),
		    str(p, "comm"));
		if ((x = json_object_get(p, "cmdline")) != NULL) {
			ca = cmdline_str(json_object_get(x, "a"));
			cb = cmdline_str(json_object_get(x, "b"));
			printf("    command line: %s -> %s\n", ca, cb);
			free(ca);
			free(cb);
		}
		if ((x = json_object_get(p, "threads")) != NULL)
			printf("    threads: %lld -> %lld\n",
			    (long long)num(x, "a"), (long long)num(x, "b"));
		if ((x = json_object_get(p, "gpus")) != NULL) {
			printf("    gpus: ");
			print_gpus(json_object_get(x, "a"));
			printf(" -> ");
			print_gpus(json_object_get(x, "b"));
			printf("\n");
		}
		m = json_object_get(p, "memory");
		printf("    memory: %s changed (%s dumped in a, %s in b)\n",
		    size_str(json_object_get(m, "changed"), b[0], sizeof b[0]),
		    size_str(json_object_get(m, "a"), b[1], sizeof b[1]),
		    size_str(json_object_get(m, "b"), b[2], sizeof b[2]));
		json_array_foreach(json_object_get(p, "mappings"), n, x) {
			printf("      %-10s %s-%s %s %-11s %10s",
			    str(x, "status"), str(x, "start"), str(x, "end"),
			    str(x, "prot"), str(x, "kind"),
			    size_str(json_object_get(x, "changed"), b[0],
			    sizeof b[0]));
			/* An anonymous mapping has no path, nor a blank. */
			if (json_is_string(json_object_get(x, "path")))
				printf("  %s", str(x, "path"));
			printf("\n");
		}
	}
	print_mounts_diff(json_object_get(d, "mounts"));
	f = json_object_get(d, "files");
	printf("criu files: %zu changed, %zu added, %zu removed, %lld the same",
	    json_array_size(json_object_get(f, "changed")),
	    json_array_size(json_object_get(f, "added")),
	    json_array_size(json_object_get(f, "removed")),
	    (long long)num(f, "same"));
	n = 0;
	json_array_foreach(json_object_get(f, "changed"), i, x)
		printf("%s~%s", n++ ? " " : ": ", safe(json_string_value(x)));
	json_array_foreach(json_object_get(f, "added"), i, x)
		printf("%s+%s", n++ ? " " : ": ", safe(json_string_value(x)));
	json_array_foreach(json_object_get(f, "removed"), i, x)
		printf("%s-%s", n++ ? " " : ": ", safe(json_string_value(x)));
	printf("\n");
}

/* --verify: reads the image whole, its parents' chunks too. */
static int
verify(struct gck_ctx *ctx, int fd, char **parents, size_t nparents,
    const char *allowed)
{
	struct gck_image_stats	 st;
	const struct gck_manifest *m;
	struct gck_reader	*rd = NULL;
	char			*who = NULL;
	int			 r;

	if ((r = gck_reader_new(ctx, fd, &rd)) == GCK_OK &&
	    (r = gck_reader_head(rd, &m)) == GCK_OK &&
	    (r = gck_reader_use_parents(rd, parents, nparents)) == GCK_OK &&
	    (r = gck_reader_extract(rd, -1)) == GCK_OK &&
	    (r = gck_reader_signer(rd, allowed, &who)) == GCK_OK) {
		gck_reader_stats(rd, &st);
		printf("image ok: %llu entries, %llu bytes",
		    (unsigned long long)st.entries,
		    (unsigned long long)st.bytes);
		if (st.ref_bytes > 0)
			printf(", %llu of them read from its parents",
			    (unsigned long long)st.ref_bytes);
		printf("\n");
		if (who != NULL && allowed != NULL)
			printf("signed by %s, as '%s' allows\n", safe(who),
			    safe(allowed));
		else if (who != NULL)
			printf("signed by %s: a good signature, whoever that "
			    "is (--allowed-signers says whom to trust)\n",
			    safe(who));
	}
	free(who);
	gck_reader_free(rd);
	return r;
}

/*
 * A series: each snapshot on a line, the newest sound one marked '*';
 * verified, each said ok or damaged, and why.
 */
static void
print_series(json_t *d, int verified)
{
	json_t		*a, *o;
	const char	*newest;
	char		 sz[32];
	size_t		 i;

	a = json_object_get(d, "snapshots");
	newest = json_string_value(json_object_get(d, "newest"));
	if (verified) {
		json_array_foreach(a, i, o) {
			if (json_is_true(json_object_get(o, "ok")))
				printf("%s: ok\n", str(o, "name"));
			else
				printf("%s: damaged: %s\n", str(o, "name"),
				    str(o, "problem"));
		}
		printf("%zu snapshot%s, %lld damaged\n", json_array_size(a),
		    json_array_size(a) == 1 ? "" : "s",
		    (long long)num(d, "damaged"));
		return;
	}
	printf("series %s: %zu snapshot%s\n", str(d, "directory"),
	    json_array_size(a), json_array_size(a) == 1 ? "" : "s");
	json_array_foreach(a, i, o) {
		printf("%c %s  %s  %-11s  %10s", newest != NULL &&
		    strcmp(newest, json_string_value(json_object_get(o,
		    "name"))) == 0 ? '*' : ' ', str(o, "name"), str(o, "time"),
		    json_is_true(json_object_get(o, "full")) ? "full" :
		    "incremental", size_str(json_object_get(o, "size"), sz,
		    sizeof sz));
		if (!json_is_true(json_object_get(o, "full")))
			printf("  parent %s", str(o, "parent"));
		if (!json_is_true(json_object_get(o, "ok")))
			printf("  not sound: %s", str(o, "problem"));
		printf("\n");
	}
	if (newest != NULL)
		printf("* newest complete snapshot, which gpurestore restores\n");
	else
		printf("no snapshot that gpurestore can restore\n");
}

/*
 * gpuinspect --check: what a restore of the image on fd would miss here;
 * each failure on stderr, each note on stdout.  Sets *fail when a restore
 * would fail.  Returns GCK_OK or a code.
 */
static int
check(struct gck_ctx *ctx, int fd, int json, int *fail)
{
	json_error_t	 jerr;
	json_t		*doc, *f;
	char		*text = NULL;
	size_t		 i;
	int		 r;

	if ((r = gck_inspect_check(ctx, fd, &text, fail)) != GCK_OK)
		return r;
	if (json) {
		fputs(text, stdout);
		free(text);
		return GCK_OK;
	}
	if ((doc = json_loads(text, 0, &jerr)) == NULL)
		errx(1, "cannot read the findings: %s", jerr.text);
	free(text);
	json_array_foreach(json_object_get(doc, "findings"), i, f) {
		if (strcmp(str(f, "severity"), "fail") == 0)
			warnx("%s", str(f, "message"));
		else
			printf("note: %s\n", str(f, "message"));
	}
	json_decref(doc);
	return GCK_OK;
}

/*
 * The series in directory dir, shown or verified.  Returns GCK_OK, or a
 * code; verified, GCK_ECORRUPT when a snapshot is damaged.
 */
static int
series(struct gck_ctx *ctx, const char *dir, enum mode mode, int json)
{
	struct gck_series	*s = NULL;
	json_error_t		 jerr;
	json_t			*doc = NULL;
	char			*text = NULL;
	int			 r;

	if ((r = gck_series_open(ctx, dir, 0, &s)) != GCK_OK ||
	    (r = gck_series_describe(ctx, s, mode == VERIFY, &text)) != GCK_OK)
		goto out;
	if (json)
		fputs(text, stdout);
	else if ((doc = json_loads(text, 0, &jerr)) != NULL)
		print_series(doc, mode == VERIFY);
	else
		errx(1, "cannot read the description: %s", jerr.text);
	if (mode == VERIFY && (doc == NULL || num(doc, "damaged") != 0))
		r = GCK_ECORRUPT;
out:
	json_decref(doc);
	free(text);
	gck_series_free(s);
	return r;
}

/* gpuinspect [-t] dir: exits with the status of the series' report. */
static _Noreturn void
series_main(struct gck_ctx *ctx, const char *dir, enum mode mode, int json,
    int image_opts)
{
	int	r;

	if (mode != SHOW && mode != VERIFY)
		errx(2, "'%s' is a directory: a series is shown or verified, "
		    "its images one at a time otherwise", dir);
	if (image_opts)
		errx(2, "--parent and --allowed-signers are not for a series: "
		    "its images' parents are in it");
	if ((r = series(ctx, dir, mode, json)) != GCK_OK &&
	    !(mode == VERIFY && r == GCK_ECORRUPT))
		warnx("%s", gck_error_string(ctx));
	gck_ctx_free(ctx);
	if (fflush(stdout) == EOF)
		r = GCK_ESYS;
	exit(r == GCK_OK ? 0 : 1);
}

/* Reads the options into a, leaving the operands in argv[optind...]. */
static void
parse_args(struct args *a, int argc, char *argv[])
{
	int	ch;

	memset(a, 0, sizeof *a);
	a->mode = SHOW;
	while ((ch = getopt_long(argc, argv, "dhjtVvx:", longopts, NULL)) !=
	    -1) {
		switch (ch) {
		case 'A':
			tool_append(&a->parents, &a->nparents, optarg);
			break;
		case 'C':
			a->mode = CHECK;
			a->nmode++;
			break;
		case 'E':
			a->env = 1;
			break;
		case 'L':
			a->files = 1;
			break;
		case 'O':
			a->sockets = 1;
			break;
		case 'S':
			a->allowed = optarg;
			break;
		case 'F':
			a->mode = FLATTEN;
			a->dir = optarg;
			a->nmode++;
			break;
		case 'd':
			a->mode = DIFF;
			a->nmode++;
			break;
		case 'h':
			usage(0);
		case 'j':
			a->json = 1;
			break;
		case 't':
			a->mode = VERIFY;
			a->nmode++;
			break;
		case 'V':
			tool_version();
		case 'v':
			a->verbose++;
			break;
		case 'x':
			a->mode = EXTRACT;
			a->dir = optarg;
			a->nmode++;
			break;
		default:
			usage(2);
		}
	}
}

/* Checks the options of a against each other and the operands. */
static void
check_args(struct args *a, int argc, char *argv[])
{
	struct stat	sb;
	enum mode	mode = a->mode;

	a->isdir = argc == 1 && stat(argv[0], &sb) == 0 &&
	    S_ISDIR(sb.st_mode);
	if (a->nmode > 1)
		tool_usage_error(synopsis, "-d, -t, -x, --check and --flatten "
		    "exclude each other");
	if (mode == DIFF && argc != 2)
		tool_usage_error(synopsis, "-d needs two images, got %s",
		    argc == 0 ? "none" : argc == 1 ? "one" : "more");
	if (mode != DIFF && argc > 1)
		tool_usage_error(synopsis, "one image at most, got %d", argc);
	if (a->json && mode != SHOW && mode != DIFF && mode != CHECK &&
	    !(mode == VERIFY && a->isdir))
		tool_usage_error(synopsis, "-j is for a summary, --check, -d, "
		    "or -t of a series");
	if ((mode == EXTRACT || mode == FLATTEN) && *a->dir == '\0')
		tool_usage_error(synopsis, "%s needs a name", mode == EXTRACT ?
		    "-x" : "--flatten");
	if (a->nparents > 0 && mode != VERIFY && mode != FLATTEN) {
		warnx("--parent is for --verify and --flatten");
		usage(2);
	}
	if ((a->files || a->sockets || a->env) && (mode != SHOW ||
	    a->isdir)) {
		warnx("--files, --sockets and --env are for the summary of an "
		    "image");
		usage(2);
	}
	if (mode == CHECK && a->isdir) {
		warnx("--check is for an image, not a series");
		usage(2);
	}
	if (a->allowed != NULL && mode != VERIFY) {
		warnx("--allowed-signers is for --verify");
		usage(2);
	}
	if (mode == DIFF && strcmp(argv[0], "-") == 0 &&
	    strcmp(argv[1], "-") == 0) {
		warnx("only one of the images can be standard input");
		usage(2);
	}
}

/*
 * The image of argv[0], or standard input, shown, verified, extracted
 * or flattened, or diffed against argv[1].  Returns the exit status.
 */
static int
image_main(struct gck_ctx *ctx, struct args *a, int argc, char *argv[])
{
	json_error_t	 jerr;
	json_t		*doc = NULL;
	const char	*name;
	char		*text = NULL;
	int		 r = GCK_OK, fd, fdb, differ = 0;

	name = argc >= 1 ? argv[0] : "-";
	fd = tool_open_image(argc >= 1 ? argv[0] : NULL, a->mode == DIFF ?
	    2 : 1);
	switch (a->mode) {
	case SHOW:
		if ((r = gck_inspect_show_opts(ctx, fd, a->env ? GCK_SHOW_ENV :
		    0, &text)) != GCK_OK)
			break;
		if (a->json)
			fputs(text, stdout);
		else if ((doc = json_loads(text, 0, &jerr)) != NULL)
			print_show(strcmp(name, "-") == 0 ? "(standard input)" :
			    name, doc, a);
		else
			errx(1, "cannot read the description: %s", jerr.text);
		break;
	case VERIFY:
		r = verify(ctx, fd, a->parents, a->nparents, a->allowed);
		break;
	case CHECK:
		r = check(ctx, fd, a->json, &differ);
		break;
	case FLATTEN:
		r = gck_inspect_flatten(ctx, fd, a->parents, a->nparents,
		    a->dir);
		break;
	case EXTRACT:
		r = gck_inspect_extract(ctx, fd, a->dir);
		break;
	case DIFF:
		fdb = tool_open_image(argv[1], 2);
		if ((r = gck_inspect_diff(ctx, fd, argv[0], fdb, argv[1],
		    &text, &differ)) != GCK_OK)
			break;
		if (a->json)
			fputs(text, stdout);
		else if ((doc = json_loads(text, 0, &jerr)) != NULL)
			print_diff(doc, a->verbose);
		else
			errx(2, "cannot read the description: %s", jerr.text);
		break;
	}
	if (r != GCK_OK)
		warnx("%s", gck_error_string(ctx));
	json_decref(doc);
	free(text);
	gck_ctx_free(ctx);
	free(a->parents);
	if (fflush(stdout) == EOF && r == GCK_OK)
		r = GCK_ESYS;
	if (a->mode == DIFF)
		return r != GCK_OK ? 2 : differ;
	return r != GCK_OK || differ;
}

int
main(int argc, char *argv[])
{
	struct args	 a;
	struct gck_ctx	*ctx;

	parse_args(&a, argc, argv);
	argc -= optind;
	argv += optind;
	check_args(&a, argc, argv);

	tool_signals();
	ctx = tool_ctx(a.verbose);
	if (a.isdir)
		series_main(ctx, argv[0], a.mode, a.json, a.nparents > 0 ||
		    a.allowed != NULL);
	return image_main(ctx, &a, argc, argv);
}

/*
 * manifest.c: gpuckpt.json, the first entry of an image.
 */
#include "config.h"

#include <sys/random.h>

#include <sys/types.h>
#include <sys/utsname.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "private.h"
#include "core/proc.h"
#include "core/util.h"
#include "gpu/cuda.h"
#include "image/manifest.h"
#include "image/names.h"
#include "image/patch.h"

#define MANIFEST_PROCS_MAX	65536
#define MANIFEST_FILES_MAX	65536
#define CRIU_INVENTORY		"inventory.img"

struct mproc {
	pid_t		 pid;
	pid_t		 host_pid;	/* as the checkpoint saw it */
	const char	*comm;
	int		 zombie;
	uint64_t	 start;
};

struct gck_manifest {
	json_t		*root;
	int		 format;
	pid_t		 root_pid;
	int		 shell_job;
	unsigned int	 criu_opts;	/* GCK_CRIU_* */
	struct mproc	*procs;
	size_t		 n;
	struct gck_mcuda *cuda;
	json_t		*files;		/* CRIU files: name -> size */
	const char	*id;		/* format 2: its id */
	json_t		*chain;		/* its parents' ids, or NULL */
	int		 chunks;	/* kind "chunks": nothing to restore */
};

/* The options.after of a manifest, by enum gck_after. */
static const char *const after_names[] = {
	"kill", "kill", "running", "stopped", "handover"
};

static json_t	*host_facts(void);
static json_t	*cpu_flags(void);
static json_t	*proc_json(const struct gck_proc *);
static int	 proc_env(json_t *, const struct gck_proc *);
static int	 pid_cmp(const void *, const void *);
static json_t	*cuda_json(const struct gck_cuda_facts *);
static json_t	*custom_json(const struct gck_cproc *);
static int	 cuda_parse(struct gck_ctx *, struct gck_manifest *, json_t *);
static int	 files_parse(struct gck_ctx *, struct gck_manifest *, json_t *);
static int	 custom_parse(struct gck_ctx *, struct gck_mcproc *, json_t *);
static int	 custom_check(struct gck_ctx *, const struct gck_manifest *);
static json_t	*criu_json(const char *, unsigned int);
static int	 criu_parse(struct gck_ctx *, struct gck_manifest *, json_t *);
static int	 id_parse(struct gck_ctx *, struct gck_manifest *);
static int	 v2_keys(json_t *, json_t *);

static int
pid_cmp(const void *a, const void *b)
{
	pid_t	x = *(const pid_t *)a, y = *(const pid_t *)b;

	return x < y ? -1 : x > y;
}

/* The CPU features a restored process may depend on. */
static json_t *
cpu_flags(void)
{
	static const char *keep[] = { "fpu", "sse", "sse2", "sse3", "ssse3",
	    "sse4_1", "sse4_2", "avx", "avx2", "avx512", "fma", "xsave",
	    "xsaveopt", "xsavec", "xsaves", "aes", "bmi1", "bmi2", "pku",
	    "amx", "sha_ni", "vaes", "f16c", "adx", "erms", "fsrm", NULL };
	char	 line[8192], *s, *tok, *save = NULL;
	json_t	*a;
	FILE	*f;
	size_t	 i;

	if ((a = json_array()) == NULL)
		return NULL;
	if ((f = fopen("/proc/cpuinfo", "re")) == NULL)
		return a;
	while (fgets(line, sizeof line, f) != NULL) {
		if (strncmp(line, "flags", 5) != 0 ||
		    (s = strchr(line, ':')) == NULL)
			continue;
		for (tok = strtok_r(s + 1, " \n", &save); tok != NULL;
		    tok = strtok_r(NULL, " \n", &save)) {
			for (i = 0; keep[i] != NULL; i++) {
				size_t	l = strlen(keep[i]);

				if (strncmp(tok, keep[i], l) == 0 &&
				    (tok[l] == '\0' || strcmp(keep[i],
				    "avx512") == 0 || strcmp(keep[i],
				    "amx") == 0)) {
					json_array_append_new(a,
					    json_string(tok));
					break;
				}
			}
		}
		break;
	}
	fclose(f);
	return a;
}

static json_t *
host_facts(void)
{
	struct utsname	u;
	char		host[256] = "", boot[64] = "";

	gethostname(host, sizeof host - 1);
	if (uname(&u) == -1)
		memset(&u, 0, sizeof u);
	gck_boot_id(boot, sizeof boot);
	return json_pack("{s:s, s:s, s:s, s:s, s:o}", "hostname", host,
	    "boot_id", boot, "kernel", u.release, "arch", u.machine,
	    "cpu_flags", cpu_flags());
}

/* This boot of this host, as the kernel names it ("" if unknown). */
void
gck_boot_id(char *buf, size_t len)
{
	size_t	l;

	if (gck_read_small_file("/proc/sys/kernel/random/boot_id", buf,
	    len) == -1)
		buf[0] = '\0';
	l = strlen(buf);
	while (l > 0 && (buf[l - 1] == '\n' || buf[l - 1] == ' '))
		buf[--l] = '\0';
}

/* Whether the image was made during this boot of this host. */
int
gck_manifest_this_boot(const struct gck_manifest *m)
{
	const char	*b = NULL;
	char		 boot[64];

	gck_boot_id(boot, sizeof boot);
	if (json_unpack(m->root, "{s:{s:s}}", "host", "boot_id", &b) != 0)
		return 0;
	return boot[0] != '\0' && strcmp(b, boot) == 0;
}

/*
 * Whether process i of the image is still on this host, as the very
 * process dumped: its host PID has the start time the image records
 * (for an image made during this boot: see gck_manifest_this_boot()).
 */
int
gck_manifest_proc_here(const struct gck_manifest *m, size_t i)
{
	return gck_manifest_start(m, i) != 0 &&
	    gck_pid_start(gck_manifest_host_pid(m, i)) ==
	    gck_manifest_start(m, i);
}

/*
 * The environment of p, its strings as /proc/PID/environ gave them
 * while the tree was stopped for the dump: "environ", and where it was
 * longer than GCK_ENV_MAX bytes, "environ_cut".
 */
static int
proc_env(json_t *o, const struct gck_proc *p)
{
	json_t	*a, *v;
	size_t	 i, l;

	if ((a = json_array()) == NULL ||
	    json_object_set_new(o, "environ", a) != 0)
		return -1;
	for (i = 0; i < p->envlen; i += l + 1) {
		l = strnlen(p->env + i, p->envlen - i);
		/* (a string that is not UTF-8 is left out) */
		if ((v = json_stringn(p->env + i, l)) != NULL &&
		    json_array_append_new(a, v) != 0)
			return -1;
	}
	if (p->envcut && json_object_set_new(o, "environ_cut",
	    json_true()) != 0)
		return -1;
	return 0;
}

static json_t *
proc_json(const struct gck_proc *p)
{
	json_t	*argv, *o;
	int	 i;

	if ((argv = json_array()) == NULL)
		return NULL;
	for (i = 0; i < p->argc; i++)
		json_array_append_new(argv, json_string(p->argv[i]));
	o = json_pack("{s:i, s:i, s:i, s:i, s:I, s:I, s:s, s:o, s:s?, "
	    "s:i, s:{s:I, s:I, s:I, s:I, s:I}}",
	    "pid", (int)p->pid, "ppid", (int)p->ppid, "pgid", (int)p->pgid,
	    "sid", (int)p->sid, "uid", (json_int_t)p->uid,
	    "gid", (json_int_t)p->gid, "comm", p->comm, "cmdline", argv,
	    "cwd", p->cwd, "threads", p->threads, "memory",
	    "vm_size", (json_int_t)p->vm_size, "vm_rss",
	    (json_int_t)p->vm_rss, "rss_anon", (json_int_t)p->rss_anon,
	    "rss_file", (json_int_t)p->rss_file, "rss_shmem",
	    (json_int_t)p->rss_shmem);
	if (o != NULL && p->start != 0 && json_object_set_new(o, "start",
	    json_integer((json_int_t)p->start)) != 0) {
		json_decref(o);
		o = NULL;
	}
	/* Checkpointed from outside its PID namespace: the PID we saw. */
	if (o != NULL && p->host_pid > 0 && p->host_pid != p->pid &&
	    json_object_set_new(o, "host_pid",
	    json_integer((json_int_t)p->host_pid)) != 0) {
		json_decref(o);
		o = NULL;
	}
	if (o != NULL && p->env != NULL && proc_env(o, p) != 0) {
		json_decref(o);
		o = NULL;
	}
	/* Only where it is one: a restored zombie is not stopped. */
	if (o != NULL && p->state == 'Z' &&
	    json_object_set_new(o, "zombie", json_true()) != 0) {
		json_decref(o);
		o = NULL;
	}
	return o;
}

/*
 * The GPU section: the driver, the GPUs the processes use, and what each
 * process holds on each of them.
 */
/*
 * The device memory of p that went through custom storage: a GPU at a
 * time as the driver described them, its name, its size, that of its
 * chunks (devspool.c cuts them so) and of its segments, the files that
 * hold it (gck_cuda_segment()).
 */
static json_t *
custom_json(const struct gck_cproc *p)
{
	json_t		*a;
	char		 name[64];
	unsigned int	 k;

	if ((a = json_array()) == NULL)
		return NULL;
	for (k = 0; k < p->ndev; k++) {
		gck_cuda_dev_file(name, sizeof name, p->pid, k);
		if (json_array_append_new(a, json_pack("{s:s, s:I, s:I, s:I}",
		    "file", name, "size", (json_int_t)p->devsize[k], "chunk",
		    (json_int_t)GCK_CHUNK_SIZE, "segment", (json_int_t)
		    gck_cuda_segment(p->devsize[k]))) != 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

static json_t *
cuda_json(const struct gck_cuda_facts *cf)
{
	json_t		*c, *gpus, *procs, *pg, *p, *e;
	char		 cc[32];
	uint64_t	 used = 0;
	size_t		 i, g;

	for (i = 0; i < cf->nprocs; i++)
		used |= cf->procs[i].gpus;
	if ((gpus = json_array()) == NULL || (procs = json_array()) == NULL) {
		json_decref(gpus);
		return NULL;
	}
	for (g = 0; g < cf->ngpus; g++) {
		if (!(used & 1ULL << g))
			continue;
		snprintf(cc, sizeof cc, "%d.%d", cf->gpus[g].cc_major,
		    cf->gpus[g].cc_minor);
		e = json_pack("{s:i, s:s, s:s, s:s, s:I, s:s}", "index",
		    cf->gpus[g].index, "uuid", cf->gpus[g].uuidstr, "name",
		    cf->gpus[g].name, "compute_capability", cc, "memory",
		    (json_int_t)cf->gpus[g].total, "pci_bus_id",
		    cf->gpus[g].pci);
		if (e != NULL && cf->gpus[g].minor >= 0)
			json_object_set_new(e, "minor",
			    json_integer(cf->gpus[g].minor));
		json_array_append_new(gpus, e);
	}
	for (i = 0; i < cf->nprocs; i++) {
		if ((pg = json_array()) == NULL)
			break;
		for (g = 0; g < cf->ngpus; g++) {
			if (!(cf->procs[i].gpus & 1ULL << g))
				continue;
			json_array_append_new(pg, cf->procs[i].gpu_memory_known ?
			    json_pack("{s:s, s:I}", "uuid", cf->gpus[g].uuidstr,
			    "memory", (json_int_t)cf->procs[i].mem[g]) :
			    json_pack("{s:s, s:n}", "uuid", cf->gpus[g].uuidstr,
			    "memory"));
		}
		p = json_pack("{s:i, s:s, s:o}", "pid", (int)cf->procs[i].pid,
		    "comm", cf->procs[i].comm, "gpus", pg);
		if (p != NULL && cf->procs[i].custom &&
		    json_object_set_new(p, "custom_storage",
		    custom_json(&cf->procs[i])) != 0) {
			json_decref(p);
			p = NULL;
		}
		json_array_append_new(procs, p);
	}
	c = json_pack("{s:i, s:s, s:s?, s:b, s:o, s:o}",
	    "driver_version", cf->driver_version,
	    "cuda_version", cf->cuda_version,
	    "driver", cf->release,
	    "nvml", cf->nvml,
	    "gpus", gpus,
	    "processes", procs);
	/* A job (gpuckpt --launch): who holds its file, where. */
	if (c != NULL && cf->job_holder > 0 && json_object_set_new(c, "job",
	    json_pack("{s:i, s:i}", "holder", (int)cf->job_holder, "fd",
	    cf->job_fd)) != 0) {
		json_decref(c);
		c = NULL;
	}
	/* An NCCL job's ranks, quiesced (libgpuckpt-nccl.so). */
	if (c != NULL && cf->nccl_ranks > 0 && json_object_set_new(c, "nccl",
	    json_pack("{s:I}", "ranks", (json_int_t)cf->nccl_ranks)) != 0) {
		json_decref(c);
		c = NULL;
	}
	return c;
}

/* The CRIU section: its version and the options of the dump. */
static json_t *
criu_json(const char *version, unsigned int opts)
{
	json_t		*a;
	unsigned int	 bit;

	if ((a = json_array()) == NULL)
		return NULL;
	for (bit = 1; bit <= GCK_CRIU_OPTS_ALL; bit <<= 1)
		if ((opts & bit) && json_array_append_new(a,
		    json_string(gck_criu_opt_name(bit))) != 0) {
			json_decref(a);
			return NULL;
		}
	return json_pack("{s:s, s:o}", "version", version, "options", a);
}

/*
 * The text of manifest m (NULL: out of memory), which it takes, with the
 * keys of version 2 when v2 (parent, or NULL, the parent's).  Returns it
 * (free it), or NULL with the error set.
 */
static char *
manifest_text(struct gck_ctx *ctx, json_t *m, int v2, json_t *parent)
{
	char	*text = NULL;

	if (m != NULL && (!v2 || v2_keys(m, parent) == 0))
		text = json_dumps(m, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(m);
	if (text == NULL)
		gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	return text;
}

/*
 * The process list of tree t, for a manifest, and now, the time it is
 * written, into created (32 bytes).  Returns NULL when out of memory.
 */
static json_t *
procs_json(const struct gck_ptree *t, char *created)
{
	json_t		*procs;
	time_t		 now = time(NULL);
	struct tm	 tm;
	size_t		 i;

	gmtime_r(&now, &tm);
	strftime(created, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
	if ((procs = json_array()) == NULL)
		return NULL;
	for (i = 0; i < t->n; i++)
		if (json_array_append_new(procs,
		    proc_json(&t->procs[i])) != 0) {
			json_decref(procs);
			return NULL;
		}
	return procs;
}

/*
 * Builds the manifest of a checkpoint of tree t.  Returns the JSON text
 * (free it), or NULL with the error set.
 */
/* A new image id, 32 random hexadecimal digits.  Returns 0 or -1. */
int
gck_new_id(char id[33])
{
	unsigned char	b[16];
	size_t		i;

	if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b)
		return -1;
	for (i = 0; i < sizeof b; i++)
		snprintf(id + 2 * i, 3, "%02x", b[i]);
	return 0;
}

/* Version 2's keys: the image's id, the size of its memory chunks. */
static int
v2_keys(json_t *m, json_t *parent)
{
	char	id[33];

	if (gck_new_id(id) == -1)
		return -1;
	if (json_object_set_new(m, "id", json_string(id)) != 0 ||
	    json_object_set_new(m, "chunk_size",
	    json_integer(GCK_CHUNK_SIZE)) != 0)
		return -1;
	if (parent != NULL && json_object_set(m, "parent", parent) != 0)
		return -1;
	return 0;
}

char *
gck_manifest_build(struct gck_ctx *ctx, const struct gck_ptree *t,
    const struct gck_ckpt_opts *o, enum gck_after after,
    const char *criu_version, int shell_job, const struct gck_cuda_facts *cf,
    const struct gck_imgfile *files, size_t nfiles,
    struct json_t *parent, struct json_t *mounts)
{
	json_t		*m = NULL, *procs, *fl;
	char		 created[32];
	size_t		 i;

	if ((procs = procs_json(t, created)) == NULL)
		goto out;
	if ((fl = json_array()) == NULL) {
		json_decref(procs);
		goto out;
	}
	for (i = 0; i < nfiles; i++)
		if (json_array_append_new(fl, files[i].cuda ?
		    json_pack("{s:s, s:I, s:b, s:b}", "name", files[i].name,
		    "size", (json_int_t)files[i].size, "memory", 1, "cuda",
		    1) : json_pack("{s:s, s:I, s:b}",
		    "name", files[i].name, "size", (json_int_t)files[i].size,
		    "memory", files[i].memory)) != 0) {
			json_decref(procs);
			json_decref(fl);
			goto out;
		}
	m = json_pack("{s:i, s:s, s:s, s:o, s:o, s:o?, s:i, s:b, s:o, "
	    "s:{s:s, s:i, s:s}, s:I, s:o}",
	    "format", o->format ? o->format : GCK_FORMAT_VERSION,
	    "tool", "gpuckpt " PACKAGE_VERSION,
	    "created", created,
	    "host", host_facts(),
	    "criu", criu_json(criu_version, o->criu_opts),
	    "cuda", cf != NULL ? cuda_json(cf) : NULL,
	    "root_pid", (int)t->procs[0].pid,
	    "shell_job", shell_job,
	    "processes", procs,
	    "options", "compress", o->level > 0 ? "zstd" : "none",
	    "level", o->level, "after", after_names[after],
	    "part_size", (json_int_t)(o->part_size ? o->part_size :
	    GCK_PART_SIZE), "files", fl);
	/* A tree in a mount namespace of its own: what it has from here. */
	if (m != NULL && mounts != NULL && json_object_set(m, "mounts",
	    mounts) != 0) {
		json_decref(m);
		m = NULL;
	}
	return manifest_text(ctx, m, o->format == 0 || o->format > 1, parent);
out:
	return manifest_text(ctx, NULL, 0, NULL);
}

/*
 * Builds the manifest of an image of chunks only (kind "chunks"): the
 * memory of tree t read while it ran, sent ahead of a live migration
 * into a receiver's cache.  Returns the JSON text (free it), or NULL
 * with the error set.
 */
char *
gck_manifest_build_chunks(struct gck_ctx *ctx, const struct gck_ptree *t,
    int level, json_t *parent)
{
	json_t		*m = NULL, *procs;
	char		 created[32];

	if ((procs = procs_json(t, created)) == NULL)
		goto out;
	m = json_pack("{s:i, s:s, s:s, s:s, s:o, s:i, s:o, s:{s:s, s:i}}",
	    "format", GCK_FORMAT_VERSION, "kind", "chunks",
	    "tool", "gpuckpt " PACKAGE_VERSION, "created", created,
	    "host", host_facts(), "root_pid", (int)t->procs[0].pid,
	    "processes", procs, "options", "compress", level > 0 ? "zstd" :
	    "none", "level", level);
	return manifest_text(ctx, m, 1, parent);
out:
	return manifest_text(ctx, NULL, 0, NULL);
}

/*
 * The zstd level the image was written with (0: not compressed), for
 * writing it again; the default where the manifest does not say.
 */
int
gck_manifest_level(const struct gck_manifest *m)
{
	json_t	*o = json_object_get(m->root, "options");
	int	 level = GCK_ZSTD_LEVEL;

	if (json_is_integer(json_object_get(o, "level")))
		level = (int)json_integer_value(json_object_get(o, "level"));
	if (json_is_string(json_object_get(o, "compress")) && strcmp(
	    json_string_value(json_object_get(o, "compress")), "none") == 0)
		level = 0;
	return level < 0 || level > 19 ? GCK_ZSTD_LEVEL : level;
}

/* Whether the image holds chunks only, nothing to restore. */
int
gck_manifest_chunks_only(const struct gck_manifest *m)
{
	return m->chunks;
}

/*
 * The list of CRIU files (absent in images that predate it): each a
 * file name the reader accepts, once, with a size.
 */
static int
files_parse(struct gck_ctx *ctx, struct gck_manifest *m, json_t *fl)
{
	json_t		*f;
	json_int_t	 size;
	const char	*name;
	size_t		 i, pos[2] = { 0, 0 };
	int		 memory, cuda;

	if (fl == NULL)
		return GCK_OK;
	if (!json_is_array(fl) || json_array_size(fl) > MANIFEST_FILES_MAX ||
	    (m->files = json_object()) == NULL)
		goto bad;
	json_array_foreach(fl, i, f) {
		memory = cuda = 0;
		if (json_unpack(f, "{s:s, s:I, s?b, s?b}", "name", &name,
		    "size", &size, "memory", &memory, "cuda", &cuda) != 0 ||
		    size < 0 || !gck_criu_name_ok(name) ||
		    (cuda && !memory) ||
		    json_object_get(m->files, name) != NULL ||
		    json_object_set_new(m->files, name, json_pack("{s:I, s:b, "
		    "s:b}", "size", size, "memory", memory, "cuda", cuda)) != 0)
			goto bad;
		pos[1] += !memory;
	}
	/*
	 * Where each file comes in the stream: inventory.img first, the
	 * others in the order of the list, then the memory in that order.
	 */
	pos[0] = json_object_get(m->files, CRIU_INVENTORY) != NULL;
	json_array_foreach(fl, i, f) {
		memory = 0;
		(void)json_unpack(f, "{s:s, s?b}", "name", &name, "memory",
		    &memory);
		memory = memory != 0;
		if (json_object_set_new(json_object_get(m->files, name), "pos",
		    json_integer(strcmp(name, CRIU_INVENTORY) == 0 ? 0 :
		    (json_int_t)pos[memory]++)) != 0)
			goto bad;
	}
	return GCK_OK;
bad:
	return gck_set_error(ctx, GCK_EFORMAT, "corrupt image: bad file list "
	    "in the manifest");
}

/*
 * The CRIU section: an object whose options (absent in images that
 * predate them) are distinct names of options this version knows.  A
 * name it does not know is an option a newer gpuckpt dumped with, which
 * criu restore would need too: such an image is refused.
 */
static int
criu_parse(struct gck_ctx *ctx, struct gck_manifest *m, json_t *c)
{
	json_t		*opts, *o;
	const char	*name;
	unsigned int	 bit;
	size_t		 i;

	if (c == NULL)
		return GCK_OK;
	if (!json_is_object(c))
		goto bad;
	if ((opts = json_object_get(c, "options")) == NULL)
		return GCK_OK;
	if (!json_is_array(opts))
		goto bad;
	json_array_foreach(opts, i, o) {
		if ((name = json_string_value(o)) == NULL)
			goto bad;
		if ((bit = gck_criu_opt_bit(name)) == 0)
			return gck_set_error(ctx, GCK_EVERSION, "the image was "
			    "dumped with criu option '%.64s', which this "
			    "version of gpuckpt does not know: upgrade "
			    "gpuckpt", name);
		if (m->criu_opts & bit)
			goto bad;
		m->criu_opts |= bit;
	}
	return GCK_OK;
bad:
	return gck_set_error(ctx, GCK_EFORMAT, "corrupt image: bad criu "
	    "section in the manifest");
}

/*
 * Whether the manifest lists the image's CRIU files (images made before
 * streaming did not).
 */
int
gck_manifest_has_file_list(const struct gck_manifest *m)
{
	return m->files != NULL;
}

/* Where CRIU file name comes among the files in the stream, or -1. */
int64_t
gck_manifest_file_pos(const struct gck_manifest *m, const char *name)
{
	json_t	*v;

	if (m->files == NULL || (v = json_object_get(m->files, name)) ==
	    NULL)
		return -1;
	return (int64_t)json_integer_value(json_object_get(v, "pos"));
}

/* How many CRIU files the manifest lists. */
size_t
gck_manifest_nfiles(const struct gck_manifest *m)
{
	return m->files != NULL ? json_object_size(m->files) : 0;
}

/* The bytes of the memory files the manifest lists, 0 if it lists none. */
uint64_t
gck_manifest_memory_bytes(const struct gck_manifest *m)
{
	const char	*name;
	json_t		*v;
	uint64_t	 n = 0;

	if (m->files == NULL)
		return 0;
	json_object_foreach(m->files, name, v)
		if (json_is_true(json_object_get(v, "memory")) &&
		    json_integer_value(json_object_get(v, "size")) > 0)
			n += (uint64_t)json_integer_value(json_object_get(v,
			    "size"));
	return n;
}

/*
 * The highest PID or thread ID of the image: of its processes, and of
 * the threads its core-TID.img files name.  0 when it has none.
 */
pid_t
gck_manifest_max_tid(const struct gck_manifest *m)
{
	const char	*name;
	json_t		*v;
	size_t		 i;
	pid_t		 max = 0;
	int		 tid, end;

	for (i = 0; i < gck_manifest_nprocs(m); i++)
		if (gck_manifest_pid(m, i) > max)
			max = gck_manifest_pid(m, i);
	if (m->files == NULL)
		return max;
	json_object_foreach(m->files, name, v) {
		end = 0;
		if (sscanf(name, "core-%d.img%n", &tid, &end) == 1 &&
		    end > 0 && name[end] == '\0' && tid > max)
			max = tid;
	}
	return max;
}

/* Whether the image has CRIU file name. */
int
gck_manifest_has_file(const struct gck_manifest *m, const char *name)
{
	return m->files != NULL && json_object_get(m->files, name) != NULL;
}

/* The size of the image's CRIU file name, or -1 if it has none. */
int64_t
gck_manifest_file_size(const struct gck_manifest *m, const char *name)
{
	json_t	*v;

	if (m->files == NULL || (v = json_object_get(m->files, name)) ==
	    NULL)
		return -1;
	return (int64_t)json_integer_value(json_object_get(v, "size"));
}

/*
 * The device memory of CUDA process cp that went through custom storage
 * (NULL: none did): a file a GPU, named for its place.  Returns GCK_OK
 * or a code.
 */
static int
custom_parse(struct gck_ctx *ctx, struct gck_mcproc *cp, json_t *a)
{
	json_t		*d;
	json_int_t	 size, chunk, seg;
	const char	*file;
	char		 want[64];
	size_t		 k;

	if (a == NULL)
		return GCK_OK;
	if (!json_is_array(a) || json_array_size(a) > GCK_GPUS_MAX)
		goto bad;
	json_array_foreach(a, k, d) {
		gck_cuda_dev_file(want, sizeof want, cp->pid, (unsigned int)k);
		chunk = seg = 0;
		/*
		 * (no chunk: an older image, its parts of any size; no
		 * segment: the GPU's memory in one file)
		 */
		if (json_unpack(d, "{s:s, s:I, s?I, s?I}", "file", &file,
		    "size", &size, "chunk", &chunk, "segment", &seg) != 0 ||
		    size < 0 || strcmp(file, want) != 0 || chunk < 0 ||
		    chunk % GCK_PAGE != 0 || chunk > GCK_PART_MAX || seg < 0 ||
		    (seg > 0 && (chunk == 0 || seg % chunk != 0 ||
		    seg > (json_int_t)1 << 40 || gck_cuda_nsegs((uint64_t)size,
		    (uint64_t)seg) > 65536)))	/* (files an image lists) */
			goto bad;
		cp->devsize[k] = (uint64_t)size;
		cp->devchunk[k] = (uint64_t)chunk;
		cp->devseg[k] = (uint64_t)seg;
	}
	cp->custom = 1;
	cp->ndev = (unsigned int)json_array_size(a);
	return GCK_OK;
bad:
	return gck_set_error(ctx, GCK_EFORMAT, "corrupt image: bad custom "
	    "storage of CUDA process %d in the manifest", (int)cp->pid);
}

/*
 * Every file of device memory the CUDA processes name is in the file
 * list, as such, with its size; and the list has no other.
 */
static int
custom_check(struct gck_ctx *ctx, const struct gck_manifest *m)
{
	const struct gck_mcproc	*cp;
	const char		*name;
	json_t			*v;
	char			 file[64];
	uint64_t		 s, nseg;
	size_t			 i, n = 0, listed = 0;
	unsigned int		 k;

	for (i = 0; m->cuda != NULL && i < m->cuda->nprocs; i++) {
		cp = &m->cuda->procs[i];
		for (k = 0; cp->custom && k < cp->ndev; k++) {
			nseg = gck_cuda_nsegs(cp->devsize[k], cp->devseg[k]);
			for (s = 0; s < nseg; s++, n++) {
				gck_cuda_seg_file(file, sizeof file, cp->pid,
				    k, cp->devseg[k], s);
				if (m->files == NULL || (v = json_object_get(
				    m->files, file)) == NULL ||
				    !json_is_true(json_object_get(v, "cuda")) ||
				    json_integer_value(json_object_get(v,
				    "size")) != (json_int_t)gck_cuda_seg_size(
				    cp->devsize[k], cp->devseg[k], s))
					return gck_set_error(ctx, GCK_EFORMAT,
					    "corrupt image: the device memory "
					    "of process %d, GPU %u, is not in "
					    "the file list as the manifest "
					    "gives it", (int)cp->pid, k);
			}
		}
	}
	if (m->files != NULL)
		json_object_foreach(m->files, name, v)
			listed += json_is_true(json_object_get(v, "cuda"));
	if (listed != n)
		return gck_set_error(ctx, GCK_EFORMAT, "corrupt image: the file "
		    "list has device memory no CUDA process names");
	return GCK_OK;
}

/*
 * Whether file name of the image holds device memory that went through
 * custom storage: not criu's, restored once its process is.
 */
int
gck_manifest_file_cuda(const struct gck_manifest *m, const char *name)
{
	json_t	*v;

	if (m->files == NULL || (v = json_object_get(m->files, name)) ==
	    NULL)
		return 0;
	return json_is_true(json_object_get(v, "cuda"));
}

/*
 * Whether the image's CRIU file name holds a process's memory pages,
 * which come after every other file.
 */
int
gck_manifest_file_memory(const struct gck_manifest *m, const char *name)
{
	json_t	*v;

	if (m->files == NULL || (v = json_object_get(m->files, name)) ==
	    NULL)
		return 0;
	return json_is_true(json_object_get(v, "memory"));
}

/*
 * A job's entry of the CUDA section (NULL: none): the process of the
 * image that holds its file, and the descriptor.  Returns GCK_OK or a
 * code.
 */
static int
job_parse(struct gck_ctx *ctx, const struct gck_manifest *m,
    struct gck_mcuda *mc, json_t *j)
{
	json_int_t	holder, fd;
	size_t		i;

	if (j == NULL)
		return GCK_OK;
	if (json_unpack(j, "{s:I, s:I}", "holder", &holder, "fd", &fd) != 0 ||
	    holder <= 0 || holder > INT32_MAX || fd < 0 || fd > INT32_MAX)
		return gck_set_error(ctx, GCK_EFORMAT, "corrupt image: bad "
		    "job in the manifest");
	for (i = 0; i < m->n; i++)
		if (m->procs[i].pid == holder)
			break;
	if (i == m->n)
		return gck_set_error(ctx, GCK_EFORMAT, "corrupt image: the "
		    "job's file is held by process %lld, which is not in the "
		    "process list", (long long)holder);
	mc->job_holder = (pid_t)holder;
	mc->job_fd = (int)fd;
	return GCK_OK;
}

/*
 * The CUDA section's NCCL ranks quiesced (NULL: none): one at least, no
 * more than the processes.  Returns GCK_OK or a code.
 */
static int
nccl_parse(struct gck_ctx *ctx, const struct gck_manifest *m,
    struct gck_mcuda *mc, json_t *j)
{
	json_int_t	ranks;

	if (j == NULL)
		return GCK_OK;
	if (json_unpack(j, "{s:I}", "ranks", &ranks) != 0 || ranks <= 0 ||
	    (size_t)ranks > m->n)
		return gck_set_error(ctx, GCK_EFORMAT, "corrupt image: bad "
		    "nccl in the manifest");
	mc->nccl_ranks = (size_t)ranks;
	return GCK_OK;
}

/*
 * Parses and checks the GPU section: null (no CUDA process), or GPUs
 * with well-formed, distinct UUIDs and processes of the tree that use
 * only those GPUs.
 */
static int
cuda_parse(struct gck_ctx *ctx, struct gck_manifest *m, json_t *c)
{
	struct gck_mcuda	*mc;
	struct gck_gpu		*g;
	struct gck_mcproc	*cp;
	json_t			*gpus, *procs, *e, *pg, *u, *mv;
	json_int_t		 ver, idx, mem, pid;
	const char		*uuid, *name, *cc, *pci, *comm;
	size_t			 i, j, k;
	int			 maj, min, n, r;

	if (c == NULL || json_is_null(c))
		return GCK_OK;
	if ((mc = calloc(1, sizeof *mc)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	m->cuda = mc;
	if (json_unpack(c, "{s:I, s:o, s:o}", "driver_version", &ver, "gpus",
	    &gpus, "processes", &procs) != 0 || !json_is_array(gpus) ||
	    !json_is_array(procs) || ver < 0 || ver > INT32_MAX ||
	    json_array_size(gpus) > GCK_GPUS_MAX ||
	    json_array_size(procs) > m->n)
		return gck_set_error(ctx, GCK_EFORMAT, "corrupt image: bad "
		    "cuda section in the manifest");
	mc->driver_version = (int)ver;
	json_array_foreach(gpus, i, e) {
		g = &mc->gpus[i];
		n = 0;
		if (json_unpack(e, "{s:I, s:s, s:s, s:s, s:I, s:s}", "index",
		    &idx, "uuid", &uuid, "name", &name, "compute_capability",
		    &cc, "memory", &mem, "pci_bus_id", &pci) != 0 ||
		    idx < 0 || idx >= 4096 || mem < 0 ||
		    gck_cuda_parse_uuid(uuid, g->uuid) == -1 ||
		    strlen(name) >= sizeof g->name ||
		    strlen(pci) >= sizeof g->pci ||
		    sscanf(cc, "%d.%d%n", &maj, &min, &n) != 2 ||
		    cc[n] != '\0' || maj < 0 || min < 0)
			return gck_set_error(ctx, GCK_EFORMAT, "corrupt image: "
			    "bad GPU %zu in the manifest", i + 1);
		for (j = 0; j < i; j++)
			if (memcmp(mc->gpus[j].uuid, g->uuid, 16) == 0)
				return gck_set_error(ctx, GCK_EFORMAT,
				    "corrupt image: GPU %s twice in the "
				    "manifest", uuid);
		g->index = (int)idx;
		snprintf(g->uuidstr, sizeof g->uuidstr, "%s", uuid);
		snprintf(g->name, sizeof g->name, "%s", name);
		snprintf(g->pci, sizeof g->pci, "%s", pci);
		g->cc_major = maj;
		g->cc_minor = min;
		g->total = (uint64_t)mem;
		g->minor = -1;
		if ((mv = json_object_get(e, "minor")) != NULL) {
			if (!json_is_integer(mv) || json_integer_value(mv) < 0 ||
			    json_integer_value(mv) >= 254)
				return gck_set_error(ctx, GCK_EFORMAT, "corrupt "
				    "image: bad GPU %zu in the manifest", i + 1);
			g->minor = (int)json_integer_value(mv);
		}
	}
	mc->ngpus = json_array_size(gpus);
	if ((mc->procs = calloc(json_array_size(procs) + 1,
	    sizeof *mc->procs)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	json_array_foreach(procs, i, e) {
		cp = &mc->procs[i];
		if (json_unpack(e, "{s:I, s:s, s:o}", "pid", &pid, "comm",
		    &comm, "gpus", &pg) != 0 || !json_is_array(pg))
			return gck_set_error(ctx, GCK_EFORMAT, "corrupt image: "
			    "bad CUDA process %zu in the manifest", i + 1);
		for (j = 0; j < m->n; j++)
			if (m->procs[j].pid == pid)
				break;
		if (j == m->n)
			return gck_set_error(ctx, GCK_EFORMAT, "corrupt image: "
			    "CUDA process %lld is not in the process list",
			    (long long)pid);
		for (k = 0; k < i; k++)
			if (mc->procs[k].pid == pid)
				return gck_set_error(ctx, GCK_EFORMAT,
				    "corrupt image: CUDA process %lld twice "
				    "in the manifest", (long long)pid);
		cp->pid = (pid_t)pid;
		cp->comm = m->procs[j].comm;
		if ((r = custom_parse(ctx, cp, json_object_get(e,
		    "custom_storage"))) != GCK_OK)
			return r;
		json_array_foreach(pg, j, u) {
			json_t	*jm = NULL;

			if (json_unpack(u, "{s:s, s:o}", "uuid", &uuid,
			    "memory", &jm) != 0 ||
			    !(json_is_null(jm) || (json_is_integer(jm) &&
			    json_integer_value(jm) >= 0)))
				return gck_set_error(ctx, GCK_EFORMAT,
				    "corrupt image: bad GPU use of process "
				    "%d in the manifest", (int)cp->pid);
			for (k = 0; k < mc->ngpus; k++)
				if (strcmp(mc->gpus[k].uuidstr, uuid) == 0)
					break;
			if (k == mc->ngpus || cp->gpus & 1ULL << k)
				return gck_set_error(ctx, GCK_EFORMAT,
				    "corrupt image: process %d uses GPU '%s', "
				    "which the manifest does not list once",
				    (int)cp->pid, uuid);
			cp->gpus |= 1ULL << k;
			cp->mem[k] = json_is_null(jm) ? -1 :
			    (int64_t)json_integer_value(jm);
		}
	}
	mc->nprocs = json_array_size(procs);
	if ((r = nccl_parse(ctx, m, mc, json_object_get(c, "nccl"))) !=
	    GCK_OK)
		return r;
	return job_parse(ctx, m, mc, json_object_get(c, "job"));
}

/*
 * The processes of manifest m, root its root's pid: each once, the root
 * among them.  Returns GCK_OK or a code.
 */
static int
procs_parse(struct gck_ctx *ctx, struct gck_manifest *m, json_t *procs,
    json_int_t root)
{
	json_t		*p;
	json_int_t	 pid, start, hpid;
	const char	*comm;
	pid_t		*sorted = NULL;
	size_t		 i;
	int		 zombie, r = GCK_OK, found = 0;

	m->n = json_array_size(procs);
	if ((m->procs = calloc(m->n, sizeof *m->procs)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	json_array_foreach(procs, i, p) {
		comm = NULL;
		zombie = 0;
		start = 0;
		hpid = 0;
		if (json_unpack(p, "{s:I, s?s, s?b, s?I, s?I}", "pid", &pid,
		    "comm", &comm, "zombie", &zombie, "start", &start,
		    "host_pid", &hpid) != 0 ||
		    pid <= 0 || pid > INT32_MAX || start < 0 || hpid < 0 ||
		    hpid > INT32_MAX)
			return gck_set_error(ctx, GCK_EFORMAT, "corrupt image: "
			    "bad process %zu in the manifest", i + 1);
		m->procs[i].pid = (pid_t)pid;
		m->procs[i].host_pid = hpid > 0 ? (pid_t)hpid : (pid_t)pid;
		m->procs[i].comm = comm != NULL ? comm : "?";
		m->procs[i].zombie = zombie;
		m->procs[i].start = (uint64_t)start;
		if (pid == root)
			found = 1;
	}
	if ((sorted = calloc(m->n, sizeof *sorted)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	for (i = 0; i < m->n; i++)
		sorted[i] = m->procs[i].pid;
	qsort(sorted, m->n, sizeof *sorted, pid_cmp);
	for (i = 1; i < m->n && r == GCK_OK; i++)
		if (sorted[i] == sorted[i - 1])
			r = gck_set_error(ctx, GCK_EFORMAT, "corrupt image: "
			    "pid %d twice in the manifest", (int)sorted[i]);
	free(sorted);
	if (r == GCK_OK && !found)
		r = gck_set_error(ctx, GCK_EFORMAT, "corrupt image: root "
		    "pid %lld is not in the process list", (long long)root);
	return r;
}

/*
 * The kind of manifest m, of format fmt: an image of chunks has no
 * files, and a parent only of format 3, a cache's, whose chunks a round
 * may hold patches of.  Returns GCK_OK or a code.
 */
static int
kind_parse(struct gck_ctx *ctx, struct gck_manifest *m, json_int_t fmt)
{
	json_t	*kind = json_object_get(m->root, "kind");
	json_t	*parent = json_object_get(m->root, "parent");

	if (kind != NULL && (fmt < 2 || !json_is_string(kind) ||
	    strcmp(json_string_value(kind), "chunks") != 0 ||
	    json_object_get(m->root, "files") != NULL ||
	    (parent != NULL && (fmt < 3 ||
	    !json_is_true(json_object_get(parent, "cache"))))))
		return gck_set_error(ctx, GCK_EFORMAT, "corrupt image: bad kind "
		    "in the manifest");
	m->chunks = kind != NULL;
	return GCK_OK;
}

/*
 * Parses and checks a manifest.  Returns GCK_OK with *mp set, GCK_EVERSION
 * for a newer format, or GCK_EFORMAT.
 */
int
gck_manifest_parse(struct gck_ctx *ctx, const char *text, size_t len,
    struct gck_manifest **mp)
{
	struct gck_manifest	*m = NULL;
	json_error_t		 jerr;
	json_t			*procs;
	json_int_t		 fmt, root;
	int			 shell = 0, r;

	*mp = NULL;
	if ((m = calloc(1, sizeof *m)) == NULL) {
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	if ((m->root = json_loadb(text, len, JSON_REJECT_DUPLICATES,
	    &jerr)) == NULL || !json_is_object(m->root)) {
		r = gck_set_error(ctx, GCK_EFORMAT, "not a gpuckpt image: "
		    "manifest is not a JSON object");
		goto out;
	}
	if (json_unpack(m->root, "{s:I}", "format", &fmt) != 0) {
		r = gck_set_error(ctx, GCK_EFORMAT, "not a gpuckpt image: "
		    "manifest has no format version");
		goto out;
	}
	if (fmt > GCK_FORMAT_VERSION) {
		r = gck_set_error(ctx, GCK_EVERSION, "image format version "
		    "%lld is newer than this version supports (%d): "
		    "upgrade gpuckpt", (long long)fmt, GCK_FORMAT_VERSION);
		goto out;
	}
	if (fmt < 1) {
		r = gck_set_error(ctx, GCK_EFORMAT, "not a gpuckpt image: "
		    "bad format version %lld", (long long)fmt);
		goto out;
	}
	if (json_unpack_ex(m->root, &jerr, 0, "{s:I, s?b, s:o}", "root_pid",
	    &root, "shell_job", &shell, "processes", &procs) != 0 ||
	    !json_is_array(procs) || json_array_size(procs) == 0 ||
	    json_array_size(procs) > MANIFEST_PROCS_MAX ||
	    root <= 0 || root > INT32_MAX) {
		r = gck_set_error(ctx, GCK_EFORMAT, "corrupt image: bad "
		    "process list in the manifest");
		goto out;
	}
	m->format = (int)fmt;
	m->root_pid = (pid_t)root;
	m->shell_job = shell;
	if ((r = procs_parse(ctx, m, procs, root)) != GCK_OK ||
	    (r = kind_parse(ctx, m, fmt)) != GCK_OK ||
	    (r = id_parse(ctx, m)) != GCK_OK ||
	    (r = cuda_parse(ctx, m, json_object_get(m->root, "cuda"))) !=
	    GCK_OK || (r = files_parse(ctx, m, json_object_get(m->root,
	    "files"))) != GCK_OK || (r = custom_check(ctx, m)) != GCK_OK ||
	    (r = criu_parse(ctx, m,
	    json_object_get(m->root, "criu"))) != GCK_OK)
		goto out;
	*mp = m;
	m = NULL;
	r = GCK_OK;
out:
	gck_manifest_free(m);
	return r;
}

/* Whether s is an image id: 32 lowercase hexadecimal digits. */
static int
id_ok(const char *s)
{
	size_t	i;

	if (s == NULL || strlen(s) != 32)
		return 0;
	for (i = 0; i < 32; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' &&
		    s[i] <= 'f')))
			return 0;
	return 1;
}

/*
 * The id of a format 2 image, and its parent: the parent's id first in
 * a chain of distinct ids, the parent's and those of its own chain.
 */
static int
id_parse(struct gck_ctx *ctx, struct gck_manifest *m)
{
	json_t		*id = json_object_get(m->root, "id"), *p, *c, *v;
	const char	*pid;
	size_t		 i;

	p = json_object_get(m->root, "parent");
	if (id != NULL && (m->format < 2 || !id_ok(json_string_value(id))))
		return gck_set_error(ctx, GCK_EFORMAT, "corrupt image: bad id "
		    "in the manifest");
	m->id = json_string_value(id);
	if (p == NULL)
		return GCK_OK;
	c = json_object_get(p, "chain");
	pid = json_string_value(json_object_get(p, "id"));
	if (m->id == NULL || !json_is_object(p) || !id_ok(pid) ||
	    !json_is_array(c) || json_array_size(c) == 0 ||
	    json_array_size(c) > 1000 ||
	    strcmp(json_string_value(json_array_get(c, 0)) != NULL ?
	    json_string_value(json_array_get(c, 0)) : "", pid) != 0)
		return gck_set_error(ctx, GCK_EFORMAT, "corrupt image: bad "
		    "parent in the manifest");
	json_array_foreach(c, i, v)
		if (!id_ok(json_string_value(v)))
			return gck_set_error(ctx, GCK_EFORMAT, "corrupt image: "
			    "bad parent in the manifest");
	m->chain = c;
	return GCK_OK;
}

/* The image's id (format 2), or NULL. */
const char *
gck_manifest_id(const struct gck_manifest *m)
{
	return m->id;
}

/* The ids of the images its data may be in (a JSON array), or NULL. */
json_t *
gck_manifest_chain(const struct gck_manifest *m)
{
	return m->chain;
}

/*
 * Whether the images of its chain are those of a receiver's cache,
 * which stand alone, rather than a chain of parents.
 */
int
gck_manifest_cached(const struct gck_manifest *m)
{
	return m->chain != NULL && json_is_true(json_object_get(
	    json_object_get(m->root, "parent"), "cache"));
}

/* The manifest as parsed, for readers of its other facts. */
json_t *
gck_manifest_json(const struct gck_manifest *m)
{
	return m->root;
}

int
gck_manifest_format(const struct gck_manifest *m)
{
	return m->format;
}

pid_t
gck_manifest_root_pid(const struct gck_manifest *m)
{
	return m->root_pid;
}

size_t
gck_manifest_nprocs(const struct gck_manifest *m)
{
	return m->n;
}

pid_t
gck_manifest_pid(const struct gck_manifest *m, size_t i)
{
	return i < m->n ? m->procs[i].pid : -1;
}

/*
 * The PID the checkpoint saw process i by: its own, but for a tree
 * checkpointed from outside its PID namespace.
 */
pid_t
gck_manifest_host_pid(const struct gck_manifest *m, size_t i)
{
	return i < m->n ? m->procs[i].host_pid : -1;
}

const char *
gck_manifest_comm(const struct gck_manifest *m, size_t i)
{
	return i < m->n ? m->procs[i].comm : NULL;
}

int
gck_manifest_zombie(const struct gck_manifest *m, size_t i)
{
	return i < m->n && m->procs[i].zombie;
}

uint64_t
gck_manifest_start(const struct gck_manifest *m, size_t i)
{
	return i < m->n ? m->procs[i].start : 0;
}

int
gck_manifest_shell_job(const struct gck_manifest *m)
{
	return m->shell_job;
}

/*
 * What gpuckpt did with the tree once the image was complete, as far as
 * the manifest says: GCK_AFTER_KILL where it says nothing known.
 */
enum gck_after
gck_manifest_after(const struct gck_manifest *m)
{
	const char	*s;
	size_t		 i;

	s = json_string_value(json_object_get(json_object_get(m->root,
	    "options"), "after"));
	for (i = GCK_AFTER_KILL; s != NULL && i < sizeof after_names /
	    sizeof after_names[0]; i++)
		if (strcmp(s, after_names[i]) == 0)
			return (enum gck_after)i;
	return GCK_AFTER_KILL;
}

unsigned int
gck_manifest_criu_opts(const struct gck_manifest *m)
{
	return m->criu_opts;
}

/* The version of criu that dumped the image ("4.2.1"), or NULL. */
const char *
gck_manifest_criu_version(const struct gck_manifest *m)
{
	return json_string_value(json_object_get(json_object_get(m->root,
	    "criu"), "version"));
}

const struct gck_mcuda *
gck_manifest_cuda(const struct gck_manifest *m)
{
	return m->cuda;
}

size_t
gck_manifest_cuda_nprocs(const struct gck_manifest *m)
{
	return m->cuda != NULL ? m->cuda->nprocs : 0;
}

void
gck_manifest_free(struct gck_manifest *m)
{
	if (m == NULL)
		return;
	json_decref(m->root);
	json_decref(m->files);
	if (m->cuda != NULL)
		free(m->cuda->procs);
	free(m->cuda);
	free(m->procs);
	free(m);
}

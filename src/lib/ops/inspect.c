/*
 * inspect.c: what an image holds, and what differs between two.
 *
 * gck_inspect_show() reads the manifest at the head of the stream, and
 * the small CRIU images after it, up to the memory (see needs.c).
 * gck_inspect_diff() reads two images whole, one after the other; of the
 * memory it keeps only a 64-bit digest of each 4 KiB page, computed as
 * the parts go by, and compares those, page by virtual address, per
 * process and per mapping.  Both describe their findings as JSON
 * documents whose schema gpuinspect(1) documents.
 */
#include "config.h"

#include <sys/stat.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <xxhash.h>

#include "private.h"
#include "core/util.h"
#include "criu/pagemap.h"
#include "image/image.h"
#include "image/manifest.h"
#include "image/names.h"
#include "image/parent.h"
#include "image/sign.h"
#include "ops/needs.h"
#include "criu/criu-images.pb-c.h"

#define PAGE		4096u
#define NAME_LEN	256
#define KEEP_ONE_MAX	(64u << 20)	/* an mm, pagemap or files image */
#define JINT_MAX	LLONG_MAX	/* json_int_t is long long */

/* CRIU's VMA status bits (criu/include/image.h) */
#define VMA_AREA_STACK		(1u << 1)
#define VMA_AREA_VSYSCALL	(1u << 2)
#define VMA_AREA_VDSO		(1u << 3)
#define VMA_AREA_HEAP		(1u << 5)
#define VMA_FILE_PRIVATE	(1u << 6)
#define VMA_FILE_SHARED		(1u << 7)
#define VMA_ANON_SHARED		(1u << 8)
#define VMA_AREA_SYSVIPC	(1u << 10)
#define VMA_AREA_SOCKET		(1u << 11)
#define VMA_AREA_VVAR		(1u << 12)
#define VMA_AREA_AIORING	(1u << 13)
#define VMA_AREA_MEMFD		(1u << 14)

/* A small CRIU file kept for the diff. */
struct kept {
	char		*name;
	char		*data;
	size_t		 len;
};

/* The page digests of one pages-N.img, in file order. */
struct pdig {
	unsigned	 id;
	uint64_t	*d;
	size_t		 n, cap;
};

/* A CRIU file: its size, and a digest of its contents. */
struct cfile {
	char		*name;
	uint64_t	 size;
	uint64_t	 digest;
};

/* Pages by address: a process's memory, or a shared segment's. */
struct pmap {
	uint64_t	*addr;
	uint64_t	*d;
	size_t		 n;
};

/* A file that mappings name, from files.img. */
struct fpath {
	uint32_t	 id;
	char		*path;
};

/* A shared memory segment's pages. */
struct shm {
	uint64_t	 shmid;
	struct pmap	 pm;
};

/* A manifest, indexed: processes and CUDA processes by PID, GPUs by UUID. */
struct mix {
	json_t		*mj;
	json_t		*procs, *cuda, *gpus;
};

/* One image, read whole for a diff. */
struct dimg {
	const char	*label;
	struct gck_reader *rd;
	const struct gck_manifest *m;
	json_t		*names;		/* where kept, pd, cf, shm hold a name:
					   under "k:", "p:", "f:", "s:" */
	struct kept	*kept;
	size_t		 nkept, capkept;
	struct pdig	*pd;
	size_t		 npd, cappd;
	struct cfile	*cf;
	size_t		 ncf, capcf;
	struct fpath	*fp;		/* by id */
	size_t		 nfp, capfp;
	struct shm	*shm;
	size_t		 nshm, capshm;
	struct mix	 ix;
};

struct vma {
	uint64_t	 start, end, pgoff, shmid;
	uint32_t	 prot, flags, status;
};

struct vmas {
	struct vma	*v;
	size_t		 n;
};

/* The members of the manifest that the summary passes on as they are. */
static const char *const host_keys[] = { "hostname", "kernel", "arch",
	"boot_id", NULL };
static const char *const cuda_keys[] = { "driver_version", "cuda_version",
	"driver", "nvml", "gpus", "job", "nccl", NULL };
static const char *const proc_keys[] = { "pid", "ppid", "pgid", "sid", "uid",
	"gid", "comm", "cmdline", "cwd", "threads", NULL };

static uint64_t	 zero_digest;
static const char zero_page[PAGE];

static json_t	*show_doc(const struct mix *, int64_t);
static int	 jset(json_t *, const char *, json_t *);
static json_t	*jcopy(json_t *, const char *);
static int	 dimg_read(struct gck_ctx *, struct dimg *, int);
static void	 dimg_free(struct dimg *);
static int	 dimg_index(struct gck_ctx *, struct dimg *, const char *,
		    const char *, size_t);
static ssize_t	 dimg_lookup(const struct dimg *, const char *, const char *);
static const struct kept *dimg_find(const struct dimg *, const char *);
static const struct pdig *dimg_pages(const struct dimg *, unsigned);
static int	 pmap_build(struct gck_ctx *, const struct dimg *,
		    const char *, struct pmap *);
static void	 pmap_free(struct pmap *);
static int	 vmas_load(struct gck_ctx *, const struct dimg *, pid_t,
		    struct vmas *);
static json_t	*proc_diff(struct gck_ctx *, const struct dimg *,
		    const struct dimg *, pid_t, json_t *, json_t *, int *);
static json_t	*files_diff(const struct dimg *, const struct dimg *,
		    int *);
static const char *vma_kind(uint32_t);
static const char *vma_path(const struct dimg *, const struct vma *);
static int	 files_index(struct gck_ctx *, struct dimg *);
static int	 fpath_cmp(const void *, const void *);
static int	 bad_criu(struct gck_ctx *, const char *);

static int
jset(json_t *o, const char *k, json_t *v)
{
	return v == NULL ? -1 : json_object_set_new(o, k, v);
}

/* A new object with a copy of each member keys[] names (null if none). */
static json_t *
jcopy_keys(json_t *o, const char *const *keys)
{
	json_t	*n;

	if ((n = json_object()) == NULL)
		return NULL;
	for (; *keys != NULL; keys++)
		if (jset(n, *keys, jcopy(o, *keys)) != 0) {
			json_decref(n);
			return NULL;
		}
	return n;
}

/* A copy of o's member k, or JSON null if it has none. */
static json_t *
jcopy(json_t *o, const char *k)
{
	json_t	*v = json_is_object(o) ? json_object_get(o, k) : NULL;

	return v != NULL ? json_deep_copy(v) : json_null();
}

/* The integer member k of o, or -1. */
static json_int_t
jint(json_t *o, const char *k)
{
	json_t	*v = json_is_object(o) ? json_object_get(o, k) : NULL;

	return json_is_integer(v) ? json_integer_value(v) : -1;
}

/* Whether two members are equal, both absent included. */
static int
jsame(json_t *a, json_t *b)
{
	return (a == NULL && b == NULL) || json_equal(a, b);
}

/* An integer, or null for a negative (unknown) one. */
static json_t *
jsize(json_int_t v)
{
	return v >= 0 ? json_integer(v) : json_null();
}

/*
 * Adds v to *sum when v is positive, at most up to JINT_MAX: the
 * totals of a hostile manifest stop there rather than wrap.
 */
static void
jtotal(json_int_t *sum, json_int_t v)
{
	if (v <= 0)
		return;
	*sum = v > JINT_MAX - *sum ? JINT_MAX : *sum + v;
}

static void
mix_free(struct mix *x)
{
	json_decref(x->procs);
	json_decref(x->cuda);
	json_decref(x->gpus);
	memset(x, 0, sizeof *x);
}

static int
mix_add(json_t *ix, json_t *o, const char *k)
{
	json_t		*v = json_object_get(o, k);
	char		 key[32];
	const char	*ks = key;

	if (json_is_integer(v))
		snprintf(key, sizeof key, "%lld",
		    (long long)json_integer_value(v));
	else if (json_is_string(v))
		ks = json_string_value(v);
	else
		return 0;
	return json_object_set(ix, ks, o);
}

static int
mix_build(struct gck_ctx *ctx, json_t *mj, struct mix *x)
{
	json_t	*cuda = json_object_get(mj, "cuda"), *o;
	size_t	 i;

	memset(x, 0, sizeof *x);
	x->mj = mj;
	if ((x->procs = json_object()) == NULL ||
	    (x->cuda = json_object()) == NULL ||
	    (x->gpus = json_object()) == NULL)
		goto nomem;
	json_array_foreach(json_object_get(mj, "processes"), i, o)
		if (mix_add(x->procs, o, "pid") != 0)
			goto nomem;
	json_array_foreach(json_object_get(cuda, "processes"), i, o)
		if (mix_add(x->cuda, o, "pid") != 0)
			goto nomem;
	json_array_foreach(json_object_get(cuda, "gpus"), i, o)
		if (mix_add(x->gpus, o, "uuid") != 0)
			goto nomem;
	return GCK_OK;
nomem:
	mix_free(x);
	return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
}

static json_t *
mix_get(json_t *ix, json_int_t pid)
{
	char	key[32];

	snprintf(key, sizeof key, "%lld", (long long)pid);
	return json_object_get(ix, key);
}

/* What a process holds on which GPUs, from the manifest's cuda section. */
static json_t *
proc_gpus(const struct mix *x, json_int_t pid)
{
	json_t		*p, *g, *mg, *a, *o;
	json_int_t	 mem;
	const char	*uuid;
	size_t		 j;

	if ((a = json_array()) == NULL)
		return NULL;
	if ((p = mix_get(x->cuda, pid)) == NULL)
		return a;
	json_array_foreach(json_object_get(p, "gpus"), j, g) {
		if (json_unpack(g, "{s:s}", "uuid", &uuid) != 0)
			continue;
		mem = jint(g, "memory");
		/* custom: the driver mapped it to gpuckpt, which copied it */
		o = json_pack("{s:s, s:o, s:s}", "uuid", uuid, "memory",
		    jsize(mem), "storage", json_is_array(json_object_get(p,
		    "custom_storage")) ? "custom" : "host");
		if (o != NULL && (mg = json_object_get(x->gpus, uuid)) !=
		    NULL) {
			jset(o, "index", jcopy(mg, "index"));
			jset(o, "name", jcopy(mg, "name"));
		}
		if (o == NULL || json_array_append_new(a, o) != 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

/*
 * The show document (schema 1) of manifest m; disk is the size of the
 * image file, or -1 when it is not known (a pipe).
 */
static json_t *
show_doc(const struct mix *x, int64_t disk)
{
	json_t		*mj = x->mj, *d, *img, *procs, *p, *np;
	json_t		*mem, *f, *gpus, *g;
	json_int_t	 data = 0, pages = 0, threads = 0, rss = 0, anon = 0;
	json_int_t	 file = 0, shmem = 0, gmem = 0, v;
	size_t		 i, j, nfiles = 0;
	int		 known = 1, gknown = 1, ok = 0;
	/* Checked by the manifest's parser: known names, each once. */
	json_t		*copts = json_object_get(json_object_get(mj, "criu"),
			    "options");

	if ((d = json_object()) == NULL || (img = json_object()) == NULL ||
	    (procs = json_array()) == NULL)
		goto out;
	json_array_foreach(json_object_get(mj, "files"), i, f) {
		if ((v = jint(f, "size")) < 0)
			continue;
		jtotal(&data, v);
		if (json_is_true(json_object_get(f, "memory")))
			jtotal(&pages, v);
		nfiles++;
	}
	if (!json_is_array(json_object_get(mj, "files")))
		known = 0;
	/* Drawn from the head alone: the rest of the image is unread. */
	if (jset(d, "schema", json_integer(GCK_INSPECT_SCHEMA)) != 0 ||
	    jset(d, "verified", json_false()) != 0 ||
	    jset(d, "image", img) != 0 ||
	    jset(img, "format", jcopy(mj, "format")) != 0 ||
	    jset(img, "size", jsize(disk)) != 0 ||
	    jset(img, "data_size", known ? json_integer(data) :
	    json_null()) != 0 ||
	    jset(img, "memory_size", known ? json_integer(pages) :
	    json_null()) != 0 ||
	    jset(img, "ratio", known && disk > 0 ? json_real((double)
	    (((uint64_t)data * 100 + (uint64_t)disk / 2) / (uint64_t)disk) /
	    100) : json_null()) != 0 ||
	    jset(img, "file_count", known ? json_integer((json_int_t)nfiles) :
	    json_null()) != 0 ||
	    jset(img, "part_size", jcopy(mj, "part_size")) != 0 ||
	    jset(img, "chunk_size", jcopy(mj, "chunk_size")) != 0 ||
	    jset(img, "id", jcopy(mj, "id")) != 0 ||
	    jset(img, "kind", json_object_get(mj, "kind") != NULL ?
	    jcopy(mj, "kind") : json_string("checkpoint")) != 0 ||
	    jset(d, "created", jcopy(mj, "created")) != 0 ||
	    jset(d, "tool", jcopy(mj, "tool")) != 0 ||
	    jset(d, "host", jcopy_keys(json_object_get(mj, "host"),
	    host_keys)) != 0 ||
	    jset(d, "criu", json_pack("{s:o, s:o}", "version",
	    jcopy(json_object_get(mj, "criu"), "version"), "options",
	    copts != NULL ? json_deep_copy(copts) : json_array())) != 0 ||
	    jset(d, "options", jcopy(mj, "options")) != 0 ||
	    jset(d, "root_pid", jcopy(mj, "root_pid")) != 0 ||
	    jset(d, "shell_job", jcopy(mj, "shell_job")) != 0 ||
	    jset(d, "mounts", json_is_object(json_object_get(mj, "mounts")) ?
	    json_deep_copy(json_object_get(mj, "mounts")) : json_null()) != 0)
		goto out;
	if (json_is_object(json_object_get(mj, "cuda"))) {
		if (jset(d, "cuda", jcopy_keys(json_object_get(mj, "cuda"),
		    cuda_keys)) != 0)
			goto out;
	} else if (jset(d, "cuda", json_null()) != 0)
		goto out;
	json_array_foreach(json_object_get(mj, "processes"), i, p) {
		json_t	*pm = json_object_get(p, "memory");

		if ((np = jcopy_keys(p, proc_keys)) == NULL ||
		    json_array_append_new(procs, np) != 0 ||
		    (mem = json_object()) == NULL || jset(np, "memory", mem) ||
		    jset(mem, "vm_size", jcopy(pm, "vm_size")) ||
		    jset(mem, "vm_rss", jcopy(pm, "vm_rss")) ||
		    jset(mem, "rss_anon", jcopy(pm, "rss_anon")) ||
		    jset(mem, "rss_file", jcopy(pm, "rss_file")) ||
		    jset(mem, "rss_shmem", jcopy(pm, "rss_shmem")) ||
		    (gpus = proc_gpus(x, jint(p, "pid"))) == NULL ||
		    jset(np, "gpus", gpus))
			goto out;
		jtotal(&threads, jint(p, "threads"));
		jtotal(&rss, jint(pm, "vm_rss"));
		jtotal(&anon, jint(pm, "rss_anon"));
		jtotal(&file, jint(pm, "rss_file"));
		jtotal(&shmem, jint(pm, "rss_shmem"));
		json_array_foreach(gpus, j, g) {
			if ((v = jint(g, "memory")) < 0)
				gknown = 0;
			else
				jtotal(&gmem, v);
		}
	}
	if (jset(d, "processes", procs) != 0)
		goto out;
	procs = NULL;
	if (jset(d, "totals", json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:o}",
	    "processes", (json_int_t)json_array_size(json_object_get(d,
	    "processes")), "threads", threads, "vm_rss", rss, "rss_anon",
	    anon, "rss_file", file, "rss_shmem", shmem, "gpu_memory", gknown ?
	    json_integer(gmem) : json_null())) != 0)
		goto out;
	ok = 1;
out:
	if (!ok) {
		json_decref(procs);
		json_decref(d);
		return NULL;
	}
	return d;
}

/* Serializes doc into *textp, indented, with a final newline. */
int
gck_inspect_text(struct gck_ctx *ctx, json_t *doc, char **textp)
{
	char	*s, *t;
	size_t	 l;

	if (doc == NULL || (s = json_dumps(doc, JSON_INDENT(2) |
	    JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(4))) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	l = strlen(s);
	if ((t = realloc(s, l + 2)) == NULL) {
		free(s);
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	}
	t[l] = '\n';
	t[l + 1] = '\0';
	*textp = t;
	return GCK_OK;
}

/*
 * What the image's parent is, and how much of it is new: the bytes it
 * stores and those it leaves to its parents, as its trailer lists them
 * (found from the end of a file; unknown, null, from a pipe); an image
 * with no parent stores the whole of its data.
 */
static int
show_parent(struct gck_ctx *ctx, int fd, const struct gck_manifest *m,
    json_t *img)
{
	json_t		*p = json_object_get(gck_manifest_json(m), "parent");
	uint64_t	 stored, ref = 0;
	int		 known;

	/* An image with no parent stores all its data. */
	if (gck_manifest_chain(m) == NULL) {
		known = json_is_integer(json_object_get(img, "data_size"));
		stored = known ? (uint64_t)json_integer_value(
		    json_object_get(img, "data_size")) : 0;
	} else
		known = gck_parents_sizes(ctx, fd, "the image", &stored,
		    &ref) == GCK_OK;
	return jset(img, "parent", gck_manifest_chain(m) != NULL ?
	    jcopy(p, "id") : json_null()) != 0 ||
	    jset(img, "chain", gck_manifest_chain(m) != NULL ?
	    json_deep_copy(gck_manifest_chain(m)) : json_array()) != 0 ||
	    jset(img, "stored_bytes", known ? json_integer((json_int_t)
	    stored) : json_null()) != 0 ||
	    jset(img, "referenced_bytes", known ? json_integer((json_int_t)
	    ref) : json_null()) != 0 ? -1 : 0;
}

static int	show_signature(struct gck_ctx *, int,
		    const struct gck_manifest *, json_t *);

/*
 * What the processes have open, as the CRIU images at the head of the
 * image say (read on from the manifest, up to the memory): "descriptors",
 * null with "descriptors_error" when they cannot be read (an image cut
 * short there, say).
 */
static int
show_needs(struct gck_ctx *ctx, struct gck_reader *rd,
    const struct gck_manifest *m, json_t *doc)
{
	struct gck_needs	*nd = NULL;
	json_t			*d = NULL;
	int			 r;

	if (gck_needs_read(ctx, rd, m, &nd) != GCK_OK)
		r = jset(doc, "descriptors", json_null()) != 0 ||
		    jset(doc, "descriptors_error", gck_needs_jstr(
		    gck_error_string(ctx), strlen(gck_error_string(ctx)))) !=
		    0;
	else
		r = jset(doc, "descriptors", (d = gck_needs_doc(nd)) != NULL ?
		    d : json_null()) != 0;
	gck_needs_free(nd);
	return r ? -1 : 0;
}

/*
 * Each process's environment, as the manifest has it: "environment",
 * null where it was not recorded; "environment_cut" where it was cut.
 */
static int
show_env(json_t *mj, json_t *doc)
{
	json_t	*mp, *p, *e;
	size_t	 i;

	json_array_foreach(json_object_get(doc, "processes"), i, p) {
		mp = json_array_get(json_object_get(mj, "processes"), i);
		e = json_object_get(mp, "environ");
		if (jset(p, "environment", json_is_array(e) ?
		    json_deep_copy(e) : json_null()) != 0 ||
		    jset(p, "environment_cut", json_boolean(json_is_true(
		    json_object_get(mp, "environ_cut")))) != 0)
			return -1;
	}
	return 0;
}

int
gck_inspect_show(struct gck_ctx *ctx, int fd, char **textp)
{
	return gck_inspect_show_opts(ctx, fd, 0, textp);
}

int
gck_inspect_show_opts(struct gck_ctx *ctx, int fd, unsigned int flags,
    char **textp)
{
	const struct gck_manifest	*m;
	struct gck_reader		*rd = NULL;
	struct stat			 st;
	struct mix			 x = { 0 };
	json_t				*doc = NULL;
	int64_t				 disk = -1;
	int				 r;

	*textp = NULL;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
		disk = (int64_t)st.st_size;
	if ((r = gck_reader_new(ctx, fd, &rd)) != GCK_OK)
		goto out;
	/* It stops at the memory: nothing is to be read ahead of it. */
	gck_reader_no_ahead(rd);
	if ((r = gck_reader_head(rd, &m)) != GCK_OK ||
	    (r = mix_build(ctx, gck_manifest_json(m), &x)) != GCK_OK)
		goto out;
	doc = show_doc(&x, disk);
	if (doc != NULL && (((flags & GCK_SHOW_ENV) && show_env(
	    gck_manifest_json(m), doc) != 0) ||
	    show_needs(ctx, rd, m, doc) != 0 ||
	    show_parent(ctx, fd, m, json_object_get(doc, "image")) != 0 ||
	    show_signature(ctx, fd, m, json_object_get(doc, "image")) != 0)) {
		json_decref(doc);
		doc = NULL;
	}
	r = gck_inspect_text(ctx, doc, textp);
out:
	mix_free(&x);
	json_decref(doc);
	gck_reader_free(rd);
	return r;
}

/* Writes len bytes of data to a new file name in dfd (dir). */
static int
write_new(struct gck_ctx *ctx, int dfd, const char *dir, const char *name,
    const void *data, size_t len)
{
	int	fd, r;

	if ((fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, 0600)) == -1)
		return gck_set_syserr(ctx, errno, "cannot create '%s/%s': %s",
		    dir, name, strerror(errno));
	r = gck_write_all(ctx, fd, data, len, name);
	if (close(fd) == -1 && r == GCK_OK)
		r = gck_set_syserr(ctx, errno, "cannot write '%s/%s': %s", dir,
		    name, strerror(errno));
	return r;
}

/*
 * For a signed image, the trailer and the signature that covers its
 * bytes, as they are in the image: so that ssh-keygen -Y verify checks
 * the one against the other.
 */
static int
extract_tail(struct gck_ctx *ctx, struct gck_reader *rd, int dfd,
    const char *dir)
{
	const char	*sig, *t;
	size_t		 siglen, tlen;
	int		 r;

	gck_reader_signature(rd, &sig, &siglen, &t, &tlen);
	if (sig == NULL || t == NULL)
		return GCK_OK;
	if ((r = write_new(ctx, dfd, dir, GCK_ENTRY_TRAILER, t, tlen)) !=
	    GCK_OK)
		return r;
	return write_new(ctx, dfd, dir, GCK_ENTRY_SIG, sig, siglen);
}

/*
 * Who signed the image read by rd, to its end.  With allowed (an
 * allowed_signers file), the signature must be good and made by a key
 * it allows (gpurestore's check); without, good, by whatever key.
 * Returns GCK_OK with *whop ("alice, ED25519 key SHA256:...", or the
 * key alone; NULL for an image not signed, which is GCK_ESIGN with
 * allowed), to be freed, or a code.
 */
int
gck_reader_signer(struct gck_reader *rd, const char *allowed, char **whop)
{
	struct gck_ctx		*ctx = gck_reader_ctx(rd);
	struct gck_sigkey	 k;
	const char		*sig, *t;
	char			*who = NULL;
	size_t			 siglen, tlen;
	int			 r;

	*whop = NULL;
	gck_reader_signature(rd, &sig, &siglen, &t, &tlen);
	if (t == NULL)
		return gck_set_error(ctx, GCK_EINVAL, "the image has not been "
		    "read to its end");
	if (sig == NULL)
		return allowed == NULL ? GCK_OK : gck_set_error(ctx, GCK_ESIGN,
		    "the image is not signed, and '%s' allows only signed "
		    "images", allowed);
	if ((r = gck_sig_key(ctx, sig, siglen, &k)) != GCK_OK)
		return r;
	if (allowed != NULL)
		r = gck_sig_verify(ctx, allowed, sig, siglen, t, tlen, &who);
	else
		r = gck_sig_check(ctx, sig, siglen, t, tlen);
	if (r != GCK_OK)
		return r;
	if ((who == NULL ? asprintf(whop, "%s key %s", k.type, k.fp) :
	    asprintf(whop, "%s, %s key %s", who, k.type, k.fp)) == -1) {
		*whop = NULL;
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	}
	free(who);
	return r;
}

/*
 * Who signed the image file on fd, read from its end, for show: null
 * when it is not signed, or read from a pipe.
 */
static int
show_signature(struct gck_ctx *ctx, int fd, const struct gck_manifest *m,
    json_t *img)
{
	struct gck_sigkey	 k;
	struct stat		 sb;
	char			*t = NULL, *sig = NULL;
	size_t			 tlen, siglen;
	json_t			*v;
	int			 r;

	if (fstat(fd, &sb) == -1 || !S_ISREG(sb.st_mode) ||
	    gck_manifest_format(m) < 2)
		return jset(img, "signature", json_null());
	r = gck_image_tail(ctx, fd, "the image", &t, &tlen, &sig, &siglen);
	if (r == GCK_OK && sig != NULL && gck_sig_key(ctx, sig, siglen,
	    &k) == GCK_OK)
		v = json_pack("{s:s, s:s}", "key", k.type, "fingerprint", k.fp);
	else if (r == GCK_OK && sig != NULL)
		v = json_pack("{s:n, s:n}", "key", "fingerprint");
	else
		v = json_null();
	free(t);
	free(sig);
	return v == NULL || jset(img, "signature", v) != 0 ? -1 : 0;
}

/*
 * Extracting: the CRIU files and the manifest land in a new directory
 * beside dir, which is renamed to dir once the whole image has been
 * read and verified; on any failure it is removed.
 */
int
gck_inspect_extract(struct gck_ctx *ctx, int fd, const char *dir)
{
	const struct gck_manifest	*m;
	struct gck_reader		*rd = NULL;
	struct stat			 st;
	const char			*text;
	char				*tmp = NULL, *slash;
	size_t				 len;
	int				 r, dfd = -1, mfd = -1;

	if (lstat(dir, &st) == 0) {
		DIR	*dp;
		struct dirent *de;
		int	 empty = 1;

		if (!S_ISDIR(st.st_mode))
			return gck_set_error(ctx, GCK_EINVAL, "'%s' exists "
			    "and is not a directory", dir);
		if ((dp = opendir(dir)) == NULL)
			return gck_set_syserr(ctx, errno, "cannot read '%s': "
			    "%s", dir, strerror(errno));
		while ((de = readdir(dp)) != NULL)
			if (strcmp(de->d_name, ".") != 0 &&
			    strcmp(de->d_name, "..") != 0)
				empty = 0;
		closedir(dp);
		if (!empty)
			return gck_set_error(ctx, GCK_EINVAL, "directory '%s' "
			    "is not empty", dir);
	} else if (errno != ENOENT)
		return gck_set_syserr(ctx, errno, "cannot use '%s': %s", dir,
		    strerror(errno));
	/* beside dir: in its parent, trailing slashes aside */
	len = strlen(dir);
	while (len > 1 && dir[len - 1] == '/')
		len--;
	for (slash = NULL; len > 0 && slash == NULL; len--)
		if (dir[len - 1] == '/')
			slash = (char *)dir + len - 1;
	if (asprintf(&tmp, "%.*s.gpuinspect.XXXXXX", slash == NULL ? 0 :
	    (int)(slash - dir + 1), dir) == -1)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	if (mkdtemp(tmp) == NULL) {
		r = gck_set_syserr(ctx, errno, "cannot make a directory "
		    "beside '%s': %s", dir, strerror(errno));
		free(tmp);
		return r;
	}
	if ((dfd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1) {
		r = gck_set_syserr(ctx, errno, "cannot open '%s': %s", tmp,
		    strerror(errno));
		goto out;
	}
	if ((r = gck_reader_new(ctx, fd, &rd)) != GCK_OK ||
	    (r = gck_reader_head(rd, &m)) != GCK_OK)
		goto out;
	gck_reader_manifest_text(rd, &text, &len);
	if ((mfd = openat(dfd, GCK_ENTRY_MANIFEST, O_WRONLY | O_CREAT |
	    O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) == -1) {
		r = gck_set_syserr(ctx, errno, "cannot create '%s/gpuckpt.json'"
		    ": %s", tmp, strerror(errno));
		goto out;
	}
	if ((r = gck_write_all(ctx, mfd, text, len, "the manifest")) !=
	    GCK_OK || (r = gck_reader_extract(rd, dfd)) != GCK_OK ||
	    (r = extract_tail(ctx, rd, dfd, tmp)) != GCK_OK)
		goto out;
	if (fsync(dfd) == -1 || rename(tmp, dir) == -1) {
		r = gck_set_syserr(ctx, errno, "cannot rename '%s' to '%s': %s",
		    tmp, dir, strerror(errno));
		goto out;
	}
	r = GCK_OK;
out:
	if (mfd != -1)
		close(mfd);
	if (dfd != -1)
		close(dfd);
	if (r != GCK_OK)
		gck_rmtree(tmp);
	free(tmp);
	gck_reader_free(rd);
	return r;
}

/*
 * Flattening: the new image is written beside path, under a name of its
 * own, and renamed to path once it is whole.
 */
int
gck_inspect_flatten(struct gck_ctx *ctx, int fd, char *const *paths,
    size_t n, const char *path)
{
	const struct gck_manifest	*m;
	struct gck_reader		*rd = NULL;
	struct gck_writer		*w = NULL;
	char				*tmp = NULL;
	int				 r, out = -1;

	if (asprintf(&tmp, "%s.XXXXXX", path) == -1)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	if ((out = mkostemp(tmp, O_CLOEXEC)) == -1) {
		r = gck_set_syserr(ctx, errno, "cannot create a file beside "
		    "'%s': %s", path, strerror(errno));
		free(tmp);
		return r;
	}
	if ((r = gck_reader_new(ctx, fd, &rd)) != GCK_OK ||
	    (r = gck_reader_head(rd, &m)) != GCK_OK)
		goto out;
	if (gck_manifest_format(m) < 2) {
		r = gck_set_error(ctx, GCK_EINVAL, "an image of format version "
		    "1 has no parents");
		goto out;
	}
	/* As compressed as the image was. */
	if ((r = gck_reader_use_parents(rd, paths, n)) != GCK_OK ||
	    (r = gck_writer_new2(ctx, out, gck_manifest_level(m), 0,
	    gck_manifest_format(m), 0, &w)) != GCK_OK ||
	    (r = gck_reader_copy(rd, w)) != GCK_OK)
		goto out;
	if (fsync(out) == -1 || rename(tmp, path) == -1) {
		r = gck_set_syserr(ctx, errno, "cannot write '%s': %s", path,
		    strerror(errno));
		goto out;
	}
	r = GCK_OK;
out:
	gck_writer_free(w);
	gck_reader_free(rd);
	close(out);
	if (r != GCK_OK)
		unlink(tmp);
	free(tmp);
	return r;
}

/* Diff: reading an image. */

static int
keep_file(const char *name)
{
	return strncmp(name, "mm-", 3) == 0 ||
	    strncmp(name, "pagemap-", 8) == 0 || strcmp(name, "files.img") == 0;
}

static int
pd_push(struct gck_ctx *ctx, struct pdig *pd, uint64_t digest)
{
	int	r;

	if ((r = gck_grow(ctx, &pd->d, &pd->cap, pd->n, sizeof *pd->d)) !=
	    GCK_OK)
		return r;
	pd->d[pd->n++] = digest;
	return GCK_OK;
}

/* Digests the pages of the current file into pd, 4 KiB at a time. */
static int
digest_pages(struct gck_ctx *ctx, struct gck_reader *rd, struct pdig *pd,
    const char *name)
{
	char		 page[PAGE];
	const void	*p;
	size_t		 fill = 0, take;
	ssize_t		 n;
	int		 hole, r;

	while ((n = gck_reader_file_chunk(rd, &p, SIZE_MAX, &hole)) > 0) {
		size_t	 left = (size_t)n;
		const char *s = p;

		while (left > 0) {
			if (fill == 0 && left >= PAGE) {
				/* whole pages, straight from the chunk */
				if ((r = pd_push(ctx, pd, hole ? zero_digest :
				    XXH3_64bits(s, PAGE))) != GCK_OK)
					return r;
				if (!hole)
					s += PAGE;
				left -= PAGE;
				continue;
			}
			take = PAGE - fill < left ? PAGE - fill : left;
			if (hole)
				memset(page + fill, 0, take);
			else {
				memcpy(page + fill, s, take);
				s += take;
			}
			fill += take;
			left -= take;
			if (fill == PAGE) {
				if ((r = pd_push(ctx, pd, XXH3_64bits(page,
				    PAGE))) != GCK_OK)
					return r;
				fill = 0;
			}
		}
	}
	if (n < 0)
		return gck_error_code(ctx);
	if (fill != 0)
		return gck_set_error(ctx, GCK_EFORMAT, "corrupt image: '%s' "
		    "is not a whole number of pages", name);
	return GCK_OK;
}

/* Keeps the current file, a small one, in memory. */
static int
keep_current(struct gck_ctx *ctx, struct dimg *im, const char *name,
    uint64_t first)
{
	struct kept	*k;
	ssize_t		 n;
	size_t		 cap = first + 1;
	int		 r;

	if ((r = gck_grow(ctx, &im->kept, &im->capkept, im->nkept,
	    sizeof *im->kept)) != GCK_OK)
		return r;
	k = &im->kept[im->nkept];
	memset(k, 0, sizeof *k);
	if ((k->name = strdup(name)) == NULL ||
	    (k->data = malloc(cap)) == NULL) {
		free(k->name);
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	}
	if ((r = dimg_index(ctx, im, "k:", name, im->nkept++)) != GCK_OK)
		return r;
	for (;;) {
		if (k->len == cap) {
			char	*nd;

			if (cap >= KEEP_ONE_MAX)
				return gck_set_error(ctx, GCK_EFORMAT,
				    "corrupt image: '%s' is too large", name);
			cap *= 2;
			if ((nd = realloc(k->data, cap)) == NULL)
				return gck_set_error(ctx, GCK_ENOMEM,
				    "out of memory");
			k->data = nd;
		}
		if ((n = gck_reader_file_read(im->rd, k->data + k->len,
		    cap - k->len)) < 0)
			return gck_error_code(ctx);
		if (n == 0)
			break;
		k->len += (size_t)n;
	}
	return GCK_OK;
}

/* Digests the rest of the current file, holes as zeros; *sizep its size. */
static int
digest_file(struct gck_ctx *ctx, struct gck_reader *rd, uint64_t *digestp,
    uint64_t *sizep)
{
	XXH3_state_t	*xs;
	const void	*p;
	uint64_t	 size = 0;
	ssize_t		 n;
	size_t		 z;
	int		 hole;

	if ((xs = XXH3_createState()) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	XXH3_64bits_reset(xs);
	while ((n = gck_reader_file_chunk(rd, &p, SIZE_MAX, &hole)) > 0) {
		size += (uint64_t)n;
		if (!hole) {
			XXH3_64bits_update(xs, p, (size_t)n);
			continue;
		}
		for (; n > 0; n -= (ssize_t)z) {
			z = (size_t)n < PAGE ? (size_t)n : PAGE;
			XXH3_64bits_update(xs, zero_page, z);
		}
	}
	*digestp = XXH3_64bits_digest(xs);
	*sizep = size;
	XXH3_freeState(xs);
	return n < 0 ? gck_error_code(ctx) : GCK_OK;
}

/*
 * Reads the image on fd whole, verifying it, and keeps what a diff
 * needs: the small images it parses, the digests of each page, and a
 * digest of the contents of every CRIU file.
 */
static int
dimg_read(struct gck_ctx *ctx, struct dimg *im, int fd)
{
	char		 name[NAME_LEN], num[24];
	struct cfile	*cf;
	uint64_t	 size;
	unsigned	 id;
	size_t		 i;
	int		 r;

	if ((r = gck_reader_new(ctx, fd, &im->rd)) != GCK_OK ||
	    (r = gck_reader_head(im->rd, &im->m)) != GCK_OK)
		return r;
	if ((im->names = json_object()) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	if ((r = mix_build(ctx, gck_manifest_json(im->m), &im->ix)) != GCK_OK)
		return r;
	for (;;) {
		if ((r = gck_reader_file(im->rd, name, sizeof name, &size)) ==
		    1)
			break;
		if (r != 0)
			return r;
		if ((r = gck_grow(ctx, &im->cf, &im->capcf, im->ncf,
		    sizeof *im->cf)) != GCK_OK)
			return r;
		cf = &im->cf[im->ncf];
		memset(cf, 0, sizeof *cf);
		if ((cf->name = strdup(name)) == NULL)
			return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		if ((r = dimg_index(ctx, im, "f:", name, im->ncf++)) != GCK_OK)
			return r;
		if (keep_file(name)) {
			struct kept	*k;

			if ((r = keep_current(ctx, im, name, size)) != GCK_OK)
				return r;
			k = &im->kept[im->nkept - 1];
			cf->digest = XXH3_64bits(k->data, k->len);
			cf->size = k->len;
		} else if (gck_pages_id(name, &id)) {
			struct pdig	*pd;

			if ((r = gck_grow(ctx, &im->pd, &im->cappd, im->npd,
			    sizeof *im->pd)) != GCK_OK)
				return r;
			pd = &im->pd[im->npd];
			memset(pd, 0, sizeof *pd);
			pd->id = id;
			snprintf(num, sizeof num, "%u", id);
			if ((r = dimg_index(ctx, im, "p:", num, im->npd++)) !=
			    GCK_OK)
				return r;
			if ((r = digest_pages(ctx, im->rd, pd, name)) != GCK_OK)
				return r;
			cf->digest = XXH3_64bits(pd->d, pd->n * sizeof *pd->d);
			cf->size = (uint64_t)pd->n * PAGE;
		} else if ((r = digest_file(ctx, im->rd, &cf->digest,
		    &cf->size)) != GCK_OK)
			return r;
	}
	if ((r = files_index(ctx, im)) != GCK_OK)
		return r;
	/* The shared memory segments, once for all their mappings. */
	for (i = 0; i < im->nkept; i++) {
		unsigned long long	 shmid;
		char			 tail[8];

		if (sscanf(im->kept[i].name, "pagemap-shmem-%llu%7s", &shmid,
		    tail) != 2 || strcmp(tail, ".img") != 0)
			continue;
		if ((r = gck_grow(ctx, &im->shm, &im->capshm, im->nshm,
		    sizeof *im->shm)) != GCK_OK)
			return r;
		im->shm[im->nshm].shmid = shmid;
		if ((r = pmap_build(ctx, im, im->kept[i].name,
		    &im->shm[im->nshm].pm)) != GCK_OK)
			return r;
		snprintf(num, sizeof num, "%llu", shmid);
		if ((r = dimg_index(ctx, im, "s:", num, im->nshm++)) != GCK_OK)
			return r;
	}
	return GCK_OK;
}

static int
fpath_cmp(const void *a, const void *b)
{
	const struct fpath	*x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

/* The paths of the regular files in files.img, by id. */
static int
files_index(struct gck_ctx *ctx, struct dimg *im)
{
	const struct kept	*k;
	const uint8_t		*rec;
	FileEntry		*fe;
	size_t			 pos;
	uint32_t		 len;
	int			 bad, r;

	if ((k = dimg_find(im, "files.img")) == NULL)
		return GCK_OK;
	if (gck_img_start(k->data, k->len, GCK_FILES_MAGIC, &pos) == -1)
		return bad_criu(ctx, "files.img");
	while ((rec = gck_img_record(k->data, k->len, &pos, &len, &bad)) !=
	    NULL) {
		if ((fe = file_entry__unpack(NULL, len, rec)) == NULL)
			return bad_criu(ctx, "files.img");
		if (fe->has_id && fe->reg != NULL && fe->reg->name != NULL) {
			if ((r = gck_grow(ctx, &im->fp, &im->capfp, im->nfp,
			    sizeof *im->fp)) != GCK_OK) {
				file_entry__free_unpacked(fe, NULL);
				return r;
			}
			im->fp[im->nfp].id = fe->id;
			if ((im->fp[im->nfp].path = strdup(fe->reg->name)) ==
			    NULL) {
				file_entry__free_unpacked(fe, NULL);
				return gck_set_error(ctx, GCK_ENOMEM,
				    "out of memory");
			}
			im->nfp++;
		}
		file_entry__free_unpacked(fe, NULL);
	}
	if (bad)
		return bad_criu(ctx, "files.img");
	qsort(im->fp, im->nfp, sizeof *im->fp, fpath_cmp);
	return GCK_OK;
}

static void
dimg_free(struct dimg *im)
{
	size_t	i;

	for (i = 0; i < im->nkept; i++) {
		free(im->kept[i].name);
		free(im->kept[i].data);
	}
	free(im->kept);
	for (i = 0; i < im->npd; i++)
		free(im->pd[i].d);
	free(im->pd);
	for (i = 0; i < im->ncf; i++)
		free(im->cf[i].name);
	free(im->cf);
	for (i = 0; i < im->nfp; i++)
		free(im->fp[i].path);
	free(im->fp);
	for (i = 0; i < im->nshm; i++)
		pmap_free(&im->shm[i].pm);
	free(im->shm);
	mix_free(&im->ix);
	json_decref(im->names);
	gck_reader_free(im->rd);
}

/* Records that what im keeps of kind ("k:"...) under name is at i. */
static int
dimg_index(struct gck_ctx *ctx, struct dimg *im, const char *kind,
    const char *name, size_t i)
{
	char	key[NAME_LEN + 8];

	snprintf(key, sizeof key, "%s%s", kind, name);
	if (json_object_set_new(im->names, key, json_integer((json_int_t)i)) !=
	    0)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	return GCK_OK;
}

/* Where im keeps kind and name, or -1. */
static ssize_t
dimg_lookup(const struct dimg *im, const char *kind, const char *name)
{
	char	 key[NAME_LEN + 8];
	json_t	*v;

	snprintf(key, sizeof key, "%s%s", kind, name);
	v = json_object_get(im->names, key);
	return v != NULL ? (ssize_t)json_integer_value(v) : -1;
}

static const struct kept *
dimg_find(const struct dimg *im, const char *name)
{
	ssize_t	i = dimg_lookup(im, "k:", name);

	return i >= 0 ? &im->kept[i] : NULL;
}

static const struct pdig *
dimg_pages(const struct dimg *im, unsigned id)
{
	char	num[16];
	ssize_t	i;

	snprintf(num, sizeof num, "%u", id);
	i = dimg_lookup(im, "p:", num);
	return i >= 0 ? &im->pd[i] : NULL;
}

static int
bad_criu(struct gck_ctx *ctx, const char *name)
{
	return gck_set_error(ctx, GCK_EFORMAT, "corrupt image: cannot parse "
	    "criu's '%s'", name);
}

/*
 * The pages that pagemap image name lists, by address, with the digests
 * of their content.  A missing pagemap gives an empty map; a failure, none.
 */
static int
pmap_build(struct gck_ctx *ctx, const struct dimg *im, const char *name,
    struct pmap *pm)
{
	const struct kept	*k;
	const struct pdig	*pd;
	struct gck_pagemap	 it;
	struct gck_pmentry	 e;
	size_t			 used = 0, cap = 0, cap2 = 0;
	uint64_t		 j;
	int			 ok, r;

	memset(pm, 0, sizeof *pm);
	if ((k = dimg_find(im, name)) == NULL)
		return GCK_OK;
	if (gck_pagemap_open(&it, k->data, k->len) == -1)
		return bad_criu(ctx, name);
	pd = dimg_pages(im, it.pages_id);
	while ((ok = gck_pagemap_next(&it, &e)) == 1) {
		for (j = 0; e.flags & GCK_PE_PRESENT && j < e.nr_pages; j++) {
			if (pd == NULL || used >= pd->n) {
				r = gck_set_error(ctx, GCK_EFORMAT,
				    "corrupt image: '%s' lists more pages "
				    "than its pages file holds", name);
				goto out;
			}
			if ((r = gck_grow(ctx, &pm->addr, &cap, pm->n,
			    sizeof *pm->addr)) != GCK_OK ||
			    (r = gck_grow(ctx, &pm->d, &cap2, pm->n,
			    sizeof *pm->d)) != GCK_OK)
				goto out;
			pm->addr[pm->n] = e.vaddr + (uint64_t)j * PAGE;
			pm->d[pm->n++] = pd->d[used++];
		}
	}
	if (ok == -1) {
		r = bad_criu(ctx, name);
		goto out;
	}
	for (j = 1; j < pm->n; j++)
		if (pm->addr[j] <= pm->addr[j - 1]) {
			r = gck_set_error(ctx, GCK_EFORMAT, "corrupt image: "
			    "'%s' lists pages out of order", name);
			goto out;
		}
	r = GCK_OK;
out:
	/* A failed build hands back no half-built map. */
	if (r != GCK_OK)
		pmap_free(pm);
	return r;
}

static void
pmap_free(struct pmap *pm)
{
	free(pm->addr);
	free(pm->d);
	memset(pm, 0, sizeof *pm);
}

static int
vmas_load(struct gck_ctx *ctx, const struct dimg *im, pid_t pid,
    struct vmas *vs)
{
	const struct kept	*k;
	const uint8_t		*rec;
	MmEntry			*mm;
	char			 name[64];
	size_t			 pos, i;
	uint32_t		 len;
	int			 bad;

	memset(vs, 0, sizeof *vs);
	snprintf(name, sizeof name, "mm-%d.img", (int)pid);
	if ((k = dimg_find(im, name)) == NULL)
		return GCK_OK;
	if (gck_img_start(k->data, k->len, GCK_MM_MAGIC, &pos) == -1 ||
	    (rec = gck_img_record(k->data, k->len, &pos, &len, &bad)) ==
	    NULL || (mm = mm_entry__unpack(NULL, len, rec)) == NULL)
		return bad_criu(ctx, name);
	if (mm->n_vmas > 0 && (vs->v = calloc(mm->n_vmas, sizeof *vs->v)) ==
	    NULL) {
		mm_entry__free_unpacked(mm, NULL);
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	}
	for (i = 0; i < mm->n_vmas; i++) {
		VmaEntry	*v = mm->vmas[i];

		if (v->end < v->start ||
		    (vs->n > 0 && v->start < vs->v[vs->n - 1].end)) {
			mm_entry__free_unpacked(mm, NULL);
			return bad_criu(ctx, name);
		}
		vs->v[vs->n].start = v->start;
		vs->v[vs->n].end = v->end;
		vs->v[vs->n].pgoff = v->pgoff;
		vs->v[vs->n].shmid = v->shmid;
		vs->v[vs->n].prot = v->prot;
		vs->v[vs->n].flags = v->flags;
		vs->v[vs->n++].status = v->status;
	}
	mm_entry__free_unpacked(mm, NULL);
	return GCK_OK;
}

/* The mapping of vs that holds addr, or -1. */
static ssize_t
vma_at(const struct vmas *vs, uint64_t addr)
{
	size_t	lo = 0, hi = vs->n, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (addr < vs->v[mid].start)
			hi = mid;
		else if (addr >= vs->v[mid].end)
			lo = mid + 1;
		else
			return (ssize_t)mid;
	}
	return -1;
}

static const char *
vma_kind(uint32_t status)
{
	if (status & VMA_AREA_HEAP)
		return "heap";
	if (status & VMA_AREA_STACK)
		return "stack";
	if (status & VMA_AREA_VDSO)
		return "vdso";
	if (status & VMA_AREA_VVAR)
		return "vvar";
	if (status & VMA_AREA_VSYSCALL)
		return "vsyscall";
	if (status & VMA_AREA_SYSVIPC)
		return "sysvipc";
	if (status & VMA_AREA_AIORING)
		return "aio";
	if (status & VMA_AREA_SOCKET)
		return "socket";
	if (status & VMA_AREA_MEMFD)
		return "memfd";
	if (status & VMA_FILE_SHARED)
		return "file-shared";
	if (status & VMA_FILE_PRIVATE)
		return "file";
	if (status & VMA_ANON_SHARED)
		return "shared";
	return "anon";
}

/* The path of a file mapping, from files.img, or NULL. */
static const char *
vma_path(const struct dimg *im, const struct vma *v)
{
	struct fpath	 key, *f;

	if (!(v->status & (VMA_FILE_PRIVATE | VMA_FILE_SHARED |
	    VMA_AREA_MEMFD)) || v->shmid > UINT32_MAX || im->nfp == 0)
		return NULL;
	key.id = (uint32_t)v->shmid;
	f = bsearch(&key, im->fp, im->nfp, sizeof *im->fp, fpath_cmp);
	return f != NULL ? f->path : NULL;
}

static void
prot_string(const struct vma *v, char buf[5])
{
	buf[0] = v->prot & 1 ? 'r' : '-';
	buf[1] = v->prot & 2 ? 'w' : '-';
	buf[2] = v->prot & 4 ? 'x' : '-';
	buf[3] = v->flags & 1 ? 's' : 'p';	/* MAP_SHARED */
	buf[4] = '\0';
}

static json_t *
hexaddr(uint64_t v)
{
	char	buf[24];

	snprintf(buf, sizeof buf, "0x%" PRIx64, v);
	return json_string(buf);
}

/* A mapping as the diff describes it. */
static json_t *
vma_json(const struct dimg *im, const struct vma *v)
{
	json_t		*o;
	const char	*path;
	char		 prot[5];

	prot_string(v, prot);
	path = vma_path(im, v);
	o = json_pack("{s:o, s:o, s:I, s:s, s:s, s:o}", "start",
	    hexaddr(v->start), "end", hexaddr(v->end), "size",
	    (json_int_t)(v->end - v->start), "prot", prot, "kind",
	    vma_kind(v->status), "path", path != NULL ? json_string(path) :
	    json_null());
	return o;
}

/* Whether two versions of a page differ: a page not dumped is zero. */
static int
page_differs(int ina, uint64_t da, int inb, uint64_t db)
{
	if (ina && inb)
		return da != db;
	if (ina)
		return da != zero_digest;
	return db != zero_digest;
}

/*
 * Bytes that differ between two page maps at addresses in [lo, hi), in
 * total and, for each mapping of va (the first image's) and vb, in chga
 * and chgb: a page counts for vb's mapping when vb has one there, else
 * for va's.  va and vb may be NULL.
 */
static uint64_t
pmap_compare(const struct pmap *a, const struct pmap *b, uint64_t lo,
    uint64_t hi, const struct vmas *va, const struct vmas *vb,
    uint64_t *chga, uint64_t *chgb)
{
	size_t		i = 0, j = 0;
	uint64_t	addr, total = 0;
	ssize_t		k;
	int		ina, inb;

	while (i < a->n || j < b->n) {
		if (j >= b->n || (i < a->n && a->addr[i] < b->addr[j])) {
			addr = a->addr[i];
			ina = 1;
			inb = 0;
		} else if (i >= a->n || b->addr[j] < a->addr[i]) {
			addr = b->addr[j];
			ina = 0;
			inb = 1;
		} else {
			addr = a->addr[i];
			ina = inb = 1;
		}
		if (addr >= lo && addr < hi && page_differs(ina, ina ?
		    a->d[i] : 0, inb, inb ? b->d[j] : 0)) {
			total += PAGE;
			if (vb != NULL && (k = vma_at(vb, addr)) >= 0)
				chgb[k] += PAGE;
			else if (va != NULL && (k = vma_at(va, addr)) >= 0)
				chga[k] += PAGE;
		}
		i += (size_t)ina;
		j += (size_t)inb;
	}
	return total;
}

/* The mapping of vs that starts at start, or -1. */
static ssize_t
vma_find(const struct vmas *vs, uint64_t start)
{
	ssize_t	k = vma_at(vs, start);

	return k >= 0 && vs->v[k].start == start ? k : -1;
}

static const struct pmap *
shm_pages(const struct dimg *im, uint64_t shmid)
{
	static const struct pmap	none;
	char				num[24];
	ssize_t				i;

	snprintf(num, sizeof num, "%" PRIu64, shmid);
	i = dimg_lookup(im, "s:", num);
	return i >= 0 ? &im->shm[i].pm : &none;
}

/*
 * Bytes that differ between a and b in the pages of the shared segment
 * that mapping v shows.
 */
static uint64_t
shm_changed(const struct dimg *a, const struct dimg *b, const struct vma *v)
{
	return pmap_compare(shm_pages(a, v->shmid), shm_pages(b, v->shmid),
	    v->pgoff, v->pgoff + (v->end - v->start), NULL, NULL, NULL, NULL);
}

/* The manifest entry of process pid, or NULL. */
static json_t *
mproc(const struct mix *x, json_int_t pid)
{
	return mix_get(x->procs, pid);
}

/* A process, briefly: for the added and removed lists. */
static json_t *
proc_brief(const struct mix *x, json_t *p)
{
	json_t	*g = proc_gpus(x, jint(p, "pid"));

	return json_pack("{s:o, s:o, s:o, s:o, s:o}", "pid", jcopy(p, "pid"),
	    "comm", jcopy(p, "comm"), "cmdline", jcopy(p, "cmdline"),
	    "threads", jcopy(p, "threads"), "gpus", g != NULL ? g :
	    json_null());
}

static json_t *
pair(json_t *a, json_t *b)
{
	return json_pack("{s:o, s:o}", "a", a, "b", b);
}

/*
 * What differs in process pid, which both images hold: its command line,
 * threads, GPUs and memory.  *differs says whether anything does.
 */
static json_t *
proc_diff(struct gck_ctx *ctx, const struct dimg *a, const struct dimg *b,
    pid_t pid, json_t *pa, json_t *pb, int *differs)
{
	struct pmap	 ma = { 0 }, mb = { 0 };
	struct vmas	 va = { 0 }, vb = { 0 };
	uint64_t	*chga = NULL, *chgb = NULL, total, shm;
	json_t		*o = NULL, *ga = NULL, *gb = NULL, *mem, *maps, *x;
	char		 name[64];
	size_t		 i;
	ssize_t		 k;
	int		 r, ok = 0;

	*differs = 0;
	snprintf(name, sizeof name, "pagemap-%d.img", (int)pid);
	if ((r = pmap_build(ctx, a, name, &ma)) != GCK_OK ||
	    (r = pmap_build(ctx, b, name, &mb)) != GCK_OK ||
	    (r = vmas_load(ctx, a, pid, &va)) != GCK_OK ||
	    (r = vmas_load(ctx, b, pid, &vb)) != GCK_OK)
		goto out;
	if ((chga = calloc(va.n + 1, sizeof *chga)) == NULL ||
	    (chgb = calloc(vb.n + 1, sizeof *chgb)) == NULL ||
	    (o = json_pack("{s:I, s:o}", "pid", (json_int_t)pid, "comm",
	    jcopy(pb, "comm"))) == NULL) {
		gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	if (!jsame(json_object_get(pa, "cmdline"),
	    json_object_get(pb, "cmdline"))) {
		jset(o, "cmdline", pair(jcopy(pa, "cmdline"),
		    jcopy(pb, "cmdline")));
		*differs = 1;
	}
	if (jint(pa, "threads") != jint(pb, "threads")) {
		jset(o, "threads", pair(jcopy(pa, "threads"),
		    jcopy(pb, "threads")));
		*differs = 1;
	}
	ga = proc_gpus(&a->ix, pid);
	gb = proc_gpus(&b->ix, pid);
	if (!jsame(ga, gb)) {
		jset(o, "gpus", pair(ga, gb));
		ga = gb = NULL;
		*differs = 1;
	}
	total = pmap_compare(&ma, &mb, 0, UINT64_MAX, &va, &vb, chga, chgb);
	if ((maps = json_array()) == NULL || jset(o, "mappings", maps) != 0)
		goto nomem;
	/* The second image's mappings, then those it no longer has. */
	for (i = 0; i < vb.n; i++) {
		const char	*st = NULL;

		k = vma_find(&va, vb.v[i].start);
		shm = vb.v[i].status & VMA_ANON_SHARED ? shm_changed(a, b,
		    &vb.v[i]) : 0;
		chgb[i] += shm;
		total += shm;
		if (k >= 0)
			chgb[i] += chga[k];	/* what it lost in shrinking */
		if (k < 0)
			st = "added";
		else if (va.v[k].end != vb.v[i].end)
			st = "resized";
		else if (va.v[k].prot != vb.v[i].prot ||
		    va.v[k].flags != vb.v[i].flags)
			st = "protection";
		else if (chgb[i] > 0)
			st = "changed";
		if (st == NULL)
			continue;
		if ((x = vma_json(b, &vb.v[i])) == NULL ||
		    jset(x, "status", json_string(st)) != 0 ||
		    jset(x, "changed", json_integer((json_int_t)chgb[i])) !=
		    0 || json_array_append_new(maps, x) != 0)
			goto nomem;
	}
	for (i = 0; i < va.n; i++) {
		if (vma_find(&vb, va.v[i].start) >= 0)
			continue;
		if ((x = vma_json(a, &va.v[i])) == NULL ||
		    jset(x, "status", json_string("removed")) != 0 ||
		    jset(x, "changed", json_integer((json_int_t)chga[i])) !=
		    0 || json_array_append_new(maps, x) != 0)
			goto nomem;
	}
	if (json_array_size(maps) > 0 || total > 0)
		*differs = 1;
	if ((mem = json_pack("{s:I, s:I, s:I}", "a", (json_int_t)ma.n * PAGE,
	    "b", (json_int_t)mb.n * PAGE, "changed", (json_int_t)total)) ==
	    NULL || jset(o, "memory", mem) != 0)
		goto nomem;
	ok = 1;
	goto out;
nomem:
	gck_set_error(ctx, GCK_ENOMEM, "out of memory");
out:
	json_decref(ga);
	json_decref(gb);
	free(chga);
	free(chgb);
	free(va.v);
	free(vb.v);
	pmap_free(&ma);
	pmap_free(&mb);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* The CRIU files whose contents differ, by digests of their contents. */
static json_t *
files_diff(const struct dimg *a, const struct dimg *b, int *differs)
{
	json_t		*o, *added, *removed, *changed;
	json_int_t	 same = 0;
	size_t		 i;
	ssize_t		 k;

	*differs = 0;
	if ((added = json_array()) == NULL || (removed = json_array()) ==
	    NULL || (changed = json_array()) == NULL ||
	    (o = json_pack("{s:o, s:o, s:o, s:I}", "added", added, "removed",
	    removed, "changed", changed, "same", (json_int_t)0)) == NULL)
		return NULL;
	for (i = 0; i < b->ncf; i++) {
		if ((k = dimg_lookup(a, "f:", b->cf[i].name)) < 0)
			json_array_append_new(added,
			    json_string(b->cf[i].name));
		else if (a->cf[k].digest != b->cf[i].digest ||
		    a->cf[k].size != b->cf[i].size)
			json_array_append_new(changed,
			    json_string(b->cf[i].name));
		else
			same++;
	}
	for (i = 0; i < a->ncf; i++)
		if (dimg_lookup(b, "f:", a->cf[i].name) < 0)
			json_array_append_new(removed,
			    json_string(a->cf[i].name));
	json_object_set_new(o, "same", json_integer(same));
	*differs = json_array_size(added) + json_array_size(removed) +
	    json_array_size(changed) > 0;
	return o;
}

/*
 * Where the array arr has an object whose member key is the string
 * val, that object, else NULL.
 */
static json_t *
by_member(json_t *arr, const char *key, const char *val)
{
	json_t	*e;
	size_t	 i;

	json_array_foreach(arr, i, e)
		if (json_is_string(json_object_get(e, key)) &&
		    strcmp(json_string_value(json_object_get(e, key)), val) == 0)
			return e;
	return NULL;
}

/* An outside file of a manifest's mounts, as a diff names it. */
static json_t *
outside_brief(json_t *f)
{
	return json_pack("{s:o, s:o, s:o}", "path", jcopy(f, "path"), "fd",
	    jcopy(f, "fd"), "pid", jcopy(f, "pid"));
}

/* Whether outside files f and g are the one file on the one fd. */
static int
outside_same(json_t *f, json_t *g)
{
	return json_equal(json_object_get(f, "path"), json_object_get(g,
	    "path")) && json_equal(json_object_get(f, "fd"),
	    json_object_get(g, "fd")) && json_equal(json_object_get(f, "pid"),
	    json_object_get(g, "pid"));
}

/*
 * What differs of the two images' mount namespaces: their roots, the
 * mounts from their hosts (added, removed, or bound from another
 * source), the files outside them.  JSON null when neither has one.
 */
static json_t *
mounts_diff(const struct dimg *a, const struct dimg *b, int *differs)
{
	json_t	*ma = json_object_get(a->ix.mj, "mounts");
	json_t	*mb = json_object_get(b->ix.mj, "mounts");
	json_t	*o, *ba, *bb, *fa, *fb, *e, *q, *x;
	json_t	*added, *removed, *changed, *fadded, *fremoved;
	size_t	 i, j;

	*differs = 0;
	if (!json_is_object(ma) && !json_is_object(mb))
		return json_null();
	ba = json_object_get(ma, "binds");
	bb = json_object_get(mb, "binds");
	fa = json_object_get(ma, "files");
	fb = json_object_get(mb, "files");
	if ((added = json_array()) == NULL || (removed = json_array()) ==
	    NULL || (changed = json_array()) == NULL || (fadded =
	    json_array()) == NULL || (fremoved = json_array()) == NULL ||
	    (o = json_pack("{s:{s:o, s:o}, s:{s:o, s:o, s:o}, s:{s:o, s:o}}",
	    "root", "a", jcopy(ma, "root"), "b", jcopy(mb, "root"), "mounts",
	    "added", added, "removed", removed, "changed", changed, "outside",
	    "added", fadded, "removed", fremoved)) == NULL)
		return NULL;
	if (!json_equal(json_object_get(ma, "root"), json_object_get(mb,
	    "root")))
		*differs = 1;
	json_array_foreach(bb, i, e) {
		if (!json_is_string(json_object_get(e, "at")))
			continue;
		q = by_member(ba, "at", json_string_value(json_object_get(e,
		    "at")));
		if (q == NULL)
			json_array_append_new(added, json_pack("{s:o, s:o, s:o}",
			    "at", jcopy(e, "at"), "source", jcopy(e, "source"),
			    "fstype", jcopy(e, "fstype")));
		else if (!json_equal(json_object_get(q, "source"),
		    json_object_get(e, "source")))
			json_array_append_new(changed, json_pack("{s:o, s:o, "
			    "s:o}", "at", jcopy(e, "at"), "a", jcopy(q,
			    "source"), "b", jcopy(e, "source")));
	}
	json_array_foreach(ba, i, e)
		if (json_is_string(json_object_get(e, "at")) && by_member(bb,
		    "at", json_string_value(json_object_get(e, "at"))) == NULL)
			json_array_append_new(removed, json_pack("{s:o, s:o, "
			    "s:o}", "at", jcopy(e, "at"), "source", jcopy(e,
			    "source"), "fstype", jcopy(e, "fstype")));
	json_array_foreach(fb, i, e) {
		json_array_foreach(fa, j, x)
			if (outside_same(x, e))
				break;
		if (j == json_array_size(fa))
			json_array_append_new(fadded, outside_brief(e));
	}
	json_array_foreach(fa, i, e) {
		json_array_foreach(fb, j, x)
			if (outside_same(x, e))
				break;
		if (j == json_array_size(fb))
			json_array_append_new(fremoved, outside_brief(e));
	}
	*differs |= json_array_size(added) + json_array_size(removed) +
	    json_array_size(changed) + json_array_size(fadded) +
	    json_array_size(fremoved) > 0;
	return o;
}

/* An image's facts, briefly, for the head of a diff. */
static json_t *
img_brief(const struct dimg *im)
{
	json_t	*h = json_object_get(im->ix.mj, "host");

	return json_pack("{s:s, s:o, s:o, s:o, s:o, s:o, s:I}", "name",
	    im->label, "created", jcopy(im->ix.mj, "created"), "hostname",
	    jcopy(h, "hostname"), "kernel", jcopy(h, "kernel"), "tool",
	    jcopy(im->ix.mj, "tool"), "root_pid", jcopy(im->ix.mj, "root_pid"),
	    "processes", (json_int_t)json_array_size(json_object_get(im->ix.mj,
	    "processes")));
}

int
gck_inspect_diff(struct gck_ctx *ctx, int fda, const char *la, int fdb,
    const char *lb, char **textp, int *differp)
{
	struct dimg	 a = { 0 }, b = { 0 };
	json_t		*doc = NULL, *added, *removed, *changed, *p, *q, *x;
	size_t		 i;
	int		 r, d, any = 0;

	*textp = NULL;
	*differp = 0;
	zero_digest = XXH3_64bits(zero_page, PAGE);
	a.label = la;
	b.label = lb;
	if ((r = dimg_read(ctx, &a, fda)) != GCK_OK ||
	    (r = dimg_read(ctx, &b, fdb)) != GCK_OK)
		goto out;
	if ((added = json_array()) == NULL || (removed = json_array()) ==
	    NULL || (changed = json_array()) == NULL ||
	    (doc = json_pack("{s:i, s:b, s:{s:o, s:o}, s:{s:o, s:o, s:o}}",
	    "schema", GCK_INSPECT_SCHEMA, "differ", 0, "images", "a",
	    img_brief(&a), "b", img_brief(&b), "processes", "added", added,
	    "removed", removed, "changed", changed)) == NULL) {
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	json_array_foreach(json_object_get(b.ix.mj, "processes"), i, p) {
		if ((q = mproc(&a.ix, jint(p, "pid"))) == NULL) {
			json_array_append_new(added, proc_brief(&b.ix, p));
			any = 1;
			continue;
		}
		if ((x = proc_diff(ctx, &a, &b, (pid_t)jint(p, "pid"), q, p,
		    &d)) == NULL) {
			r = gck_error_code(ctx);
			goto out;
		}
		if (d) {
			json_array_append_new(changed, x);
			any = 1;
		} else
			json_decref(x);
	}
	json_array_foreach(json_object_get(a.ix.mj, "processes"), i, p)
		if (mproc(&b.ix, jint(p, "pid")) == NULL) {
			json_array_append_new(removed, proc_brief(&a.ix, p));
			any = 1;
		}
	if ((x = files_diff(&a, &b, &d)) == NULL ||
	    jset(doc, "files", x) != 0) {
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	any |= d;
	if ((x = mounts_diff(&a, &b, &d)) == NULL ||
	    jset(doc, "mounts", x) != 0) {
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	any |= d;
	json_object_set_new(doc, "differ", json_boolean(any));
	*differp = any;
	r = gck_inspect_text(ctx, doc, textp);
out:
	json_decref(doc);
	dimg_free(&a);
	dimg_free(&b);
	return r;
}

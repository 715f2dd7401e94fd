/*
 * precopy.c: gck_precopy(), a running tree's memory read into an image
 * of chunks, for a live migration's rounds (gpusend --live).
 *
 * The tree is not stopped, frozen or traced: each process's memory is
 * read as it runs (process_vm_readv(2)), GCK_CHUNK_SIZE bytes of its
 * address space at a time, and cut into the chunks a checkpoint of the
 * same memory would make: of the pages its pagemap shows present, those
 * holding more than zeros, in address order, cut where their contents
 * say and where each mapping starts (gpuckpt-image(5), "Chunks" and
 * "Zero pages").  Only private anonymous memory is read, as only there
 * does this rule alone decide what a checkpoint holds; the rest is left
 * to the checkpoint.  A chunk whose
 * digest the receiver has is not written again.  The digests of the
 * chunks read go into a memo (digest.c), so that those read again, by
 * later rounds and by the checkpoint that ends them, cost a fast hash
 * rather than SHA-256.
 *
 * What is read may change while it is read: nothing here needs to be
 * consistent.  A chunk is only ever used for the digest of its own
 * bytes, which the checkpoint computes again from the stopped tree.
 */
#include "config.h"

#include <sys/types.h>
#include <sys/uio.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "private.h"
#include "core/proc.h"
#include "image/chunker.h"
#include "image/digest.h"
#include "image/image.h"
#include "image/manifest.h"
#include "image/names.h"
#include "image/parent.h"
#include "image/patch.h"
#include "ops/ops.h"

#define PAGE		4096u
#define WPAGES		(GCK_CHUNK_SIZE / PAGE)
#define PM_PRESENT	(1ull << 63)
#define PM_SWAP		(1ull << 62)

/* A mapping of the process, as /proc/PID/maps shows it. */
struct vma {
	uint64_t	start, end;
	int		anon;		/* private anonymous memory */
};

/* One process being read. */
struct pread {
	struct gck_ctx		*ctx;
	pid_t			 pid;		/* as we see it */
	struct vma		*v;
	size_t			 nv;
	int			 pmfd;		/* its pagemap */
	uint64_t		 pm[WPAGES];
	struct iovec		 local[WPAGES], remote[WPAGES];
};

/* Whether a line of maps, perms and path given, is anonymous memory. */
static int
is_anon(const char *perms, unsigned long long inode, const char *path)
{
	if (perms[3] != 'p' || inode != 0)
		return 0;
	return *path == '\0' || strcmp(path, "[heap]") == 0 ||
	    strcmp(path, "[stack]") == 0 || strncmp(path, "[anon:", 6) == 0;
}

/*
 * Reads the mappings of p->pid.  Returns GCK_OK, a code, or 1 when the
 * process has exited.
 */
static int
read_maps(struct pread *p)
{
	char			 path[64], line[PATH_MAX + 128], perms[8];
	char			 name[PATH_MAX];
	unsigned long long	 a, b, off, inode;
	struct vma		*nv;
	size_t			 cap = 0;
	FILE			*f;
	int			 n;

	snprintf(path, sizeof path, "/proc/%d/maps", (int)p->pid);
	if ((f = fopen(path, "re")) == NULL && (errno == ENOENT ||
	    errno == ESRCH))
		return 1;
	if (f == NULL)
		return gck_set_syserr(p->ctx, errno, "cannot read the memory "
		    "map of process %d: %s", (int)p->pid, strerror(errno));
	while (fgets(line, sizeof line, f) != NULL) {
		name[0] = '\0';
		n = sscanf(line, "%llx-%llx %7s %llx %*s %llu %4095[^\n]", &a,
		    &b, perms, &off, &inode, name);
		if (n < 5 || strlen(perms) < 4 || b <= a)
			continue;
		if (p->nv == cap) {
			cap = cap ? cap * 2 : 64;
			if ((nv = reallocarray(p->v, cap, sizeof *nv)) ==
			    NULL) {
				fclose(f);
				return gck_set_error(p->ctx, GCK_ENOMEM,
				    "out of memory");
			}
			p->v = nv;
		}
		p->v[p->nv].start = a;
		p->v[p->nv].end = b;
		p->v[p->nv].anon = is_anon(perms, inode, name + strspn(name,
		    " "));
		p->nv++;
	}
	fclose(f);
	return GCK_OK;
}

/*
 * Reads the pages of [from, to), at most WPAGES of them, that the
 * pagemap shows present and that hold more than zeros, to buf, in
 * address order.  Returns the bytes read, or -1 when they cannot be
 * read now.
 */
static ssize_t
read_range(struct pread *p, uint64_t from, uint64_t to, char *buf)
{
	size_t		 k, np = (size_t)((to - from) / PAGE), nio = 0, len = 0,
			 i, out;
	uint64_t	 a;

	if (pread(p->pmfd, p->pm, np * 8, (off_t)(from / PAGE * 8)) !=
	    (ssize_t)(np * 8))
		return -1;
	for (k = 0; k < np; k++) {
		if ((p->pm[k] & (PM_PRESENT | PM_SWAP)) == 0)
			continue;
		a = from + k * PAGE;
		if (nio > 0 && (uint64_t)(uintptr_t)
		    p->remote[nio - 1].iov_base + p->remote[nio - 1].iov_len ==
		    a) {
			p->remote[nio - 1].iov_len += PAGE;
			p->local[nio - 1].iov_len += PAGE;
		} else {
			p->remote[nio].iov_base = (void *)(uintptr_t)a;
			p->remote[nio].iov_len = PAGE;
			p->local[nio].iov_base = buf + len;
			p->local[nio].iov_len = PAGE;
			nio++;
		}
		len += PAGE;
	}
	/* A page gone meanwhile: the checkpoint will see what is there. */
	if (nio > 0 && process_vm_readv(p->pid, p->local, nio, p->remote,
	    nio, 0) != (ssize_t)len)
		return -1;
	for (i = 0, out = 0; i < len; i += PAGE) {
		if (gck_zero_page(buf + i, PAGE))
			continue;
		if (out != i)
			memmove(buf + out, buf + i, PAGE);
		out += PAGE;
	}
	return (ssize_t)out;
}

/* The chunk of len bytes at buf, written unless have has it. */
static int
put_chunk(struct pread *p, struct gck_writer *w,
    struct gck_parents *have, struct gck_memo *memo, const char *buf,
    size_t len, long *part, struct gck_precopy_stats *st)
{
	struct gck_digest	 d;
	char			 file[64], ename[GCK_NAME_MAX + 32];
	uint64_t		 ref;
	int			 r;

	st->memory += len;
	if (gck_memo_digest(memo, buf, len, &d) == -1)
		return gck_set_error(p->ctx, GCK_ENOMEM, "out of memory");
	if (have != NULL && gck_parents_has(have, &d)) {
		st->known += len;
		return GCK_OK;
	}
	snprintf(file, sizeof file, "pages-%d.img", (int)p->pid);
	gck_entry_name(ename, sizeof ename, file, (*part)++);
	ref = gck_writer_refbytes(w);
	if ((r = gck_writer_add_memory(w, ename, buf, len)) != GCK_OK)
		return r;
	/* (a patch stores only the pages that changed) */
	st->stored += len - (gck_writer_refbytes(w) - ref);
	st->chunks++;
	return GCK_OK;
}

/*
 * Writes the chunks of mapping i of process p, private anonymous
 * memory, that have has not.  The pages read are cut as a checkpoint
 * cuts them (chunker.c), from the mapping's start, where a chunk starts,
 * to its end, where one ends.  A range that cannot be read now leaves
 * out the chunk it is in, and the pages after it up to where they are
 * cut.
 */
static int
precopy_vma(struct pread *p, size_t i, struct gck_writer *w,
    struct gck_parents *have, struct gck_memo *memo, char *buf,
    long *part, struct gck_precopy_stats *st)
{
	struct gck_chunker	 ck;
	uint64_t		 a, b;
	size_t			 len = 0, scanned = 0, n;
	ssize_t			 got;
	int			 r, synced = 1;

	gck_chunker_start(&ck);
	for (a = p->v[i].start; a < p->v[i].end; a = b) {
		if ((r = gck_check_interrupt(p->ctx)) != GCK_OK)
			return r;
		b = p->v[i].end - a < GCK_CHUNK_SIZE ? p->v[i].end :
		    a + GCK_CHUNK_SIZE;
		if ((got = read_range(p, a, b, buf + len)) == -1) {
			gck_chunker_start(&ck);
			len = scanned = 0;
			synced = 0;
			continue;
		}
		len += (size_t)got;
		while ((n = gck_chunker_scan(&ck, buf + scanned, len -
		    scanned)) > 0) {
			n += scanned;
			if (synced && (r = put_chunk(p, w, have, memo, buf, n,
			    part, st)) != GCK_OK)
				return r;
			synced = 1;
			memmove(buf, buf + n, len - n);
			len -= n;
			scanned = 0;
		}
		scanned = len;
	}
	if (synced && len > 0)
		return put_chunk(p, w, have, memo, buf, len, part, st);
	return GCK_OK;
}

/*
 * Writes the chunks of process p that have has not, as pages-PID.img in
 * parts, into w.
 */
static int
precopy_proc(struct pread *p, struct gck_writer *w,
    struct gck_parents *have, struct gck_memo *memo, char *buf,
    struct gck_precopy_stats *st)
{
	size_t	i;
	long	part = 0;
	int	r;

	for (i = 0; i < p->nv; i++)
		if (p->v[i].anon && (r = precopy_vma(p, i, w, have, memo, buf,
		    &part, st)) != GCK_OK)
			return r;
	return GCK_OK;
}

/*
 * Writes to fd an image of the chunks of the memory of the tree rooted
 * at pid that have does not hold (NULL: all), zstd at level, while the
 * tree runs; the digest of each chunk read goes into memo (or NULL),
 * where one read before is found.  Returns GCK_OK with *st filled in,
 * or a code.
 */
int
gck_precopy(struct gck_ctx *ctx, pid_t pid, int level, int fd,
    struct gck_parents *have, struct gck_memo *memo, struct gck_ptab *pages,
    struct gck_precopy_stats *st)
{
	struct gck_ptree	*t = NULL;
	struct gck_writer	*w = NULL;
	struct pread		*p = NULL;
	json_t			*parent = NULL;
	char			*manifest = NULL, *buf = NULL, path[64];
	size_t			 i;
	int			 r;

	memset(st, 0, sizeof *st);
	if ((r = gck_ptree_scan(ctx, pid, &t)) != GCK_OK)
		goto out;
	if ((p = calloc(1, sizeof *p)) == NULL ||
	    posix_memalign((void **)&buf, PAGE, 2 * GCK_CHUNK_SIZE) != 0) {
		buf = NULL;
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	p->pmfd = -1;
	/*
	 * Where have holds the pages of chunks (pages: those sent before
	 * to where have is), a chunk that changed in a few of them is a
	 * patch of those (gpuckpt-image(5), "Patches").
	 */
	if (have != NULL && pages != NULL &&
	    (r = gck_parents_use_pages(have, pages)) != GCK_OK)
		goto out;
	if (have != NULL && gck_parents_ptab(have)->slot != NULL &&
	    (parent = gck_parents_json(have)) == NULL) {
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	if ((manifest = gck_manifest_build_chunks(ctx, t, level, parent)) ==
	    NULL) {
		r = ctx->code;
		goto out;
	}
	if ((r = gck_writer_new2(ctx, fd, level, 0, GCK_FORMAT_VERSION, 0,
	    &w)) != GCK_OK)
		goto out;
	if (parent != NULL)
		gck_writer_set_parents(w, have);
	/* The digest of each chunk it writes is the memo's, just noted. */
	gck_writer_set_memo(w, memo);
	if ((r = gck_writer_add(w, GCK_ENTRY_MANIFEST, manifest,
	    strlen(manifest))) != GCK_OK)
		goto out;
	for (i = 0; i < t->n; i++) {
		p->ctx = ctx;
		p->pid = t->procs[i].host_pid > 0 ? t->procs[i].host_pid :
		    t->procs[i].pid;
		p->nv = 0;
		snprintf(path, sizeof path, "/proc/%d/pagemap", (int)p->pid);
		/*
		 * A process that has exited since the tree was read (a
		 * shell's sleep) has nothing the stop will need.
		 */
		if ((p->pmfd = open(path, O_RDONLY | O_CLOEXEC)) == -1 &&
		    (errno == ENOENT || errno == ESRCH)) {
			gck_log(ctx, 2, "pre-copy: process %d has exited",
			    (int)p->pid);
			continue;
		}
		if (p->pmfd == -1) {
			r = gck_set_syserr(ctx, errno, "cannot read the "
			    "memory of process %d: %s", (int)p->pid,
			    strerror(errno));
			goto out;
		}
		if ((r = read_maps(p)) == 1) {
			close(p->pmfd);
			p->pmfd = -1;
			continue;
		}
		if (r != GCK_OK ||
		    (r = precopy_proc(p, w, have, memo, buf, st)) != GCK_OK)
			goto out;
		close(p->pmfd);
		p->pmfd = -1;
	}
	if ((r = gck_writer_finish(w)) == GCK_OK && pages != NULL)
		r = gck_writer_pages(w, pages);
out:
	json_decref(parent);
	gck_writer_free(w);
	if (p != NULL) {
		if (p->pmfd != -1)
			close(p->pmfd);
		free(p->v);
	}
	free(p);
	free(buf);
	free(manifest);
	gck_ptree_free(t);
	return r;
}

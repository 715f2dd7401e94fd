/*
 * zeroscan.c: the zero pages of a task's private anonymous memory, left
 * out of the image.
 *
 * criu dump writes every page a task has written to, zeros or not.  A
 * restore maps private anonymous memory afresh, and there a page the
 * image does not list is the kernel's zero page: nothing is allocated
 * for it until the task writes to it.  So a page of such memory that
 * holds only zeros is left out of the image altogether: the task's
 * pagemap-PID.img no longer lists it (its entry is split around it) and
 * its pages-N.img no longer holds it.  Any criu restore, ours or a stock
 * `criu restore -D' of the files extracted, then gives the task the same
 * memory without ever mapping the page.
 *
 * The rule, which keeps the restored memory exactly what it was (as
 * criu/mem.c of CRIU 4.1 and 4.2 restores it):
 * - Only pages of a mapping that mm-PID.img records as private
 *   anonymous memory: its status VMA_AREA_REGULAR and VMA_ANON_PRIVATE,
 *   and nothing else but VMA_AREA_STACK or VMA_AREA_HEAP (no AIO ring,
 *   SysV IPC, vDSO or vvar, vsyscall, file, shared, memfd, socket,
 *   shadow stack, guard, uprobes or plugin mapping), and neither shared
 *   nor of hugetlbfs (MAP_SHARED, MAP_HUGETLB) by its flags.  Any other
 *   mapping is restored from a file, or shared, where a page left out
 *   would show the file's or someone else's bytes; a private mapping of
 *   /dev/zero is recorded as a file's, and kept as it is.
 * - Only pages of pagemap entries that are present (PE_PRESENT), lazy or
 *   not (PE_LAZY): an entry that has PE_PARENT, or a flag we do not
 *   know, stays as criu wrote it, and an entry split keeps its flags.
 *   criu dump marks PE_LAZY every page of private anonymous memory but
 *   the stack's, lazy restore or not, and what it means holds for the
 *   pages left out too: a lazy restore (criu/uffd.c,
 *   handle_page_fault()) answers a fault on a page that no entry lists
 *   with UFFDIO_ZEROPAGE, a zero page.
 * - Never a page under a thread's rseq area, which the kernel rewrites.
 * - A child's mapping inherited from its parent is no exception.  criu
 *   restores a parent's memory before it forks the parent's children,
 *   and restore_priv_vma_content() notes in a bitmap each page it
 *   writes into a private mapping.  A child whose mapping matches its
 *   parent's (prepare_cow_vmas()) gets its copy of the parent's, moved
 *   into place with mremap(); each page the child's pagemap lists
 *   clears that page's bit of the parent's bitmap (the child's copy of
 *   it) and is compared or copied; then every page whose bit is still
 *   set, the parent's but not in the child's pagemap, is dropped from
 *   the child with madvise(MADV_DONTNEED), which leaves a zero page, and
 *   a page the parent did not write either was zero there all along.
 *   So a page missing from a child's pagemap comes back zero in the
 *   child whatever its parent holds at that address: CRIU relies on
 *   this itself, for the pages a child gave back with MADV_DONTNEED
 *   after the fork.
 *
 * The pages are read from the stopped task whole, in ranges of up to
 * 256 KiB, on as many threads as there are processors (up to 8), a part
 * of the pages file each; each page of such memory is checked for
 * zeros, its first bytes first (a page that is not zero nearly always
 * shows it there).  Reading only the first bytes of each page costs no
 * less: process_vm_readv() pins every range it reads, and the pinning
 * of a page costs about as much as the copy of it, so a scan of the
 * first 64 bytes of each page was as slow as reading it whole where the
 * pages hold data, and twice as slow where half of them are zero.  As
 * every byte is read, the samples (the first 4 KiB of every 64 KiB)
 * are checked, part by part, against the digests taken of criu's stream
 * (streamer.c), as the writer checks them (checkpoint.c), while the
 * layout is still criu's.
 */
#include "config.h"

#include <sys/mman.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

#include "private.h"
#include "core/proc.h"
#include "core/util.h"
#include "criu/pagemap.h"
#include "criu/streamer.h"
#include "criu/zeroscan.h"
#include "criu/criu-images.pb-c.h"

#define ZCHUNK		(256u << 10)	/* read at a time */
#define ZTHREADS	8		/* at the most */


/* Addresses [start, end) of private anonymous memory. */
struct range {
	uint64_t	start, end;
};

/* A run of pages of the pages file: len bytes at off, from addr. */
struct zrun {
	uint64_t	addr, off, len;
	int		splits;		/* its entry may lose pages */
};

/* The scan of one task's pages, shared by the threads. */
struct zscan {
	const struct gck_sfile	*pages;
	pid_t			 pid;		/* as we see it */
	uint64_t		 psz;
	uint64_t		 part_size, nparts;
	struct zrun		*runs;
	size_t			 nruns, capruns;
	struct range		*ok;
	size_t			 nok, capok;
	const struct gck_area	*rseq;
	size_t			 nrseq;
	struct gck_pmread	*rd;		/* criu's layout, for rseq */
	uint8_t			*drop;		/* per page of the file: goes */
	uint64_t		 ndrop;
	atomic_uint_fast64_t	 next;		/* part */
	atomic_int		 stop;		/* a thread failed */
};

/* What a scanning thread failed on. */
enum zfail {
	ZF_NONE,
	ZF_READ,		/* errno, at addr */
	ZF_CHANGED		/* a part's samples */
};

/* A scanning thread. */
struct zworker {
	struct zscan	*z;
	pthread_t	 th;
	int		 running;
	char		*buf;		/* ZCHUNK bytes */
	struct iovec	*liov, *riov;
	XXH3_state_t	*xs;
	int		 memfd;		/* /proc/PID/mem, when needed */
	uint64_t	 ndrop;
	enum zfail	 fail;
	int		 eno;
	uint64_t	 eaddr, epart;
};

static int	zruns(struct gck_ctx *, struct zscan *,
		    const struct gck_sfile *);
static int	mm_ranges(struct gck_ctx *, struct zscan *,
		    const struct gck_sfile *);
static int	in_ranges(const struct zscan *, uint64_t);
static size_t	run_at(const struct zscan *, uint64_t);
static int	allzero(const char *, size_t);
static int	under_rseq(const struct zscan *, uint64_t);
static int	mem_pread(struct zworker *, const struct iovec *,
		    const struct iovec *);
static int	w_read(struct zworker *, size_t);
static int	w_chunk(struct zworker *, uint64_t, size_t);
static void	w_samples(struct zworker *, uint64_t, const char *, size_t);
static int	w_part(struct zworker *, uint64_t);
static void	*w_main(void *);
static int	w_error(struct gck_ctx *, const struct zscan *,
		    const struct zworker *);
static int	scan(struct gck_ctx *, struct zscan *);

/*
 * The runs of pages the pagemap lists, in the order of the pages file
 * (gck_pmread_open() has checked that they add up to it).
 */
static int
zruns(struct gck_ctx *ctx, struct zscan *z, const struct gck_sfile *pagemap)
{
	struct gck_pagemap	pm;
	struct gck_pmentry	e;
	uint64_t		off = 0;
	int			ok, r;

	if (gck_pagemap_open(&pm, pagemap->data, pagemap->len) == -1)
		goto bad;
	while ((ok = gck_pagemap_next(&pm, &e)) == 1) {
		if (!(e.flags & GCK_PE_PRESENT) || e.nr_pages == 0)
			continue;
		if ((r = gck_grow(ctx, &z->runs, &z->capruns, z->nruns,
		    sizeof *z->runs)) != GCK_OK)
			return r;
		z->runs[z->nruns].addr = e.vaddr;
		z->runs[z->nruns].off = off;
		z->runs[z->nruns].len = (uint64_t)e.nr_pages * z->psz;
		z->runs[z->nruns++].splits = GCK_PE_SPLITS(e.flags);
		off += (uint64_t)e.nr_pages * z->psz;
	}
	if (ok == -1)
		goto bad;
	return GCK_OK;
bad:
	return gck_set_error(ctx, GCK_ECRIU, "cannot parse criu's '%s'",
	    pagemap->name);
}

/*
 * The private anonymous memory of the task, from mm (NULL: none known,
 * and nothing is dropped), in order.
 */
static int
mm_ranges(struct gck_ctx *ctx, struct zscan *z, const struct gck_sfile *mm)
{
	MmEntry		*me;
	VmaEntry	*v;
	const uint8_t	*rec;
	uint32_t	 rl;
	size_t		 i;
	int		 r = GCK_OK;

	if (mm == NULL || (rec = gck_img_first(mm->data, mm->len,
	    GCK_MM_MAGIC, &rl)) == NULL ||
	    (me = mm_entry__unpack(NULL, rl, rec)) == NULL)
		return GCK_OK;
	for (i = 0; i < me->n_vmas; i++) {
		v = me->vmas[i];
		if (!gck_vma_anon_private(v))
			continue;
		if (z->nok > 0 && v->start < z->ok[z->nok - 1].end) {
			/* Not in order, as criu writes them: drop nothing. */
			z->nok = 0;
			break;
		}
		if ((r = gck_grow(ctx, &z->ok, &z->capok, z->nok,
		    sizeof *z->ok)) != GCK_OK)
			break;
		z->ok[z->nok].start = v->start;
		z->ok[z->nok++].end = v->end;
	}
	mm_entry__free_unpacked(me, NULL);
	return r;
}

/* Whether the page at addr lies in private anonymous memory. */
static int
in_ranges(const struct zscan *z, uint64_t addr)
{
	size_t	lo = 0, hi = z->nok, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (z->ok[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < z->nok && z->ok[lo].start <= addr &&
	    addr + z->psz > addr && addr + z->psz <= z->ok[lo].end;
}

/* The run that holds offset off of the pages file. */
static size_t
run_at(const struct zscan *z, uint64_t off)
{
	size_t	lo = 0, hi = z->nruns, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (z->runs[mid].off + z->runs[mid].len <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int
allzero(const char *p, size_t len)
{
	return p[0] == 0 && memcmp(p, p + 1, len - 1) == 0;
}

/* Whether the page at addr holds part of a thread's rseq area. */
static int
under_rseq(const struct zscan *z, uint64_t addr)
{
	size_t	k;

	for (k = 0; k < z->nrseq; k++)
		if (z->rseq[k].addr < addr + z->psz &&
		    addr < z->rseq[k].addr + z->rseq[k].size)
			return 1;
	return 0;
}

/*
 * Reads one range the task may not read itself, through its mem file.
 * Returns 0, or -1 with the failure noted.
 */
static int
mem_pread(struct zworker *w, const struct iovec *l, const struct iovec *rv)
{
	char		path[64];
	uint64_t	addr = (uintptr_t)rv->iov_base;
	size_t		got = 0;
	ssize_t		n = -1;

	if (w->memfd == -1) {
		snprintf(path, sizeof path, "/proc/%d/mem", (int)w->z->pid);
		w->memfd = open(path, O_RDONLY | O_CLOEXEC);
	}
	while (w->memfd != -1 && got < l->iov_len) {
		n = pread(w->memfd, (char *)l->iov_base + got,
		    l->iov_len - got, (off_t)(addr + got));
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	if (got == l->iov_len)
		return 0;
	w->fail = ZF_READ;
	w->eno = n == 0 ? 0 : errno;
	w->eaddr = addr + got;
	return -1;
}

/*
 * Reads the n ranges of w->riov into w->liov: with process_vm_readv(),
 * and a range it cannot read (it stops at the first) through the mem
 * file.  Returns 0 or -1.
 */
static int
w_read(struct zworker *w, size_t n)
{
	size_t	i = 0, cnt;
	ssize_t	got;

	while (i < n) {
		cnt = n - i;
		if ((got = process_vm_readv(w->z->pid, w->liov + i, cnt,
		    w->riov + i, cnt, 0)) == -1)
			got = 0;
		while (cnt > 0 && (size_t)got >= w->riov[i].iov_len) {
			got -= (ssize_t)w->riov[i].iov_len;
			i++;
			cnt--;
		}
		if (cnt == 0)
			continue;
		if (mem_pread(w, &w->liov[i], &w->riov[i]) == -1)
			return -1;
		i++;
	}
	return 0;
}

/*
 * Reads len bytes at offset off of the pages file into w->buf and notes
 * the zero pages among them that are to go.  Returns 0 or -1.
 */
static int
w_chunk(struct zworker *w, uint64_t off, size_t len)
{
	struct zscan		*z = w->z;
	const struct zrun	*r;
	uint64_t		 pos, end = off + len, k, addr;
	size_t			 i, n = 0;

	for (pos = off, i = run_at(z, off); pos < end; pos += k) {
		if (pos == z->runs[i].off + z->runs[i].len)
			i++;
		r = &z->runs[i];
		k = (r->off + r->len < end ? r->off + r->len : end) - pos;
		w->liov[n].iov_base = w->buf + (pos - off);
		w->liov[n].iov_len = (size_t)k;
		w->riov[n].iov_base = (void *)(uintptr_t)(r->addr +
		    (pos - r->off));
		w->riov[n++].iov_len = (size_t)k;
	}
	if (w_read(w, n) == -1)
		return -1;
	for (pos = off, i = run_at(z, off); pos < end; pos += z->psz) {
		if (pos == z->runs[i].off + z->runs[i].len)
			i++;
		r = &z->runs[i];
		addr = r->addr + (pos - r->off);
		if (r->splits && allzero(w->buf + (pos - off),
		    (size_t)z->psz) && in_ranges(z, addr) &&
		    !under_rseq(z, addr)) {
			z->drop[pos / z->psz] = 1;
			w->ndrop++;
		}
	}
	return 0;
}

/* Takes the samples of len bytes at p, at offset in of their part. */
static void
w_samples(struct zworker *w, uint64_t in, const char *p, size_t len)
{
	uint64_t	s, k;

	while (len > 0) {
		s = in % GCK_SAMPLE_STRIDE;
		k = s < GCK_SAMPLE_LEN ? GCK_SAMPLE_LEN - s :
		    GCK_SAMPLE_STRIDE - s;
		if (k > len)
			k = len;
		if (s < GCK_SAMPLE_LEN)
			XXH3_64bits_update(w->xs, p, (size_t)k);
		in += k;
		p += k;
		len -= (size_t)k;
	}
}

/*
 * Scans part p of the pages file, and checks its samples against those
 * criu wrote.  The tree has been held by criu all along: only the
 * kernel can have written to it since, in the rseq areas.  Returns 0 or
 * -1.
 */
static int
w_part(struct zworker *w, uint64_t p)
{
	struct zscan	*z = w->z;
	uint64_t	 off = p * z->part_size, end, at;
	size_t		 n, k;

	end = z->pages->size - off < z->part_size ? z->pages->size :
	    off + z->part_size;
	XXH3_64bits_reset(w->xs);
	for (at = off; at < end; at += n) {
		n = end - at < ZCHUNK ? (size_t)(end - at) : ZCHUNK;
		if (w_chunk(w, at, n) == -1)
			return -1;
		w_samples(w, at - off, w->buf, n);
	}
	if (XXH3_64bits_digest(w->xs) == z->pages->digests[p])
		return 0;
	for (k = 0; k < z->nrseq; k++)
		if (gck_pmread_overlaps(z->rd, off, end - off,
		    z->rseq[k].addr, z->rseq[k].size))
			return 0;
	w->fail = ZF_CHANGED;
	w->epart = p;
	return -1;
}

/* A scanning thread: part after part, until none is left. */
static void *
w_main(void *arg)
{
	struct zworker	*w = arg;
	struct zscan	*z = w->z;
	uint64_t	 p;

	while (!atomic_load(&z->stop) &&
	    (p = atomic_fetch_add(&z->next, 1)) < z->nparts)
		if (w_part(w, p) == -1) {
			atomic_store(&z->stop, 1);
			break;
		}
	return NULL;
}

/* Sets the error of worker w's failure.  Returns its code. */
static int
w_error(struct gck_ctx *ctx, const struct zscan *z, const struct zworker *w)
{
	if (w->fail == ZF_READ)
		return gck_set_syserr(ctx, w->eno, "cannot read the memory of "
		    "process %d at %#" PRIx64 ": %s", (int)z->pid, w->eaddr,
		    w->eno != 0 ? strerror(w->eno) : "end of file");
	return gck_set_error(ctx, GCK_ECRIU, "the memory of process %d "
	    "changed after criu dumped it (part %u of '%s')",
	    (int)z->pages->pid, (unsigned)w->epart, z->pages->name);
}

/*
 * Scans the parts of the pages file on as many threads as there are
 * processors, up to ZTHREADS and one a part.
 */
static int
scan(struct gck_ctx *ctx, struct zscan *z)
{
	struct zworker	 w[ZTHREADS];
	long		 ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	size_t		 nw, i;
	int		 r = GCK_OK;

	nw = ncpu < 1 ? 1 : ncpu > ZTHREADS ? ZTHREADS : (size_t)ncpu;
	if (nw > z->nparts)
		nw = z->nparts > 0 ? (size_t)z->nparts : 1;
	memset(w, 0, sizeof w);
	for (i = 0; i < nw; i++) {
		w[i].z = z;
		w[i].memfd = -1;
		if ((w[i].buf = malloc(ZCHUNK)) == NULL ||
		    (w[i].liov = calloc(ZCHUNK / 4096 + 1,
		    sizeof *w[i].liov)) == NULL ||
		    (w[i].riov = calloc(ZCHUNK / 4096 + 1,
		    sizeof *w[i].riov)) == NULL ||
		    (w[i].xs = XXH3_createState()) == NULL) {
			r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
			goto out;
		}
	}
	/* The first here, the others on threads of their own if they can. */
	for (i = 1; i < nw; i++)
		w[i].running = pthread_create(&w[i].th, NULL, w_main,
		    &w[i]) == 0;
	w_main(&w[0]);
	for (i = 0; i < nw; i++) {
		if (w[i].running)
			pthread_join(w[i].th, NULL);
		w[i].running = 0;
	}
	for (i = 0; i < nw; i++) {
		if (w[i].fail != ZF_NONE && r == GCK_OK)
			r = w_error(ctx, z, &w[i]);
		z->ndrop += w[i].ndrop;
	}
out:
	for (i = 0; i < nw; i++) {
		if (w[i].memfd != -1)
			close(w[i].memfd);
		if (w[i].xs != NULL)
			XXH3_freeState(w[i].xs);
		free(w[i].buf);
		free(w[i].liov);
		free(w[i].riov);
	}
	return r;
}

/*
 * Finds the zero pages of private anonymous memory among the pages of
 * pages, which pagemap lists and mm (NULL: none is dropped) maps, of the
 * stopped task pid as we see it, whose threads' rseq areas are rseq[n],
 * and checks the samples of each part of part_size bytes against those
 * of criu's stream.  Fills *out in: the pagemap without the pages that
 * go, when some do (free out->pagemap), and the bytes kept and left
 * out.  Returns GCK_OK or a code.
 */
int
gck_zero_pages(struct gck_ctx *ctx, const struct gck_sfile *pagemap,
    const struct gck_sfile *pages, const struct gck_sfile *mm, pid_t pid,
    const struct gck_area *rseq, size_t n, size_t part_size,
    struct gck_zero *out)
{
	struct zscan	*z;
	int		 r;

	memset(out, 0, sizeof *out);
	if ((z = calloc(1, sizeof *z)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	z->pages = pages;
	z->pid = pid;
	z->psz = (uint64_t)sysconf(_SC_PAGESIZE);
	z->part_size = part_size;
	z->rseq = rseq;
	z->nrseq = n;
	if (part_size == 0 || part_size % z->psz != 0 || ZCHUNK % z->psz != 0) {
		r = gck_set_error(ctx, GCK_EINVAL, "cannot scan pages in parts "
		    "of %zu bytes", part_size);
		goto out;
	}
	z->nparts = (pages->size + part_size - 1) / part_size;
	if ((r = gck_pmread_open(ctx, pagemap, pages, pid, &z->rd)) !=
	    GCK_OK || (r = zruns(ctx, z, pagemap)) != GCK_OK ||
	    (r = mm_ranges(ctx, z, mm)) != GCK_OK)
		goto out;
	if (z->nparts != pages->ndigests) {
		r = gck_set_error(ctx, GCK_ECRIU, "'%s' of process %d is "
		    "shorter than criu wrote it", pages->name, (int)pages->pid);
		goto out;
	}
	if ((z->drop = calloc(pages->size / z->psz + 1, 1)) == NULL) {
		r = gck_set_error(ctx, GCK_ENOMEM, "out of memory");
		goto out;
	}
	if ((r = scan(ctx, z)) != GCK_OK)
		goto out;
	out->dropped = z->ndrop * z->psz;
	out->size = pages->size - out->dropped;
	if (z->ndrop > 0)
		r = gck_pagemap_without(ctx, pagemap, z->drop, &out->pagemap,
		    &out->len);
out:
	gck_pmread_free(z->rd);
	free(z->runs);
	free(z->ok);
	free(z->drop);
	free(z);
	return r;
}

/*
 * Leaves the zero pages of private anonymous memory out of the pages
 * files of cap (see above): each task's pagemap is rewritten without
 * them, and its pages file marked as holding what is left, its samples
 * checked.  criu names the tasks as their PID namespace ns (NULL: ours)
 * sees them.  *droppedp is set to the bytes left out.  Returns GCK_OK or
 * a code.
 */
int
gck_zero_scan(struct gck_ctx *ctx, struct gck_capture *cap,
    const struct gck_nsview *ns, uint64_t *droppedp)
{
	const struct gck_sfile	*f, *pm, *mm;
	struct gck_area		*rseq = NULL;
	struct gck_zero		 z;
	char			 pmname[64], mmname[64];
	size_t			 i, nrseq = 0, psz;
	pid_t			 pid;
	int			 r;

	*droppedp = 0;
	psz = (size_t)sysconf(_SC_PAGESIZE);
	if (gck_capture_part_size(cap) % psz != 0 || ZCHUNK % psz != 0) {
		/* (checkpoint.c checks the samples, in criu's layout) */
		gck_log(ctx, 1, "image: zero pages are not left out: parts of "
		    "%zu bytes are no whole pages", gck_capture_part_size(cap));
		return GCK_OK;
	}
	for (i = 0; i < gck_capture_nfiles(cap); i++) {
		f = gck_capture_file(cap, i);
		if (!f->pages)
			continue;
		snprintf(pmname, sizeof pmname, "pagemap-%d.img", (int)f->pid);
		snprintf(mmname, sizeof mmname, "mm-%d.img", (int)f->pid);
		if ((pm = gck_capture_find(cap, pmname)) == NULL)
			return gck_set_error(ctx, GCK_ECRIU, "criu wrote '%s' "
			    "without '%s'", f->name, pmname);
		if ((pid = gck_nsview_host(ns, f->pid)) <= 0)
			return gck_set_error(ctx, GCK_ECRIU, "criu wrote '%s' "
			    "of process %d, which is not in the tree", f->name,
			    (int)f->pid);
		mm = gck_capture_find(cap, mmname);
		if ((r = gck_rseq_areas(ctx, cap, pid, ns, &rseq, &nrseq)) !=
		    GCK_OK)
			return r;
		r = gck_zero_pages(ctx, pm, f, mm, pid, rseq, nrseq,
		    gck_capture_part_size(cap), &z);
		free(rseq);
		rseq = NULL;
		if (r != GCK_OK)
			return r;
		gck_log(ctx, 2, "%s: %llu of %llu bytes are zero pages of "
		    "private anonymous memory, left out", f->name,
		    (unsigned long long)z.dropped,
		    (unsigned long long)f->size);
		/* (gck_capture_replace() owns z.pagemap, even on failure) */
		if ((z.pagemap != NULL && (r = gck_capture_replace(cap, pmname,
		    z.pagemap, z.len)) != GCK_OK) ||
		    (r = gck_capture_set_pages(cap, f->name, z.size)) != GCK_OK)
			return r;
		*droppedp += z.dropped;
	}
	gck_log(ctx, 1, "image: %llu bytes of zero pages of private anonymous "
	    "memory left out", (unsigned long long)*droppedp);
	return GCK_OK;
}

/*
 * fill.c: a restore from an image file writes the private memory of its
 * processes in place itself, on every CPU, rather than through criu.
 *
 * criu restore reads the pages of a process from one pipe, and copies
 * each into place, on one CPU: on a large image that pipe bounds the
 * whole restore.  But an image file's trailer says where each chunk of
 * it is (gpuckpt-image(5)), so the chunks criu needs can be read ahead
 * of it, and the rest written in place afterwards.  So, from a file:
 * - the chunks this restore writes itself (see below) are left out of
 *   the pagemaps criu is given, and criu maps that memory empty, as it
 *   does the zero pages an image leaves out (zeroscan.c);
 * - the few other chunks are read ahead, each from where the trailer
 *   says and checked against its digest, and given to criu as the
 *   processes' pages files;
 * - criu restores the tree, which it leaves stopped;
 * - then the image is read on to its end as every restore reads it,
 *   every entry checked, and the decompressing workers write each chunk
 *   they decompress into its process (process_vm_writev(2)) as they
 *   digest it, or the chunks of a parent they read for a reference
 *   (gck_parents_load()) as they check them; what the reader's thread
 *   meets that no worker wrote (frames decompressed before criu was
 *   done, references it read itself) it writes itself.
 * The tree runs only once the reader has checked the whole image and
 * all that was done ahead of it is accounted for: each chunk criu was
 * given has the digest of the entry the reader checked in its place,
 * and into each chunk written exactly the bytes of that entry's data
 * were written.  A frame that claimed to be a chunk it is not, and was
 * written too, makes them more.
 *
 * The chunks written in place are those whose every page:
 * - is of a mapping that mm-PID.img records as private anonymous
 *   memory (gck_vma_anon_private()), and writable, as
 *   process_vm_writev() writes only where the process could;
 * - is of a mapping that no other process of the image has, private,
 *   at the same place: a child's copy of its parent's memory shares the
 *   parent's pages until either writes to them, which criu keeps (where
 *   a child's private mapping has the bounds and the kind of one of its
 *   parent's, prepare_cow_vmas() in criu/mem.c, it restores the child's
 *   from the parent's and compares their pages), and written apart they
 *   would take twice the memory;
 * - holds no part of a thread's rseq area, which criu writes at the end
 *   of the restore;
 * - is not within 512 KiB below a thread's stack pointer, nor on its
 *   signal stack: a signal the image holds pending is delivered, its
 *   frame written there, as criu lets the tasks go, before the stop
 *   that holds them for us.
 * The image's processes must be of x86_64, where the stack pointer is
 * known; otherwise criu restores everything, as it does from a pipe.
 */
#include "config.h"

#include <sys/mman.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "private.h"
#include "core/util.h"
#include "criu/fill.h"
#include "criu/pagemap.h"
#include "criu/streamer.h"
#include "image/digest.h"
#include "image/image.h"
#include "image/manifest.h"
#include "image/names.h"
#include "image/parent.h"
#include "criu/criu-images.pb-c.h"

#define FILL_AHEAD_MAX	(256u << 20)	/* read ahead for criu, at most */
#define SP_BELOW	(512u << 10)	/* signal frames under a stack */
#define SP_ABOVE	(4u << 10)
#define FILL_IOV	64		/* ranges of one write */
#define MARCH_X86_64	1		/* core_entry's mtype */

/* Addresses [start, end), sorted by start. */
struct range {
	uint64_t	start, end;
};

struct ranges {
	struct range	*r;
	size_t		 n, cap;
};

/* A private mapping of a process. */
struct pvma {
	uint64_t	start, end;
	uint32_t	flags;
	int		fillable;	/* anonymous, writable */
};

/* The private mappings of a process, sorted by start. */
struct pvmas {
	struct pvma	*v;
	size_t		 n, cap;
};

/* len bytes at off of a chunk belong at addr. */
struct fseg {
	uint64_t	off, addr, len;
};

struct ffile;

/* A chunk of a pages file: a part of it in the image. */
struct fpart {
	struct ffile	*file;
	uint64_t	 off, size;	/* in the pages file */
	struct gck_digest d;		/* the trailer's */
	int		 ref;		/* a reference to a parent's */
	int		 fill;		/* written in place */
	struct fseg	*seg;		/* where its pages go, in order */
	size_t		 nseg, capseg;
	atomic_uint_fast64_t taken;	/* bytes written */
	int		 accepted;	/* 1 + GCK_TAKEN_*, once checked */
	uint64_t	 data;		/* its bytes of data, checked */
};

/* The pages file of a process. */
struct ffile {
	struct gck_fill	*fill;
	char		 name[GCK_NAME_MAX + 1];	/* pages-ID.img */
	int		 whole;		/* one entry, not in parts */
	size_t		 proc;		/* its process in the manifest */
	pid_t		 pid;		/* as we see it, once armed */
	const struct gck_sfile *pm;	/* its pagemap, while planning */
	char		 pmname[GCK_SNAME];
	struct ranges	 ok;		/* memory that may be written */
	struct fpart	*part;
	size_t		 npart, cappart;
	uint64_t	 size;
	char		*pagemap, *pages;	/* what criu is given */
	size_t		 pmlen, pglen;
};

struct gck_fill {
	struct gck_ctx	*ctx;
	const struct gck_manifest *m;
	const struct gck_sfile *kept;
	size_t		 nkept;
	struct ffile	*file;
	size_t		 nfile, capfile;
	struct pvmas	*priv;		/* each process's private mappings */
	size_t		 nprocs;
	struct ranges	 away;		/* rseq areas, stacks, signal stacks */
	struct gck_taker taker;
	atomic_int	 armed;
	atomic_int	 fail;		/* errno of the first failed write */
	pid_t		 fpid;		/* its process */
	uint64_t	 faddr;		/* and where */
	uint64_t	 psz, filled, ahead;
	uint64_t	*at, *zsize;	/* the frames of the chunks */
	size_t		 nframes, capat, capzsize;
};

static int	 range_cmp(const void *, const void *);
static int	 ranges_add(struct gck_ctx *, struct ranges *, uint64_t,
		    uint64_t);
static size_t	 ranges_at(const struct ranges *, uint64_t);
static int	 ranges_hold(const struct ranges *, uint64_t, uint64_t);
static int	 ranges_meet_any(const struct ranges *, uint64_t, uint64_t);
static const struct gck_sfile *f_kept(const struct gck_fill *, const char *);
static int	 f_core(struct gck_fill *, const struct gck_sfile *);
static int	 f_cores(struct gck_fill *);
static int	 f_frame(struct gck_fill *, const struct gck_tentry *);
static struct ffile *f_file(struct gck_fill *, const char *);
static int	 f_parts(struct gck_fill *, const struct gck_parents *);
static int	 f_proc(struct gck_fill *, struct ffile *);
static int	 pvma_cmp(const void *, const void *);
static int	 f_private(struct gck_fill *);
static int	 f_twin(const struct gck_fill *, size_t, const struct pvma *);
static int	 f_writable(const struct gck_fill *, const struct ffile *,
		    uint64_t, uint64_t);
static int	 f_seg(struct gck_fill *, struct fpart *, uint64_t, uint64_t,
		    uint64_t);
static int	 f_decide(struct gck_fill *, struct ffile *);
static int	 f_ahead(struct gck_fill *, struct ffile *,
		    struct gck_parents *, struct gck_parents *);
static int	 f_none(struct gck_fill *, const char *);
static int	 f_choose(struct gck_fill *);
static struct fpart *f_part(struct gck_fill *, const char *);
static void	*f_begin(void *, const char *);
static void	 f_failed(struct gck_fill *, pid_t, uint64_t, int);
static int	 f_write(struct gck_fill *, pid_t, const struct iovec *,
		    const struct iovec *, unsigned long);
static int	 f_take(void *, void *, uint64_t, const void *, size_t);
static int	 f_error(struct gck_fill *);
static int	 f_accepted(void *, const char *, const struct gck_digest *,
		    uint64_t, int);

static int
range_cmp(const void *a, const void *b)
{
	const struct range	*x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

static int
ranges_add(struct gck_ctx *ctx, struct ranges *rs, uint64_t start,
    uint64_t end)
{
	int	r;

	if (end <= start)
		return GCK_OK;
	if ((r = gck_grow(ctx, &rs->r, &rs->cap, rs->n, sizeof *rs->r)) !=
	    GCK_OK)
		return r;
	rs->r[rs->n].start = start;
	rs->r[rs->n++].end = end;
	return GCK_OK;
}

/* The first range that ends after addr. */
static size_t
ranges_at(const struct ranges *rs, uint64_t addr)
{
	size_t	lo = 0, hi = rs->n, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (rs->r[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Whether one range holds [a, a + len) (rs sorted, not overlapping). */
static int
ranges_hold(const struct ranges *rs, uint64_t a, uint64_t len)
{
	size_t	i = ranges_at(rs, a);

	return i < rs->n && rs->r[i].start <= a && a + len <= rs->r[i].end;
}

/* Whether any range meets [a, a + len) (rs sorted by start). */
static int
ranges_meet_any(const struct ranges *rs, uint64_t a, uint64_t len)
{
	size_t	i;

	for (i = 0; i < rs->n && rs->r[i].start < a + len; i++)
		if (rs->r[i].end > a)
			return 1;
	return 0;
}

static const struct gck_sfile *
f_kept(const struct gck_fill *f, const char *name)
{
	size_t	i;

	for (i = 0; i < f->nkept; i++)
		if (strcmp(f->kept[i].name, name) == 0)
			return &f->kept[i];
	return NULL;
}

/*
 * What a thread's core image says of where the kernel may write: its
 * rseq area, the stack under its stack pointer, its signal stack.
 * Returns 1, 0 when nothing may be filled (not x86_64, or the image
 * unreadable), or a code.
 */
static int
f_core(struct gck_fill *f, const struct gck_sfile *c)
{
	CoreEntry	*ce;
	ThreadCoreEntry	*tc;
	const uint8_t	*rec;
	uint64_t	 sp;
	uint32_t	 len;
	int		 r = GCK_OK;

	if ((rec = gck_img_first(c->data, c->len, GCK_CORE_MAGIC, &len)) ==
	    NULL || (ce = core_entry__unpack(NULL, len, rec)) == NULL)
		return 0;
	if (!ce->has_mtype || ce->mtype != MARCH_X86_64 ||
	    ce->thread_info == NULL || ce->thread_info->gpregs == NULL ||
	    !ce->thread_info->gpregs->has_sp) {
		core_entry__free_unpacked(ce, NULL);
		return 0;
	}
	sp = ce->thread_info->gpregs->sp;
	r = ranges_add(f->ctx, &f->away, sp > SP_BELOW ? sp - SP_BELOW : 0,
	    sp + SP_ABOVE);
	if ((tc = ce->thread_core) != NULL && r == GCK_OK) {
		if (tc->rseq_entry != NULL &&
		    tc->rseq_entry->rseq_abi_pointer != 0)
			r = ranges_add(f->ctx, &f->away,
			    tc->rseq_entry->rseq_abi_pointer,
			    tc->rseq_entry->rseq_abi_pointer +
			    (tc->rseq_entry->has_rseq_abi_size ?
			    tc->rseq_entry->rseq_abi_size : 32));
		if (r == GCK_OK && tc->sas != NULL &&
		    !(tc->sas->ss_flags & SS_DISABLE) && tc->sas->ss_size > 0)
			r = ranges_add(f->ctx, &f->away, tc->sas->ss_sp,
			    tc->sas->ss_sp + tc->sas->ss_size);
	}
	core_entry__free_unpacked(ce, NULL);
	return r == GCK_OK ? 1 : r;
}

/* The core images of every thread.  Returns 1, 0 or a code (f_core()). */
static int
f_cores(struct gck_fill *f)
{
	size_t	i;
	int	r, n = 0;

	for (i = 0; i < f->nkept; i++) {
		if (strncmp(f->kept[i].name, "core-", 5) != 0)
			continue;
		if ((r = f_core(f, &f->kept[i])) != 1)
			return r;
		n++;
	}
	if (n == 0)
		return 0;
	if (f->away.n > 0)
		qsort(f->away.r, f->away.n, sizeof *f->away.r, range_cmp);
	return 1;
}

/* Notes where the frame of entry e is. */
static int
f_frame(struct gck_fill *f, const struct gck_tentry *e)
{
	int	r;

	if ((r = gck_grow(f->ctx, &f->at, &f->capat, f->nframes,
	    sizeof *f->at)) != GCK_OK || (r = gck_grow(f->ctx, &f->zsize,
	    &f->capzsize, f->nframes, sizeof *f->zsize)) != GCK_OK)
		return r;
	f->at[f->nframes] = e->at;
	f->zsize[f->nframes++] = e->zsize;
	return GCK_OK;
}

static struct ffile *
f_file(struct gck_fill *f, const char *name)
{
	size_t	i;

	for (i = 0; i < f->nfile; i++)
		if (strcmp(f->file[i].name, name) == 0)
			return &f->file[i];
	return NULL;
}

/*
 * The chunks of the pages files, as the trailer of the image lists
 * them.  Returns 1, 0 when they are not as a restore expects them
 * (nothing is filled; the reader will say what is wrong), or a code.
 */
static int
f_parts(struct gck_fill *f, const struct gck_parents *self)
{
	struct gck_tentry e;
	struct ffile	*ff;
	struct fpart	*p;
	char		 file[GCK_NAME_MAX + 1];
	size_t		 i, n = gck_parents_nentries(self);
	long		 part;
	int		 r;

	for (i = 0; i < n; i++) {
		if (gck_parents_entry(self, i, &e) == -1)
			return 0;
		if (gck_entry_parse(e.name, file, sizeof file, &part) == -1 ||
		    gck_manifest_file_memory(f->m, file) != 1 ||
		    gck_manifest_file_cuda(f->m, file))
			continue;
		if ((r = f_frame(f, &e)) != GCK_OK)
			return r;
		if ((ff = f_file(f, file)) == NULL) {
			if (part > 0 || (r = gck_grow(f->ctx, &f->file,
			    &f->capfile, f->nfile, sizeof *f->file)) != GCK_OK)
				return part > 0 ? 0 : r;
			ff = &f->file[f->nfile++];
			memset(ff, 0, sizeof *ff);
			ff->fill = f;
			snprintf(ff->name, sizeof ff->name, "%s", file);
			ff->whole = part == -1;
		}
		if (ff->whole || part != (long)ff->npart ||
		    e.size % f->psz != 0)
			return 0;
		if ((r = gck_grow(f->ctx, &ff->part, &ff->cappart, ff->npart,
		    sizeof *ff->part)) != GCK_OK)
			return r;
		p = &ff->part[ff->npart++];
		memset(p, 0, sizeof *p);
		p->file = ff;
		p->off = ff->size;
		p->size = e.size;
		p->d = e.d;
		p->ref = e.ref;
		p->fill = 1;
		atomic_init(&p->taken, 0);
		ff->size += e.size;
	}
	return f->nfile > 0;
}

/*
 * The process whose pagemap names ff, and the memory of it that may be
 * written.  Returns 1, 0 (nothing is filled) or a code.
 */
static int
f_proc(struct gck_fill *f, struct ffile *ff)
{
	const struct pvmas	*pv;
	const struct pvma	*v;
	struct gck_pagemap	 pm;
	char			 name[64];
	unsigned		 id;
	size_t			 i;
	int			 r = GCK_OK;

	if (!gck_pages_id(ff->name, &id) || gck_manifest_file_size(f->m,
	    ff->name) != (int64_t)ff->size)
		return 0;
	for (i = 0; i < f->nprocs; i++) {
		snprintf(name, sizeof name, "pagemap-%d.img",
		    (int)gck_manifest_pid(f->m, i));
		if ((ff->pm = f_kept(f, name)) != NULL &&
		    gck_pagemap_open(&pm, ff->pm->data, ff->pm->len) == 0 &&
		    pm.pages_id == id)
			break;
	}
	if (i == f->nprocs)
		return 0;
	ff->proc = i;
	snprintf(ff->pmname, sizeof ff->pmname, "%s", ff->pm->name);
	pv = &f->priv[i];
	for (i = 0; i < pv->n && r == GCK_OK; i++) {
		v = &pv->v[i];
		if (!v->fillable)
			continue;
		if (f_twin(f, ff->proc, v))
			gck_log(f->ctx, 2, "process %d: %#" PRIx64 "-%#" PRIx64
			    " left to criu: it may share pages with another "
			    "process", (int)gck_manifest_pid(f->m, ff->proc),
			    v->start, v->end);
		else
			r = ranges_add(f->ctx, &ff->ok, v->start, v->end);
	}
	if (r != GCK_OK)
		return r;
	/* (in order already, as the mappings are) */
	for (i = 1; i < ff->ok.n; i++)
		if (ff->ok.r[i].start < ff->ok.r[i - 1].end)
			return 0;
	return 1;
}

static int
pvma_cmp(const void *a, const void *b)
{
	const struct pvma	*x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/*
 * The private mappings of every process of the image, which a child's
 * may share pages with.  Returns GCK_OK or a code.
 */
static int
f_private(struct gck_fill *f)
{
	const struct gck_sfile	*mm;
	struct pvmas		*pv;
	MmEntry			*me;
	VmaEntry		*v;
	const uint8_t		*rec;
	char			 name[64];
	uint32_t		 len;
	size_t			 i, k;
	int			 r = GCK_OK;

	if ((f->priv = calloc(f->nprocs + 1, sizeof *f->priv)) == NULL)
		return gck_set_error(f->ctx, GCK_ENOMEM, "out of memory");
	for (i = 0; i < f->nprocs && r == GCK_OK; i++) {
		snprintf(name, sizeof name, "mm-%d.img",
		    (int)gck_manifest_pid(f->m, i));
		if ((mm = f_kept(f, name)) == NULL || (rec = gck_img_first(
		    mm->data, mm->len, GCK_MM_MAGIC, &len)) == NULL ||
		    (me = mm_entry__unpack(NULL, len, rec)) == NULL)
			continue;
		pv = &f->priv[i];
		for (k = 0; k < me->n_vmas && r == GCK_OK; k++) {
			v = me->vmas[k];
			if (!v->has_start || !v->has_end || !v->has_flags ||
			    (v->flags & (MAP_SHARED | MAP_HUGETLB)) ||
			    (r = gck_grow(f->ctx, &pv->v, &pv->cap, pv->n,
			    sizeof *pv->v)) != GCK_OK)
				continue;
			pv->v[pv->n].start = v->start;
			pv->v[pv->n].end = v->end;
			pv->v[pv->n].flags = v->flags;
			pv->v[pv->n++].fillable = gck_vma_anon_private(v) &&
			    v->has_prot && (v->prot & PROT_WRITE);
		}
		mm_entry__free_unpacked(me, NULL);
		if (pv->n > 0)
			qsort(pv->v, pv->n, sizeof *pv->v, pvma_cmp);
	}
	return r;
}

/*
 * Whether another process than proc has a private mapping of the bounds
 * and the kind of v, which may share pages with it.
 */
static int
f_twin(const struct gck_fill *f, size_t proc, const struct pvma *v)
{
	const struct pvmas	*pv;
	struct pvma		 key, *w;
	size_t			 i;

	key.start = v->start;
	for (i = 0; i < f->nprocs; i++) {
		pv = &f->priv[i];
		if (i == proc || pv->n == 0 || (w = bsearch(&key, pv->v, pv->n,
		    sizeof *pv->v, pvma_cmp)) == NULL)
			continue;
		if (w->end == v->end && !((w->flags ^ v->flags) &
		    (MAP_GROWSDOWN | MAP_ANONYMOUS)))
			return 1;
	}
	return 0;
}

/* Whether [a, a + len) of process proc may be written in place. */
static int
f_writable(const struct gck_fill *f, const struct ffile *ff, uint64_t a,
    uint64_t len)
{
	return ranges_hold(&ff->ok, a, len) &&
	    !ranges_meet_any(&f->away, a, len);
}

/* Notes that bytes [off, off + len) of part p go to addr. */
static int
f_seg(struct gck_fill *f, struct fpart *p, uint64_t off, uint64_t addr,
    uint64_t len)
{
	struct fseg	*s;
	int		 r;

	if (p->nseg > 0) {
		s = &p->seg[p->nseg - 1];
		if (s->off + s->len == off && s->addr + s->len == addr) {
			s->len += len;
			return GCK_OK;
		}
	}
	if ((r = gck_grow(f->ctx, &p->seg, &p->capseg, p->nseg,
	    sizeof *p->seg)) != GCK_OK)
		return r;
	p->seg[p->nseg].off = off;
	p->seg[p->nseg].addr = addr;
	p->seg[p->nseg++].len = len;
	return GCK_OK;
}

/*
 * Goes through ff's pagemap: which of its chunks may be written in
 * place, and where each of their pages goes.  Returns 1, 0 when the
 * pagemap and the chunks do not agree (nothing is filled), or a code.
 */
static int
f_decide(struct gck_fill *f, struct ffile *ff)
{
	struct gck_pagemap	pm;
	struct gck_pmentry	e;
	struct fpart		*p;
	uint64_t		off = 0, a, left, len;
	size_t			k = 0;
	int			ok, r;

	if (gck_pagemap_open(&pm, ff->pm->data, ff->pm->len) == -1)
		return 0;
	while ((ok = gck_pagemap_next(&pm, &e)) == 1) {
		if (!(e.flags & GCK_PE_PRESENT))
			continue;
		a = e.vaddr;
		left = (uint64_t)e.nr_pages * f->psz;
		while (left > 0) {
			while (k < ff->npart && off >= ff->part[k].off +
			    ff->part[k].size)
				k++;
			if (k == ff->npart)
				return 0;
			p = &ff->part[k];
			len = p->off + p->size - off;
			if (len > left)
				len = left;
			if (!GCK_PE_SPLITS(e.flags) ||
			    !f_writable(f, ff, a, len))
				p->fill = 0;
			if ((r = f_seg(f, p, off - p->off, a, len)) != GCK_OK)
				return r;
			off += len;
			a += len;
			left -= len;
		}
	}
	return ok == 0 && off == ff->size;
}

/*
 * What criu is given of ff: its pagemap without the chunks written in
 * place, and the other chunks, read ahead, as its pages file.  Returns
 * GCK_OK or a code.
 */
static int
f_ahead(struct gck_fill *f, struct ffile *ff, struct gck_parents *self,
    struct gck_parents *parents)
{
	struct fpart	*p;
	const char	*data;
	uint8_t		*drop;
	size_t		 k, at = 0;
	uint64_t	 i;
	int		 r;

	if ((drop = calloc(ff->size / f->psz + 1, 1)) == NULL)
		return gck_set_error(f->ctx, GCK_ENOMEM, "out of memory");
	for (k = 0; k < ff->npart; k++) {
		p = &ff->part[k];
		if (p->fill)
			for (i = p->off / f->psz; i < (p->off + p->size) /
			    f->psz; i++)
				drop[i] = 1;
		else
			ff->pglen += (size_t)p->size;
	}
	r = gck_pagemap_without(f->ctx, ff->pm, drop, &ff->pagemap,
	    &ff->pmlen);
	free(drop);
	if (r != GCK_OK)
		return r;
	if ((ff->pages = malloc(ff->pglen + 1)) == NULL)
		return gck_set_error(f->ctx, GCK_ENOMEM, "out of memory");
	for (k = 0; k < ff->npart; k++) {
		p = &ff->part[k];
		if (p->fill || p->size == 0)
			continue;
		if ((r = gck_parents_fetch(p->ref ? parents : self, &p->d,
		    p->size, &data)) != GCK_OK)
			return r;
		memcpy(ff->pages + at, data, (size_t)p->size);
		at += (size_t)p->size;
	}
	return GCK_OK;
}

/* Says why nothing is filled.  Returns GCK_OK. */
static int
f_none(struct gck_fill *f, const char *why)
{
	gck_log(f->ctx, 1, "restoring all memory through criu: %s", why);
	return GCK_OK;
}

/* Which chunks are written in place.  Returns 1, 0 (none) or a code. */
static int
f_choose(struct gck_fill *f)
{
	struct ffile	*ff;
	size_t		 i, k;
	int		 r;

	for (i = 0; i < f->nfile; i++) {
		ff = &f->file[i];
		if ((r = f_proc(f, ff)) != 1 || (r = f_decide(f, ff)) != 1)
			return r;
		for (k = 0; k < ff->npart; k++) {
			if (ff->part[k].fill)
				f->filled += ff->part[k].size;
			else
				f->ahead += ff->part[k].size;
			if (ff->part[k].size == 0)
				ff->part[k].fill = 0;
		}
	}
	return f->filled > 0;
}

/*
 * Plans the restore of the memory of the image whose manifest is m,
 * read from a file whose own trailer self gives (gck_parents_self()),
 * with the chain of parents parents (or NULL), whose other files,
 * read already, are kept[nkept].  *fp is left NULL where nothing would
 * be written in place (then criu restores all, as from a pipe).
 * Returns GCK_OK or a code.
 */
int
gck_fill_plan(struct gck_ctx *ctx, const struct gck_manifest *m,
    struct gck_parents *self, struct gck_parents *parents,
    const struct gck_sfile *kept, size_t nkept, struct gck_fill **fp)
{
	struct gck_fill	*f;
	size_t		 i, k;
	int		 r;

	*fp = NULL;
	if ((f = calloc(1, sizeof *f)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	f->ctx = ctx;
	f->m = m;
	f->kept = kept;
	f->nkept = nkept;
	f->nprocs = gck_manifest_nprocs(m);
	f->psz = (uint64_t)sysconf(_SC_PAGESIZE);
	atomic_init(&f->armed, 0);
	atomic_init(&f->fail, 0);
	if ((r = f_cores(f)) != 1) {
		r = r == 0 ? f_none(f, "the threads' core images are not of "
		    "x86_64") : r;
		goto out;
	}
	if ((r = f_private(f)) != GCK_OK || (r = f_parts(f, self)) != 1) {
		r = r == 0 ? f_none(f, "its trailer lists no chunks of "
		    "memory") : r;
		goto out;
	}
	if ((r = f_choose(f)) != 1) {
		r = r == 0 ? f_none(f, "no chunk of memory can be written in "
		    "place") : r;
		goto out;
	}
	if (f->ahead > FILL_AHEAD_MAX) {
		r = f_none(f, "too much of it is not private anonymous "
		    "memory");
		goto out;
	}
	for (i = 0; parents == NULL && i < f->nfile; i++)
		for (k = 0; k < f->file[i].npart; k++)
			if (f->file[i].part[k].ref && !f->file[i].part[k].fill) {
				r = f_none(f, "no parent images");
				goto out;
			}
	/* The patches the image holds stand on chunks of its parents. */
	if (parents != NULL)
		gck_parents_set_bases(self, parents);
	for (i = 0; i < f->nfile; i++)
		if ((r = f_ahead(f, &f->file[i], self, parents)) != GCK_OK)
			goto out;
	gck_log(ctx, 1, "writing %" PRIu64 " bytes of memory in place, "
	    "%" PRIu64 " through criu", f->filled, f->ahead);
	f->taker.begin = f_begin;
	f->taker.take = f_take;
	f->taker.accepted = f_accepted;
	f->taker.arg = f;
	f->kept = NULL;
	f->nkept = 0;
	for (i = 0; i < f->nfile; i++)
		f->file[i].pm = NULL;
	*fp = f;
	f = NULL;
	r = GCK_OK;
out:
	gck_fill_free(f);
	return r;
}

/* How many pages files the plan gives criu. */
size_t
gck_fill_nfiles(const struct gck_fill *f)
{
	return f->nfile;
}

/*
 * What criu is given for pages file i: the name of the pagemap that
 * names it and what that pagemap is to hold, and the pages file's name
 * and what it is to hold.  The buffers are the caller's from now on.
 */
void
gck_fill_file(struct gck_fill *f, size_t i, const char **pmnamep,
    char **pmp, size_t *pmlenp, const char **pgnamep, char **pgp,
    size_t *pglenp)
{
	struct ffile	*ff = &f->file[i];

	*pmnamep = ff->pmname;
	*pmp = ff->pagemap;
	*pmlenp = ff->pmlen;
	*pgnamep = ff->name;
	*pgp = ff->pages;
	*pglenp = ff->pglen;
	ff->pagemap = ff->pages = NULL;
}

/*
 * Where the frames of the chunks are, as the trailer says: n of them, at
 * at[], of zsize[] bytes.
 */
void
gck_fill_frames(const struct gck_fill *f, const uint64_t **atp,
    const uint64_t **zsizep, size_t *np)
{
	*atp = f->at;
	*zsizep = f->zsize;
	*np = f->nframes;
}

/* The taker to give the reader (gck_reader_set_taker()). */
const struct gck_taker *
gck_fill_taker(struct gck_fill *f)
{
	return &f->taker;
}

/*
 * criu has restored the tree, stopped: its processes, as we see them,
 * are pids[], in the manifest's order.  The chunks are written from now
 * on.
 */
void
gck_fill_arm(struct gck_fill *f, const pid_t *pids)
{
	size_t	i;

	for (i = 0; i < f->nfile; i++)
		f->file[i].pid = pids[f->file[i].proc];
	atomic_store(&f->armed, 1);
}

/* The chunk of entry name, or NULL. */
static struct fpart *
f_part(struct gck_fill *f, const char *name)
{
	struct ffile	*ff;
	char		 file[GCK_NAME_MAX + 1];
	long		 part;

	if (gck_entry_parse(name, file, sizeof file, &part) == -1 ||
	    (ff = f_file(f, file)) == NULL)
		return NULL;
	if (part == -1 && ff->whole)
		part = 0;
	if (part < 0 || (size_t)part >= ff->npart)
		return NULL;
	return &ff->part[part];
}

static void *
f_begin(void *arg, const char *name)
{
	struct gck_fill	*f = arg;
	struct fpart	*p;

	if (!atomic_load(&f->armed) || (p = f_part(f, name)) == NULL ||
	    !p->fill)
		return NULL;
	return p;
}

/* Notes the first write that failed, with errno e. */
static void
f_failed(struct gck_fill *f, pid_t pid, uint64_t addr, int e)
{
	int	none = 0;

	if (atomic_compare_exchange_strong(&f->fail, &none, e != 0 ? e :
	    EIO)) {
		f->fpid = pid;
		f->faddr = addr;
	}
}

/* Writes the n ranges of l[] to r[] of the process.  Returns 0 or -1. */
static int
f_write(struct gck_fill *f, pid_t pid, const struct iovec *l,
    const struct iovec *r, unsigned long n)
{
	size_t	want = 0, i;
	ssize_t	got;

	for (i = 0; i < n; i++)
		want += l[i].iov_len;
	if ((got = process_vm_writev(pid, l, n, r, n, 0)) == (ssize_t)want)
		return 0;
	f_failed(f, pid, (uintptr_t)r[0].iov_base, got == -1 ? errno :
	    EFAULT);
	return -1;
}

/*
 * Writes len bytes at data, bytes [off, off + len) of chunk h, into its
 * process.  Run by any thread.  Returns 0 or -1.
 */
static int
f_take(void *arg, void *h, uint64_t off, const void *data, size_t len)
{
	struct gck_fill	*f = arg;
	struct fpart	*p = h;
	struct iovec	 l[FILL_IOV], r[FILL_IOV];
	const struct fseg *s;
	uint64_t	 s0, s1;
	size_t		 lo = 0, hi = p->nseg, mid;
	unsigned long	 n = 0;

	atomic_fetch_add(&p->taken, len);
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (p->seg[mid].off + p->seg[mid].len <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < p->nseg && p->seg[lo].off < off + len; lo++) {
		s = &p->seg[lo];
		s0 = s->off > off ? s->off : off;
		s1 = s->off + s->len < off + len ? s->off + s->len : off + len;
		l[n].iov_base = (char *)data + (s0 - off);
		l[n].iov_len = (size_t)(s1 - s0);
		r[n].iov_base = (void *)(uintptr_t)(s->addr + (s0 - s->off));
		r[n].iov_len = (size_t)(s1 - s0);
		if (++n == FILL_IOV) {
			if (f_write(f, p->file->pid, l, r, n) == -1)
				return -1;
			n = 0;
		}
	}
	if (n > 0 && f_write(f, p->file->pid, l, r, n) == -1)
		return -1;
	return 0;
}

/* The error of the first write that failed.  Returns its code. */
static int
f_error(struct gck_fill *f)
{
	int	e = atomic_load(&f->fail);

	return gck_set_syserr(f->ctx, e, "cannot write the memory of "
	    "restored process %d at %#" PRIx64 ": %s", (int)f->fpid,
	    f->faddr, strerror(e));
}

/*
 * The reader has checked entry name, whose digest is d and which holds
 * data bytes of data, written in place by.  Returns GCK_OK or a code.
 */
static int
f_accepted(void *arg, const char *name, const struct gck_digest *d,
    uint64_t data, int by)
{
	struct gck_fill	*f = arg;
	struct fpart	*p;
	char		 shown[GCK_ENAME_MAX + 16];

	if ((p = f_part(f, name)) == NULL)
		return GCK_OK;
	gck_entry_display(name, shown, sizeof shown);
	if (p->accepted)
		return gck_set_error(f->ctx, GCK_ECORRUPT, "corrupt image: %s "
		    "twice", shown);
	p->accepted = 1 + by;
	p->data = data;
	if (!p->fill) {
		if (!gck_digest_equal(d, &p->d))
			return gck_set_error(f->ctx, GCK_ECORRUPT, "corrupt "
			    "image: %s is not the chunk its trailer names",
			    shown);
		return GCK_OK;
	}
	if (by == GCK_TAKEN_FAILED)
		return f_error(f);
	if (by == GCK_TAKEN_NONE && data > 0)
		return gck_set_error(f->ctx, GCK_ECORRUPT, "corrupt image: %s "
		    "was not written in place", shown);
	return GCK_OK;
}

/*
 * The reader has read the whole image: checks that every chunk was
 * checked, and that each chunk written in place was written once, with
 * the data the reader checked.  Returns GCK_OK or a code.
 */
int
gck_fill_finish(struct gck_fill *f)
{
	struct fpart	*p;
	char		 name[GCK_ENAME_MAX], shown[GCK_ENAME_MAX + 16];
	uint64_t	 byw = 0, byr = 0;
	size_t		 i, k;

	atomic_store(&f->armed, 0);
	if (atomic_load(&f->fail) != 0)
		return f_error(f);
	for (i = 0; i < f->nfile; i++)
		for (k = 0; k < f->file[i].npart; k++) {
			p = &f->file[i].part[k];
			gck_entry_name(name, sizeof name, f->file[i].name,
			    f->file[i].whole ? -1 : (long)k);
			gck_entry_display(name, shown, sizeof shown);
			if (!p->accepted)
				return gck_set_error(f->ctx, GCK_ECORRUPT,
				    "corrupt image: %s is missing", shown);
			if (p->fill && atomic_load(&p->taken) != p->data)
				return gck_set_error(f->ctx, GCK_ECORRUPT,
				    "corrupt image: %" PRIu64 " bytes were "
				    "written for %s, which holds %" PRIu64,
				    (uint64_t)atomic_load(&p->taken), shown,
				    p->data);
			if (p->fill && p->accepted == 1 + GCK_TAKEN_WORKER)
				byw += p->data;
			else if (p->fill)
				byr += p->data;
		}
	gck_log(f->ctx, 1, "memory written in place: %" PRIu64 " bytes by "
	    "the decompressing workers, %" PRIu64 " by the reader", byw, byr);
	return GCK_OK;
}

/* Bytes written in place, and bytes given to criu. */
void
gck_fill_stats(const struct gck_fill *f, uint64_t *filledp, uint64_t *aheadp)
{
	*filledp = f->filled;
	*aheadp = f->ahead;
}

void
gck_fill_free(struct gck_fill *f)
{
	size_t	i, k;

	if (f == NULL)
		return;
	for (i = 0; i < f->nfile; i++) {
		for (k = 0; k < f->file[i].npart; k++)
			free(f->file[i].part[k].seg);
		free(f->file[i].part);
		free(f->file[i].ok.r);
		free(f->file[i].pagemap);
		free(f->file[i].pages);
	}
	free(f->file);
	for (i = 0; f->priv != NULL && i < f->nprocs; i++)
		free(f->priv[i].v);
	free(f->priv);
	free(f->away.r);
	free(f->at);
	free(f->zsize);
	free(f);
}

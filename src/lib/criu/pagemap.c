/*
 * pagemap.c: a task's memory pages, read again from the task itself.
 *
 * CRIU's pages-N.img holds, back to back, the pages its pagemap-PID.img
 * lists as present.  While the tree stays stopped after the dump, the
 * same bytes can be read from the processes, in whatever order suits
 * the stream; the capture's digests prove they are the same.
 */
#include "config.h"

#include <sys/mman.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "private.h"
#include "core/proc.h"
#include "core/util.h"
#include "criu/pagemap.h"
#include "criu/streamer.h"
#include "image/names.h"
#include "criu/criu-images.pb-c.h"

struct run {
	uint64_t	addr, len;
};

static uint64_t	pe_count(const PagemapEntry *);

struct gck_pmread {
	struct gck_ctx	*ctx;
	pid_t		 pid;
	char		 name[GCK_SNAME];
	struct run	*runs;
	size_t		 nruns, capruns, cur;
	uint64_t	 off;		/* into runs[cur] */
	int		 memfd;		/* /proc/PID/mem, when needed */
	int		 err;		/* of a failed read: errno (-1: EOF) */
	uint64_t	 erraddr;	/* and where */
};

/*
 * Next record of a CRIU protobuf image of len bytes at data, from *posp:
 * its bytes and length, or NULL at the end, with *bad set if the image
 * ends inside a record.
 */
const uint8_t *
gck_img_record(const char *data, size_t len, size_t *posp, uint32_t *lenp,
    int *bad)
{
	uint32_t	rl;

	*bad = 0;
	if (*posp >= len)
		return NULL;
	if (len - *posp < sizeof rl) {
		*bad = 1;
		return NULL;
	}
	memcpy(&rl, data + *posp, sizeof rl);
	if (rl > len - *posp - sizeof rl) {
		*bad = 1;
		return NULL;
	}
	*posp += sizeof rl + rl;
	*lenp = rl;
	return (const uint8_t *)data + *posp - rl;
}

/*
 * Whether data, len bytes, starts with CRIU's header for an image of
 * kind magic: 0 with *posp at its first record, or -1.
 */
int
gck_img_start(const char *data, size_t len, uint32_t magic, size_t *posp)
{
	uint32_t	m[2];

	if (len < sizeof m)
		return -1;
	memcpy(m, data, sizeof m);
	if (m[0] != GCK_IMG_COMMON_MAGIC || m[1] != magic)
		return -1;
	*posp = sizeof m;
	return 0;
}

/*
 * The first record of the CRIU image of len bytes at data, whose magic
 * is magic, and its length in *lenp: NULL when it is no such image or
 * holds no whole record.
 */
const uint8_t *
gck_img_first(const char *data, size_t len, uint32_t magic, uint32_t *lenp)
{
	size_t	pos;
	int	bad;

	if (gck_img_start(data, len, magic, &pos) == -1)
		return NULL;
	return gck_img_record(data, len, &pos, lenp, &bad);
}

/*
 * Whether mapping v of mm-PID.img is private anonymous memory, which a
 * restore maps afresh, empty, and fills with the pages its pagemap
 * lists: its status VMA_AREA_REGULAR and VMA_ANON_PRIVATE, and nothing
 * else but VMA_AREA_STACK or VMA_AREA_HEAP (no AIO ring, SysV IPC, vDSO
 * or vvar, vsyscall, file, shared, memfd, socket, shadow stack, guard,
 * uprobes or plugin mapping), neither shared nor of hugetlbfs by its
 * flags (MAP_SHARED, MAP_HUGETLB), and its bounds given.
 */
int
gck_vma_anon_private(const VmaEntry *v)
{
	const uint32_t	other = ~(GCK_VMA_AREA_REGULAR | GCK_VMA_AREA_STACK |
			    GCK_VMA_AREA_HEAP | GCK_VMA_ANON_PRIVATE);

	return v->has_status && v->has_flags && v->has_start && v->has_end &&
	    v->end > v->start && (v->status & GCK_VMA_AREA_REGULAR) &&
	    (v->status & GCK_VMA_ANON_PRIVATE) && !(v->status & other) &&
	    !(v->flags & MAP_HUGETLB) && !(v->flags & MAP_SHARED);
}

/*
 * Starts reading the pagemap image of len bytes at data: its header and
 * head record, which names the pages file (pm->pages_id).  Returns 0, or
 * -1 if it is no pagemap image.
 */
int
gck_pagemap_open(struct gck_pagemap *pm, const char *data, size_t len)
{
	PagemapHead	*h;
	const uint8_t	*rec;
	uint32_t	 rl;
	int		 bad;

	memset(pm, 0, sizeof *pm);
	pm->data = data;
	pm->len = len;
	if (gck_img_start(data, len, GCK_PAGEMAP_MAGIC, &pm->pos) == -1 ||
	    (rec = gck_img_record(data, len, &pm->pos, &rl, &bad)) == NULL ||
	    (h = pagemap_head__unpack(NULL, rl, rec)) == NULL)
		return -1;
	pm->pages_id = h->pages_id;
	pagemap_head__free_unpacked(h, NULL);
	return 0;
}

/*
 * How many pages entry pe lists: CRIU 4.2 writes nr_pages, older CRIU
 * compat_nr_pages alone.
 */
static uint64_t
pe_count(const PagemapEntry *pe)
{
	return pe->has_nr_pages ? pe->nr_pages : pe->compat_nr_pages;
}

/*
 * The next entry of the pagemap into *e, its flags as CRIU means them
 * (an entry of the old form, without flags: in the parent or present).
 * Returns 1, 0 at the end, or -1 if the image ends inside a record or
 * holds one that is no entry (or lists more than GCK_PE_MAX_PAGES).
 */
int
gck_pagemap_next(struct gck_pagemap *pm, struct gck_pmentry *e)
{
	PagemapEntry	*pe;
	const uint8_t	*rec;
	uint32_t	 rl;
	int		 bad;

	if ((rec = gck_img_record(pm->data, pm->len, &pm->pos, &rl, &bad)) ==
	    NULL)
		return bad ? -1 : 0;
	if ((pe = pagemap_entry__unpack(NULL, rl, rec)) == NULL)
		return -1;
	if (pe_count(pe) > GCK_PE_MAX_PAGES) {
		pagemap_entry__free_unpacked(pe, NULL);
		return -1;
	}
	e->vaddr = pe->vaddr;
	e->nr_pages = pe_count(pe);
	e->flags = pe->has_flags ? pe->flags : (pe->has_in_parent &&
	    pe->in_parent ? GCK_PE_PARENT : GCK_PE_PRESENT);
	pagemap_entry__free_unpacked(pe, NULL);
	return 1;
}

/*
 * Rewrites the records of CRIU image f, kept in cap, with fn(ctx, rec,
 * len, arg, &out, &outlen): each as fn gives it back (malloc'ed; one of
 * length 0 dropped), or, where fn gives NULL, as it was, byte for byte;
 * the header stays.  f is replaced in cap only when something changed.
 * Returns GCK_OK, fn's code, or a code.
 */
int
gck_img_rewrite(struct gck_ctx *ctx, struct gck_capture *cap,
    const struct gck_sfile *f, void *arg, gck_img_rec_fn fn)
{
	const uint8_t	*rec;
	uint8_t		*nrec = NULL;
	uint32_t	 rl, nl;
	size_t		 pos = 2 * sizeof(uint32_t), olen = 0, ocap, nlen;
	char		*out = NULL;
	int		 bad, r, changed = 0;

	if (f->len < pos)
		return gck_set_error(ctx, GCK_ECRIU, "criu wrote a '%s' "
		    "without its header", f->name);
	ocap = f->len + 1024;
	if ((out = malloc(ocap)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	memcpy(out, f->data, pos);
	olen = pos;
	while ((rec = gck_img_record(f->data, f->len, &pos, &rl, &bad)) !=
	    NULL) {
		if ((r = fn(ctx, rec, rl, arg, &nrec, &nlen)) != GCK_OK)
			goto out;
		if (nrec != NULL)
			changed = 1;
		if (nrec == NULL) {
			nrec = (uint8_t *)rec;
			nlen = rl;
		}
		if (nlen > 0) {
			if (olen + sizeof nl + nlen > ocap) {
				char	*n;

				ocap = (olen + sizeof nl + nlen) * 2;
				if ((n = realloc(out, ocap)) == NULL) {
					r = gck_set_error(ctx, GCK_ENOMEM,
					    "out of memory");
					goto out;
				}
				out = n;
			}
			nl = (uint32_t)nlen;
			memcpy(out + olen, &nl, sizeof nl);
			memcpy(out + olen + sizeof nl, nrec, nlen);
			olen += sizeof nl + nlen;
		}
		if (nrec != rec)
			free(nrec);
		nrec = NULL;
	}
	if (bad) {
		r = gck_set_error(ctx, GCK_ECRIU, "criu wrote a '%s' that "
		    "ends inside a record", f->name);
		goto out;
	}
	r = GCK_OK;
	if (changed) {
		r = gck_capture_replace(cap, f->name, out, olen);
		out = NULL;
	}
out:
	free(out);
	return r;
}

/* A growing buffer. */
struct obuf {
	char	*p;
	size_t	 len, cap;
};

static int
obuf_room(struct gck_ctx *ctx, struct obuf *o, size_t len)
{
	size_t	 cap;
	char	*p;

	if (o->cap - o->len >= len)
		return GCK_OK;
	cap = o->cap > 0 ? o->cap : 4096;
	while (cap - o->len < len)
		cap *= 2;
	if ((p = realloc(o->p, cap)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	o->p = p;
	o->cap = cap;
	return GCK_OK;
}

/*
 * Appends an entry like t but for its nr pages at vaddr, the count
 * written as t has it: where CRIU 4.2 writes it, or where older CRIU
 * did.
 */
static int
put_entry(struct gck_ctx *ctx, struct obuf *o, const PagemapEntry *t,
    uint64_t vaddr, uint64_t nr)
{
	PagemapEntry	e = *t;
	uint32_t	rl;
	int		r;

	e.vaddr = vaddr;
	if (t->has_nr_pages)
		e.nr_pages = nr;
	else
		e.compat_nr_pages = (uint32_t)nr;	/* at most t's */
	rl = (uint32_t)pagemap_entry__get_packed_size(&e);
	if ((r = obuf_room(ctx, o, sizeof rl + rl)) != GCK_OK)
		return r;
	memcpy(o->p + o->len, &rl, sizeof rl);
	o->len += sizeof rl;
	o->len += pagemap_entry__pack(&e, (uint8_t *)o->p + o->len);
	return GCK_OK;
}

/*
 * Appends entry pe, the first of whose pages is page idx of the pages
 * file, without the pages drop marks: the runs of those that stay.
 */
static int
split(struct gck_ctx *ctx, const uint8_t *drop, struct obuf *o,
    const PagemapEntry *pe, uint64_t idx, uint64_t psz)
{
	uint64_t	i, run = 0, n = pe_count(pe);
	int		r;

	for (i = 0; i <= n; i++) {
		if (i < n && !drop[idx + i]) {
			run++;
			continue;
		}
		if (run > 0 && (r = put_entry(ctx, o, pe, pe->vaddr +
		    (uint64_t)(i - run) * psz, run)) != GCK_OK)
			return r;
		run = 0;
	}
	return GCK_OK;
}

/*
 * The pagemap image pagemap without the pages that drop marks (one byte
 * for each page of its pages file, in the file's order): its header and
 * head as they are, an entry that loses pages split around them with
 * the same flags, every other entry as criu wrote it.  Only entries of
 * pages present in the pages file, lazy or not, lose pages.  Returns
 * GCK_OK with *outp (free it) and *lenp, or a code.
 */
int
gck_pagemap_without(struct gck_ctx *ctx, const struct gck_sfile *pagemap,
    const uint8_t *drop, char **outp, size_t *lenp)
{
	PagemapEntry	*pe = NULL;
	struct obuf	 o = { NULL, 0, 0 };
	const uint8_t	*rec;
	uint64_t	 idx = 0, psz = (uint64_t)sysconf(_SC_PAGESIZE), i, nd;
	uint32_t	 rl, flags;
	size_t		 pos, at;
	int		 bad, r;

	*outp = NULL;
	*lenp = 0;
	if (gck_img_start(pagemap->data, pagemap->len, GCK_PAGEMAP_MAGIC,
	    &pos) == -1 || gck_img_record(pagemap->data, pagemap->len, &pos,
	    &rl, &bad) == NULL)
		goto bad;
	if ((r = obuf_room(ctx, &o, pagemap->len)) != GCK_OK)
		goto out;
	memcpy(o.p, pagemap->data, pos);
	o.len = pos;
	for (;;) {
		at = pos;
		if ((rec = gck_img_record(pagemap->data, pagemap->len, &pos,
		    &rl, &bad)) == NULL) {
			if (bad)
				goto bad;
			break;
		}
		if ((pe = pagemap_entry__unpack(NULL, rl, rec)) == NULL ||
		    pe_count(pe) > GCK_PE_MAX_PAGES)
			goto bad;
		flags = pe->has_flags ? pe->flags : pe->has_in_parent &&
		    pe->in_parent ? GCK_PE_PARENT : GCK_PE_PRESENT;
		for (i = 0, nd = 0; GCK_PE_SPLITS(flags) && i < pe_count(pe);
		    i++)
			nd += (uint64_t)(drop[idx + i] != 0);
		if (nd > 0)
			r = split(ctx, drop, &o, pe, idx, psz);
		else if ((r = obuf_room(ctx, &o, pos - at)) == GCK_OK) {
			memcpy(o.p + o.len, pagemap->data + at, pos - at);
			o.len += pos - at;
		}
		if (r != GCK_OK)
			goto out;
		if (flags & GCK_PE_PRESENT)
			idx += pe_count(pe);
		pagemap_entry__free_unpacked(pe, NULL);
		pe = NULL;
	}
	*outp = o.p;
	*lenp = o.len;
	o.p = NULL;
	r = GCK_OK;
	goto out;
bad:
	r = gck_set_error(ctx, GCK_ECRIU, "cannot parse criu's '%s'",
	    pagemap->name);
out:
	if (pe != NULL)
		pagemap_entry__free_unpacked(pe, NULL);
	free(o.p);
	return r;
}

/*
 * The runs of memory the pagemap lists as present into p, checked
 * against the pages file they name.
 */
static int
pmread_runs(struct gck_pmread *p, const struct gck_sfile *pagemap,
    const struct gck_sfile *pages)
{
	struct gck_ctx		*ctx = p->ctx;
	struct gck_pagemap	 pm;
	struct gck_pmentry	 e;
	uint64_t		 total = 0, psz;
	unsigned		 id;
	int			 ok, r;

	psz = (uint64_t)sysconf(_SC_PAGESIZE);
	if (gck_pagemap_open(&pm, pagemap->data, pagemap->len) == -1)
		goto bad;
	if (!gck_pages_id(pages->name, &id) || id != pm.pages_id)
		return gck_set_error(ctx, GCK_ECRIU, "'%s' names pages-%u.img, "
		    "not '%s'", pagemap->name, pm.pages_id, pages->name);
	while ((ok = gck_pagemap_next(&pm, &e)) == 1) {
		if (!(e.flags & GCK_PE_PRESENT) && e.nr_pages > 0)
			return gck_set_error(ctx, GCK_ECRIU, "'%s' has pages "
			    "that are not in the image (flags %#x)",
			    pagemap->name, e.flags);
		if (!(e.flags & GCK_PE_PRESENT) || e.nr_pages == 0)
			continue;
		if ((r = gck_grow(ctx, &p->runs, &p->capruns, p->nruns,
		    sizeof *p->runs)) != GCK_OK)
			return r;
		p->runs[p->nruns].addr = e.vaddr;
		p->runs[p->nruns++].len = (uint64_t)e.nr_pages * psz;
		total += (uint64_t)e.nr_pages * psz;
	}
	if (ok == -1)
		goto bad;
	if (total != pages->size)
		return gck_set_error(ctx, GCK_ECRIU, "'%s' lists %" PRIu64
		    " bytes of pages, criu wrote %" PRIu64 " to '%s'",
		    pagemap->name, total, pages->size, pages->name);
	return GCK_OK;
bad:
	return gck_set_error(ctx, GCK_ECRIU, "cannot parse criu's '%s'",
	    pagemap->name);
}

/*
 * Opens the pages of pages, as listed by pagemap, for reading from the
 * task, pid as we see it (pages->pid is what criu calls it).  Checks
 * that the pagemap names that pages file and adds up to the bytes criu
 * wrote there.
 */
int
gck_pmread_open(struct gck_ctx *ctx, const struct gck_sfile *pagemap,
    const struct gck_sfile *pages, pid_t pid, struct gck_pmread **pp)
{
	struct gck_pmread	*p = NULL;
	int			 r;

	*pp = NULL;
	if ((p = calloc(1, sizeof *p)) == NULL)
		return gck_set_error(ctx, GCK_ENOMEM, "out of memory");
	p->ctx = ctx;
	p->pid = pid;
	p->memfd = -1;
	snprintf(p->name, sizeof p->name, "%s", pages->name);
	if ((r = pmread_runs(p, pagemap, pages)) != GCK_OK) {
		gck_pmread_free(p);
		return r;
	}
	*pp = p;
	return GCK_OK;
}

void
gck_pmread_free(struct gck_pmread *p)
{
	if (p == NULL)
		return;
	if (p->memfd != -1)
		close(p->memfd);
	free(p->runs);
	free(p);
}

/*
 * Reads the next len bytes of the pages (fewer at their end) from the
 * stopped task.  Returns the bytes read, 0 at the end, or -1, and then
 * gck_pmread_error() sets the error.  Touches no context: it may run in
 * a thread of its own.
 */
ssize_t
gck_pmread_read(struct gck_pmread *p, void *buf, size_t len)
{
	struct iovec	 local, remote;
	char		 path[64];
	size_t		 got = 0, want;
	ssize_t		 n;

	while (got < len && p->cur < p->nruns) {
		want = len - got;
		if (want > p->runs[p->cur].len - p->off)
			want = (size_t)(p->runs[p->cur].len - p->off);
		local.iov_base = (char *)buf + got;
		local.iov_len = want;
		remote.iov_base = (void *)(uintptr_t)(p->runs[p->cur].addr +
		    p->off);
		remote.iov_len = want;
		n = process_vm_readv(p->pid, &local, 1, &remote, 1, 0);
		if (n <= 0) {
			/* Pages the task may not read: through its mem file. */
			if (p->memfd == -1) {
				snprintf(path, sizeof path, "/proc/%d/mem",
				    (int)p->pid);
				p->memfd = open(path, O_RDONLY | O_CLOEXEC);
			}
			n = p->memfd == -1 ? -1 : pread(p->memfd, local.iov_base,
			    want, (off_t)(p->runs[p->cur].addr + p->off));
			if (n <= 0) {
				p->err = n == 0 ? -1 : errno;
				p->erraddr = p->runs[p->cur].addr + p->off;
				return -1;
			}
		}
		got += (size_t)n;
		p->off += (uint64_t)n;
		if (p->off == p->runs[p->cur].len) {
			p->cur++;
			p->off = 0;
		}
	}
	return (ssize_t)got;
}

/*
 * Where in the pages each mapping of mm (the task's mm-PID.img) but the
 * first starts: the offset of its first page there, in *cutsp (free
 * it), *np of them, ascending.  A chunk ends at each (chunker.c).  None
 * where mm cannot be read, or its mappings or the pagemap's entries are
 * not in address order.  Returns GCK_OK or a code.
 */
int
gck_pmread_vma_cuts(const struct gck_pmread *p, const struct gck_sfile *mm,
    uint64_t **cutsp, size_t *np)
{
	MmEntry		*me = NULL;
	const uint8_t	*rec;
	uint64_t	*cuts = NULL, pos = 0, start, off;
	uint32_t	 rl;
	size_t		 i, k = 0, n = 0, cap = 0;
	int		 r = GCK_OK;

	*cutsp = NULL;
	*np = 0;
	for (i = 1; i < p->nruns; i++)
		if (p->runs[i].addr < p->runs[i - 1].addr + p->runs[i - 1].len)
			return GCK_OK;
	if (mm == NULL || (rec = gck_img_first(mm->data, mm->len,
	    GCK_MM_MAGIC, &rl)) == NULL ||
	    (me = mm_entry__unpack(NULL, rl, rec)) == NULL)
		return GCK_OK;
	for (i = 1; i < me->n_vmas; i++) {
		if ((start = me->vmas[i]->start) < me->vmas[i - 1]->start) {
			n = 0;
			break;
		}
		/* The first run not wholly below the mapping. */
		for (; k < p->nruns && p->runs[k].addr + p->runs[k].len <=
		    start; k++)
			pos += p->runs[k].len;
		if (k == p->nruns)
			break;
		off = pos + (start > p->runs[k].addr ? start -
		    p->runs[k].addr : 0);
		if (off == 0 || (n > 0 && off <= cuts[n - 1]))
			continue;
		if ((r = gck_grow(p->ctx, &cuts, &cap, n, sizeof *cuts)) !=
		    GCK_OK)
			break;
		cuts[n++] = off;
	}
	mm_entry__free_unpacked(me, NULL);
	if (r != GCK_OK || n == 0) {
		free(cuts);
		return r;
	}
	*cutsp = cuts;
	*np = n;
	return GCK_OK;
}

/*
 * Whether bytes [off, off + len) of the pages come from memory that
 * overlaps [addr, addr + size).
 */
int
gck_pmread_overlaps(const struct gck_pmread *p, uint64_t off, uint64_t len,
    uint64_t addr, uint64_t size)
{
	uint64_t	pos = 0, a, b, lo, hi;
	size_t		i;

	for (i = 0; i < p->nruns && pos < off + len; i++) {
		a = pos > off ? pos : off;
		b = pos + p->runs[i].len < off + len ? pos + p->runs[i].len :
		    off + len;
		if (a < b) {
			lo = p->runs[i].addr + (a - pos);
			hi = p->runs[i].addr + (b - pos);
			if (lo < addr + size && addr < hi)
				return 1;
		}
		pos += p->runs[i].len;
	}
	return 0;
}

/*
 * The rseq areas of process pid's threads, from their core images: the
 * kernel rewrites their CPU numbers whenever a thread runs, as it does
 * when criu takes its parasite out.  pid is the process as we see it,
 * its threads' core images named as its PID namespace ns (NULL: ours)
 * sees them.  Returns GCK_OK with *areasp (free it) or a code.
 */
int
gck_rseq_areas(struct gck_ctx *ctx, const struct gck_capture *cap, pid_t pid,
    const struct gck_nsview *ns, struct gck_area **areasp, size_t *np)
{
	const struct gck_sfile	*f;
	struct gck_area		*a = NULL;
	struct dirent		*d;
	CoreEntry		*ce;
	DIR			*dir;
	const uint8_t		*rec;
	char			 path[64], name[NAME_MAX + 16];
	uint32_t		 len;
	size_t			 n = 0, na = 0;

	*areasp = NULL;
	*np = 0;
	snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
	if ((dir = opendir(path)) == NULL)
		return gck_set_syserr(ctx, errno, "cannot read '%s': %s", path,
		    strerror(errno));
	while ((d = readdir(dir)) != NULL) {
		if (d->d_name[0] == '.')
			continue;
		snprintf(name, sizeof name, "core-%d.img",
		    (int)gck_nsview_local(ns, (pid_t)atoi(d->d_name)));
		if ((f = gck_capture_find(cap, name)) == NULL ||
		    (rec = gck_img_first(f->data, f->len, GCK_CORE_MAGIC,
		    &len)) == NULL ||
		    (ce = core_entry__unpack(NULL, len, rec)) == NULL)
			continue;
		if (ce->thread_core != NULL && ce->thread_core->rseq_entry !=
		    NULL && ce->thread_core->rseq_entry->rseq_abi_pointer != 0) {
			if (gck_grow(ctx, &a, &na, n, sizeof *a) != GCK_OK) {
				core_entry__free_unpacked(ce, NULL);
				closedir(dir);
				free(a);
				return ctx->code;
			}
			a[n].addr = ce->thread_core->rseq_entry->rseq_abi_pointer;
			a[n].size = ce->thread_core->rseq_entry->has_rseq_abi_size ?
			    ce->thread_core->rseq_entry->rseq_abi_size : 32;
			n++;
		}
		core_entry__free_unpacked(ce, NULL);
	}
	closedir(dir);
	*areasp = a;
	*np = n;
	return GCK_OK;
}

/* Sets the error of the read that failed.  Returns its code. */
int
gck_pmread_error(const struct gck_pmread *p)
{
	return gck_set_syserr(p->ctx, p->err > 0 ? p->err : 0, "cannot read "
	    "the memory of process %d at %#" PRIx64 ": %s", (int)p->pid,
	    p->erraddr, p->err > 0 ? strerror(p->err) : "end of file");
}
